"""User-namespace remapping (issue 26, finding 5 and item 6), tried for real.

``scripts/docker-userns-up`` starts a second engine beside the main one,
``dockerd --userns-remap=default`` on its own socket (``USERNS_HOST``),
with the test images copied into it; environments reach it through
``docker_host=`` and ``runner`` through ``DOCKER_HOST``.  Each test runs on
both engines: what the remap adds shows as the difference, so a test that
passed on the main engine would prove nothing.
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import anyio
import pytest
from conftest import RUNNER_CLI, USERNS_HOST

import runner as agents

pytestmark = pytest.mark.docker


def dockremap_base() -> int:
    """The first host uid of the ``dockremap`` range (/etc/subuid), which
    ``--userns-remap=default`` maps container uid 0 to."""
    for line in Path("/etc/subuid").read_text().splitlines():
        name, start, _count = line.split(":")
        if name == "dockremap":
            return int(start)
    raise AssertionError("/etc/subuid has no dockremap range: the remapped engine never started")


def host_processes_of(container_id: str) -> dict[int, list[int]]:
    """Every process of the container, as the host's /proc sees it: host pid
    -> its real, effective, saved and filesystem uids (the ``Uid:`` line)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if f"/docker/{container_id}" not in (entry / "cgroup").read_text():
                continue
            status = (entry / "status").read_text()
        except OSError:  # ended meanwhile
            continue
        (uids,) = (line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
        found[int(entry.name)] = [int(uid) for uid in uids]
    return found


@pytest.mark.anyio
@pytest.mark.parametrize(
    "docker_on_every_image", ["docker:full", "userns:full", "userns:busybox"], indirect=True
)
async def test_container_root_and_the_sandbox_user_are_unprivileged_host_uids(
    docker_on_every_image,
) -> None:
    """Root's helper, the TTL clock and ``docker-init``, and a process the
    agent leaves running, read from the host's /proc: on the main engine they
    are host uids 0 and 1000; on the remapped one the base of the dockremap
    range (100000 here) and that plus 1000, while inside they are still 0
    and 1000."""
    backend = docker_on_every_image
    base = dockremap_base() if backend.docker_host else 0
    env = backend.environment()
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        box = session.sandbox
        inside = await box.execute("id -u; sleep 300 >/dev/null 2>&1 & echo started")
        as_root = await box.execute_as_root("id -u")
        processes = host_processes_of(box.container_id)
    assert inside.stdout.split() == ["1000", "started"], inside
    assert as_root.stdout.split() == ["0"], as_root
    uids = {tuple(uids) for uids in processes.values()}
    assert uids == {(base,) * 4, (base + 1000,) * 4}, processes
    if backend.docker_host:
        assert base >= 100000, base  # no uid a host account or service has


#: The agent's attack on a per-uid kernel limit: a process left in the
#: background takes every inotify instance it can get, says how many in
#: ``taken`` (with the errno that stopped it) and holds them.
TAKE_EVERY_INOTIFY = r"""python3 -c '
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
held = []
while True:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    held.append(fd)
with open("taken", "w") as out:
    out.write("%d %d\n" % (len(held), ctypes.get_errno()))
time.sleep(600)
' >/dev/null 2>&1 &
while [ ! -s taken ]; do sleep 0.1; done; cat taken"""

#: Run on the host: one inotify instance, "ok" or the errno that refused it.
ONE_INOTIFY = (
    "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); fd = libc.inotify_init1(0); "
    "print('ok' if fd >= 0 else ctypes.get_errno()); fd >= 0 and os.close(fd)"
)


#: A python3 every host user can run.
HOST_PYTHON = "/usr/bin/python3"


def host_inotify_as(uid: int) -> str:
    """Whether a host process of ``uid`` can get one inotify instance now
    (the system's python3: this venv's may sit where uid 1000 cannot read)."""
    done = subprocess.run(
        [HOST_PYTHON, "-c", ONE_INOTIFY],
        user=uid,
        group=uid,
        extra_groups=[],
        capture_output=True,
        text=True,
        cwd="/",
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.anyio
@pytest.mark.parametrize("docker_backend", ["docker", "userns"], indirect=True)
async def test_an_agent_holding_every_inotify_instance_no_longer_starves_host_uid_1000(
    docker_backend, inotify_lock
) -> None:
    """Finding 5: the agent (uid 1000) takes every inotify instance it can
    and holds them.  On the main engine a host process of uid 1000 then
    fails with EMFILE ("Too many open files"), as the review saw.  On the
    remapped engine it does not; the kernel charges the instances to the
    user namespace's owner instead, host root (runc creates the namespace as
    root), so a host root process fails there: the limit moved, it did not
    go away (SECURITY.md says so).  The window is kept short: the container
    is removed as soon as the host has tried."""
    env = docker_backend.environment()
    with anyio.fail_after(120):
        async with await agents.Agent(model="m", environment=env).start_session() as session:
            taken = await session.sandbox.execute(TAKE_EVERY_INOTIFY, timeout_seconds=60)
            host_user, host_root = host_inotify_as(1000), host_inotify_as(0)
    assert taken.exit_code == 0, taken
    count, stopped_by = map(int, taken.stdout.split())
    assert count > 0 and stopped_by == errno.EMFILE, taken.stdout
    if docker_backend.docker_host:
        assert (host_user, host_root) == ("ok", str(errno.EMFILE))
    else:
        assert (host_user, host_root) == (str(errno.EMFILE), "ok")


@pytest.mark.parametrize("engine", ["docker", "userns"])
def test_runner_info_reports_the_remap(request, engine) -> None:
    """``runner info`` against each engine, through ``DOCKER_HOST`` as a user
    would point it: the remapped one is reported as such, the main one not."""
    env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    if engine == "userns":
        request.getfixturevalue("userns_client")  # skipped (failed under CI) without it
        env["DOCKER_HOST"] = USERNS_HOST
    else:
        request.getfixturevalue("docker_client")
    done = subprocess.run(
        [*RUNNER_CLI, "info"], capture_output=True, text=True, env=env, cwd="/", timeout=60
    )
    assert done.returncode == 0, done.stderr
    (isolation,) = (line for line in done.stdout.splitlines() if "isolation:" in line)
    if engine == "userns":
        assert "user namespaces remapped" in isolation, done.stdout
    else:
        assert "no user-namespace remapping" in isolation, done.stdout
