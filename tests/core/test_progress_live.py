"""Progress of a running step (issue 31, item 2): a line when it starts, and
on a terminal a live line with its elapsed time and last output line,
replaced by its outcome; in a log, plain lines at most once per interval;
``-v`` every output line; ``-q`` nothing but errors and the answer.

Run for real: the CLI in a pipe (a CI log) and under a pseudo-terminal
(``os.openpty``), as a user's terminal runs it.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import docker.errors
import pytest
from conftest import RUNNER_CLI
from terminal import run_on_a_terminal, without_rich

STEPS = textwrap.dedent(
    """\
    version: 1
    agent:
      model: local-model
      environment:
        sandbox: local
        hooks:
          - name: build
            on_create:
              - run: echo compiling
              - run: sleep 1.2
    """
)


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "steps.yaml"
    path.write_text(STEPS)
    return path


def test_a_log_gets_a_line_when_a_step_starts_and_one_when_it_ends(tmp_path: Path) -> None:
    done = subprocess.run(
        [*RUNNER_CLI, "run", str(_file(tmp_path))],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    started = lines.index("    [2] sleep 1.2 ...")
    ended = next(i for i, line in enumerate(lines) if line.startswith("    [2] sleep 1.2 ok ("))
    assert started < ended
    assert "\x1b" not in done.stderr  # plain lines: no cursor control in a log


def test_a_terminal_shows_the_running_step_with_its_elapsed_time(tmp_path: Path) -> None:
    code, shown = run_on_a_terminal(["run", str(_file(tmp_path))], tmp_path)
    text = shown.decode(errors="replace")
    assert code == 0, text
    # the live line, redrawn with a growing time, then replaced by the outcome
    times = [float(t) for t in re.findall(r"\[2\] sleep 1\.2 \.\.\.  (\d+\.\d)s", text)]
    assert len(times) >= 2 and times[-1] > times[0] and times[-1] >= 0.8, text
    assert re.search(r"\[2\] sleep 1\.2 ok \(1\.\d\ds\)", text), text
    (tmp_path / "capture.txt").write_text(text)


#: A step that prints three lines on stdout, one on stderr, and a last one
#: without a newline.  (Between streams the order is the reader's: the
#: tests compare the lines as a multiset where both streams print.)
TALKING = textwrap.dedent(
    """\
    version: 1
    agent:
      model: local-model
      environment:
        sandbox: local
        hooks:
          - name: build
            on_create:
              - run: |
                  for i in 1 2 3; do echo "compiling part $i"; done
                  echo "a warning" >&2
                  printf 'linking'
    """
)

EXPECTED = ["a warning", "compiling part 1", "compiling part 2", "compiling part 3", "linking"]


def _talking(tmp_path: Path) -> Path:
    path = tmp_path / "talking.yaml"
    path.write_text(TALKING)
    return path


def _run(tmp_path: Path, *args: str, env: dict[str, str] | None = None):
    return subprocess.run(
        [*RUNNER_CLI, "run", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TMPDIR": str(tmp_path), **(env or {})},
    )


def test_a_log_says_a_long_step_is_still_running_without_its_output(tmp_path: Path) -> None:
    """In a log (no terminal), every RUNNER_PROGRESS_INTERVAL seconds a
    running step gets a plain line naming it with its elapsed time, and no
    output content.  The step prints a line, then waits for a file that the
    test writes once it read two such lines from the runner's stderr (read
    as the runner writes it): no guess at timing."""
    go = tmp_path / "go"
    path = tmp_path / "long.yaml"
    path.write_text(
        STEPS.replace(
            "- run: sleep 1.2",
            "- name: build\n"
            "            timeout_seconds: 60\n"  # without the lines: fails, not hangs
            "            run: echo output-content; "
            f"while [ ! -e {go} ]; do sleep 0.05; done",
        )
    )
    process = subprocess.Popen(
        [*RUNNER_CLI, "run", str(path)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path), "RUNNER_PROGRESS_INTERVAL": "0.2"},
    )
    assert process.stderr is not None
    lines: list[str] = []
    try:
        for line in process.stderr:
            lines.append(line.rstrip("\n"))
            if sum("still running" in seen for seen in lines) == 2:
                go.touch()
    finally:
        process.wait(timeout=120)
    text = "\n".join(lines)
    assert process.returncode == 0 and go.exists(), text
    start = lines.index("    [2] build ...")
    end = next(i for i, line in enumerate(lines) if line.startswith("    [2] build ok ("))
    running = lines[start + 1 : end]
    times = [
        re.fullmatch(r"    \[2\] build still running \((\d+\.\d)s\)", line) for line in running
    ]
    assert len(running) >= 2 and all(times), text
    elapsed = [float(match.group(1)) for match in times if match]
    assert elapsed == sorted(elapsed), text
    assert "output-content" not in text  # output content only under -v
    assert "\x1b" not in text


def test_a_log_gets_at_most_one_progress_line_per_interval(tmp_path: Path) -> None:
    """An interval longer than the whole step: its five output lines give no
    progress line at all, only its start and end lines."""
    done = _run(tmp_path, str(_talking(tmp_path)), env={"RUNNER_PROGRESS_INTERVAL": "3600"})
    assert done.returncode == 0, done.stderr
    step_lines = [line for line in done.stderr.splitlines() if line.startswith("    [1] ")]
    assert len(step_lines) == 2, done.stderr
    assert step_lines[0].endswith(" ...") and " ok (" in step_lines[1], done.stderr


def test_verbose_prints_every_output_line_of_a_step(tmp_path: Path) -> None:
    done = _run(tmp_path, "-v", str(_talking(tmp_path)))
    assert done.returncode == 0, done.stderr
    printed = [line for line in done.stderr.splitlines() if line.startswith("      | ")]
    assert sorted(printed) == ["      | " + line for line in EXPECTED], done.stderr


def test_quiet_prints_nothing_for_a_run_that_succeeds(tmp_path: Path) -> None:
    done = _run(tmp_path, "-q", str(_talking(tmp_path)), env={"RUNNER_PROGRESS_INTERVAL": "0"})
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_quiet_and_verbose_together_are_refused(tmp_path: Path) -> None:
    done = _run(tmp_path, "-q", "-v", str(_talking(tmp_path)))
    assert done.returncode == 2
    assert done.stderr == "runner: give --quiet or --verbose, not both\n"


@pytest.mark.parametrize("value", ["soon", "-1", "nan"])
def test_a_bad_progress_interval_is_a_usage_error(tmp_path: Path, value: str) -> None:
    done = _run(tmp_path, str(_talking(tmp_path)), env={"RUNNER_PROGRESS_INTERVAL": value})
    assert done.returncode == 2
    assert done.stderr.startswith(f"runner: RUNNER_PROGRESS_INTERVAL={value!r}: expected"), (
        done.stderr
    )


def test_a_terminal_shows_the_running_steps_last_output_line(tmp_path: Path) -> None:
    """The step prints two lines and waits for a file that the test writes
    only once the terminal showed the second on the live line: no guess at
    how long a redraw takes.  The frame is the one docs/cli.md shows."""
    go = tmp_path / "go"
    path = tmp_path / "waiting.yaml"
    path.write_text(
        STEPS.replace(
            "- run: sleep 1.2",
            "- name: build\n"
            "            run: echo compiling part 1; echo compiling part 2; "
            f"while [ ! -e {go} ]; do sleep 0.05; done",
        )
    )
    live = re.compile(rb"    \[2\] build \.\.\.  \d+\.\ds\x1b\[2m  \| compiling part 2\x1b\[0m")
    code, shown = run_on_a_terminal(
        ["run", str(path)], tmp_path, on_output=lambda shown: live.search(shown) and go.touch()
    )
    text = shown.decode(errors="replace")
    assert code == 0, text
    assert go.exists() and re.search(r"\[2\] build ok \(\d", text), text
    frame = live.search(shown)
    assert frame is not None
    seen = without_rich(frame.group()).decode()
    documented = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    assert re.sub(r"\d+\.\ds", "N.Ns", seen) in re.sub(r"\d+\.\ds", "N.Ns", documented), seen


def test_verbose_on_a_terminal_prints_each_line_above_the_live_one(tmp_path: Path) -> None:
    code, shown = run_on_a_terminal(["run", "-v", str(_talking(tmp_path))], tmp_path)
    text = shown.decode(errors="replace")
    assert code == 0, text
    printed = re.findall(r"      \| ([^\r\n\x1b]*)\r?\n", text)
    assert sorted(printed) == EXPECTED, text


HOSTILE = textwrap.dedent(
    r"""
    version: 1
    agent:
      model: local-model
      environment:
        sandbox: local
        hooks:
          - name: build
            on_create:
              - name: hostile
                run: |
                  printf '\033]0;pwned\007\033[2J\033[1A\033[2Kfake ok \342\200\256evil\n'
                  while [ ! -e GO ]; do sleep 0.05; done
    """
)
SHOWN = rb"\x1b]0;pwned\x07\x1b[2J\x1b[1A\x1b[2Kfake ok \u202eevil"


@pytest.mark.parametrize("verbose", [False, True], ids=["live", "verbose"])
def test_output_lines_reach_a_terminal_escaped(tmp_path: Path, verbose: bool) -> None:
    """A step's output may retitle the terminal, clear it or move the cursor
    over the runner's own lines: on the live line and under -v, it is shown
    as visible escapes, and the only sequences that reach the terminal are
    rich's own."""
    go = tmp_path / "go"
    path = tmp_path / "hostile.yaml"
    path.write_text(HOSTILE.replace("GO", str(go)))
    code, shown = run_on_a_terminal(
        ["run", *(["-v"] if verbose else []), str(path)],
        tmp_path,
        on_output=lambda shown: SHOWN in shown and go.touch(),
    )
    assert code == 0, shown
    assert go.exists() and SHOWN in shown, shown
    rest = without_rich(shown)
    for raw in (b"\x1b", b"\x07", b"\xe2\x80\xae"):
        assert raw not in rest, shown


