"""Configuration errors that point at the file, line and column."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.errors import AgentsError

JsonPath = tuple[str | int, ...]


def format_path(path: JsonPath) -> str:
    """``("agent", "environment", "hooks", 0, "run")`` -> ``agent.environment.hooks[0].run``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif text:
            text += f".{part}"
        else:
            text = str(part)
    return text or "(document)"


@dataclass(frozen=True)
class ConfigProblem:
    """One problem in one file: ``FILE:LINE:COL: message (at json.path)``, 1-based."""

    file: str
    line: int
    column: int
    message: str
    path: JsonPath = ()

    def __str__(self) -> str:
        where = f" (at {format_path(self.path)})" if self.path else ""
        return f"{self.file}:{self.line}:{self.column}: {self.message}{where}"


class ConfigError(AgentsError):
    """A configuration file is invalid; ``problems`` lists every problem found."""

    def __init__(self, problems: Sequence[ConfigProblem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))
