"""The agent's ``read_file`` tool: peak memory for a huge file against a small one.

    .venv/bin/python bench/read_limit.py [--size-mib 1024] [--backends local,docker]

Issue 26 asks that the tool's peak RSS for any file be bounded by its limit
(1 MiB) plus a constant.  For each backend, each measure runs in a fresh
Python process (so its peak resident set, ``ru_maxrss``, is its own):

- baseline: a session, the file planted, and the tool asked for a 10-byte file;
- huge: the same, then the tool asked for a sparse file of ``--size-mib``
  MiB (one emoji at its end), through ``a/../huge`` as the review did;

and the growth, huge - baseline, in MiB (issue 26, finding 1: before the fix
this was ~6 GiB for 1023 MiB).  Not a test: it prints a table.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys

import anyio

import runner as agents
from runner.models.turns import PreparedCall, run_tool


async def measure(backend: str, size_mib: int, huge: bool) -> int:
    if backend == "docker":
        from runner.sandboxes.docker.environment import LocalDockerSandbox

        environment: agents.SandboxEnvironment = LocalDockerSandbox()
    else:
        from runner.sandboxes.local import DangerousLocalSandbox

        environment = DangerousLocalSandbox()
    async with await agents.Agent(model="m", environment=environment).start_session() as session:
        box = session.sandbox
        planted = await box.execute(
            f"mkdir -p sub/deep && ln -s sub/deep a && truncate -s {size_mib}M huge"
            " && printf '\\360\\237\\230\\200' >> huge && printf 'small file' > small.txt"
        )
        assert planted.exit_code == 0, planted.stderr
        path = "a/../huge" if huge else "small.txt"
        call = PreparedCall(agents.ToolCall("c1", "read_file", "{}"), "read_file", {"path": path})
        record = await run_tool(box, call)
        assert record.is_error == huge, record.output[:200]
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--backends", default="local,docker")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        backend, which = args.child
        print(anyio.run(measure, backend, args.size_mib, which == "huge"))
        return
    print(f"read_file tool, a {args.size_mib} MiB sparse file vs a 10-byte one (peak RSS)")
    print(f"{'backend':<8} {'baseline MiB':>13} {'huge MiB':>9} {'growth MiB':>11}")
    for backend in args.backends.split(","):
        peaks = []
        for which in ("small", "huge"):
            child = [sys.executable, __file__, "--size-mib", str(args.size_mib)]
            out = subprocess.run(
                [*child, "--child", backend, which],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ},
            )
            peaks.append(int(out.stdout.split()[-1]) / 1024)
        print(f"{backend:<8} {peaks[0]:13.1f} {peaks[1]:9.1f} {peaks[1] - peaks[0]:11.1f}")


if __name__ == "__main__":
    main()
