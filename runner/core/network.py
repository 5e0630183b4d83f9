"""What a sandbox may reach on the network.

A policy is a value object; each backend decides how (and whether) it can
enforce it, and refuses at construction what it cannot enforce, so a session
never starts with weaker isolation than the user asked for.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Network:
    """A sandbox's network policy: ``none()`` (the default), ``all()`` or ``allow(hosts)``."""

    mode: Literal["none", "all", "allow"]
    hosts: tuple[str, ...] = ()

    @classmethod
    def none(cls) -> Network:
        """No network at all: the safe default."""
        return cls("none")

    @classmethod
    def all(cls) -> Network:
        """Unrestricted network access."""
        return cls("all")

    @classmethod
    def allow(cls, hosts: Iterable[str]) -> Network:
        """Only these IP addresses or CIDR ranges (``MistralSandbox`` refuses host
        names: its firewall matches addresses); Docker cannot enforce it at all."""
        host_list = tuple(hosts)
        if not host_list:
            raise ValueError("Network.allow() needs at least one host; use Network.none()")
        for host in host_list:
            if not isinstance(host, str) or not host or any(c.isspace() for c in host):
                raise ValueError(f"Network.allow(): not a host name: {host!r}")
        return cls("allow", host_list)

    def __str__(self) -> str:
        if self.mode == "allow":
            return f"Network.allow({list(self.hosts)!r})"
        return f"Network.{self.mode}()"
