"""Shared fixtures: the two real backends every lifecycle rule is tested on.

``backend`` is parametrized over the local sandbox (host subprocesses in a
temp dir of the test's own) and a real Docker container made from the image
``scripts/docker-up`` builds.  Each backend can list what it left behind, so
tests assert that nothing is.  With ``CI`` set, a missing Docker engine or
test image fails the Docker tests instead of skipping them.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest

import runner as agents
from runner.sandboxes.docker.environment import LABEL_OWNER_PID, LocalDockerSandbox
from runner.sandboxes.local import DangerousLocalWarning

#: Every container and snapshot this test run makes carries this scope (the
#: label ``sandbox-runner.scope``), and every gc, sweep and snapshot lookup
#: of the run, in this process and in the CLI processes it starts, sees only
#: that scope's: the suite never removes or reuses what a user's runs left
#: (tests/sandboxes/test_cleanup_scope.py).
os.environ.setdefault("RUNNER_SCOPE", f"tests-{uuid.uuid4().hex[:12]}")
#: The label a test puts on a container or snapshot it makes by hand, so the
#: run's gc sees it.
SCOPE_LABELS = {"sandbox-runner.scope": os.environ["RUNNER_SCOPE"]}

TEST_IMAGE = os.environ.get("RUNNER_TEST_IMAGE", "sandbox-runner-test:latest")
#: Images without a full Python (scripts/docker-up builds them too): python3-minimal
#: only (no json module), and busybox-static alone (no bash, no python).
TEST_IMAGE_MINIMAL = os.environ.get(
    "RUNNER_TEST_IMAGE_MINIMAL", "sandbox-runner-test-minimal:latest"
)
TEST_IMAGE_BUSYBOX = os.environ.get(
    "RUNNER_TEST_IMAGE_BUSYBOX", "sandbox-runner-test-busybox:latest"
)
#: The second engine scripts/docker-userns-up starts beside the main one:
#: ``dockerd --userns-remap=default`` (container root is host uid 100000,
#: the sandbox user host uid 101000), with the test images copied into it.
USERNS_HOST = os.environ.get(
    "RUNNER_TEST_USERNS_HOST", "unix:///run/sandbox-runner-userns/docker.sock"
)


#: How tests start the command line.  scripts/test sets RUNNER_CLI to the
#: ``runner`` of the built wheel installed in a fresh venv (with the koyeb
#: extra), so the CLI tests run what users install; without it, this
#: checkout's package.
RUNNER_CLI: list[str] = (
    [os.environ["RUNNER_CLI"]] if os.environ.get("RUNNER_CLI") else [sys.executable, "-m", "runner"]
)


def cli_package_dir() -> Path:
    """The folder of the ``runner`` package that RUNNER_CLI runs."""
    if not os.environ.get("RUNNER_CLI"):
        import runner

        return Path(runner.__file__).resolve().parent
    python = Path(RUNNER_CLI[0]).parent / "python"
    code = "import runner; print(runner.__file__)"
    found = subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd="/")
    return Path(found.stdout.strip()).resolve().parent


@pytest.fixture(scope="session")
def image_tags() -> dict[str, str]:
    """The tags of the three test images, by kind: ``full`` (the default test image,
    python3 and git), ``minimal`` (python3-minimal only) and ``busybox``."""
    return {"full": TEST_IMAGE, "minimal": TEST_IMAGE_MINIMAL, "busybox": TEST_IMAGE_BUSYBOX}


#: The kinds of test image, in the order tests are parametrized.
IMAGE_KINDS = ("full", "minimal", "busybox")


def lifecycle_until_it_dies(
    docker_client: Any, container_id: str, *, since: int, seconds: float
) -> list[str]:
    """The container's events from ``since`` (a Unix time) until it dies or
    ``seconds`` after ``since``: "create", "start", "kill", "die", ... (an
    exec's events without their command).  For a test that waits for a
    container to end by itself: an expired container is garbage, and another
    test process's first session (``pytest -n``, or ``scripts/mutate``
    running two mutants) may remove it before an ``inspect`` could see it
    stopped; the engine's events still tell.  Its own end is a ``die`` with
    no ``kill`` sent through the engine before it."""
    actions: list[str] = []
    events = docker_client.events(
        since=since,
        until=int(since + seconds),
        filters={"type": "container", "container": container_id},
        decode=True,
    )
    try:
        for event in events:
            actions.append(event["Action"].partition(":")[0])  # "exec_create: <command>"
            if actions[-1] == "die":
                break
    finally:
        events.close()
    return actions


def _present(tag: str, docker_client: Any) -> str:
    """``tag``, skipped (failed under CI) if that image is missing."""
    import docker.errors

    try:
        docker_client.images.get(tag)
    except docker.errors.ImageNotFound:
        problem = f"the test image {tag} is missing; run scripts/docker-up"
        if os.environ.get("CI"):
            pytest.fail(problem)
        pytest.skip(problem)
    return tag


@pytest.fixture(params=IMAGE_KINDS)
def image(request: pytest.FixtureRequest, image_tags: dict[str, str], docker_client: Any) -> Any:
    """(kind, tag) of one test image; skipped (failed under CI) if it is missing."""
    return request.param, _present(image_tags[request.param], docker_client)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


_docker_problem: str | None = None
_docker_checked = False


def docker_problem() -> str | None:
    """Why Docker tests cannot run here, or None if they can (checked once)."""
    global _docker_checked, _docker_problem
    if not _docker_checked:
        _docker_checked = True
        try:
            import docker

            client = docker.from_env()
            client.ping()
            client.images.get(TEST_IMAGE)
        except Exception as exc:
            _docker_problem = (
                f"Docker or the image {TEST_IMAGE} is not available ({exc}); run scripts/docker-up"
            )
    return _docker_problem


@pytest.fixture
def snapshot_lock(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Tests that make or remove snapshots run one at a time, across test
    processes (``pytest -n``): gc tests remove snapshots by age, count and
    size engine-wide, and the ``snapshots`` fixture counts every new one as
    its test's.  A lock file in the run's shared temporary root (xdist's
    ``loadgroup`` would do it, but does not group under pytest 9.2:
    pytest-xdist issue 1386)."""
    path = tmp_path_factory.getbasetemp().parent / "snapshots.lock"
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


