"""The exec channel's POSIX-shell helper (``helpers/exec_helper.sh``), against the Python one.

The shell helper serves images without a usable python3 (busybox, Alpine,
``python3-minimal``).  It must behave exactly as the Python helper does, so
most tests here run the same requests through both on the full image
(``exec_channel="python"`` and ``"shell"``) and compare; the attacker's
tests run on every image.  Every input travels to the shell as data (each
string as a count of lines, then its lines, read with the ``read``
builtin), never as code: the generated-input test checks that every value
comes back byte for byte and that nothing it spells ran.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

import anyio
import pytest
from helper_parity import observed, open_session

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


# --- the same answers as the Python helper ----------------------------------------

#: Commands whose every observable result must not depend on the helper.
COMMANDS = [
    "true",
    "false",
    "exit 7",
    "echo out; echo err >&2",
    "printf 'no newline'",
    "printf '\\377\\376 not utf-8 \\000 nul'",
    'printf \'%s\\n\' "$HOME" "$PWD"',
    "id -u; id -g; grep ^Groups /proc/self/status",
    "kill -9 $$",
    "kill -15 $$",
    "head -c 3000000 /dev/zero | tr '\\0' x",  # over the cap: head, marker, tail
    "head -c 3000000 /dev/zero | tr '\\0' y >&2; echo small",
    "cat /etc/shadow",
    "cd /root",
    'echo "$X" | od -c | head -3',
    "umask",
    "(exec 0<&-; cat) 2>&1; echo $?",
    "ls -ld . | cut -c1-10 && touch made && ls -ln made | cut -c1-24",
]


async def test_every_command_gets_the_same_result_from_both_helpers(docker_backend) -> None:
    results: dict[str, list[tuple[Any, ...]]] = {}
    for helper in ("python", "shell"):
        async with await open_session(
            docker_backend, exec_channel=helper, output_cap_bytes=1 << 20
        ) as session:
            box = session.sandbox
            assert box.channel.kind == helper
            results[helper] = [
                observed(await box.execute(c, env={"X": "a b\n'c'"})) for c in COMMANDS
            ]
            results[helper].append(observed(await box.execute("pwd", cwd="/no/such/dir")))
            results[helper].append(observed(await box.execute("pwd", cwd="/tmp")))
    for command, python, shell in zip(
        [*COMMANDS, "cwd missing", "cwd /tmp"], results["python"], results["shell"], strict=True
    ):
        assert shell == python, command
    # And the cap did cut the big outputs (the comparison alone would pass
    # were both helpers wrong the same way).
    cut = results["shell"][COMMANDS.index("head -c 3000000 /dev/zero | tr '\\0' x")]
    assert cut[4] is True and "[... 1951424 bytes omitted ...]" in cut[1]


async def test_files_are_the_same_through_both_helpers(docker_backend) -> None:
    rng = random.Random(13)
    big = rng.randbytes(40 << 20)  # three pieces of 16 MiB
    seen: dict[str, list[Any]] = {}
    for helper in ("python", "shell"):
        async with await open_session(docker_backend, exec_channel=helper) as session:
            box = session.sandbox
            await box.write_file("empty", b"")
            await box.write_file("deep/er/big.bin", big)
            await box.execute("chmod 700 empty && mkdir adir && echo s > secret && chmod 0 secret")
            await box.write_file("empty", b"again")  # keeps its mode
            outcomes: list[Any] = [
                await box.read_file("empty"),
                (await box.execute("stat -c %a empty")).stdout,
                (await box.read_file("deep/er/big.bin")) == big,
                (await box.execute("wc -c < deep/er/big.bin")).stdout.strip(),
            ]
            for path in ("missing", "adir", "secret", "empty/below", "/etc/shadow"):
                try:
                    await box.read_file(path)
                except OSError as exc:
                    outcomes.append((type(exc).__name__, str(exc)))
            for path in ("adir", "/etc/passwd", "empty/below", "/proc/1/nope/x"):
                try:
                    await box.write_file(path, b"x")
                except OSError as exc:
                    outcomes.append((type(exc).__name__, str(exc)))
            seen[helper] = outcomes
    assert seen["shell"] == seen["python"]
    assert seen["shell"][:4] == [b"again", "700\n", True, str(40 << 20)]
    assert [kind for kind, _ in seen["shell"][4:]] == [
        "FileNotFoundError",
        "IsADirectoryError",
        "PermissionError",
        "NotADirectoryError",
        "PermissionError",
        "IsADirectoryError",
        "PermissionError",
        "OSError",  # File exists: makedirs and mkdir -p meet the file "empty"
        "FileNotFoundError",
    ]


# --- inputs are data, never code -------------------------------------------------------

#: Pieces an attacker would put in a value, to end the request's line, forge
#: a line count, or make the shell run something.
NASTY = [
    "\n",
    "\n\n",
    "\r",
    "\\",
    "\\n",
    "\\0101",
    "'",
    '"',
    "$(touch /tmp/pwned)",
    "`touch /tmp/pwned`",
    "${IFS}",
    ";touch /tmp/pwned;",
    "| touch /tmp/pwned",
    "&& touch /tmp/pwned",
    "-e",
    "--",
    "-n",
    "*",
    "?",
    "[a]",
    "~",
    "%s%n",
    " ",
    "\t",
    "0",
    "1\nexec 1 - 0 0 1\n1\ntouch /tmp/pwned",
    "kill 1 - 0 0 0",
    "é",
    "\u2028",
    "\x1b[2J",
    "\x7f",
    "\udcff",  # a non-UTF-8 byte (surrogate escape)
]


def nasty_value(rng: random.Random) -> str:
    return "".join(rng.choice(NASTY) for _ in range(rng.randint(0, 8)))


async def test_generated_values_travel_as_data_on_every_image(docker_backend, image) -> None:
    """Values in env, cwd and file paths and contents come back exactly; no
    marker file appears, and the channel is the shell helper throughout.
    (``RUNNER_FUZZ_CASES``, ``RUNNER_FUZZ_SEED``: more or other cases.)"""
    _kind, tag = image
    rng = random.Random(int(os.environ.get("RUNNER_FUZZ_SEED", "7")))
    cases = int(os.environ.get("RUNNER_FUZZ_CASES", "60"))
    async with await open_session(docker_backend, image=tag, exec_channel="shell") as session:
        box = session.sandbox
        await assert_values_travel_as_data(box, rng, cases)
        assert box.channel is not None and box.channel.kind == "shell"


async def assert_values_travel_as_data(box: Any, rng: random.Random, cases: int) -> None:
    """Generated values in env, the command, file names and contents, and
    the cwd come back byte for byte, and nothing they spell runs."""
    for case in range(cases):
        value = nasty_value(rng)
        expected = value.encode("utf-8", "surrogateescape")
        # env: printf prints it back; od makes the bytes comparable exactly
        result = await box.execute('printf %s "$V" | od -An -tx1 -v', env={"V": value})
        assert result.exit_code == 0, (value, result)
        assert bytes.fromhex("".join(result.stdout.split())) == expected, value
        # the command itself: a value as a literal inside single quotes
        quoted = "'" + value.replace("'", "'\\''") + "'"
        result = await box.execute(f"printf %s {quoted} | od -An -tx1 -v")
        assert bytes.fromhex("".join(result.stdout.split())) == expected, value
        # a file named after it, holding it
        name = "f" + value.replace("/", "_").replace("\0", "")
        await box.write_file(name, expected)
        assert await box.read_file(name) == expected, value
        # a directory named after it, as the cwd
        if "/" not in value and value not in ("", ".", ".."):
            made = await box.execute('mkdir -p -- "d$V"', env={"V": value})
            assert made.exit_code == 0, made
            where = await box.execute("pwd | od -An -tx1 -v", cwd="d" + value)
            assert bytes.fromhex("".join(where.stdout.split())) == (
                b"/workspace/d" + expected + b"\n"
            ), value
        if case % 20 == 0:
            assert (await box.execute("ls /tmp/pwned 2>&1")).exit_code != 0
    assert (await box.execute("ls /tmp/pwned 2>&1")).exit_code != 0


# --- a hostile sandbox user ---------------------------------------------------------

#: As the sandbox user: every way to reach the helper's processes and files.
ATTACK = r"""
hits=0
for p in /proc/[0-9]*; do
  [ "$(stat -c %u $p 2>/dev/null)" = 0 ] || continue  # root's processes only
  case $(tr '\0' ' ' < $p/cmdline 2>/dev/null) in *runner-channel*|*"The exec helper for"*) ;; *) continue ;; esac
  for fd in 0 1 2 3; do
    if (echo forged > $p/fd/$fd) 2>/dev/null; then echo "wrote $p/fd/$fd"; hits=$((hits+1)); fi
    if (cat < $p/fd/$fd > /dev/null) 2>/dev/null; then echo "read $p/fd/$fd"; hits=$((hits+1)); fi
  done
  if kill -STOP ${p#/proc/} 2>/dev/null; then echo "stopped $p"; hits=$((hits+1)); fi
done
for d in /tmp/.runner-channel.* /run/sandbox-runner /run/sandbox-runner/.runner-channel.*; do
  ls "$d" >/dev/null 2>&1 && { echo "listed $d"; hits=$((hits+1)); }
  (echo "1 exec 0 false 0 0 0" > "$d/n") 2>/dev/null && { echo "noted $d"; hits=$((hits+1)); }
done
kill -9 -1 2>/dev/null
echo "hits=$hits"
"""


async def test_the_sandbox_user_cannot_reach_the_shell_helper(docker_backend, image) -> None:
    _kind, tag = image
    async with await open_session(docker_backend, image=tag, exec_channel="shell") as session:
        box = session.sandbox
        helpers = await box.execute_as_root(
            "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"
            " | grep -c 'The exec helper for images'"
        )
        assert int(helpers.stdout) >= 1  # the attack below looks at the right processes
        result = await box.execute(ATTACK)
        assert result.stdout.strip().splitlines()[-1:] == ["hits=0"], result
        assert box.channel is not None
        after = await box.execute("echo still served")
        assert (after.exit_code, after.stdout) == (0, "still served\n")
        assert await box.read_file("/etc/hostname")


async def test_nothing_piles_up_in_the_container(docker_backend, image) -> None:
    """200 commands, reads and writes leave no zombie, no process and no data
    behind in the helper's directory (its names are removed 16 answers at a
    time, their data at once)."""
    _kind, tag = image
    count = (
        "n=0; for p in /proc/[0-9]*/stat; do n=$((n+1)); done; z=0;"
        " for p in /proc/[0-9]*/stat; do case $(cat $p 2>/dev/null) in *') Z '*) z=$((z+1));;"
        " esac; done; d=$(echo /run/sandbox-runner/.runner-channel.*);"
        " echo $n $z $(find $d -type f -size +0c | wc -l) $(ls -A $d | wc -l)"
    )
    async with await open_session(docker_backend, image=tag, exec_channel="shell") as session:
        box = session.sandbox
        before = (await box.execute_as_root(count)).stdout.split()
        for batch in range(0, 200, 20):  # 20 at once: each is a few processes
            async with anyio.create_task_group() as tasks:
                for i in range(batch, batch + 20):
                    tasks.start_soon(box.execute, f"echo {i}; sleep 0.0$((i % 3))")
                    if i % 10 == 0:
                        tasks.start_soon(box.write_file, f"f{i}", b"x" * i)
        for i in range(0, 200, 10):
            assert await box.read_file(f"f{i}") == b"x" * i
        # Jobs that answered may take a moment to exit on a loaded machine:
        # wait (up to 10 s) for the count to come back down.
        for _ in range(50):
            after = (await box.execute_as_root(count)).stdout.split()
            if int(after[0]) <= int(before[0]) and after[1] == "0":
                break
            await anyio.sleep(0.2)
    processes, zombies, holding_data, names = (int(x) for x in after)
    assert int(before[2]) == 0
    assert zombies == 0
    assert processes <= int(before[0])  # the same helpers, nothing left running
    assert holding_data == 0
    # 16 answers' names at most (15 each), FIFOs made ahead (32 pairs at a
    # time), the writer's FIFO and the counting command's own files
    assert names <= 16 * 15 + 2 * 64 + 1 + 10, names


# --- output caps ---------------------------------------------------------------------

CAPS = [1, 2, 7, 100, 65536, 65537, 200001]


async def test_output_is_cut_as_the_python_helper_cuts_it(docker_backend) -> None:
    """Head, marker and tail, byte for byte, for caps and sizes around every
    boundary (the shell helper reads in 64 KiB blocks, then a remainder)."""
    answers: dict[str, list[Any]] = {}
    for helper in ("python", "shell"):
        async with await open_session(docker_backend, exec_channel=helper) as session:
            channel = session.sandbox.channel
            assert channel.kind == helper
            answers[helper] = []
            for cap in CAPS:
                half = max(1, cap // 2)
                for size in sorted({0, 1, half - 1, half, 2 * half, 2 * half + 1, 3 * half + 5}):
                    if size < 0:
                        continue
                    command = (
                        f"seq 1 {size} | tr -d '\\n' | head -c {size};"
                        f" seq 7 {size + 7} | head -c {size} >&2"
                    )
                    request = {
                        "op": "exec",
                        "argv": ["sh", "-c", command],
                        "cwd": "/",
                        "env": {},
                        "timeout": 30,
                        "cap": cap,
                        "user": [1000, 1000],
                    }
                    header, body = await anyio.to_thread.run_sync(
                        lambda r=request, c=channel: c.request(r, timeout=45)
                    )
                    header.pop("id")
                    answers[helper].append((cap, size, header, body))
    for python, shell in zip(answers["python"], answers["shell"], strict=True):
        assert shell == python, python[:2]
    assert any(b"bytes omitted" in body for *_, body in answers["shell"])


async def test_a_full_channel_directory_cuts_output_but_kills_no_command(docker_backend) -> None:
    """If the helper's tmpfs is full (only root can fill it), a command still
    runs to its end: its output is what fit, marked as cut, with its true size."""
    async with await open_session(docker_backend, exec_channel="shell", user="root") as session:
        box = session.sandbox
        await box.execute(
            "dd if=/dev/zero of=/run/sandbox-runner/fill bs=1M 2>/dev/null;"
            " df /run/sandbox-runner | tail -1 > /workspace/df"
        )
        result = await box.execute("seq 1 200000; echo done > /workspace/ran")
        assert result.exit_code == 0, result
        assert result.output_truncated
        assert "bytes omitted ...]" in result.stdout
        await box.execute("rm /run/sandbox-runner/fill")
        assert b" 100% " in await box.read_file("df")
        assert (await box.read_file("ran")) == b"done\n"
        after = await box.execute("seq 1 200000 | wc -l")
        assert (after.exit_code, after.stdout, after.output_truncated) == (0, "200000\n", False)


#: A write body that, were it ever read as requests, would run a command as root.
SMUGGLED = b"".join(
    b"%s exec %d - 0 0 3\n1\n/\n1\nsh\n1\ntouch /pwned-%d\n" % (token, n, n)
    for n, token in enumerate([b"", b"x", b"0" * 32])
)


async def test_a_body_that_cannot_be_stored_is_still_read_whole(docker_backend) -> None:
    """A write into a full helper directory fails, but its body is consumed
    to the last byte: no byte of it is read as a request."""
    async with await open_session(docker_backend, exec_channel="shell", user="root") as session:
        box = session.sandbox
        await box.execute("dd if=/dev/zero of=/run/sandbox-runner/fill bs=1M 2>/dev/null")
        with pytest.raises(OSError, match="no space left"):
            await box.write_file("smuggled", SMUGGLED * 5000)  # ~450 KB: several dd blocks
        await box.execute("rm /run/sandbox-runner/fill")
        assert box.channel is not None  # still in step
        after = await box.execute("ls / | grep -c pwned; echo in step")
        assert after.stdout == "0\nin step\n", after


def test_a_line_without_the_token_ends_the_shell_helper(docker_client) -> None:
    """The helper alone, fed by hand: the right token runs a request; any
    other first field (no token, a wrong one) ends it before anything runs."""
    from conftest import TEST_IMAGE_BUSYBOX

    from runner.sandboxes.docker.channel import helper_source

    container = docker_client.containers.run(
        TEST_IMAGE_BUSYBOX, ["sleep", "120"], detach=True, network_mode="none"
    )
    try:
        outcomes = []
        for token in (b"0" * 32, b"", b"1" * 32):
            line = token + b" exec 9 - 0 0 3\n1\n/\n1\nsh\n1\ntouch /ran\n"
            exec_id = docker_client.api.exec_create(
                container.id,
                ["sh", "-c", helper_source("exec_helper.sh")],
                stdin=True,
                user="0:0",
            )["Id"]
            sock = docker_client.api.exec_start(exec_id, socket=True)
            raw = getattr(sock, "_sock", sock)
            raw.sendall(b"0" * 32 + b"\n" + line)  # the token, then one request
            time.sleep(1)  # it runs in the background: give it time
            raw.shutdown(1)  # end of requests: the helper ends
            raw.settimeout(10)
            while raw.recv(65536):
                pass
            raw.close()
            check = container.exec_run(["sh", "-c", "ls /ran 2>/dev/null; rm -f /ran"])
            outcomes.append(check.output.decode().strip())
        assert outcomes == ["/ran", "", ""]
    finally:
        container.remove(force=True)


# --- found by an attacker's review -----------------------------------------------------


async def test_a_background_child_holding_the_output_is_killed_at_the_timeout(
    docker_backend, image
) -> None:
    """``server &`` keeps the output open: the command times out (124) with
    what it printed, its child is killed, and the channel goes on (the
    Python helper on the full image, the shell helper on the others)."""
    _kind, tag = image
    async with await open_session(docker_backend, image=tag) as session:
        box = session.sandbox
        started = time.monotonic()
        result = await box.execute("echo started; sleep 100 &", timeout_seconds=3)
        took = time.monotonic() - started
        left = await box.execute_as_root(
            "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"
            " | grep -c '^sleep 100'"
        )
        assert box.channel is not None
    assert (result.exit_code, result.timed_out, result.stdout) == (124, True, "started\n")
    assert took < 8, took
    assert left.stdout.strip() == "0"


async def test_a_process_that_leaves_the_group_cannot_hold_the_answer(
    docker_backend, image
) -> None:
    """A child in a session of its own keeps the pipes: the answer comes at
    the timeout and a grace, with no made-up cut, and no root process of the
    helper's is left behind."""
    _kind, tag = image
    count_root_copies = (
        "n=0; for p in /proc/[0-9]*; do"
        ' [ "$(stat -c %u $p 2>/dev/null)" = 0 ] || continue;'
        " case $(tr '\\0' ' ' < $p/cmdline 2>/dev/null) in dd*|tee*|tail*|head*|wc*) n=$((n+1));; esac;"
        " done; echo $n"
    )
    async with await open_session(docker_backend, image=tag, exec_channel="shell") as session:
        box = session.sandbox
        before = await box.execute_as_root(count_root_copies)
        started = time.monotonic()
        result = await box.execute("setsid sleep 300 & sleep 100", timeout_seconds=2)
        took = time.monotonic() - started
        await anyio.sleep(0.5)
        after = await box.execute_as_root(count_root_copies)
        assert box.channel is not None
        assert (await box.execute("echo on")).stdout == "on\n"
    assert (result.exit_code, result.timed_out) == (124, True)
    assert "omitted" not in result.stdout + result.stderr, result
    assert took < 8, took
    assert int(after.stdout) <= int(before.stdout), (before.stdout, after.stdout)


