"""A backend is its own module and one registry line (issue 27).

``directory_backend`` below is a backend written in a test: sandboxes are
directories under a base path (commands run as the local backend runs
them).  It registers itself with one ``register`` line and implements the
durability contract of ``runner.sandboxes.base`` (``make_durable``,
``record``, ``reattach``, ``discard``, ``recover``).  The real
``runner serve`` then serves it, is killed with SIGKILL, and resumes its
session through that contract alone: serve has no code of its own for it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from serve_process import Server, wait_for

from runner.config import ConfigError, compile_file
from runner.sandboxes.base import COMMON_OPTIONS, OptionError
from runner.sandboxes.registry import BACKENDS, backend_class

BACKEND = """
from pathlib import Path

import runner
from runner.core.errors import SandboxUnavailableError
from runner.sandboxes import registry
from runner.sandboxes.base import SandboxEnvironment
from runner.sandboxes.local import LocalSandbox

registry.register("directory", "directory_backend:DirectoryEnvironment")  # the one line


def log(base, line):
    with open(Path(base) / "contract.log", "a") as out:
        out.write(line + "\\n")


class DirectoryEnvironment(SandboxEnvironment):
    backend = "directory"

    def __init__(self, *, hooks=(), base="."):
        super().__init__(hooks=hooks)
        self.base = Path(base)
        self.owner = None

    def make_durable(self, owner):
        self.owner = owner

    def _sandbox(self, root, session_id):
        return LocalSandbox(root=root, session_id=session_id, shell="/bin/sh", env={},
                            default_exec_timeout_seconds=30)

    async def create(self, *, session_id, expires_at):
        root = self.base / session_id
        for name in ("workspace", "home", "tmp"):
            (root / name).mkdir(parents=True)
        (root / "owner").write_text(self.owner or "")
        log(self.base, f"create {session_id}")
        return self._sandbox(root, session_id)

    async def reattach(self, record, *, session_id):
        root = Path(record["root"])
        if not (root / "workspace").is_dir():
            raise SandboxUnavailableError(f"{root} is gone")
        log(self.base, f"reattach {session_id}")
        return self._sandbox(root, session_id)

    async def discard(self, record, *, session_id):
        log(self.base, f"discard {session_id}")
        return False

    @classmethod
    async def recover(cls, records, *, owner, sessions):
        for record in records:
            log(Path(record["root"]).parent, f"recover {Path(record['root']).name}")
        return [f"directory backend: {len(records)} sandbox(es) of {owner[:8]} kept"]


class Seed(runner.SandboxHook):
    async def on_create(self, ctx):
        await ctx.sandbox.execute("echo seeded > seed.txt")

    async def on_destroy(self, ctx):
        await ctx.sandbox.execute("cat seed.txt >> ../../destroyed.txt")


agent = runner.Agent(model="local-model", environment=DirectoryEnvironment(hooks=[Seed()], base={base!r}))
"""


def test_a_backend_written_outside_the_package_is_served_and_resumed(tmp_path: Path) -> None:
    base = tmp_path / "sandboxes"
    base.mkdir()
    source = textwrap.dedent(BACKEND).replace("{base!r}", repr(str(base)))
    (tmp_path / "directory_backend.py").write_text(source)
    server = Server([], tmp_path, args=["--agent", "directory_backend:agent"])
    try:
        server.start()
        with server.client() as client:
            created = client.post("/v1/sessions", json={"agent": "agent", "inputs": {}})
            assert created.status_code == 201, created.text
            session_id = created.json()["id"]
            wait_for(
                lambda: client.get(f"/v1/sessions/{session_id}").json()["status"] == "waiting",
                what="the session to start",
            )
        root = base / session_id
        assert (root / "workspace" / "seed.txt").read_text() == "seeded\n"
        assert (root / "owner").read_text(), "make_durable gave the store's id"
        server.kill()

        server.start()
        assert f"resuming 1 session(s) left open: {session_id}" in server.stderr()
        assert "directory backend: 1 sandbox(es) of" in server.stderr()
        with server.client() as client:
            session = wait_for(
                lambda: (
                    (s := client.get(f"/v1/sessions/{session_id}").json())["status"]
                    in ("waiting", "failed")
                    and s
                ),
                what="the session to resume",
            )
            assert session["status"] == "waiting", session["error"]
            closed = client.delete(f"/v1/sessions/{session_id}").json()
        assert closed["status"] == "closed", closed["error"]
        log = (base / "contract.log").read_text().split()
        assert log == ["create", session_id, "recover", session_id, "reattach", session_id]
        assert (base / "destroyed.txt").read_text() == "seeded\n"  # on_destroy ran, once
        assert not (root / "workspace").exists()  # delete() removed the sandbox
    finally:
        server.stop()


def test_every_registered_backend_owns_its_options_and_builds_from_them() -> None:
    """The compiler asks the backend: its options, its defaults, its errors."""
    for name in BACKENDS:
        backend = backend_class(name)
        assert backend.backend == name
        assert not backend.options & COMMON_OPTIONS
    docker = backend_class("docker")
    built = docker.from_options({"sandbox": "docker", "image": "x:1"}, {"hooks": []})
    assert (built.image, built.memory, built.pids_limit) == ("x:1", "2g", 512)  # type: ignore[attr-defined]
    with pytest.raises(OptionError) as refused:
        docker.from_options({"network": {"allow": ["a.example"]}}, {})
    assert refused.value.key == "network"
    with pytest.raises(OptionError) as refused:
        backend_class("none").from_options({"hooks": [{"run": "true"}]}, {})
    assert refused.value.key == "hooks"


def test_an_option_of_another_backend_is_refused_where_it_stands(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "version: 1\nagent:\n  model: m\n  environment:\n    sandbox: local\n    memory: 1g\n"
    )
    with pytest.raises(ConfigError) as refused:
        compile_file(path)
    assert "agent.yaml:6:5: 'memory' does not apply to sandbox: local" in str(refused.value)
