"""The test tiers of docs/contributing.md ("Test tiers") are what the code
does: ``RUNNER_TEST_SCALE`` is read in tests/support/scale.py, which hands
scripts/test the budgets the page names; a misspelt scale is refused rather
than run at the small size; scripts/long runs scripts/test at the long scale.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from scale import BUDGETS, SCALES

ROOT = Path(__file__).parents[2]
SCALE_SCRIPT = ROOT / "tests" / "support" / "scale.py"


def printed_budgets(scale: str) -> subprocess.CompletedProcess[str]:
    """What scripts/test evaluates: ``python tests/support/scale.py``."""
    return subprocess.run(
        [sys.executable, str(SCALE_SCRIPT)],
        env={**os.environ, "RUNNER_TEST_SCALE": scale},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_each_scale_prints_its_budgets_as_shell_assignments() -> None:
    for scale in SCALES:
        result = printed_budgets(scale)
        assert result.returncode == 0, result.stderr
        assert dict(line.split("=", 1) for line in result.stdout.splitlines()) == BUDGETS[scale]
    assert int(BUDGETS["long"]["fuzz_cases"]) > int(BUDGETS["ci"]["fuzz_cases"])
    assert (BUDGETS["ci"]["mutate"], BUDGETS["long"]["mutate"]) == ("--ci", "--fast")


def test_a_misspelt_scale_is_refused_naming_the_variable() -> None:
    result = printed_budgets("Long")
    assert result.returncode != 0
    assert result.stdout == ""
    assert "RUNNER_TEST_SCALE='Long': expected one of ci, long" in result.stderr


def test_the_page_names_the_budgets_of_each_scale() -> None:
    page = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    for name in ("fuzz_cases", "validate_fuzz_cases"):
        ci, long = (f"{int(BUDGETS[scale][name]):,}" for scale in ("ci", "long"))
        assert f"| {ci} | {long} |" in page, name
    assert "| `scripts/mutate --ci` | `scripts/mutate --fast` |" in page


def test_scripts_long_runs_scripts_test_at_the_long_scale(tmp_path: Path) -> None:
    """scripts/long beside a stand-in scripts/test that prints what it got."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "long", tmp_path / "scripts" / "long")
    stand_in = tmp_path / "scripts" / "test"
    stand_in.write_text('#!/bin/sh\necho "scale=$RUNNER_TEST_SCALE args=$* cwd=$PWD"\n')
    stand_in.chmod(0o755)
    env = {key: value for key, value in os.environ.items() if key != "RUNNER_TEST_SCALE"}
    result = subprocess.run(
        ["bash", str(tmp_path / "scripts" / "long"), "-k", "pool"],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"scale=long args=-k pool cwd={tmp_path}\n"


def test_collecting_the_suite_imports_no_cloud_sdk() -> None:
    # koyeb-sdk takes ~7 s of CPU to import: a test module that imports it at
    # its top makes every test process (the fast tier's too) pay that while it
    # collects.  Tests that need the SDK's models import them when they run
    # (tests/support/koyeb_server.py's sdk()).
    import conftest

    assert conftest.SDK_IMPORTED_WHILE_COLLECTING is False