#: What the agent plants in a directory of its own that the container's PATH
#: names first: were the root helper to look its tools up there, it would run them.
PLANT = """
mkdir -p /workspace/bin
for tool in dd wc cat head tail stat mkfifo tee setsid setpriv nsenter sleep rm env ls mktemp sh; do
  printf '#!/bin/sh\\nid -u > /workspace/pwned-$(basename $0)\\n' > /workspace/bin/$tool
  chmod +x /workspace/bin/$tool
done
"""


async def test_the_helper_never_runs_a_tool_from_a_directory_the_agent_writes(
    docker_backend, image
) -> None:
    _kind, tag = image
    path = "/workspace/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    async with await open_session(
        docker_backend, image=tag, exec_channel="shell", env={"PATH": path}
    ) as session:
        box = session.sandbox
        assert (await box.execute(PLANT)).exit_code == 0
        await box.write_file("f", b"data")
        assert await box.read_file("f") == b"data"
        seen = await box.execute("echo $PATH")
        timed = await box.execute("while :; do :; done", timeout_seconds=1)
        planted = await box.execute_as_root("cat /workspace/pwned-* 2>/dev/null | sort -u")
    # Commands still get the container's PATH (and so the agent's tools)...
    assert seen.stdout.splitlines() == [path]
    assert timed.timed_out
    # ...but nothing of the helper's ran from there: only the agent's own
    # command did, as the agent (uid 1000).
    assert planted.stdout.split() in ([], ["1000"]), planted


