"""Hooks compiled from YAML steps: ordinary ``SandboxHook`` objects.

A :class:`StepsHook` runs through the same lifecycle as a hand-written hook.
Its session inputs arrive the way every hook's do, through ``Depends``: the
compiler gives each instance ``on_create``/``on_destroy`` callables whose
signatures declare ``Annotated[InputClass, Depends()]`` for the inputs its
templates use.  Steps render their templates from those inputs at run time;
every ``{{ }}`` in a ``run`` command is shell-quoted by the template itself.
"""

from __future__ import annotations

import contextvars
import inspect
import os
import shlex
import time
import weakref
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import anyio

from ..core.errors import AgentsError
from ..core.events import emit, scrubbed
from ..core.hooks import SandboxCallbackContext, SandboxHook
from ..core.redaction import MASK, scrub
from ..engine.dependencies import Depends
from ..engine.inputs import SessionInput, secret_strings
from ..sandboxes.base import Sandbox, SandboxExecutionResult
from .host_paths import RUNNER_NAMES, check_value_path, resolve_inside
from .template_checks import path_components
from .templates import (
    MASKED_CONTEXT,
    Fields,
    Template,
    UnsafeTemplateError,
    names_a_secret_file,
    refuse_secret_directory,
    refuse_unsafe_env_values,
)

#: The environment variable every ``run`` step of a hook gets: the step's id.
STEP_ID_VARIABLE = "RUNNER_STEP_ID"

#: The id of the hook step running in this task (``run_steps`` sets it).
current_step_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "current_step_id", default=None
)


#: The files ``secret_file:`` steps, and ``write:`` steps whose content reads
#: a secret input, wrote in each sandbox: a run step's value may not name one
#: for a program to read (``Template.render``).
_secret_files: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


def step_id(session_id: str, hook: str, point: str, index: int) -> str:
    """A step's id: the same each time the step runs (a resumed session runs
    a cut-off step again, on this server or another), different for every
    other step and session, so a command can make itself idempotent
    (``[ -e done-$RUNNER_STEP_ID ] || ...``).  Built from what names the
    step, not from a counter, so nothing needs to be stored."""
    return f"{session_id}.{hook}.{point}.{index + 1}"


