"""What one session's container looks like: the hardened options
``containers.create`` gets (capabilities, user, tmpfs mounts, limits,
labels) and the checks on the settings they come from.

A mixin of ``LocalDockerSandbox``, which holds the settings; kept apart so
that every default that makes a container safe is read in one place.
"""

from __future__ import annotations

import os
import re
import socket
import time
from typing import Any

from ...core.network import Network
from .engine import (
    LABEL,
    LABEL_DURABLE,
    LABEL_EXPIRES,
    LABEL_OWNER_HOST,
    LABEL_OWNER_PID,
    LABEL_OWNER_START,
    LABEL_SCOPE,
    LABEL_SESSION,
    current_scope,
    process_start_time,
)
from .owners import HOOK_GID, HOOK_UID, SANDBOX_HOME, WORKSPACE

#: Every capability is dropped, then only these are given back, each for a
#: reason.  They are root's only (the helper, the setup script, ``user:
#: root`` commands): the sandbox users' commands have none.  CHOWN - hand
#: the workspace and HOME between the hooks' and the agent's uids
#: (``owners``), and let dpkg/pip/git as root own files; DAC_OVERRIDE,
#: FOWNER, FSETID - root may read and write any file of the image and keep
#: file modes; SETUID, SETGID - the helper starts each command as a sandbox
#: user (and apt drops to its own user); KILL - the helper kills the process
#: groups of timed-out commands, which belong to a sandbox user.  Left out
#: of Docker's default set: NET_RAW, NET_BIND_SERVICE, MKNOD, AUDIT_WRITE,
#: SETFCAP, SETPCAP, SYS_CHROOT.
CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "KILL")
#: Who runs hooks and agent commands: "sandbox" (hooks uid/gid 1001, the
#: agent 1000, no capabilities; see ``owners``) or "root" (the weaker
#: opt-out: the agent can then stop the helper and the TTL process).
USERS = ("sandbox", "root")
#: With ``read_only_root``: the writable places, each a tmpfs of this size
#: (counted against the memory limit); the workspace's is ``workspace_size``.
READ_ONLY_TMPFS_SIZES = {"/tmp": "256m", "home": "256m", WORKSPACE: "1g"}
#: The CPU limit when none is given: a runaway command cannot take every core.
DEFAULT_CPUS = 2.0
#: Where the shell helper keeps its files: a tmpfs only root can enter (it
#: uses /tmp in containers made without it).  Only what is stored counts
#: against the memory limit; each command holds at most 1.5 output caps per
#: stream there, each file piece 16 MiB.
CHANNEL_DIR = "/run/sandbox-runner"
CHANNEL_DIR_SIZE = "512m"


class ContainerOptions:
    """The container options of one environment (see the module's docstring)."""

    # Set by LocalDockerSandbox.__init__.
    image: str
    user: str
    env: dict[str, str]
    memory: str | None
    cpus: float | None
    pids_limit: int
    network: Network
    runtime: str | None
    security_options: list[str]
    read_only_root: bool
    workspace_size: str | None
    durable_owner: str | None

    def _check_workspace_fits_in_memory(self) -> None:
        """A tmpfs workspace is memory: one larger than the memory limit lets
        the agent fill the limit with pages no process owns, and the
        out-of-memory killer then ends every process, the TTL clock and
        docker-init included (issue 26).  Refused here, so ``runner validate``
        names it too.  Sizes it cannot read (a percentage) are left to Docker."""
        size = self.workspace_size or (
            READ_ONLY_TMPFS_SIZES[WORKSPACE] if self.read_only_root else None
        )
        if size is None or not self.memory:
            return
        workspace, memory = size_in_bytes(size), size_in_bytes(self.memory)
        if workspace is not None and memory is not None and workspace > memory:
            given = (
                f"workspace_size {size!r}"
                if self.workspace_size
                else f"read_only_root's tmpfs workspace ({size})"
            )
            raise ValueError(
                f"{given} is larger than the memory limit {self.memory!r}: a tmpfs workspace is "
                "counted against memory, and filling it would leave none for the sandbox's own "
                "processes; give a workspace_size no larger than memory, or more memory"
            )

    def container_options(self, *, session_id: str, expires_at: float | None) -> dict[str, Any]:
        """The keyword arguments of ``containers.create`` for one session."""
        labels = {
            LABEL: "1",
            LABEL_SESSION: session_id,
            LABEL_OWNER_HOST: socket.gethostname(),
            LABEL_OWNER_PID: str(os.getpid()),
            LABEL_OWNER_START: process_start_time(os.getpid()) or "",
        }
        if self.durable_owner:
            labels[LABEL_DURABLE] = self.durable_owner
        scope = current_scope()
        if scope is not None:
            labels[LABEL_SCOPE] = scope
        lifetime = "infinity"
        if expires_at is not None:
            labels[LABEL_EXPIRES] = str(int(expires_at))
            lifetime = str(max(1, int(expires_at - time.time()) + 1))
        home = SANDBOX_HOME if self.user == "sandbox" else "/root"
        options: dict[str, Any] = {
            "image": self.image,
            "command": ["sleep", lifetime],
            # Root whatever the image's USER says: the helper and the TTL
            # clock must be out of the sandbox user's reach.
            "user": "0:0",
            "working_dir": WORKSPACE,
            "labels": labels,
            "environment": {"HOME": home, **self.env},
            "init": True,
            "security_opt": ["no-new-privileges", *self.security_options],
            "cap_drop": ["ALL"],
            "cap_add": list(CAPABILITIES),
            "pids_limit": self.pids_limit,
            "detach": True,
        }
        if self.runtime is not None:
            options["runtime"] = self.runtime
        if self.network.mode == "none":
            options["network_mode"] = "none"
        if self.memory:
            options["mem_limit"] = self.memory
        owner = (
            f"uid={HOOK_UID},gid={HOOK_GID},mode=0755"  # the hooks run first (``owners``)
            if self.user == "sandbox"
            else "mode=1777"
        )
        # The shell helper's own files (commands' output, file pieces): root's
        # only, so the agent can neither read them nor fill their space.
        tmpfs: dict[str, str] = {CHANNEL_DIR: f"size={CHANNEL_DIR_SIZE},mode=0700"}
        if self.read_only_root:
            options["read_only"] = True
            sizes = READ_ONLY_TMPFS_SIZES
            tmpfs["/tmp"] = f"size={sizes['/tmp']},mode=1777,exec"
            tmpfs[home] = f"size={sizes['home']},{owner},exec"
            tmpfs[WORKSPACE] = f"size={self.workspace_size or sizes[WORKSPACE]},{owner},exec"
        elif self.workspace_size:
            tmpfs[WORKSPACE] = f"size={self.workspace_size},{owner},exec"
        options["tmpfs"] = tmpfs
        if self.cpus:
            options["nano_cpus"] = int(self.cpus * 1e9)
        return options


_SIZE = re.compile(r"([0-9]+)\s*([bkmgt]?)b?", re.IGNORECASE)


def size_in_bytes(size: str | int) -> int | None:
    """A size as Docker reads a memory limit or a tmpfs size ("512m", "2g",
    bytes as an int or digits), in bytes; None for what it cannot read."""
    if isinstance(size, int) and not isinstance(size, bool):
        return size
    found = _SIZE.fullmatch(str(size).strip())
    if found is None:
        return None
    return int(found.group(1)) << (10 * " kmgt".index(found.group(2).lower() or " "))
