"""The agent's processes: listed before a turn, killed after it and
before ``on_destroy`` (issue 26).

Root lists and kills every process of the agent's uid (1000; before
``on_destroy`` the hooks' uid's too, see ``owners``) with a script of shell
builtins only (``PROCESSES_SCRIPT``), round after round, so
a loop forking as fast as it can is caught too, and with the pids limit
raised for that moment if the agent's processes hold every pid.  A mixin
of ``DockerSandbox``, split from ``container`` (issue 27).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING

import anyio

from ...core.errors import SandboxUnavailableError
from .engine import DockerClient
from .exec import PROBE_SECONDS
from .owners import HOOK_GID, HOOK_UID, SANDBOX_UID

if TYPE_CHECKING:
    import docker

    from ..base import SandboxExecutionResult


PROCESSES_SCRIPT = r"""
# $1: list | kill; $2: the uid; then the processes to keep, as PID:START
# (START: the 22nd field of /proc/PID/stat, its start time in clock ticks
# since boot: a reused pid never matches), with every process they fork
# later (a hook's service that starts a worker after the mark).  Builtins
# only (read, kill, a glob): with the pids limit reached, nothing else
# could start.
what=$1 uid=$2
shift 2
keep=" $* "
set -f
# procs: the uid's live processes, neither kept nor descended from a kept
# one, as PID:START, in L
procs() {
    L= K=' '
    set +f
    for d in /proc/[0-9]*; do
        set -f
        u= s=
        while read -r k a b rest; do
            case $k in
            State:) s=$a ;;
            Uid:) u="$a $b" && break ;;
            esac
        done 2>/dev/null <"$d/status"
        case $s in Z | X | '') continue ;; esac
        case " $u " in *" $uid "*) ;; *) continue ;; esac
        read -r line 2>/dev/null <"$d/stat" || continue
        set -- ${line##*) }
        [ $# -ge 20 ] || continue
        pp=$2
        shift 19
        p=${d#/proc/}
        case $keep in *" $p:$1 "*) K="$K$p " && continue ;; esac
        L="$L $p:$1:$pp"
    done
    set -f
    # the descendants of kept processes, parent by parent (K: kept pids)
    more=1
    while [ "$more" = 1 ]; do
        more=0 rest=
        for e in $L; do
            case $K in
            *" ${e##*:} "*) K="$K${e%%:*} " more=1 ;;
            *) rest="$rest $e" ;;
            esac
        done
        L=$rest
    done
    rest=
    for e in $L; do rest="$rest ${e%:*}"; done
    L=$rest
}
procs
if [ "$what" = list ]; then
    echo "procs:$L"
    exit 0
fi
# kill: round after round, until a round finds none it has not killed
# (what one forked while the last round ran is found by the next; a killed
# process never runs its own code again, even before it is gone)
killed=0 round=0 hit=' '
while :; do
    new=0
    for e in $L; do
        case $hit in *" $e "*) continue ;; esac
        kill -9 "${e%%:*}" 2>/dev/null && killed=$((killed + 1))
        hit="$hit$e " new=1
    done
    [ "$new" = 1 ] || break
    round=$((round + 1))
    [ "$round" -le 1000 ] || exit 1
    procs
