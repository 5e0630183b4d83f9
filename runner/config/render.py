"""``runner render``: what every hook would run, in lifecycle order, creating nothing.

Inputs are validated exactly as a session would validate them; templates are
rendered with secret inputs masked, so the output is safe to paste in a log.
The output is a shell script whose only commands are the ``run`` commands
(see :func:`plan_text`), so it is safe to read and to pipe into ``bash``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.hooks import SandboxHook
from ..core.progress import terminal_safe
from ..engine.dependencies import resolve_inputs
from ..pattern.sandbox_hook import GitIdentity
from .compiler import CompiledConfig
from .steps import StepsHook

PREVIEW_SESSION_ID = "sess_preview"


@dataclass(frozen=True)
class RenderedStep:
    hook: str
    point: str
    kind: str
    text: str


def render_plan(compiled: CompiledConfig, values: Mapping[str, Any]) -> list[RenderedStep]:
    """Every step of every hook: all ``on_create`` in order, then ``on_destroy`` reversed."""
    agent = compiled.agent
    if not agent.environment.creates_sandbox:
        return []
    inputs = resolve_inputs(values, [*agent.declared_inputs, *agent.plan.dependencies])
    hooks = list(agent.environment.hooks)
    rendered: list[RenderedStep] = []
    for point, order in (("on_create", hooks), ("on_destroy", list(reversed(hooks)))):
        for hook in order:
            rendered.extend(_render_hook(hook, point, inputs))
    return rendered


def _render_hook(hook: Any, point: str, inputs: Mapping[str, Any]) -> list[RenderedStep]:
    name = hook.display_name
    if isinstance(hook, StepsHook):
        steps = hook.create_steps if point == "on_create" else hook.destroy_steps
        values = {b.input_class.input_id: inputs[b.input_class.input_id] for b in hook.bindings}
        context = hook.context(values, PREVIEW_SESSION_ID, mask=True)
        return [RenderedStep(name, point, step.kind, step.describe(context)) for step in steps]
    if isinstance(hook, GitIdentity):
        if point == "on_create":
            return [RenderedStep(name, point, "run", hook.command())]
        return []
    if getattr(type(hook), point) is getattr(SandboxHook, point):
        return []  # the inherited no-op
    where = f"{type(hook).__module__}.{type(hook).__qualname__}.{point}()"
    return [RenderedStep(name, point, "python", f"{where} (Python code; not rendered)")]


def plan_text(steps: Sequence[RenderedStep]) -> str:
    """The plan as ``runner render`` prints it: ``run`` commands as they are, all else comments.

    A description holds templated values (a ``write`` path), and a newline in
    one would start a line of its own, a live command under ``| bash``: so
    every line of it is commented.  A ``run`` command's own newlines are real
    shell, but a trailing backslash would join the next line to it, so a blank
    line follows such a command.
    """
    if not steps:
        return _comment("no hook steps run (no sandbox, or no hooks)")
    lines: list[str] = []
    current = None
    for step in steps:
        if (step.hook, step.point) != current:
            current = (step.hook, step.point)
            lines.append(_comment(f"{step.hook}.{step.point}"))
        text = step.text.rstrip("\n")
        if step.kind != "run":
            lines.append(_comment(text))
        else:
            lines.append(text + ("\n\n" if text.endswith("\\") else "\n"))
    return "".join(lines)


def _comment(text: str) -> str:
    """Each line of ``text`` as a comment, its control characters shown as escapes
    (a carriage return or a terminal escape cannot hide the ``# `` from a reader)."""
    return "".join(f"# {terminal_safe(line)}\n" for line in text.split("\n"))
