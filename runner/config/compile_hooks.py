"""Hooks and their steps: ``run``, ``write``, ``save``, ``upload``, ``secret_file``,
``uses:`` built-ins and ``python:`` hooks, strict mode's ``consumers:`` and the
``cache:`` checks.  A part of the YAML compiler (``compiler``);
``CompilerBase`` says why parts.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..core.hooks import SandboxHook
from .compile_base import CompilerBase
from .errors import JsonPath
from .steps import (
    RunStep,
    SaveStep,
    SecretFileStep,
    Step,
    StepsHook,
    UploadStep,
    WriteStep,
)
from .templates import Template


class HooksCompiler(CompilerBase):
    """The hooks of ``environment.hooks``."""

    def environment_env(self) -> frozenset[str]:
        """The names ``agent.environment.env`` exports to every command."""
        agent = self.data.get("agent")
        environment = agent.get("environment") if isinstance(agent, dict) else None
        env = environment.get("env") if isinstance(environment, dict) else None
        return (
            frozenset(name for name in env if isinstance(name, str))
            if isinstance(env, dict)
            else frozenset()
        )

    def refuse_backslash_locales(self, path: JsonPath, spec: Mapping[str, Any]) -> None:
        """Beside a value, ``LC_ALL``, ``LC_CTYPE`` and ``LANG`` (the step's
        ``env:`` or the environment's) name only C, POSIX or a UTF-8 locale:
        in another a character may end in a backslash byte, and bash would
        read the script's quotes apart from the checker (review 39's F3:
        ``中\\'`` under ``zh_TW.BIG5``; review 46 spelled it ``b+i+g+5``)."""
        from .shell.variables import LOCALE_NAMES, reads_backslash_as_a_trail_byte

        agent = self.data.get("agent")
        environment = agent.get("environment") if isinstance(agent, dict) else None
        outer = environment.get("env") if isinstance(environment, dict) else None
        places = [((*path, "env"), spec.get("env")), (("agent", "environment", "env"), outer)]
        for where, env in places:
            if not isinstance(env, dict):
                continue
            for name in sorted(LOCALE_NAMES & set(env)):
                value = env[name]
                if isinstance(value, str) and reads_backslash_as_a_trail_byte(value):
                    self.problem(
                        (*where, name),
                        f"{name}={value} beside a value: only C, POSIX or a UTF-8 locale; in "
                        "another a character may end in a backslash byte (BIG5, GBK, JOHAB), "
                        "and bash would read the script's quotes apart from the check; use "
                        "C.UTF-8",
                    )

    def compile_step(self, path: JsonPath, spec: Mapping[str, Any]) -> tuple[Step | None, list]:
        label = spec.get("name")
        templates: list[Template | None] = []
        step: Step | None = None
        if "run" in spec:
            env = {
                name: self.template((*path, "env", name), value, shell=False)
                for name, value in (spec.get("env") or {}).items()
            }
            # A templated env value taints its variable in the command, and
            # may not go into a variable that changes how the shell runs.
            tainted = {name for name, t in env.items() if t is not None and not t.is_static}
            if tainted:
                from .shell.variables import is_code_bearing_env
            for name in sorted(tainted):
                if is_code_bearing_env(name):
                    self.problem(
                        (*path, "env", name),
                        f"a templated value may not go into {name}: the shell or a program "
                        "reads it as code or options; use another variable name",
                    )
            cwd = self.template((*path, "cwd"), spec["cwd"], shell=False) if "cwd" in spec else None
            if cwd is not None and not cwd.is_static:
                tainted |= {"PWD", "OLDPWD"}  # the command runs in a directory a value named
            command = self.template(
                (*path, "run"),
                spec["run"],
                shell=True,
                tainted=tainted,
                consumers=self.consumers(path, spec),
                # exported before the script runs, so a value it assigns to one is
                # exported too: the step's env: (static names too), its secrets:
                # and the environment's env: (the twelfth review)
                exported=frozenset(env) | set(spec.get("secrets") or {}) | self.environment_env(),
            )
            if command is not None and not command.is_static:
                self.refuse_backslash_locales(path, spec)
            templates = [command, *env.values(), cwd] if cwd else [command, *env.values()]
            secret_env = dict(spec.get("secrets") or {})
            known = all(
                self.secret_name((*path, "secrets", env_name), secret)
                for env_name, secret in secret_env.items()
            )
            if all(t is not None for t in templates) and known:
                step = RunStep(
                    label=label,
                    command=command,  # type: ignore[arg-type]
                    timeout_seconds=spec.get("timeout_seconds"),
                    env=env,  # type: ignore[arg-type]
                    cwd=cwd,
                    check=spec.get("check", True),
                    secret_env=secret_env,
                    host_secret_files=self.host_secret_files(),
                )
        elif "write" in spec:
            target = self.template((*path, "write"), spec["write"], shell=False)
            content = self.template((*path, "content"), spec["content"], shell=False, options=False)
            templates = [target, content]
            if target is not None and not target.is_static and content and content.reads_secret:
                self.problem(  # like secret_file: (review 24's K6)
                    (*path, "write"),
                    "a write: whose content reads a secret input may not take its path "
                    "from an input (it would choose where the secret lands); write a fixed path",
                )
                target = None
            if target and content:
                step = WriteStep(label=label, path=target, content=content)
        elif "save" in spec:
            source = self.template((*path, "save"), spec["save"], shell=False)
            to = self.host_path((*path, "to"), spec["to"], writes=True)
            templates = [source, to]
            if source and to:
                step = SaveStep(
                    label=label, path=source, to=to, missing_ok=spec.get("missing_ok", False)
                )
        elif "secret_file" in spec:
            target = self.template((*path, "secret_file"), spec["secret_file"], shell=False)
            templates = [target]
            if target is not None and not target.is_static:
                # a value would choose where the secret lands, and the template's
                # own fixed read (od -c notes.txt) print it (review 24's K6)
                self.problem(
                    (*path, "secret_file"),
                    "a secret_file: path may not hold an input's value (it would choose "
                    "where the secret lands, where the step's own commands may print it); "
                    "write a fixed path",
                )
                target = None
            if target and self.secret_name((*path, "secret"), spec["secret"]):
                step = SecretFileStep(label=label, path=target, secret=spec["secret"])
        elif "upload" in spec:
            source = self.host_path((*path, "upload"), spec["upload"])
            to = self.template((*path, "to"), spec["to"], shell=False)
            templates = [source, to]
            if source and to:
                step = UploadStep(
                    label=label, source=source, to=to, host_secret_files=self.host_secret_files()
                )
        return step, [t for t in templates if t is not None]

    def compile_steps_hook(self, path: JsonPath, spec: Mapping[str, Any]) -> SandboxHook | None:
        points: dict[str, list[Step]] = {"on_create": [], "on_destroy": []}
        templates: list[Template] = []
        ok = True
        uses_secrets = False
        for point in points:
            for index, step_spec in enumerate(spec.get(point) or []):
                step, used = self.compile_step((*path, point, index), step_spec)
                templates += used
                if point == "on_create":
                    self.create_names.setdefault(path, set()).update(
                        name for t in used for name in t.names
                    )
                uses_secrets |= "secrets" in step_spec or "secret_file" in step_spec
                if step is None:
                    ok = False
                else:
                    points[point].append(step)
        if not ok:
            return None
        return StepsHook(
            name=spec["name"],
            on_create=points["on_create"],
            on_destroy=points["on_destroy"],
            inputs=self.bindings_for(templates, secrets=uses_secrets),
            paths=self.paths,
        )

    def compile_uses_hook(self, path: JsonPath, spec: Mapping[str, Any]) -> SandboxHook | None:
        from ..pattern.sandbox_hook import GitIdentity

        arguments = spec.get("with") or {}
        try:
            hook = GitIdentity(**arguments)
        except (TypeError, ValueError) as exc:
            self.problem((*path, "with"), str(exc))
            return None
        if "name" in spec:
            hook.name = spec["name"]
        return hook

    def compile_python_hook(self, path: JsonPath, spec: Mapping[str, Any]) -> SandboxHook | None:
        reference = spec["python"]
        module_name, _, attribute = reference.partition(":")
        where = (*path, "python")
        try:
            with _importable_from(self.paths.config_dir):
                target: Any = importlib.import_module(module_name)
            for part in attribute.split("."):
                target = getattr(target, part)
        except ImportError as exc:
            self.problem(where, f"cannot import {module_name!r}: {exc}")
            return None
        except AttributeError:
            self.problem(where, f"module {module_name!r} has no {attribute!r}")
            return None
        if not (isinstance(target, type) and issubclass(target, SandboxHook)):
            self.problem(where, f"{reference} is not a SandboxHook subclass")
            return None
        try:
            hook = target(**(spec.get("with") or {}))
        except Exception as exc:
            self.problem(
                (*path, "with") if "with" in spec else where,
                f"{reference}(...) failed: {type(exc).__name__}: {exc}",
            )
            return None
        if "name" in spec:
            hook.name = spec["name"]
        return hook

    def consumers(self, path: JsonPath, spec: Mapping[str, Any]) -> frozenset[str] | None:
        """The programs of strict mode for one run step: the file's ``consumers``
        and the step's together (None: neither is given, the default mode)."""
        file_level, step_level = self.data.get("consumers"), spec.get("consumers")
        if file_level is None and step_level is None:
            return None
        self.check_consumers((*path, "consumers"), step_level or [])
        return frozenset([*(file_level or []), *(step_level or [])])

    def check_consumers(self, path: JsonPath, names: list[str]) -> None:
        """A shell or an interpreter is never a consumer: it would run the value."""
        from .shell.programs import is_interpreter

        for index, name in enumerate(names):
            if is_interpreter(name):
                self.problem(
                    (*path, index),
                    f"{name!r} runs what it receives as code, so it can never be a consumer; "
                    "pass the value to a program that treats it as data",
                )

    def compile_hooks(self, environment: Mapping[str, Any]) -> list[SandboxHook]:
        #: The shell run steps are checked as (None: bash, or sh on an image without it).
        self.run_shell = environment.get("shell")
        self.check_consumers(("consumers",), self.data.get("consumers") or [])
        hooks: list[SandboxHook] = []
        for index, spec in enumerate(environment.get("hooks") or []):
            path: JsonPath = ("agent", "environment", "hooks", index)
            if "uses" in spec:
                hook = self.compile_uses_hook(path, spec)
            elif "python" in spec:
                hook = self.compile_python_hook(path, spec)
            else:
                hook = self.compile_steps_hook(path, spec)
            if hook is not None:
                hooks.append(hook)
                self.compiled_hooks[index] = hook
                if spec.get("cache"):
                    hook.cache = True  # type: ignore[attr-defined]
                    hook.cache_definition = _normalized(spec)  # type: ignore[attr-defined]
        return hooks

    def check_cache(self, environment: Mapping[str, Any], hooks: list[SandboxHook]) -> None:
        """``cache: true`` only where a snapshot can hold the hook's work, and never a secret."""
        backend = environment.get("sandbox", "none")
        leading = True
        for index, spec in enumerate(environment.get("hooks") or []):
            path: JsonPath = ("agent", "environment", "hooks", index)
            if not spec.get("cache"):
                leading = False
                continue
            where = (*path, "cache")
            if backend != "docker":
                # One file runs everywhere it can (issue 31): the hook runs its
                # on_create in every session, as with --no-cache, and the
                # agent's SnapshotWarning becomes one notice (cli.common).
                continue
            if not leading:
                self.problem(
                    where,
                    "cache: true has no effect here: only the leading run of cached hooks is "
                    "snapshotted, and a hook before this one is not cached",
                )
            for point in ("on_create", "on_destroy"):
                for step_index, step in enumerate(spec.get(point) or []):
                    for key in ("secrets", "secret_file"):
                        if key in step:
                            self.problem(
                                (*path, point, step_index, key),
                                "a cached hook (cache: true) may not use secrets: a snapshot "
                                "must never hold a secret",
                                at_key=True,
                            )
            for step_index, step in enumerate(spec.get("on_create") or []):
                for key in ("save", "upload"):
                    if key in step:
                        why = (
                            "it would not run when the snapshot is used"
                            if key == "save"
                            else "the host file's content is not part of the snapshot key"
                        )
                        self.problem(
                            (*path, "on_create", step_index, key),
                            f"a cached hook's on_create may not have a {key} step: {why}",
                            at_key=True,
                        )
            if "session" in self.create_names.get(path, ()):
                self.problem(
                    where,
                    "a cached hook's on_create may not use session.id: the snapshot would keep "
                    "the first session's id",
                )
            hook = self.compiled_hooks.get(index)
            for binding in getattr(hook, "bindings", ()):
                if binding.secret and binding.templated:
                    self.problem(
                        where,
                        f"a cached hook may not use the secret input "
                        f"{binding.input_class.input_id!r}: a snapshot must never hold a secret",
                    )

    # --- tools ----------------------------------------------------------------


def _normalized(spec: Mapping[str, Any]) -> Any:
    """A hook's YAML data as plain JSON values: what identifies it in a snapshot key."""
    import json

    return json.loads(json.dumps(spec, sort_keys=True, default=str))


@contextmanager
def _importable_from(directory: Path):  # type: ignore[no-untyped-def]
    """Let ``python:`` hooks import modules that sit next to the config file."""
    entry = str(directory)
    added = entry not in sys.path
    if added:
        sys.path.insert(0, entry)
    try:
        yield
    finally:
        if added and entry in sys.path:
            sys.path.remove(entry)
