"""Malformed YAML files, as a new user writes them, fed to every command that reads one.

Whatever the file holds, the answer is a positioned problem
(``FILE:LINE:COL: message``) and exit code 2: never a Python traceback.
The corpus is generated from one valid file by breaking it at every path
(a wrong type, a misspelled key), plus hand-written oddities.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import RUNNER_CLI

#: Valid, and touching every section: each path of it gets broken below.
VALID: dict[str, Any] = {
    "version": 1,
    "inputs": {
        "demo.task": {
            "as": "task",
            "required": True,
            "schema": {
                "type": "object",
                "properties": {"title": {"type": "string"}},
                "required": ["title"],
            },
        }
    },
    "secrets": {"TOKEN": {"from_env": "TOKEN", "required": False}},
    "agent": {
        "name": "a",
        "model": "m",
        "instructions": "Use bash.",
        "max_tool_calls": 3,
        "environment": {
            "sandbox": "local",
            "default_exec_timeout_seconds": 30,
            "env": {"LANG": "C"},
            "hooks": [
                {
                    "name": "seed",
                    "on_create": [
                        {"run": "echo {{ task.title }}", "timeout_seconds": 5, "check": True},
                        {"write": "NOTES.md", "content": "hi"},
                        {"secret_file": ".token", "secret": "TOKEN"},
                    ],
                    "on_destroy": [{"save": "NOTES.md", "to": "notes.md", "missing_ok": True}],
                },
                {"uses": "git-identity", "with": {"name": "Bot", "email": "b@example.com"}},
            ],
        },
    },
}

#: Hand-written files: YAML oddities, numbers, nulls, step kinds, templates.
HAND_WRITTEN: dict[str, str | bytes] = {
    "empty": "",
    "comment_only": "# nothing here\n",
    "list_root": "- version: 1\n- agent: {model: m}\n",
    "scalar_root": "hello\n",
    "binary": bytes(range(256)) * 4,
    "png_header": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    "nul_in_text": "version: 1\x00\nagent: {model: m}\n",
    "deep_lists": "version: 1\nagent: " + "[" * 300 + "]" * 300 + "\n",
    "deep_mappings": "version: 1\nagent:\n" + "".join(f"{' ' * i}k{i}:\n" for i in range(2, 200)),
    "tab_indent": "version: 1\nagent:\n\tmodel: m\n",
    "unclosed_quote": 'version: 1\nagent: {model: "m}\n',
    "two_documents": "version: 1\n---\nversion: 1\n",
    "anchor": "version: 1\nagent: &a {model: m}\nother: *a\n",
    "python_tag": "version: 1\nagent: !!python/object:os.system {model: m}\n",
    "merge_key": "version: 1\nbase: {model: m}\nagent:\n  <<: {model: m}\n",
    "duplicate_key": "version: 1\nversion: 1\nagent: {model: m}\n",
    "complex_key": "version: 1\n? [a, b]\n: c\nagent: {model: m}\n",
    "version_float": "version: 1.0\nagent: {model: m, name: ''}\n",
    "version_huge": "version: 1e400\nagent: {model: m}\n",
    "version_null": "version:\nagent: {model: m}\n",
    "agent_null": "version: 1\nagent:\n",
    "model_null": "version: 1\nagent: {model: null}\n",
    "sandbox_null": "version: 1\nagent: {model: m, environment: {sandbox: null}}\n",
}


def _local(environment: str, *, top: str = "") -> str:
    """A file with the local sandbox and ``environment`` (indented YAML) below it."""
    return f"version: 1\n{top}agent:\n  model: m\n  environment:\n    sandbox: local\n{environment}"


def _hook(steps: str) -> str:
    return _local(f"    hooks:\n      - name: h\n        on_create:\n{steps}")


HAND_WRITTEN |= {
    "pids_limit_float": "version: 1\nagent:\n  model: m\n  environment:\n"
    "    sandbox: docker\n    pids_limit: 100.0\n",
    "pool_float": "version: 1\nagent:\n  model: m\n  environment:\n    sandbox: docker\n    pool: 2.0\n",
    "pids_limit_huge": "version: 1\nagent:\n  model: m\n  environment:\n"
    "    sandbox: docker\n    pids_limit: 1e400\n",
    "pids_limit_bigint": "version: 1\nagent:\n  model: m\n  environment:\n"
    "    sandbox: docker\n    pids_limit: 99999999999999999999999999999999\n    pool: 65\n",
    "max_tool_calls_float": "version: 1\nagent: {model: m, max_tool_calls: 3.0}\n",
    "max_tool_calls_fraction": "version: 1\nagent: {model: m, max_tool_calls: 2.5}\n",
    "max_tool_calls_huge": "version: 1\nagent: {model: m, max_tool_calls: 1e400}\n",
    "ttl_infinite": _local("    ttl_seconds: .inf\n"),
    "timeout_nan": _hook("          - run: echo\n            timeout_seconds: .nan\n"),
    "exec_timeout_zero": _local("    default_exec_timeout_seconds: 0\n"),
    "hooks_null": _local("    hooks:\n    shell: ''\n"),
    "hook_string": _local("    hooks: [seed]\n"),
    "hook_empty": _local("    hooks: [{}]\n"),
    "hook_misspelled_point": _local(
        "    hooks:\n      - name: h\n        on_craete:\n          - run: echo hi\n"
    ),
    "hook_misspelled_uses": _local("    hooks:\n      - use: git-identity\n"),
    "step_misspelled_run": _hook("          - rn: echo hi\n"),
    "step_unknown_kind": _hook("          - copy: a\n            to: b\n"),
    "step_string": _hook("          - echo hi\n"),
    "step_null": _hook("          -\n"),
    "step_run_null": _hook("          - run:\n"),
    "step_two_kinds": _hook("          - run: echo\n            write: a\n"),
    "step_content_null": _hook("          - write: a\n            content:\n"),
    "template_unclosed": _hook("          - run: echo {{ x\n"),
    "template_undefined": _hook("          - run: echo {{ nothing.here }}\n"),
    "template_quoted": _hook('          - run: echo "{{ session.id }}"\n'),
    "template_dunder": _hook("          - write: \"{{ ''.__class__ }}\"\n            content: x\n"),
    "template_bad_for": _hook('          - write: a\n            content: "{% for %}"\n'),
    "template_filter": _hook("          - run: echo {{ session.id | safe }}\n"),
    "save_absolute": _local(
        "    hooks:\n      - name: h\n        on_destroy:\n"
        "          - save: a\n            to: /etc/passwd\n"
    ),
    "upload_parent": _hook("          - upload: ../../etc/passwd\n            to: x\n"),
    "secret_undeclared": _hook("          - secret_file: a\n            secret: NOPE\n"),
    "secret_both": _local("", top="secrets: {T: {from_env: T, from_file: t}}\n"),
    "secret_file_absolute": _local("", top="secrets: {T: {from_file: /etc/shadow}}\n"),
    "env_bad_name": _local("    env: {BAD-NAME: x}\n"),
    "env_templated_path": _hook(
        "          - run: echo\n            env: {PATH: '{{ session.id }}'}\n"
    ),
    "python_missing_module": _local("    hooks:\n      - python: no_such_module_x:Hook\n"),
    "python_not_a_hook": _local("    hooks:\n      - python: os:path\n"),
    "python_bad_with": _local("    hooks:\n      - python: runner:SandboxHook\n        with: 5\n"),
    "git_identity_bad": _local("    hooks:\n      - uses: git-identity\n        with: {name: 1}\n"),
    "none_with_hooks": "version: 1\nagent:\n  model: m\n  environment:\n    sandbox: none\n"
    "    hooks: [{name: h, on_create: [{run: echo}]}]\n",
    "docker_allow_network": "version: 1\nagent:\n  model: m\n  environment:\n"
    "    sandbox: docker\n    network: {allow: [example.com]}\n",
    "docker_memory_bad": "version: 1\nagent:\n  model: m\n  environment:\n"
    "    sandbox: docker\n    memory: lots\n",
    "mistral_bad_region": "version: 1\nagent:\n  model: m\n  environment:\n"
    "    sandbox: mistral\n    region: '?'\n    shell: bash\n",
    "input_bad_schema": "version: 1\ninputs: {a: {schema: {type: strin}}}\nagent: {model: m}\n",
    "input_not_object": "version: 1\ninputs: {a: {schema: {type: string}}}\nagent: {model: m}\n",
    "input_schema_null": "version: 1\ninputs: {a: {schema: }}\nagent: {model: m}\n",
    "input_reserved": "version: 1\ninputs: {runner.x: {schema: {type: object}}}\nagent: {model: m}\n",
    "input_bad_alias": "version: 1\ninputs: {a: {as: session, schema: {type: object}}}\n"
    "agent: {model: m}\n",
    "input_remote_ref": "version: 1\ninputs: {a: {schema: {type: object, properties: "
    "{x: {$ref: 'https://example.com/s.json'}}}}}\nagent: {model: m}\n",
    "input_optional_required": "version: 1\ninputs: {a: {required: false, schema: "
    "{type: object, required: [x]}}}\nagent: {model: m}\n",
    "input_bad_default": "version: 1\ninputs: {a: {required: false, schema: {type: object, "
    "properties: {n: {type: integer, default: 1e400}}}}}\nagent: {model: m}\n",
    "huge_string": "version: 1\nagent: {model: m, name: '" + "x" * 900_000 + "'}\nx: 1\n",
    "too_large": "version: 1\n# " + "x" * 1_100_000 + "\n",
}

WRONG_FOR_SCALAR: list[Any] = [[1], {"x": 1}]
WRONG_FOR_CONTAINER: list[Any] = ["oops", 7, None]


def _paths(value: Any, path: tuple = ()) -> Iterator[tuple]:
    """Every path inside ``value``, parents before children."""
    if path:
        yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*path, index))


def _with(path: tuple, replace: Any = None, *, rename: str | None = None) -> dict[str, Any]:
    """VALID with the value at ``path`` replaced, or its key renamed to ``rename``."""
    data = copy.deepcopy(VALID)
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    if rename is None:
        parent[path[-1]] = replace
    else:
        parent = {(rename if k == path[-1] else k): v for k, v in parent.items()}
        grand = data
        for part in path[:-2]:
            grand = grand[part]
        if len(path) == 1:
            data = parent
        else:
            grand[path[-2]] = parent
    return data


def _misspelled(key: str) -> str:
    """A typo a person makes: a letter left out (``on_creae``, ``modl``)."""
    return key[:-2] + key[-1] if len(key) > 3 else key + key[-1]


def _generated() -> dict[str, str]:
    files = {}
    # An input's schema is the user's own JSON Schema: anything goes there.
    paths = [p for p in _paths(VALID) if p[:3] != ("inputs", "demo.task", "schema") or len(p) == 3]
    # Keys the user names (input ids, secrets, variables) have no misspelling.
    named_by_user = {("inputs",), ("secrets",), ("agent", "environment", "env")}
    for number, path in enumerate(paths):
        value = _value_at(path)
        wrong = WRONG_FOR_CONTAINER if isinstance(value, dict | list) else WRONG_FOR_SCALAR
        for kind, replacement in enumerate(wrong):
            files[f"type_{number}_{kind}"] = json.dumps(_with(path, replacement), indent=1)
        if isinstance(path[-1], str) and path[:-1] not in named_by_user:
            files[f"typo_{number}"] = json.dumps(
                _with(path, rename=_misspelled(path[-1])), indent=1
            )
    return files


def _value_at(path: tuple) -> Any:
    value: Any = VALID
    for part in path:
        value = value[part]
    return value


CORPUS: dict[str, str | bytes] = {**HAND_WRITTEN, **_generated()}
#: The files render, run and info read, one process each: one of each sort of break.
SAMPLE = [
    "empty",
    "binary",
    "list_root",
    "deep_lists",
    "pids_limit_float",
    "step_misspelled_run",
    "template_undefined",
    "python_not_a_hook",
    "type_0_0",
    "typo_20",
]


def _write_corpus(folder: Path) -> dict[str, Path]:
    paths = {}
    for name, content in CORPUS.items():
        path = folder / f"{name}.yaml"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        paths[name] = path
    return paths


def _runner(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUNNER_CLI, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"},
        timeout=120,
    )


def _positioned(output: str, name: str) -> bool:
    return re.search(rf"^{re.escape(name)}\.yaml:\d+:\d+: \S", output, re.MULTILINE) is not None


def test_the_corpus_is_large_and_named_uniquely() -> None:
    assert len(CORPUS) > 200
    assert all(name in CORPUS for name in SAMPLE)


def test_validate_reports_every_malformed_file_with_a_position(tmp_path: Path) -> None:
    paths = _write_corpus(tmp_path)
    result = _runner("validate", *(p.name for p in paths.values()), cwd=tmp_path)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output[-3000:]
    assert result.returncode == 2
    assert not re.search(r"\.yaml: ok$", result.stdout, re.MULTILINE), result.stdout
    unpositioned = [name for name in paths if not _positioned(result.stderr, name)]
    assert not unpositioned
    for expected in EXPECTED:
        assert expected in result.stderr


#: What a new user sees for the mistakes of the "errors never as tracebacks" issue.
EXPECTED = [
    "pids_limit_float.yaml:6:17: expected an integer, got a number (100.0); write 100 "
    "(at agent.environment.pids_limit)",
    "max_tool_calls_float.yaml:2:35: expected an integer, got a number (3.0); write 3",
    "ttl_infinite.yaml:6:18: expected a finite number, got a number (inf)",
    "hook_misspelled_point.yaml:8:9: unknown key 'on_craete'; did you mean 'on_create'?",
    "hook_misspelled_uses.yaml:7:9: unknown key 'use'; did you mean 'uses'?",
    "step_misspelled_run.yaml:9:13: unknown key 'rn'; did you mean 'run'?",
]


@pytest.mark.parametrize("command", ["render", "run", "info"])
def test_other_commands_report_malformed_files_with_a_position(
    tmp_path: Path, command: str
) -> None:
    paths = _write_corpus(tmp_path)
    extra = ["--output-dir", "out"] if command == "run" else []
    for name in SAMPLE:
        result = _runner(command, paths[name].name, *extra, cwd=tmp_path)
        output = result.stdout + result.stderr
        assert "Traceback" not in output, (name, output[-3000:])
        assert result.returncode == 2, (name, output)
        assert _positioned(result.stderr, name), (name, output)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