class StepFailedError(AgentsError):
    """A ``run`` step with ``check: true`` exited non-zero (or timed out)."""

    def __init__(self, message: str, *, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class InputBinding:
    """An input a hook uses: its class, and the template name (alias) it goes by.

    (Plain classes rather than dataclasses in this module: they are built on
    every `runner validate`, where each dataclass costs ~0.7 ms of start-up.)
    """

    __slots__ = ("alias", "input_class", "templated")

    def __init__(
        self, input_class: type[SessionInput], alias: str | None, *, templated: bool = True
    ) -> None:
        self.input_class = input_class
        self.alias = alias
        #: False for the secrets input: steps read it, templates never see it.
        self.templated = templated

    @property
    def secret(self) -> bool:
        return self.input_class.__secret__

    @property
    def parameter(self) -> str:
        return self.alias or "input_" + "".join(
            c if c.isalnum() else "_" for c in self.input_class.input_id
        )


class Paths:
    """Where host paths of ``save``/``upload`` steps are relative to."""

    __slots__ = ("config_dir", "output_dir")

    def __init__(self, *, output_dir: Path, config_dir: Path) -> None:
        self.output_dir = output_dir
        self.config_dir = config_dir


def template_context(
    bindings: Sequence[InputBinding],
    values: Mapping[str, SessionInput],
    session_id: str,
    *,
    mask_secrets: bool = False,
) -> dict[str, Any]:
    """The names templates see: each alias, ``inputs[input_id]`` and ``session.id``."""
    by_id: dict[str, Any] = {}
    context: dict[str, Any] = {}
    for binding in bindings:
        if not binding.templated:
            continue
        value = values[binding.input_class.input_id].to_dict()
        if mask_secrets and binding.secret:
            value = _masked(value)
        by_id[binding.input_class.input_id] = Fields(value)
        if binding.alias:
            context[binding.alias] = Fields(value)
    context["inputs"] = Fields(by_id)
    context["session"] = Fields({"id": session_id})
    if mask_secrets:  # a preview: the words it prints are not secrets to register
        context[MASKED_CONTEXT] = True
    return context


def _masked(value: Any) -> Any:
    """Every scalar as ``***``: a secret port or PIN is as secret as a password."""
    if isinstance(value, dict):
        return {k: _masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return MASK


def _shorten(text: str, limit: int = 1500) -> str:
    """Head and tail of a long message, cut only after secrets were scrubbed."""
    if len(text) <= limit:
        return text
    return f"{text[:300]} [... {len(text) - limit} characters ...] {text[-(limit - 300) :]}"


class Step:
    """Base of the step kinds.  ``describe`` is what ``runner render`` prints."""

    kind = ""

    def __init__(self, *, label: str | None) -> None:
        self.label = label

    def title(self, context: Mapping[str, Any]) -> str:
        """A one-line name for progress output (secrets masked by the caller's context)."""
        if self.label:
            return self.label
        try:
            lines = self.describe(context).splitlines()
        except Exception:  # the step itself will report why it cannot render
            return self.kind
        return lines[0][:80] if lines else self.kind

    def describe(self, context: Mapping[str, Any]) -> str:
        raise NotImplementedError

    async def run(
        self,
        ctx: SandboxCallbackContext,
        context: Mapping[str, Any],
        paths: Paths,
        secrets: Mapping[str, str],
    ) -> dict:
        raise NotImplementedError


class RunStep(Step):
    kind = "run"

    def __init__(
        self,
        *,
        label: str | None,
        command: Template,
        timeout_seconds: float | None = None,
        env: dict[str, Template] | None = None,
        cwd: Template | None = None,
        check: bool = True,
        secret_env: dict[str, str] | None = None,  # ENV_NAME -> secret name
        host_secret_files: Collection[str] = (),  # from_file: secrets' files
    ) -> None:
        super().__init__(label=label)
        self.command = command
        self.timeout_seconds = timeout_seconds
        self.env = env or {}
        self.cwd = cwd
        self.check = check
        self.secret_env = secret_env or {}
        self.host_secret_files = frozenset(host_secret_files)

    def describe(self, context: Mapping[str, Any]) -> str:
        return self.command.render(context)

    async def run(
        self,
        ctx: SandboxCallbackContext,
        context: Mapping[str, Any],
        paths: Paths,
        secrets: Mapping[str, str],
    ) -> dict:
        result = await self.execute(ctx.sandbox, context, secrets)
        if self.check and result.exit_code != 0:
            reason = (
                self._timed_out(ctx.sandbox) if result.timed_out else f"exited {result.exit_code}"
            )
            detail = result.stderr.strip() or result.stdout.strip()
            raise StepFailedError(
                f"command {reason}" + (f": {detail}" if detail else ""), exit_code=result.exit_code
            )
        return {"exit_code": result.exit_code, "timed_out": result.timed_out}

    async def execute(
        self, sandbox: Sandbox, context: Mapping[str, Any], secrets: Mapping[str, str]
    ) -> SandboxExecutionResult:
        """Render the command (the exact script checked first), its env and cwd,
        and run it: the one path of hook steps and YAML tools alike."""
        env = {name: value.render(context) for name, value in self.env.items()}
        refuse_unsafe_env_values(env, [n for n, value in self.env.items() if not value.is_static])
        env.update({name: secrets[secret] for name, secret in self.secret_env.items()})
        running = current_step_id.get()
        if running is not None:  # a hook's step (a tool call is not one)
            env[STEP_ID_VARIABLE] = running
        # Checked as the sandbox's shell reads it (None: bash, the default).
        shell = getattr(sandbox, "shell", None)
        secret_files = self.host_secret_files | _secret_files.get(sandbox, set())
        workspace = getattr(sandbox, "workspace", None)
        if isinstance(workspace, str) and workspace.startswith("/"):
            # token.txt at the workspace's root: cd {{ d }} with /workspace (review 24's K2)
            secret_files |= {os.path.join(workspace, f) for f in secret_files if f[:1] != "/"}
        cwd = self.cwd.render(context) if self.cwd else None
        if cwd is not None and not self.cwd.is_static:  # type: ignore[union-attr]
            refuse_secret_directory(cwd, secret_files)
        copies: set[str] = set()
        command = self.command.render(
            context,
            shell=shell if isinstance(shell, str) else None,
            secret_files=secret_files,
            env=env,
            copies=copies,
        )
        if copies:  # ln -s .netrc l.txt: as secret for every later step (review 23's J4)
            _secret_files.setdefault(sandbox, set()).update(copies)
        return await sandbox.execute(
            command,
            timeout_seconds=self.timeout_seconds,
            env=env or None,
            cwd=cwd,
        )

    def _timed_out(self, sandbox: Any) -> str:
        """ "timed out after 30s", and the key that sets the limit."""
        if self.timeout_seconds:
            return (
                f"timed out after {self.timeout_seconds:g}s (the step's timeout_seconds; "
                "raise it for a longer command)"
            )
        default = getattr(sandbox, "default_exec_timeout_seconds", None)
        after = f" after {default:g}s" if isinstance(default, int | float) else ""
        return (
            f"timed out{after} (the environment's default_exec_timeout_seconds; give the "
            "step timeout_seconds: N for a longer command)"
        )


class WriteStep(Step):
    kind = "write"

    def __init__(self, *, label: str | None, path: Template, content: Template) -> None:
        super().__init__(label=label)
        self.path = path
        self.content = content

    def describe(self, context: Mapping[str, Any]) -> str:
        return f"write {self.path.render(context)}"

    async def run(
        self,
        ctx: SandboxCallbackContext,
        context: Mapping[str, Any],
        paths: Paths,
        secrets: Mapping[str, str],
    ) -> dict:
        data = self.content.render(context).encode("utf-8")
        target = self.path.render(context)
        if self.content.reads_secret:  # a secret's file, like secret_file: (review 22's I5)
            _secret_files.setdefault(ctx.sandbox, set()).add(target)
        await ctx.sandbox.write_file(target, data)
        return {"bytes": len(data)}


class SaveStep(Step):
    kind = "save"

    def __init__(
        self, *, label: str | None, path: Template, to: Template, missing_ok: bool = False
    ) -> None:
        super().__init__(label=label)
        self.path = path
        self.to = to
        self.missing_ok = missing_ok

    def describe(self, context: Mapping[str, Any]) -> str:
        return f"save {self.path.render(context)} -> {self.to.render(context)}"

    async def run(
        self,
        ctx: SandboxCallbackContext,
        context: Mapping[str, Any],
        paths: Paths,
        secrets: Mapping[str, str],
    ) -> dict:
        source = self.path.render(context)
        if not self.path.is_static and names_a_secret_file(
            source, _secret_files.get(ctx.sandbox, set())
        ):  # save: "{{ x.f }}" with creds/token.txt (review 24's F1)
            raise StepFailedError(
                "save: a value names a secret's file, which would be saved in clear; "
                "save it by a fixed path if that is meant",
                exit_code=1,
            )
        to = self.to.render(context)
        target = resolve_inside(paths.output_dir, to, what="save: to")
        _check_value_path(self.to, to, what="save: to")
        await anyio.Path(target.parent).mkdir(parents=True, exist_ok=True)
        try:
            # Streamed to disk where the backend can, bounded by max_file_bytes.
            size = await ctx.sandbox.save_file(self.path.render(context), target)
        except FileNotFoundError:
            if self.missing_ok:
                return {"skipped": "missing"}
            raise StepFailedError(
                f"{self.path.render(context)} does not exist in the sandbox, so nothing was "
                "saved; add missing_ok: true to the step if it may be absent",
                exit_code=1,
            ) from None
        return {"bytes": size, "host_path": str(target)}


def _check_value_path(template: Template, rendered: str, *, what: str) -> None:
    """A host path an input's value helps choose holds no dot-name of the value's."""
    if template.names - RUNNER_NAMES:
        check_value_path(path_components(template.source, RUNNER_NAMES), rendered, what=what)


class UploadStep(Step):
    kind = "upload"

    def __init__(
        self,
        *,
        label: str | None,
        source: Template,
        to: Template,
        host_secret_files: Collection[str] = (),
    ) -> None:
        super().__init__(label=label)
        self.source = source
        self.to = to
        #: the from_file: secrets' files, which no upload copies in (review 24's K5)
        self.host_secret_files = frozenset(host_secret_files)

    def describe(self, context: Mapping[str, Any]) -> str:
        return f"upload {self.source.render(context)} -> {self.to.render(context)}"

    async def run(
        self,
        ctx: SandboxCallbackContext,
        context: Mapping[str, Any],
        paths: Paths,
        secrets: Mapping[str, str],
    ) -> dict:
        named = self.source.render(context)
        source = resolve_inside(paths.config_dir, named, what="upload")
        _check_value_path(self.source, named, what="upload")
        if str(source) in self.host_secret_files or os.path.realpath(source) in {
            os.path.realpath(p) for p in self.host_secret_files
        }:
            raise StepFailedError(
                f"upload: {self.source.render(context)} is the file a from_file: secret is read "
                "from; a secret goes into the sandbox only by a secret_file: step",
                exit_code=1,
            )
        data = await anyio.Path(source).read_bytes()
        await ctx.sandbox.write_file(self.to.render(context), data)
        return {"bytes": len(data)}


class SecretFileStep(Step):
    kind = "secret_file"

    def __init__(self, *, label: str | None, path: Template, secret: str) -> None:
        super().__init__(label=label)
        self.path = path
        self.secret = secret

    def describe(self, context: Mapping[str, Any]) -> str:
        return f"secret_file {self.path.render(context)} (secret {self.secret})"

    async def run(
        self,
        ctx: SandboxCallbackContext,
        context: Mapping[str, Any],
        paths: Paths,
        secrets: Mapping[str, str],
    ) -> dict:
        target = self.path.render(context)
        # The bytes it was read from, also when they are not UTF-8 (surrogate-escaped).
        data = secrets[self.secret].encode("utf-8", errors="surrogateescape")
        _secret_files.setdefault(ctx.sandbox, set()).add(target)  # before: a failed write too
        await ctx.sandbox.write_file(target, data)
        result = await ctx.sandbox.execute(f"chmod 600 -- {shlex.quote(target)}")
        if result.exit_code != 0:
            raise StepFailedError(f"chmod 600 failed: {result.stderr.strip()}", exit_code=1)
        return {}


class StepsHook(SandboxHook):
    """A hook declared in YAML as lists of steps.  Stateless between its points."""

    def __init__(
        self,
        *,
        name: str,
        on_create: Sequence[Step] = (),
        on_destroy: Sequence[Step] = (),
        inputs: Sequence[InputBinding] = (),
        paths: Paths,
    ) -> None:
        self.name = name
        self.create_steps = tuple(on_create)
        self.destroy_steps = tuple(on_destroy)
        self.bindings = tuple(inputs)
        self.paths = paths
        # Instance attributes shadow the class's no-op methods; their
        # signatures declare this hook's inputs through Depends().
        self.on_create = self._point("on_create", self.create_steps)  # type: ignore[method-assign]
        self.on_destroy = self._point("on_destroy", self.destroy_steps)  # type: ignore[method-assign]

    def _point(self, point: str, steps: Sequence[Step]) -> Any:
        async def run_point(ctx: SandboxCallbackContext, **inputs: SessionInput) -> None:
            await self.run_steps(point, steps, ctx, inputs)

        parameters = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        parameters += [
            inspect.Parameter(
                b.parameter,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=Annotated[b.input_class, Depends()],
            )
            for b in self.bindings
        ]
        run_point.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        run_point.__name__ = point
        run_point.__qualname__ = f"{self.name}.{point}"
        return run_point

    def _values(self, inputs: Mapping[str, SessionInput]) -> dict[str, SessionInput]:
        return {b.input_class.input_id: inputs[b.parameter] for b in self.bindings}

    def context(
        self, values: Mapping[str, SessionInput], session_id: str, *, mask: bool = False
    ) -> dict:
        return template_context(self.bindings, values, session_id, mask_secrets=mask)

    async def run_steps(
        self,
        point: str,
        steps: Sequence[Step],
        ctx: SandboxCallbackContext,
        inputs: Mapping[str, SessionInput],
    ) -> None:
        values = self._values(inputs)
        context = self.context(values, ctx.session_id)
        secret_values = next(
            (values[b.input_class.input_id].to_dict() for b in self.bindings if not b.templated),
            {},
        )
        shown = self.context(values, ctx.session_id, mask=True)
        secrets = secret_strings(values.values())
        for index, step in enumerate(steps):
            title = step.title(shown)
            common = {
                "session_id": ctx.session_id,
                "hook": self.name,
                "point": point,
                "step": index,
                "kind": step.kind,
                "title": title,
            }
            emit("step_started", **common)
            started = time.perf_counter()
            failure: StepFailedError | None = None
            running = current_step_id.set(step_id(ctx.session_id, self.display_name, point, index))
            try:
                details = await step.run(ctx, context, self.paths, secret_values)
            except UnsafeTemplateError as exc:
                # A refusal of the run-time check: nothing ran; a config error (exit 2).
                emit(
                    "step_failed",
                    **common,
                    duration_seconds=time.perf_counter() - started,
                    error_type=type(exc).__name__,
                    error=str(exc),
                )
                raise UnsafeTemplateError(f"step {index + 1} ({title}): {exc}") from None
            except Exception as exc:
                # scrubbed(): also the words rendered from secret inputs (after
                # their filters), which the templates registered as they rendered.
                message = _shorten(scrubbed(scrub(str(exc), secrets)))
                emit(
                    "step_failed",
                    **common,
                    duration_seconds=time.perf_counter() - started,
                    error_type=type(exc).__name__,
                    error=message,
                )
                failure = StepFailedError(
                    f"step {index + 1} ({title}) failed: "
                    + (
                        message
                        if isinstance(exc, StepFailedError)
                        else f"{type(exc).__name__}: {message}"
                    ),
                    exit_code=getattr(exc, "exit_code", 1),
                )
                if not secrets:
                    raise failure from exc
            finally:
                current_step_id.reset(running)
            if failure is not None:
                # With secret inputs the cause is dropped: its text may hold them.
                # Raised outside the except block, so it is not the context either.
                raise failure
            emit(
                "step_finished", **common, duration_seconds=time.perf_counter() - started, **details
            )

    def __repr__(self) -> str:
        steps = f"{len(self.create_steps)} on_create, {len(self.destroy_steps)} on_destroy"
        return f"StepsHook(name={self.name!r}, steps: {steps})"