async def test_the_containers_environment_reaches_commands_whatever_its_names(
    docker_backend, image
) -> None:
    """Names the helper uses for itself (D, P, TOKEN, f, id, ...) must not
    replace the author's values, nor hand the channel's token to the agent."""
    _kind, tag = image
    names = ["D", "P", "W", "f", "id", "TOKEN", "AS", "PATH_X", "S1", "S3", "v", "line"]
    env = {name: f"author-{name}" for name in names}
    async with await open_session(
        docker_backend, image=tag, exec_channel="shell", env=env
    ) as session:
        script = "; ".join(f'printf "%s\\n" "${name}"' for name in names)
        result = await session.sandbox.execute(script, env={"EXTRA": "x"})
        plain = await session.sandbox.execute(script)
    assert result.stdout.splitlines() == [f"author-{name}" for name in names]
    assert plain.stdout == result.stdout


async def test_long_and_odd_commands_get_the_python_helpers_answers(docker_backend) -> None:
    answers = {}
    for helper in ("python", "shell"):
        async with await open_session(docker_backend, exec_channel=helper) as session:
            box = session.sandbox
            started = time.monotonic()
            many_lines = await box.execute("cat <<'EOF' | wc -l\n" + "x\n" * 50000 + "EOF")
            took = time.monotonic() - started
            too_long = await box.execute("true" + "\n" * 400000)
            surrogate = await box.execute("echo \ud800")
            surrogate_env = await box.execute("true", env={"X": "\ud800"})
            linked = await box.execute("mkdir -p d && ln -sfn d dlink && pwd", cwd="dlink")
            oldpwd = await box.execute('echo "${OLDPWD-unset}"', cwd="/tmp")
            answers[helper] = [
                (many_lines.exit_code, many_lines.stdout),
                (too_long.exit_code, "Argument list too long" in too_long.stderr),
                surrogate.exit_code,
                surrogate_env.exit_code,
                linked.stdout,
                oldpwd.stdout,
            ]
            assert took < 5, (helper, took)
            assert box.channel is not None
            if helper == "shell":
                assert box.channel._pending == {}  # nothing left waiting
    assert answers["shell"] == answers["python"]
    assert answers["shell"][:2] == [(0, "50000\n"), (126, True)]