def test_the_agents_command_shows_its_output_lines_too(tmp_path: Path) -> None:
    """A bash tool call of the agent is a running command like a step: its
    lines under -v, and none of its output in a log without -v."""
    from chat_server import ChatServer, assistant

    call = ("call-1", "bash", {"command": "echo tool says hi; echo second line"})
    for args, env, expected in [
        (["-v"], {}, ["      | tool says hi", "      | second line"]),
        ([], {"RUNNER_PROGRESS_INTERVAL": "0.01"}, []),
    ]:
        with ChatServer([assistant(None, call), assistant("done")]) as server:
            path = tmp_path / "agent.yaml"
            path.write_text(
                "version: 1\nagent:\n  model: local-model\n"
                f"  base_url: {server.url}\n  environment:\n    sandbox: local\n"
            )
            done = _run(tmp_path, *args, str(path), "--prompt", "go", env=env)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "done\n"
        lines = done.stderr.splitlines()
        assert all(line in lines for line in expected), done.stderr
        if not args:  # in a log, no output content without -v
            assert "tool says hi" not in done.stderr


def test_each_input_set_shows_its_own_output_lines_and_quiet_hides_them(tmp_path: Path) -> None:
    """--input-sets: -v prints each set's output lines under its [k] prefix;
    -q leaves the progress out (the summary table stays)."""
    sets = tmp_path / "sets.yaml"
    sets.write_text("- {}\n- {}\n")
    path = _talking(tmp_path)
    verbose = _run(tmp_path, "-v", str(path), "--input-sets", str(sets))
    assert verbose.returncode == 0, verbose.stderr
    for index in (1, 2):
        printed = [
            line.removeprefix(f"[{index}]       | ")
            for line in verbose.stderr.splitlines()
            if line.startswith(f"[{index}]       | ")
        ]
        assert sorted(printed) == EXPECTED, verbose.stderr
    quiet = _run(tmp_path, "-q", str(path), "--input-sets", str(sets))
    assert quiet.returncode == 0, quiet.stderr
    assert not [line for line in quiet.stderr.splitlines() if line.startswith("[")], quiet.stderr
    assert "2 session(s), 2 ok, 0 failed" in quiet.stderr


