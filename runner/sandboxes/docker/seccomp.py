"""Seccomp profiles for Docker sandboxes: Docker's default, or the runner's stricter one.

``seccomp: strict`` (YAML) / ``seccomp="strict"`` (Python) starts from
Docker's own default profile (vendored unchanged in ``data/``, see its
README) and takes away what coding agents do not need and what lets one
sandbox reach past its own limits on a shared kernel:

- ``io_uring_*``: a large kernel surface that bypasses per-syscall filters;
- ``ptrace`` and ``process_vm_*``: reading or steering other processes;
- ``inotify_init*`` and ``fanotify_init``: inotify instances are counted per
  uid across every container and the host (issue 26, finding 5: the agent
  took all 128 of host uid 1000's); file watchers fall back to polling or fail;
- message queues (``mq_*``, ``msg*``): also counted per uid, host-wide;
- sockets of families other than unix, IPv4, IPv6 and netlink (AF_ALG,
  AF_PACKET, AF_VSOCK, ...), and the 32-bit ``socketcall`` that would
  bypass that check.

Docker's default already refuses ``bpf``, ``perf_event_open``, ``keyctl``,
``add_key``, ``request_key``, ``userfaultfd``, namespaces and mounts to a
container without capabilities, which ours is; the strict profile keeps that.
A denied call fails with EPERM.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import Any

#: The values ``seccomp`` takes.
PROFILES = ("default", "strict")

#: Calls the strict profile removes from every rule of Docker's default.
STRICT_DENIED = frozenset(
    {
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "inotify_init",
        "inotify_init1",
        "fanotify_init",
        "mq_open",
        "mq_unlink",
        "mq_notify",
        "mq_getsetattr",
        "mq_timedsend",
        "mq_timedsend_time64",
        "mq_timedreceive",
        "mq_timedreceive_time64",
        "msgget",
        "msgctl",
        "msgsnd",
        "msgrcv",
        "socketcall",
        "socket",  # allowed again below, for the families in SOCKET_FAMILIES
    }
)
#: The socket families the strict profile allows: AF_UNIX, AF_INET,
#: AF_INET6, AF_NETLINK (glibc's getaddrinfo and ``ip`` use it).
SOCKET_FAMILIES = (1, 2, 10, 16)


@cache
def docker_default() -> dict[str, Any]:
    """Docker's default profile, as vendored."""
    text = resources.files(__package__).joinpath("data/seccomp-docker-default.json").read_text()
    return json.loads(text)


@cache
def strict_profile() -> str:
    """The strict profile as the JSON text ``--security-opt seccomp=`` takes."""
    profile = copy.deepcopy(docker_default())
    rules = []
    for rule in profile["syscalls"]:
        names = [name for name in rule["names"] if name not in STRICT_DENIED]
        if names:
            rules.append({**rule, "names": names})
    for family in SOCKET_FAMILIES:
        rules.append(
            {
                "names": ["socket"],
                "action": "SCMP_ACT_ALLOW",
                "args": [{"index": 0, "value": family, "op": "SCMP_CMP_EQ"}],
            }
        )
    profile["syscalls"] = rules
    return json.dumps(profile, separators=(",", ":"))


def security_options(seccomp: str) -> list[str]:
    """The ``security_opt`` entries for ``seccomp`` (none for Docker's default)."""
    if seccomp == "default":
        return []
    if seccomp == "strict":
        return [f"seccomp={strict_profile()}"]
    raise ValueError(f"seccomp must be one of {', '.join(PROFILES)}, got {seccomp!r}")