done
echo "killed:$killed"
"""
#: How long listing or killing the sandbox user's processes may take.
PROCESSES_SECONDS = 30.0
#: A process as ``PROCESSES_SCRIPT`` names it: PID:START.
_PROCESS = re.compile(r"[0-9]+:[0-9]+")


class SandboxProcesses:
    """Listing and killing the sandbox user's processes (see the module's docstring)."""

    # Set by DockerSandbox.__init__.
    client: DockerClient
    home: str | None
    pids_limit: int | None

    if TYPE_CHECKING:

        @property
        def container_id(self) -> str: ...

        @property
        def separates_users(self) -> bool: ...

        async def execute_as_root(
            self, command: str, *, timeout_seconds: float | None = None
        ) -> SandboxExecutionResult: ...

    async def mark_processes(self) -> frozenset[str] | None:
        """The sandbox user's processes now, as PID:START (None under ``user:
        root``, where the agent's processes are not told apart from root's)."""
        if not self.separates_users:
            return None
        return frozenset((await self._processes("list", ())).split())

    async def fresh_home(self) -> str | None:
        """A new ``HOME`` for the hooks: made by root in ``/tmp`` (mktemp, so
        nothing the agent left there can stand in for it), the hooks' uid's
        (``owners``), mode 700: the agent's uid can neither write nor list it."""
        if self.separates_users:
            made = await self.execute_as_root(
                "d=$(mktemp -d /tmp/runner-hooks-home.XXXXXXXX) && chown "
                f'{HOOK_UID}:{HOOK_GID} "$d" && chmod 700 "$d" && printf %s "$d"',
                timeout_seconds=PROBE_SECONDS,
            )
            if made.exit_code != 0 or not made.stdout.startswith("/tmp/runner-hooks-home."):
                raise SandboxUnavailableError(
                    f"could not make a new HOME for the hooks: {made.stderr.strip()[-300:]}"
                )
            self.home = made.stdout
        return self.home

    async def end_processes(self, *, since: frozenset[str] | None = None) -> int | None:
        """Kill every process of the agent's uid (1000) but those in the
        mark ``since`` and the ones they forked since (a hook's service that
        starts a worker later; the turn's commands descend from the root
        helper, never from a marked process): as root, by uid, round after
        round until none is left, so a loop forking as fast as it can is
        caught too.  A hook's processes (another uid, ``owners``) are out
        of the agent's reach and outlive its turns.  Without a mark (before
        ``on_destroy``) the hooks' uid's processes go too, after the
        agent's: a hook's service may have run what the agent wrote (a dev
        server, a test watcher), and nothing of that may run beside an
        ``on_destroy`` step's secret.  Nothing under ``user: root``.
        Raises ``SandboxUnavailableError`` if it could not be done."""
        if not self.separates_users:
            return None
        keep = sorted(p for p in since or () if _PROCESS.fullmatch(p))
        killed = int(await self._processes("kill", keep))
        if since is None:
            killed += int(await self._processes("kill", (), uid=HOOK_UID))
        return killed

    async def _processes(self, what: str, keep: Iterable[str], *, uid: int = SANDBOX_UID) -> str:
        command = f"set -- {what} {uid} {' '.join(keep)}\n{PROCESSES_SCRIPT}"
        expected = "procs:" if what == "list" else "killed:"
        result = await self.execute_as_root(command, timeout_seconds=PROCESSES_SECONDS)
        if not result.stdout.startswith(expected):
            # No process could start (the pids limit reached, by the agent's
            # processes): once more, with a little room above the limit.
            async with self._pids_headroom():
                result = await self.execute_as_root(command, timeout_seconds=PROCESSES_SECONDS)
        if result.exit_code != 0 or not result.stdout.startswith(expected):
            raise SandboxUnavailableError(
                f"could not {what} the sandbox user's processes (exit code {result.exit_code}): "
                f"{(result.stderr or result.stdout).strip()[-300:]}"
            )
        return result.stdout[len(expected) :].strip()

    @contextlib.asynccontextmanager
    async def _pids_headroom(self) -> AsyncIterator[None]:
        """The container's pids limit raised by ``PIDS_HEADROOM`` meanwhile."""
        limit = self.pids_limit
        if not limit or limit <= 0:
            yield
            return
        await self.client.call(_update_pids_limit, self.container_id, limit + PIDS_HEADROOM)
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await self.client.call(_update_pids_limit, self.container_id, limit)


#: How many pids above its limit the container gets while the sandbox user's
#: processes are killed, if they had taken every one.
PIDS_HEADROOM = 16


def _update_pids_limit(client: docker.DockerClient, container_id: str, limit: int) -> None:
    """``docker update --pids-limit`` (docker-py's ``update_container`` lacks it)."""
    api = client.api
    url = api._url("/containers/{0}/update", container_id)
    api._raise_for_status(api._post_json(url, data={"PidsLimit": limit}))
