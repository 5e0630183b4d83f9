"""The API contract checked by a tool nobody here wrote (issue 28, item 7):
Schemathesis generates requests from the live server's ``/openapi.json``
(valid ones, invalid ones, and stateful sequences: create, read, delete) and
checks every answer against the document.  No 5xx, no status, header,
content type or body the document does not describe, and the server alive
at the end.  Bounded: a few examples per operation, a fixed seed.

Two of Schemathesis' checks are left out, on purpose:
``positive_data_acceptance`` (a body valid by the document may still be
refused with 400: the inputs an agent declares, a model key not set, a
cursor that is not one of ours; no static document can say those) and
``use_after_free`` (a ``DELETE`` closes a session, which stays readable,
closed, by design).

An open session's event stream (``streamEvents``) does not end: Schemathesis
reads it until the request timeout and checks the events that came.  That
wait is cut to 2 s for this operation alone (a per-operation
``request-timeout`` in a ``schemathesis.toml``): a waiting local session's
events all come at once, and the other operations keep 5 s; at 5 s each such
stream cost 5 s, about two thirds of the test's time."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from serve_process import TOKEN, Server

pytest.importorskip("schemathesis")

pytestmark = pytest.mark.slow


def test_schemathesis_finds_nothing_outside_the_document(tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text(
        textwrap.dedent(
            """\
            version: 1
            agent:
              name: plain
              model: local-model
              environment: {sandbox: local}
            """
        )
    )
    st = Path(sys.executable).parent / "st"
    st_config = tmp_path / "schemathesis.toml"
    st_config.write_text(
        '[[operations]]\ninclude-operation-id = "streamEvents"\nrequest-timeout = 2\n'
    )
    with Server([config], tmp_path) as server:
        result = subprocess.run(
            [
                str(st),
                *("--config-file", str(st_config)),
                "run",
                f"{server.url}/openapi.json",
                "--url",
                server.url,
                "-H",
                f"Authorization: Bearer {TOKEN}",
                *("--max-examples", "5", "--seed", "2", "--generation-database", "none"),
                *("--request-timeout", "5", "--checks", "all"),
                *("--exclude-checks", "positive_data_acceptance,use_after_free"),
            ],
            capture_output=True,
            text=True,
            timeout=900,
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stdout[-6000:]
        assert "failures" not in result.stdout.splitlines()[-1], result.stdout[-3000:]
        assert server.process.poll() is None, server.stderr()
        with server.client() as client:
            assert client.get("/readyz").status_code == 200
    assert "Traceback" not in server.stderr()
