"""runner/config/shell/executors.py and its data, runner/config/shell/data/executors.json.

The data is GTFOBins' binary and function names (scripts/refresh-executors
regenerates it from a clone).  Everything here reads the real file; the one
test that regenerates it needs a GTFOBins clone holding the recorded commit
(RUNNER_GTFOBINS, else the mirror's usual place on the development machine)
and is skipped without one: CI has no network to clone it, and the file is
committed, so the other tests still check what ships.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from itertools import chain
from pathlib import Path

import pytest
from conftest import cli_package_dir

from runner.config.shell import executors

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "refresh-executors"
DATA = ROOT / "runner" / "config" / "shell" / "data" / "executors.json"
WHEEL_PATH = "runner/config/shell/data/executors.json"


def _gtfobins_clone() -> Path | None:
    """A GTFOBins clone (work tree or git directory) holding the data's commit, or None."""
    candidates = [
        os.environ.get("RUNNER_GTFOBINS", ""),
        "/work/.mirror/GTFOBins+GTFOBins.github.io/repo",
    ]
    commit = json.loads(DATA.read_text())["commit"]
    for candidate in filter(None, candidates):
        has_commit = subprocess.run(
            ["git", "-C", candidate, "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True
        )
        if has_commit.returncode == 0:
            return Path(candidate)
    return None


GTFOBINS = _gtfobins_clone()

#: Programs known to run their arguments (or input) as commands or code; GTFOBins
#: must list each of them with a function that executes.
WELL_KNOWN = [
    "bash", "dash", "python", "perl", "env", "nice", "timeout", "find", "awk", "xargs",
    "setarch", "sg", "nohup", "stdbuf", "taskset", "ionice", "chroot", "flock", "unshare",
    "nsenter",
]  # fmt: skip
#: Well-known ones GTFOBins does not list at the recorded commit: the checker keeps
#: them in its own small supplement.  A refresh that finds one listed fails here,
#: so the supplement can shrink.
NOT_IN_GTFOBINS = ["sh", "python3", "prlimit"]


@pytest.mark.skipif(
    GTFOBINS is None,
    reason="no GTFOBins clone with the data's commit (set RUNNER_GTFOBINS); CI has no network",
)
def test_the_data_file_is_what_the_script_generates_at_its_commit():
    commit = json.loads(DATA.read_text())["commit"]
    generated = subprocess.run(
        [sys.executable, str(SCRIPT), str(GTFOBINS), "--rev", commit, "--stdout"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert generated == DATA.read_text()


def test_the_data_file_is_deterministic_json_with_its_provenance():
    text = DATA.read_text()
    data = json.loads(text)
    assert text == json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    assert data["source"] == {
        "repository": "GTFOBins/GTFOBins.github.io",
        "url": "https://github.com/GTFOBins/GTFOBins.github.io",
    }
    assert len(data["commit"]) == 40 and int(data["commit"], 16) >= 0
    assert data["license"] == "GPL-3.0"
    assert "GTFOBins" in data["attribution"]
    assert {
        "shell", "command", "reverse-shell", "non-interactive-reverse-shell", "bind-shell",
        "non-interactive-bind-shell", "library-load",
    } <= set(data["functions_that_execute"])  # fmt: skip
    assert not {"file-read", "file-write", "inherit"} & set(data["functions_that_execute"])
    # facts only: names and relations, no example code or text of GTFOBins
    assert set(data) == {
        "source", "commit", "commit_date", "license", "attribution",
        "functions_that_execute", "binaries", "aliases", "inherits",
    }  # fmt: skip
    names = re.compile(r"[A-Za-z0-9_.+-]+")
    for name, functions in data["binaries"].items():
        assert functions == sorted(set(functions)) and functions, name
        assert all(names.fullmatch(n) for n in [name, *functions]), name
    assert all(names.fullmatch(n) for pair in data["aliases"].items() for n in pair)
    assert all(
        names.fullmatch(n)
        for n in [*data["inherits"], *chain.from_iterable(data["inherits"].values())]
    )


def test_the_module_exposes_the_data():
    data = json.loads(DATA.read_text())
    assert f"GTFOBins @ {data['commit'][:7]} ({data['commit_date'][:10]})" == executors.SOURCE
    assert len(data["binaries"]) > 400
    assert 250 < len(executors.EXECUTORS) < len(data["binaries"])
    assert {
        name
        for name, functions in data["binaries"].items()
        if set(functions) & set(data["functions_that_execute"])
    } == executors.EXECUTORS
    assert "shell" in executors.functions_of("bash")
    assert executors.functions_of("not-a-binary") == frozenset()
    # file-read only: listed, not an executor
    assert executors.functions_of("7z") == {"file-read"}
    assert "7z" not in executors.EXECUTORS


@pytest.mark.parametrize("name", WELL_KNOWN)
def test_well_known_executors_are_executors(name):
    assert name in executors.EXECUTORS, (name, sorted(executors.functions_of(name)))


@pytest.mark.parametrize("name", NOT_IN_GTFOBINS)
def test_the_well_known_executors_gtfobins_lacks(name):
    assert executors.functions_of(name) == frozenset(), (
        f"GTFOBins now lists {name}: the checker's supplement no longer needs it"
    )


def test_aliases_and_inheritance_are_resolved():
    data = json.loads(DATA.read_text())
    assert data["aliases"]["awk"] == "mawk"
    assert executors.functions_of("awk") == executors.functions_of("mawk")
    # git reaches less (a pager) through `git help`: less's functions are git's too
    assert "less" in data["inherits"]["git"]
    assert executors.functions_of("less") | {"inherit"} <= executors.functions_of("git")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
    )


def test_the_script_stops_on_an_unclassified_function_or_an_unknown_licence(tmp_path):
    repo = tmp_path / "gtfobins"
    (repo / "_gtfobins").mkdir(parents=True)
    (repo / "LICENSE").write_text(
        "                    GNU GENERAL PUBLIC LICENSE\n                       Version 3, 29 June 2007\n"
    )
    (repo / "_gtfobins" / "tool").write_text("---\nfunctions:\n  shell:\n  - code: x\n...\n")
    (repo / "_gtfobins" / "alias-of-tool").write_text("---\nalias: tool\n...\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(SCRIPT), str(repo), "--stdout"], capture_output=True, text=True
        )

    data = json.loads(run().stdout)
    assert data["binaries"] == {"alias-of-tool": ["shell"], "tool": ["shell"]}
    assert data["license"] == "GPL-3.0"

    (repo / "_gtfobins" / "tool").write_text("---\nfunctions:\n  teleport:\n  - code: x\n...\n")
    _git(repo, "commit", "-q", "-am", "a new function")
    failed = run()
    assert failed.returncode != 0 and "teleport" in failed.stderr and not failed.stdout

    (repo / "LICENSE").write_text("MIT License\n\nCopyright (c) 2026\n")
    (repo / "_gtfobins" / "tool").write_text("---\nfunctions:\n  shell:\n  - code: x\n...\n")
    _git(repo, "commit", "-q", "-am", "another licence")
    failed = run()
    assert failed.returncode != 0 and "licence" in failed.stderr and not failed.stdout


def test_the_built_wheel_ships_the_data(tmp_path):
    """Build the sdist, then from it the wheel (as scripts/smoke-wheel does), from a
    copy of the package; the wheel must hold the JSON, and the module must load it
    from the unpacked wheel with nothing of the checkout on the import path.  The
    sdist by this venv's setuptools (it needs no `wheel` package), the wheel by
    `pip wheel`, whose isolated build gets pyproject.toml's build requirements."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "runner", source / "runner", ignore=shutil.ignore_patterns("__pycache__")
    )
    dist = tmp_path / "dist"
    code = "import sys\nfrom setuptools import build_meta\nbuild_meta.build_sdist(sys.argv[1])"
    subprocess.run(
        [sys.executable, "-c", code, str(dist)], cwd=source, check=True, capture_output=True
    )
    (sdist,) = dist.glob("sandbox?runner-*.tar.gz")  # setuptools < 69: sandbox-runner
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path, filter="data")
    unpacked = tmp_path / sdist.name.removesuffix(".tar.gz")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "-w",
            str(dist),
            str(unpacked),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("sandbox_runner-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read(WHEEL_PATH) == DATA.read_bytes()
        assert "runner/config/shell/data/README.md" in archive.namelist()
        archive.extractall(tmp_path / "installed")
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "from runner.config.shell import executors as e; print(e.__file__, e.SOURCE)",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "installed")},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert loaded[0].startswith(str(tmp_path / "installed"))
    assert " ".join(loaded[1:]) == executors.SOURCE


@pytest.mark.skipif(
    not os.environ.get("RUNNER_CLI"), reason="RUNNER_CLI unset (scripts/test sets it)"
)
def test_the_installed_wheel_of_the_cli_tests_has_the_data():
    assert (
        cli_package_dir() / "config" / "shell" / "data" / "executors.json"
    ).read_bytes() == DATA.read_bytes()
