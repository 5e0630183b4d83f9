"""The oracle of the injection fuzzer: compile, render, run, and judge one case.

The promise under test: *no input value ever runs as code*.  For a case the
checker accepts, the exact rendered script runs the way the local sandbox
runs it (``[shell, "-c", script]`` in a fresh directory, stdin from
/dev/null), and two things are checked:

(a) no file whose name starts with ``CANARY`` (any case) exists anywhere
    under the case's directory: every hostile value creates one if any part
    of it is ever run as code;
(b) every argument the probe ``argv`` received that holds a value's marker
    (``V0_``, ``I2_`` ...) holds that whole value (or a form a Jinja filter
    made of it): a value is never split into several words or globbed.

A case the checker refuses (compile problems, or an ``AgentsError`` at
render time) passes.  All use of the project's API goes through
:func:`render_case`, so a change of that API is a change of one function.

Run as a script to replay cases: ``python tests/support/injection_oracle.py SEED...``
or ``python tests/support/injection_oracle.py --file tests/data/injection_regressions.jsonl``.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from injection_grammar import Case, generate
from jinja2.utils import htmlsafe_json_dumps
from markupsafe import escape

from runner.config.templates import Fields, compile_template
from runner.core.errors import AgentsError

try:  # the step-level rule of compiler.compile_step (absent from the old checker)
    from runner.config.shell.checker import is_shell_control_name
except ImportError:
    is_shell_control_name = None

#: The template names a case may use: ``x``, with any field.
FIELDS_BY_NAME = {"x": None}
TIMEOUT_SECONDS = 5.0
SHELLS = {"bash": shutil.which("bash") or "/bin/bash", "sh": shutil.which("sh") or "/bin/sh"}

#: The probe: appends its arguments, NUL-terminated, then a record separator.
ARGV_SCRIPT = """#!/bin/sh
# Records its arguments for the injection fuzzer (NUL after each, then RS NUL).
for a in "$@"; do printf '%s\\000' "$a"; done >> "${ARGV_LOG:-/dev/null}"
printf '\\036\\000' >> "${ARGV_LOG:-/dev/null}"
"""
#: A program that creates CANARY_CMD: the value ``payload`` run as a command.
PAYLOAD_SCRIPT = """#!/bin/sh
: > CANARY_CMD
"""
#: Programs the scripts may find on PATH (besides the probe): the canary's
#: ``touch`` and what the grammar runs as programs.  Nothing else is reachable.
TOOLS = ["touch", "cat", "env", "bash", "sh", "true"]


# --- the adapter: the one place that knows the project's API --------------------


@dataclass
class Rendered:
    """What the runner would execute: the script and the step's environment."""

    script: str
    env: dict[str, str]


def _accepts(function: object, keyword: str) -> bool:
    try:
        return keyword in inspect.signature(function).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


#: Strict mode with one data program named: it only narrows the default mode,
#: so it may never accept a case the default mode refuses.
STRICT_CONSUMERS = ("argv",)


def only_the_probe_unnamed(refusal: str) -> bool:
    """Was a default-mode refusal only that the probe (``argv``) is not a
    data program nor named in ``consumers:`` (``[strict-program]``)?"""
    rules = re.findall(r"\[([a-z-]+)\]: ", refusal)
    unnamed = refusal.count("(argv, not in consumers:) [strict-program]")
    return bool(rules) and all(rule == "strict-program" for rule in rules) and unnamed == len(rules)


def render_case(case: Case, consumers: tuple[str, ...] | None = None) -> Rendered | str:
    """Compile and render ``case`` as the runner does; a string is a refusal.

    Env values are text templates (inserted as they are); the run template
    is a shell template.  The names of env entries whose value is templated
    are passed as ``tainted_env`` when the API has that keyword, and, as
    ``compiler.compile_step`` does, a templated value may not go into a
    variable that controls the shell (``is_shell_control_name``).
    """
    context = {"x": Fields({**case.values, "items": list(case.items)})}
    env_templates = {}
    for name, source in case.env.items():
        template, problems = compile_template(source, shell=False, fields_by_name=FIELDS_BY_NAME)
        if problems or template is None:
            return f"env {name}: " + "; ".join(p.message for p in problems)
        env_templates[name] = template
    tainted = frozenset(name for name, t in env_templates.items() if not t.is_static)
    for name in sorted(tainted):
        if is_shell_control_name is not None and is_shell_control_name(name):
            return f"env {name}: a templated value may not go into a shell control variable"
    extra: dict = {"tainted_env": tainted} if _accepts(compile_template, "tainted_env") else {}
    if consumers is not None:
        extra["consumers"] = consumers
    template, problems = compile_template(
        case.template, shell=True, fields_by_name=FIELDS_BY_NAME, **extra
    )
    if problems or template is None:
        return "; ".join(p.message for p in problems)
    try:
        env = {name: t.render(context) for name, t in env_templates.items()}
        script = template.render(context)
    except AgentsError as exc:
        return f"at render: {exc}"
    return Rendered(script, env)


