"""How secret redaction scales: additions of secret forms and the scrub of
an output, each at two sizes, side by side in the same process.

    .venv/bin/python bench/redaction.py

Each render of a templated step adds the secret words it printed, so a long
session adds thousands of forms; every output is then scrubbed of all of
them.  The table prints, for n additions and for the scrub of an output of
n repeats, the time at n and at 4n and their ratio.  The scrub is one pass
per form, linear in the output: a ratio near 4.  An addition that brings a
new word merges it into the sorted forms, linear in the forms already
known, so n additions cost n squared in all: a ratio near 16 (2,000 words,
16,000 forms, took 0.6 s on a quiet 2-core machine; 2.3 s before issue
25's merge, which rebuilt a set and re-sorted every form per addition).
Not a test: it prints a table (tests/core/test_events.py checks the
results, not the time).
"""

from __future__ import annotations

import time

from runner.core.events import _secrets, add_secrets, decode_output, scrubbed
from runner.core.redaction import secret_text_forms


def adding(count: int) -> float:
    words = [secret_text_forms(f"render-{index:05d}-word\n") for index in range(count)]
    token = _secrets.set(())
    try:
        started = time.perf_counter()
        for forms in words:
            add_secrets(forms)
        return time.perf_counter() - started
    finally:
        _secrets.reset(token)


def scrubbing(repeats: int) -> float:
    words = [secret_text_forms(f"render-{index:05d}-word\n") for index in range(2000)]
    output = b"x render-01234-word y " * repeats
    token = _secrets.set(())
    try:
        for forms in words:
            add_secrets(forms)
        started = time.perf_counter()
        scrubbed(decode_output(output))
        return time.perf_counter() - started
    finally:
        _secrets.reset(token)


def main() -> None:
    print("| work | at n | at 4n | ratio (linear ~4, n squared ~16) |")
    print("|---|---|---|---|")
    for name, work, n in (
        ("add n secret words", adding, 500),
        ("scrub n x 22 bytes of output", scrubbing, 11_250),
    ):
        small = min(work(n) for _ in range(3))
        large = min(work(4 * n) for _ in range(3))
        print(f"| {name} (n={n:,}) | {small:.3f} s | {large:.3f} s | {large / small:.1f} |")


if __name__ == "__main__":
    main()