@pytest.fixture
def inotify_lock(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Tests that take every inotify instance a host uid has, and tests that
    need one in a sandbox, run one at a time across test processes
    (``pytest -n``): the first kind starves host uid 1000 (the main engine's
    sandbox user) or host root (the remapped engine's namespaces) for a
    moment (tests/sandboxes/test_userns_remap.py)."""
    path = tmp_path_factory.getbasetemp().parent / "inotify.lock"
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


@pytest.fixture
def docker_client() -> Any:
    problem = docker_problem()
    if problem:
        if os.environ.get("CI"):
            pytest.fail(problem)
        pytest.skip(problem)
    import docker

    return docker.from_env()


_userns_problem: str | None = None
_userns_checked = False


def userns_problem() -> str | None:
    """Why the remapped engine cannot be used here, or None (checked once)."""
    global _userns_checked, _userns_problem
    if not _userns_checked:
        _userns_checked = True
        try:
            import docker

            client = docker.DockerClient(base_url=USERNS_HOST)
            options = " ".join(client.info().get("SecurityOptions") or [])
            if "name=userns" not in options:
                _userns_problem = f"the engine at {USERNS_HOST} does not remap user namespaces"
            client.images.get(TEST_IMAGE)
        except Exception as exc:
            _userns_problem = f"no remapped engine with {TEST_IMAGE} at {USERNS_HOST} ({exc})"
        if _userns_problem:
            _userns_problem += (
                "; scripts/docker-up starts one (scripts/docker-userns-up, "
                "log in /tmp/sandbox-runner-dockerd-userns.log)"
            )
    return _userns_problem


@pytest.fixture
def userns_client() -> Any:
    """A client of the remapped engine; skipped (failed under CI) without one."""
    problem = userns_problem()
    if problem:
        if os.environ.get("CI"):
            pytest.fail(problem)
        pytest.skip(problem)
    import docker

    return docker.DockerClient(base_url=USERNS_HOST)


class Backend:
    """Builds environments of one backend and reports what they left behind."""

    def __init__(
        self,
        name: str,
        tmp_path: Path,
        docker_client: Any = None,
        image: str = TEST_IMAGE,
        docker_host: str | None = None,
    ) -> None:
        self.name = name
        self.temp_dir = tmp_path / "sandboxes"
        self.temp_dir.mkdir()
        self.docker_client = docker_client
        self.image = image  # Docker's: the image environments default to
        #: Docker's: the engine environments use (None: DOCKER_HOST, else the
        #: default socket); USERNS_HOST for the remapped engine.
        self.docker_host = docker_host

    def environment(self, **options: Any) -> agents.SandboxEnvironment:
        if self.name == "local":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DangerousLocalWarning)
                return agents.DangerousLocalSandbox(temp_dir=self.temp_dir, **options)
        options.setdefault("image", self.image)
        if self.docker_host:
            options.setdefault("docker_host", self.docker_host)
        return LocalDockerSandbox(**options)

    def cli_environment(self) -> dict[str, str]:
        """What a ``runner`` process needs in its environment to use this
        backend's engine and image."""
        engine = {"DOCKER_HOST": self.docker_host} if self.docker_host else {}
        return {**engine, "RUNNER_DOCKER_IMAGE": self.image}

    def leftovers(self) -> list[str]:
        """Sandboxes of this test process that still exist."""
        if self.name == "local":
            return sorted(p.name for p in self.temp_dir.iterdir())
        containers = self.docker_client.containers.list(
            all=True, filters={"label": f"{LABEL_OWNER_PID}={os.getpid()}"}
        )
        return sorted(c.id for c in containers)

    def is_deleted(self, sandbox: agents.Sandbox) -> bool:
        if self.name == "local":
            return not Path(sandbox.root).exists()  # type: ignore[attr-defined]
        import docker.errors

        try:
            self.docker_client.containers.get(sandbox.container_id)  # type: ignore[attr-defined]
        except docker.errors.NotFound:
            return True
        return False


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    client = request.getfixturevalue("docker_client") if request.param == "docker" else None
    backend = Backend(request.param, tmp_path, client)
    yield backend
    assert backend.leftovers() == [], f"the {backend.name} backend left sandboxes behind"


def _docker_on(request: pytest.FixtureRequest, tmp_path: Path, engine: str, kind: str) -> Any:
    """A Docker ``Backend`` on ``engine`` (``docker``: the main one, ``userns``:
    the remapped one) with the image of ``kind``."""
    if engine == "userns":
        client, host = request.getfixturevalue("userns_client"), USERNS_HOST
    else:
        client, host = request.getfixturevalue("docker_client"), None
    tag = request.getfixturevalue("image_tags")[kind]
    return Backend("docker", tmp_path, client, image=_present(tag, client), docker_host=host)


@pytest.fixture
def docker_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A Docker backend on the main engine; a test parametrized indirectly with
    ``"userns"`` (``ENGINES``) gets the remapped engine instead."""
    engine = getattr(request, "param", "docker")
    backend = _docker_on(request, tmp_path, engine, "full")
    yield backend
    assert backend.leftovers() == [], f"the {engine} backend left containers behind"


#: Indirect params of ``docker_backend``: the main engine and the remapped one.
ENGINES = ("docker", "userns")


def _backend_on(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A ``Backend`` for a param of ``local``, ``docker:KIND`` (an image kind)
    or ``userns:KIND`` (that image on the remapped engine)."""
    if request.param == "local":
        return Backend("local", tmp_path)
    engine, _, kind = request.param.partition(":")
    return _docker_on(request, tmp_path, engine, kind)


#: The params of ``backend_on_every_image``; a test may add ``userns:KIND``
#: ones (indirect parametrization) to run on the remapped engine too.
EVERY_BACKEND = (
    "local",
    *(pytest.param(f"docker:{k}", marks=pytest.mark.docker) for k in IMAGE_KINDS),
)


def on_userns(*kinds: str) -> list[Any]:
    """Params ``userns:KIND`` for ``backend_on_every_image`` or ``docker_on_every_image``."""
    return [pytest.param(f"userns:{k}", marks=pytest.mark.docker) for k in kinds]


@pytest.fixture(params=EVERY_BACKEND)
def backend_on_every_image(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """``backend``, with Docker on each test image (issue 13: the lifecycle
    tests run on all three)."""
    backend = _backend_on(request, tmp_path)
    yield backend
    assert backend.leftovers() == [], f"the {request.param} backend left sandboxes behind"


@pytest.fixture(params=[f"docker:{k}" for k in IMAGE_KINDS])
def docker_on_every_image(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """``docker_backend`` on each test image (the channel tests run on all three)."""
    backend = _backend_on(request, tmp_path)
    yield backend
    assert backend.leftovers() == [], f"the {request.param} backend left containers behind"


@pytest.fixture
def local_backend(tmp_path: Path) -> Any:
    backend = Backend("local", tmp_path)
    yield backend
    assert backend.leftovers() == [], "the local backend left workspaces behind"


#: Fixtures that start containers or talk to the engine: a test using one
#: is a ``docker`` test whatever its own marks say.
DOCKER_FIXTURES = frozenset(
    {
        "docker_client",
        "docker_backend",
        "docker_on_every_image",
        "image",
        "image_tags",
        "userns_client",
    }
)


#: The files whose tests start whole ``runner serve`` processes (and one
#: runs the GitHub action's steps): marked ``e2e``.  The unit tests of the
#: server's parts (the journal) are not.
E2E_FILES = {"test_github_action.py"} | {
    path.name
    for path in (Path(__file__).parent / "serve").glob("test_*.py")
    if path.name != "test_serve_journal.py"
}


#: Whether koyeb-sdk was imported while the test modules were collected (set
#: below; tests/docs/test_test_tiers.py checks it is not): importing it takes
#: ~7 s of CPU (pydantic builds a validator for each of its ~1,100 API
#: functions), which a module that imports it at its top makes every test
#: process pay, the fast tier's included, whether or not a cloud test runs.
SDK_IMPORTED_WHILE_COLLECTING: bool | None = None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests from the fixtures they use: ``postgres`` for PostgreSQL's,
    ``docker`` for the engine's; and ``e2e`` from their file (E2E_FILES).
    ``scripts/test --fast`` leaves all three out.

    The e2e files run first, whole files in their own order (their module
    fixtures set up once): they hold most of the longest tests (20-75 s
    each), and a long test left for the end of a ``pytest -n 2`` run keeps
    one process busy while the other has nothing left (scripts/test also
    lets an idle process take queued tests, ``--dist worksteal``).  Every
    process sorts the same collection alike, as pytest-xdist requires."""
    global SDK_IMPORTED_WHILE_COLLECTING
    SDK_IMPORTED_WHILE_COLLECTING = "koyeb" in sys.modules
    for item in items:
        if item.path.name in E2E_FILES:
            item.add_marker(pytest.mark.e2e)
        fixtures = set(getattr(item, "fixturenames", ()))
        if "postgres_server" in fixtures:
            item.add_marker(pytest.mark.postgres)
        if fixtures & DOCKER_FIXTURES:
            item.add_marker(pytest.mark.docker)
    items.sort(key=lambda item: item.path.name not in E2E_FILES)  # stable: e2e first


@pytest.fixture(scope="session")
def postgres_server() -> Any:
    """One throwaway PostgreSQL server for the whole run (tests/support/postgres_server.py):
    unix socket only, stopped and removed at the end.  Skipped if PostgreSQL
    is not installed (failed under CI)."""
    from postgres_server import PostgresServer, find_bindir

    if find_bindir() is None:
        problem = "PostgreSQL is not installed: run scripts/postgres-install"
        if os.environ.get("CI"):
            pytest.fail(problem)
        pytest.skip(problem)
    with PostgresServer() as server:
        yield server


@pytest.fixture
def postgres_dsn(postgres_server: Any) -> str:
    """The DSN of a new, empty database of its own on the session's server."""
    return str(postgres_server.new_database())