# --- running ------------------------------------------------------------------


@dataclass
class Outcome:
    """What happened to one case.  ``failures`` empty: the promise held."""

    case: Case
    refusal: str | None = None
    rendered: Rendered | None = None
    failures: list[str] = field(default_factory=list)
    error: str | None = None  # the harness itself broke (a grammar bug)
    exit_code: int | None = None
    stderr: str = ""

    @property
    def status(self) -> str:
        if self.error:
            return "error"
        if self.refusal is not None:
            return "failed" if self.failures else "refused"
        return "failed" if self.failures else "passed"


def make_bin(base: Path) -> Path:
    """A PATH directory with the probe and the few tools the scripts may use."""
    bin_dir = base / "bin"
    bin_dir.mkdir(exist_ok=True)
    probe = bin_dir / "argv"
    probe.write_text(ARGV_SCRIPT)
    probe.chmod(0o755)
    payload = bin_dir / "payload"
    payload.write_text(PAYLOAD_SCRIPT)
    payload.chmod(0o755)
    for tool in TOOLS:
        found = shutil.which(tool)
        if found and not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(found)
    return bin_dir


def prepare_directory(root: Path, case: Case) -> Path:
    """The work directory: ``sub/`` for ``cd``, and decoy files a glob of any
    marked value would match (``V0_a``, ``V0_aDECOY``), so globbing shows."""
    work = root / "work"
    (work / "sub").mkdir(parents=True)
    for marker in case.markers():
        (work / f"{marker}a").touch()
        (work / f"{marker}aDECOY").touch()
    return work


