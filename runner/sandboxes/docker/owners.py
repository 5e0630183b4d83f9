"""Who a Docker sandbox's commands run as: the hooks or the agent (issue 26).

Hooks and the agent are two principals with two uids: hook commands (YAML
steps, a Python hook's ``ctx.sandbox`` commands and file moves) run as
``HOOK_UID``, the agent's tools as ``SANDBOX_UID``.  Neither has a
capability, so a process of one can neither trace, signal nor read the
``/proc/PID/environ`` of the other: a service a hook starts in
``on_create`` with a secret in its environment is out of the agent's reach
during its turns.

The workspace (and HOME, which the hooks seed for the agent: ``git config
--global`` in ``on_create``) belongs to whoever's turn it is, handed over
by root:

- at creation, after the setup script: everything in them to the hooks;
- after the last ``on_create`` (``hand_to_agent``): what the hooks own in
  them, to the agent, so seeded files are the agent's to change;
- before ``on_destroy``, once every process of the agent is killed
  (``hand_to_hooks``): what the agent owns in the workspace, to the hooks,
  which carry it out (``save:``); they get a fresh HOME of their own
  (``SandboxProcesses.fresh_home``).

A hand-over changes only the files of the uid it takes from (``chown
--from``, else ``find -user``), never follows a link (neither walk does,
``chown -h`` changes the link itself), and does the workspace directory
itself last, so its owner
says whose turn it is, even to a server re-attaching after a crash
mid-way.  A mixin of ``DockerSandbox``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from ...core.errors import SandboxUnavailableError
from .exec import PROBE_SECONDS

if TYPE_CHECKING:
    from ..base import SandboxExecutionResult

WORKSPACE = "/workspace"
#: HOME of every command but root's (the hooks' before ``on_destroy`` excepted).
SANDBOX_HOME = "/home/sandbox"
#: The agent's uid and gid: its tools (bash, read_file, write_file) run as it.
SANDBOX_UID = SANDBOX_GID = 1000
#: The hooks' uid and gid.  Numeric, as the agent's: the helpers switch with
#: setresuid/setpriv, and an image's /etc/passwd need not name either (a
#: read-only root could not take an entry added at start anyway).
HOOK_UID = HOOK_GID = 1001
#: How long one hand-over of the workspace may take (see bench/isolation.py
#: for what a 10,000-file workspace costs).
HANDOVER_SECONDS = 300.0
#: Hands the files of uid $1 under each later argument to uid $2 (and gid),
#: as root, never through a link (``-h``; neither walk follows one), each
#: argument itself last.  GNU chown's ``--from`` does it in one process
#: (twice as fast as find on 10,000 files); busybox's has no ``--from``,
#: so ``find -user`` picks the files there.
HANDOVER_SCRIPT = r"""
from=$1 to=$2
shift 2
if chown --help 2>&1 | grep -q -e --from=; then
    for d in "$@"; do
        [ -e "$d" ] || continue
        find "$d" -mindepth 1 -maxdepth 1 -exec chown -R -h --from="$from" "$to:$to" {} + &&
            chown -h --from="$from" "$to:$to" "$d" || exit 1
    done
else
    for d in "$@"; do
        [ -e "$d" ] || continue
        find "$d" -depth -user "$from" -exec chown -h "$to:$to" {} + || exit 1
    done
fi
echo handed
"""

Principal = Literal["hooks", "agent"]


class Owners:
    """Whose turn it is, and the hand-overs between them (see the module's docstring)."""

    # Set by DockerSandbox.__init__.
    user: str
    image: str
    #: Whose commands run now: "hooks" from creation to the last
    #: ``on_create`` and again from ``on_destroy``; "agent" in between.
    principal: Principal

    if TYPE_CHECKING:

        async def execute_as_root(
            self, command: str, *, timeout_seconds: float | None = None
        ) -> SandboxExecutionResult: ...

    @property
    def separates_users(self) -> bool:
        """False under ``user: root``: everything then runs as root."""
        return self.user != "root"

    def _ids(self, *, root: bool = False) -> list[int] | None:
        """The uid and gid the helper switches to (None: stay root)."""
        if root or not self.separates_users:
            return None
        if self.principal == "hooks":
            return [HOOK_UID, HOOK_GID]
        return [SANDBOX_UID, SANDBOX_GID]

    async def hand_over_workspace(self) -> None:
        """At creation, after the setup script: the workspace and HOME, with
        all that is in them (the setup script's files, the image's), to the
        hooks, who run first."""
        dirs = f"{SANDBOX_HOME} {WORKSPACE}"
        result = await self.execute_as_root(
            f"mkdir -p -- {dirs} && chown -R -h {HOOK_UID}:{HOOK_GID} -- {dirs}",
            timeout_seconds=HANDOVER_SECONDS,
        )
        if result.exit_code != 0:
            raise SandboxUnavailableError(
                f"could not give {WORKSPACE} and {SANDBOX_HOME} to the hooks' user in image "
                f"{self.image!r}: {result.stderr.strip()[-500:]}"
            )

    async def hand_to_agent(self) -> None:
        """After the last ``on_create``: what the hooks own in the workspace
        and HOME becomes the agent's, and its commands run as it from now."""
        if self.separates_users and self.principal != "agent":
            await self._hand_over(HOOK_UID, SANDBOX_UID, (SANDBOX_HOME, WORKSPACE))
        self.principal = "agent"

    async def hand_to_hooks(self) -> None:
        """Before ``on_destroy``, once the agent's processes are killed: what
        the agent owns in the workspace becomes the hooks', and commands run
        as them from now.  HOME stays the agent's (the hooks get their own)."""
        if self.separates_users and self.principal != "hooks":
            await self._hand_over(SANDBOX_UID, HOOK_UID, (WORKSPACE,))
        self.principal = "hooks"

    async def _hand_over(self, source: int, target: int, dirs: tuple[str, ...]) -> None:
        command = f"set -- {source} {target} {' '.join(dirs)}\n{HANDOVER_SCRIPT}"
        result = await self.execute_as_root(command, timeout_seconds=HANDOVER_SECONDS)
        if result.exit_code != 0 or result.stdout.strip() != "handed":
            raise SandboxUnavailableError(
                f"could not hand {' and '.join(dirs)} from uid {source} to uid {target} "
                f"(exit code {result.exit_code}): {result.stderr.strip()[-300:]}"
            )

    async def read_principal(self) -> None:
        """Whose turn it is, from the workspace's owner (``runner serve``
        re-attaching a container another process made; unknown: the agent,
        the lesser rights over the hooks' processes)."""
        if not self.separates_users:
            return
        result = await self.execute_as_root(
            f"stat -c %u {WORKSPACE}", timeout_seconds=PROBE_SECONDS
        )
        self.principal = "hooks" if result.stdout.strip() == str(HOOK_UID) else "agent"
