"""How large the suite's scaled tests run: ``RUNNER_TEST_SCALE``, read here only.

A few tests check a property whose strength grows with their size (how many
sessions go through a pool before it is checked for leaks, how many values a
property test generates).  CI runs them at a size that still catches the
fault they are about; ``scripts/long`` sets ``RUNNER_TEST_SCALE=long`` and
runs every one at its full size.  Same test, same assertions, same fixed
examples: only the count changes (docs/contributing.md, "Test tiers").

- ``ci`` (default): CI's size (``scripts/test``, ``.ci/run``, ``--fast``).
- ``long``: the full size (``scripts/long``).

Anything else is an error, so a typo does not quietly run the small size.
"""

from __future__ import annotations

import os

SCALES = ("ci", "long")
SCALE = os.environ.get("RUNNER_TEST_SCALE", "ci")
if SCALE not in SCALES:
    raise ValueError(f"RUNNER_TEST_SCALE={SCALE!r}: expected one of {', '.join(SCALES)}")
LONG = SCALE == "long"


def scaled(ci: int, long: int) -> int:
    """``ci`` at CI's scale, ``long`` under ``RUNNER_TEST_SCALE=long``."""
    return long if LONG else ci


#: scripts/test's budgets at each scale, beside the scaled tests: the
#: injection fuzzer's cases (RUNNER_FUZZ_CASES), the validate fuzzer's files
#: (RUNNER_VALIDATE_FUZZ_CASES) and scripts/mutate's sample.  The shell reads
#: them with ``eval "$(python tests/support/scale.py)"``.
BUDGETS: dict[str, dict[str, str]] = {
    "ci": {"fuzz_cases": "10000", "validate_fuzz_cases": "300", "mutate": "--ci"},
    "long": {"fuzz_cases": "200000", "validate_fuzz_cases": "5000", "mutate": "--fast"},
}

if __name__ == "__main__":
    for name, value in BUDGETS[SCALE].items():
        print(f"{name}={value}")
