"""The run-time injection check's cost as the number of values grows, against a baseline.

    .venv/bin/python bench/shell_check.py [--rounds N] [--sizes 1000,10000]

Issue 25 asks for linear time: a ``{% for %}`` over 10,000 list items must
render and check in under a second.  For each size and each shape of script
(one ``echo`` per line, one long ``&&`` chain, all values as arguments of one
command piped to ``cat``), it prints medians over N rounds of:

- check: ``Template.render`` of the ``run`` template, which renders with
  sentinels, parses the exact text with tree-sitter and runs every pass of
  ``shell_check``, then substitutes the quoted values;
- baseline: the same template rendered by a plain Jinja environment with
  ``shlex.quote`` as its finalizer, in the same process: the quoting alone,
  with no check;

and the ratio check / baseline, and the time per value.  Linear growth shows
as a constant time per value across sizes.  Not a test: it prints a table.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import time
from types import SimpleNamespace

from jinja2 import Environment

from runner.config.templates import Fields, compile_template

SHAPES = {
    "lines": "{% for i in x.items %}echo {{ i }}\n{% endfor %}",
    "and-chain": "true{% for i in x.items %} && echo {{ i }}{% endfor %}",
    "one-command": "printf '%s\\n'{% for i in x.items %} {{ i }}{% endfor %} | cat",
}


def measure(source: str, items: list[str], rounds: int) -> tuple[float, float]:
    template, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert template is not None and not problems, problems
    baseline = Environment(finalize=lambda v: shlex.quote(str(v))).from_string(source)
    context = {"x": Fields({"items": items})}
    checked, plain = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        template.render(context)
        checked.append(time.perf_counter() - started)
        started = time.perf_counter()
        baseline.render(x=SimpleNamespace(items=items))
        plain.append(time.perf_counter() - started)
    return statistics.median(checked), statistics.median(plain)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default="1000,10000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    columns = ("shape", "values", "check s", "baseline s", "ratio", "us/value")
    print("{:<12} {:>7} {:>9} {:>11} {:>7} {:>9}".format(*columns))
    for shape, source in SHAPES.items():
        for size in sizes:
            items = [f"item-{i} $(touch x) 'q'" for i in range(size)]
            checked, plain = measure(source, items, args.rounds)
            print(
                f"{shape:<12} {size:>7} {checked:>9.3f} {plain:>11.4f} "
                f"{checked / plain:>7.1f} {1e6 * checked / size:>9.1f}"
            )


if __name__ == "__main__":
    main()
