"""Differential fuzzing of the promise "no input value ever runs as code".

``injection_grammar`` writes random bash ``run`` templates with placeholders
in random places; ``injection_oracle`` compiles each with the project's
checker, and runs every accepted one in real bash (sometimes dash) with
hostile values that create a ``CANARY`` file if they ever run as code, and a
probe that reports any value split into several words.  Strict mode only
narrows the default: a case the default mode refuses must be refused with
``consumers: [argv]`` (a data program) too.

- ``RUNNER_FUZZ_CASES``: how many cases (default: about two minutes on two cores).
- ``RUNNER_FUZZ_SEED``: the seed of every case.  Unset, three quarters of the
  cases come from a fixed seed (reproducible in CI) and a quarter from a
  time-based seed (new cases each run); both are printed.

A failing case is shrunk, printed with all it takes to reproduce it, and
appended to ``tests/data/injection_regressions.jsonl``, whose every case
``test_regression_case`` replays on each run.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from injection_oracle import (
    append_cases,
    case_seed,
    checker_under_test,
    describe,
    load_cases,
    make_bin,
    run_case,
    run_many,
    shrink_failures,
)

REGRESSIONS = Path(__file__).parents[1] / "data" / "injection_regressions.jsonl"
FIXED_SEED = 20_250_611
DEFAULT_CASES = 50_000
#: Failures shown in full in the test's message (all are appended to REGRESSIONS).
SHOWN = 12


def seed_plan() -> list[tuple[int, int]]:
    """(base seed, number of cases) for this run."""
    cases = int(os.environ.get("RUNNER_FUZZ_CASES", DEFAULT_CASES))
    if "RUNNER_FUZZ_SEED" in os.environ:
        return [(int(os.environ["RUNNER_FUZZ_SEED"]), cases)]
    fresh = cases // 4
    return [(FIXED_SEED, cases - fresh), (int(time.time()) % 1_000_000_000, fresh)]


@pytest.mark.fuzz
def test_no_value_runs_as_code(tmp_path: Path) -> None:
    plan = seed_plan()
    seeds = [case_seed(base, index) for base, count in plan for index in range(count)]
    stats = run_many(seeds, tmp_path, workers=2, progress=20_000 if len(seeds) > 40_000 else 0)
    seeds_text = ", ".join(f"RUNNER_FUZZ_SEED={base} RUNNER_FUZZ_CASES={n}" for base, n in plan)
    print(f"\ninjection fuzz of {checker_under_test()} ({seeds_text}): {stats.summary()}")
    assert not stats.errors, "the fuzzer itself broke:\n\n" + "\n\n".join(
        describe(outcome) for outcome in stats.errors[:SHOWN]
    )
    if stats.failed:
        shrunk = shrink_failures(stats.failed, tmp_path)
        added = append_cases(REGRESSIONS, [outcome.case for outcome in shrunk])
        report = "\n\n".join(describe(outcome) for outcome in shrunk[:SHOWN])
        pytest.fail(
            f"{len(stats.failed)} accepted templates let a value run as code or split it "
            f"({seeds_text}; replay one with python tests/support/injection_oracle.py CASE_SEED).\n"
            f"{stats.summary()}\n{added} new case(s) appended to {REGRESSIONS.name}; "
            f"{min(len(shrunk), SHOWN)} of {len(shrunk)} shrunk cases:\n\n{report}",
            pytrace=False,
        )
    assert stats.accepted > 0, "the checker refused everything: the fuzzer proves nothing"


def _regression_cases() -> list:
    cases = load_cases(REGRESSIONS)
    return [
        pytest.param(case, id=f"{number}-{(case.note or case.template)[:40]}")
        for number, case in enumerate(cases, start=1)
    ]


@pytest.mark.parametrize("case", _regression_cases())
def test_regression_case(case, tmp_path: Path) -> None:
    """Every case ever found (or from the review) is refused or runs harmlessly."""
    outcome = run_case(case, tmp_path, make_bin(tmp_path))
    assert outcome.status in ("refused", "passed"), describe(outcome)