def execute(
    rendered: Rendered, shell: str, work: Path, bin_dir: Path, log: Path
) -> tuple[int | None, str]:
    """Run the script like the local sandbox does; (exit code or None on timeout, stderr)."""
    env = {"PATH": str(bin_dir), "HOME": str(work), "ARGV_LOG": str(log), **rendered.env}
    process = subprocess.Popen(
        [SHELLS[shell], "-c", rendered.script],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        _, stderr = process.communicate(timeout=TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        # The group is ours (start_new_session) and its leader is not yet reaped.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate()
        return None, stderr.decode(errors="replace")
    return process.returncode, stderr.decode(errors="replace")


# --- judging ------------------------------------------------------------------


def canaries(root: Path) -> list[str]:
    """Files or directories under ``root`` whose name starts with CANARY."""
    found = []
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            if name.lower().startswith("canary"):
                found.append(os.path.relpath(os.path.join(folder, name), root))
    return sorted(found)


def forms(value: str) -> set[str]:
    """The value and what the filters the grammar uses (and autoescape) make of it."""
    transforms = [
        str.strip,
        str.upper,
        lambda v: str(htmlsafe_json_dumps(v)),
        lambda v: str(escape(v)),
    ]
    found = {value}
    for _ in range(2):
        found |= {transform(form) for form in found for transform in transforms}
    return found


def probe_arguments(log: Path) -> list[str]:
    if not log.exists():
        return []
    text = log.read_bytes().decode("utf-8", errors="surrogateescape")
    return [arg for arg in text.split("\0") if arg != "\x1e"]


def split_values(case: Case, arguments: list[str]) -> list[str]:
    """Arguments that hold a value's marker but not the whole value."""
    problems = []
    for marker, value in case.markers().items():
        accepted = forms(value)
        for argument in arguments:
            if marker in argument and not any(form in argument for form in accepted):
                problems.append(f"argv got {argument!r}: a piece of the value {value!r}")
    return problems


def run_case(case: Case, base: Path, bin_dir: Path) -> Outcome:
    """Compile, render and (if accepted) run one case, and judge it."""
    try:
        rendered = render_case(case)
    except Exception as exc:  # not a refusal: the harness or the grammar is wrong
        return Outcome(case, error=f"{type(exc).__name__}: {exc}")
    if isinstance(rendered, str) and only_the_probe_unnamed(rendered):
        # Both modes are a closed world: the default mode runs no program
        # beside a value that is not a data program, the probe included.
        # Named, the probe is judged in strict mode, whose acceptance is run.
        rendered = render_case(case, STRICT_CONSUMERS)
        if isinstance(rendered, str):
            return Outcome(case, refusal=rendered)
    elif isinstance(rendered, str):
        outcome = Outcome(case, refusal=rendered)
        if _accepts(compile_template, "consumers") and not isinstance(
            render_case(case, STRICT_CONSUMERS), str
        ):
            outcome.failures.append(
                "strict mode (consumers: [argv]) accepted what the default refused"
            )
        return outcome
    outcome = Outcome(case, rendered=rendered)
    root = Path(tempfile.mkdtemp(dir=base, prefix="case-"))
    try:
        work = prepare_directory(root, case)
        log = root / "argv.log"
        outcome.exit_code, outcome.stderr = execute(rendered, case.shell, work, bin_dir, log)
        if outcome.exit_code is None:
            outcome.failures.append(f"timed out after {TIMEOUT_SECONDS}s")
        for canary in canaries(root):
            outcome.failures.append(f"a value ran as code: {canary} was created")
        outcome.failures += split_values(case, probe_arguments(log))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return outcome


# --- shrinking and reporting ----------------------------------------------------


def shrink(case: Case, base: Path, bin_dir: Path, budget: int = 40) -> Case:
    """A smaller case that still fails: drop top-level statements, env entries,
    loop items, and make unneeded values plain (``V0_a``)."""

    def still_fails(candidate: Case) -> bool:
        nonlocal budget
        budget -= 1
        return run_case(candidate, base, bin_dir).status == "failed"

    current = case
    parts = list(case.parts or [case.template])
    index = 0
    while index < len(parts) and len(parts) > 1 and budget > 0:
        trial = parts[:index] + parts[index + 1 :]
        candidate = replace(current, template="".join(trial), parts=trial)
        if still_fails(candidate):
            parts, current = trial, candidate
        else:
            index += 1
    for name in list(current.env):
        if budget > 0:
            candidate = replace(current, env={k: v for k, v in current.env.items() if k != name})
            if still_fails(candidate):
                current = candidate
    for name, value in list(current.values.items()):
        plain = f"V{name[1:]}_a"
        if value != plain and budget > 0:
            candidate = replace(current, values={**current.values, name: plain})
            if still_fails(candidate):
                current = candidate
    while current.items and budget > 0:
        candidate = replace(current, items=current.items[:-1])
        if not still_fails(candidate):
            break
        current = candidate
    if current is not case:  # its seed no longer reproduces it: say where it came from
        current = replace(current, seed=None, note=f"shrunk from case seed {case.seed}")
    return current


def describe(outcome: Outcome) -> str:
    """Everything needed to reproduce a failing case, and nothing more."""
    case = outcome.case
    lines = [
        f"shell: {case.shell}   case seed: {case.seed}",
        f"template: {case.template!r}",
        f"values: {case.values!r}",
    ]
    if case.items:
        lines.append(f"items: {case.items!r}")
    if case.env:
        lines.append(f"env: {case.env!r}")
    if outcome.rendered:
        lines.append(f"rendered script: {outcome.rendered.script!r}")
        if outcome.rendered.env:
            lines.append(f"rendered env: {outcome.rendered.env!r}")
    if outcome.error:
        lines.append(f"harness error: {outcome.error}")
    lines += [f"FAILED: {failure}" for failure in outcome.failures]
    if outcome.stderr.strip():
        lines.append(f"stderr: {outcome.stderr.strip()[:300]!r}")
    return "\n".join(lines)


def load_cases(path: Path) -> list[Case]:
    if not path.exists():
        return []
    return [
        Case.from_json(json.loads(line)) for line in path.read_text().splitlines() if line.strip()
    ]


def case_key(case: Case) -> str:
    return json.dumps([case.template, case.env, case.values, case.items, case.shell])


def append_cases(path: Path, cases: list[Case]) -> int:
    """Append the cases not already in ``path``; returns how many were new."""
    known = {case_key(c) for c in load_cases(path)}
    new = []
    for case in cases:
        if case_key(case) not in known:
            known.add(case_key(case))
            new.append(case)
    if new:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as file:
            for case in new:
                file.write(json.dumps(case.to_json(), ensure_ascii=False) + "\n")
    return len(new)


# --- many cases ---------------------------------------------------------------


def case_seed(base_seed: int, index: int) -> int:
    """The seed of case ``index`` of a run seeded with ``base_seed``."""
    return base_seed * 10_000_000 + index


@dataclass
class Stats:
    """Counts of one fuzzing run, and the outcomes worth reporting."""

    generated: int = 0
    refused: int = 0
    passed: int = 0
    template_syntax: int = 0  # refused because the Jinja did not parse (grammar noise)
    shell_syntax: int = 0  # run, but the shell stopped at a syntax error
    by_shell: dict[str, int] = field(default_factory=dict)
    failed: list[Outcome] = field(default_factory=list)
    errors: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def accepted(self) -> int:
        return self.passed + len(self.failed)

    def add(self, outcome: Outcome) -> None:
        self.generated += 1
        status = outcome.status
        if status == "refused":
            self.refused += 1
            self.template_syntax += "template syntax" in (outcome.refusal or "")
        elif status == "error":
            self.errors.append(outcome)
        else:
            self.passed += status == "passed"
            if status == "failed":
                self.failed.append(outcome)
            shell = outcome.case.shell
            self.by_shell[shell] = self.by_shell.get(shell, 0) + 1
            self.shell_syntax += outcome.exit_code == 2 and "syntax error" in outcome.stderr

    def summary(self) -> str:
        rate = self.generated / self.seconds if self.seconds else 0.0
        per_mille = 1000 * self.accepted / self.generated if self.generated else 0.0
        return (
            f"{self.generated} generated, {self.accepted} accepted and run "
            f"({per_mille:.0f} per 1000; by shell {self.by_shell}), {self.refused} refused "
            f"({self.template_syntax} of them Jinja syntax errors), {len(self.failed)} FAILED, "
            f"{len(self.errors)} harness errors, {self.shell_syntax} runs stopped at a shell "
            f"syntax error; {self.seconds:.1f}s, {rate:.0f} cases/s"
        )


def run_many(seeds: list[int], base: Path, workers: int = 2, progress: int = 0) -> Stats:
    """Generate and judge the case of every seed, ``workers`` at a time
    (printing a summary every ``progress`` cases, if set)."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    bin_dir = make_bin(base)
    stats = Stats()
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for outcome in pool.map(lambda seed: run_case(generate(seed), base, bin_dir), seeds):
            stats.add(outcome)
            if progress and stats.generated % progress == 0:
                stats.seconds = time.perf_counter() - started
                print(f"  ... {stats.summary()}", file=sys.stderr, flush=True)
    stats.seconds = time.perf_counter() - started
    return stats


def checker_under_test() -> str:
    """Where the checker being fuzzed comes from (PYTHONPATH can point elsewhere)."""
    return inspect.getsourcefile(compile_template) or "?"


def shrink_failures(outcomes: list[Outcome], base: Path, limit: int = 40) -> list[Outcome]:
    """Shrink up to ``limit`` failures; one outcome per distinct shrunk case."""
    bin_dir = make_bin(base)
    found: dict[str, Outcome] = {}
    for outcome in outcomes[:limit]:
        small = shrink(outcome.case, base, bin_dir)
        rerun = run_case(small, base, bin_dir)
        if rerun.status != "failed":  # flaky shrink: keep the original
            rerun = outcome
        found.setdefault(case_key(rerun.case), rerun)
    return list(found.values())


def main(argv: list[str]) -> int:
    """Replay cases by seed, or every case of a JSONL file; print each outcome."""
    if argv[:1] == ["--file"]:
        cases = load_cases(Path(argv[1]))
    else:
        cases = [generate(int(seed)) for seed in argv]
    failed = 0
    with tempfile.TemporaryDirectory(prefix="fuzz-injection-") as tmp:
        base = Path(tmp)
        bin_dir = make_bin(base)
        for case in cases:
            outcome = run_case(case, base, bin_dir)
            print(f"--- {outcome.status}" + (f": {outcome.refusal}" if outcome.refusal else ""))
            print(describe(outcome))
            failed += outcome.status in ("failed", "error")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