def _container_of_child(docker_client: Any) -> Any:
    """The container a ``runner`` child of this test process made (its
    owner-pid label names a process whose parent is this one), or None."""
    from runner.sandboxes.docker.engine import LABEL_OWNER_PID

    for container in docker_client.containers.list(filters={"label": LABEL_OWNER_PID}):
        pid = container.labels.get(LABEL_OWNER_PID, "")
        try:
            stat = Path(f"/proc/{int(pid)}/stat").read_text()
        except (OSError, ValueError):
            continue
        state, parent = stat.rsplit(")", 1)[1].split()[:2]
        # a zombie is an earlier test's runner, not yet reaped: its container goes
        if state != "Z" and int(parent) == os.getpid():
            return container
    return None


@pytest.mark.parametrize("image_kind", ["full", "busybox"])
def test_a_terminal_shows_a_docker_steps_last_output_line(
    tmp_path: Path, docker_client: Any, image_tags: dict[str, str], image_kind: str
) -> None:
    """The same live line for a step in a Docker sandbox (the Python helper
    on the full image, the shell helper on busybox): its helper streams the
    output.  The step waits for a file in the container, which the test
    makes (``docker exec``) once the terminal showed its second line."""
    path = tmp_path / "docker.yaml"
    path.write_text(
        STEPS.replace(
            "sandbox: local", f"sandbox: docker\n    image: {image_tags[image_kind]}"
        ).replace(
            "- run: sleep 1.2",
            "- name: build\n"
            "            run: echo compiling part 1; echo compiling part 2; "
            "while [ ! -e /tmp/go ]; do sleep 0.05; done",
        )
    )
    live = re.compile(rb"    \[2\] build \.\.\.  \d+\.\ds\x1b\[2m  \| compiling part 2\x1b\[0m")
    touched: list[Any] = []

    def on_output(shown: bytes) -> None:
        if not touched and live.search(shown):
            container = _container_of_child(docker_client)
            if container is not None:
                with contextlib.suppress(
                    docker.errors.APIError
                ):  # gone: the next output asks again
                    touched.append(container.exec_run(["touch", "/tmp/go"]).exit_code)

    code, shown = run_on_a_terminal(["run", str(path)], tmp_path, on_output=on_output)
    text = shown.decode(errors="replace")
    assert code == 0, text
    assert touched == [0], text
    assert re.search(r"\[2\] build ok \(\d", text), text
