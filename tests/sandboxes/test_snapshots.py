"""Snapshots of seeded workspaces: cached hooks run once, later sessions start from the commit.

Real containers throughout.  Every test that can make a snapshot uses the
``snapshots`` fixture, which removes the snapshot images it made (and fails
if one is still used by a container).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest
from conftest import RUNNER_CLI, SCOPE_LABELS, TEST_IMAGE

import runner as agents
from runner.config import ConfigError, load_file
from runner.config.compiler import compile_document
from runner.core.events import listen
from runner.core.snapshot_keys import SnapshotError, cached_prefix, snapshots_disabled
from runner.sandboxes.docker.environment import (
    LABEL_EXPIRES,
    LABEL_OWNER_PID,
    LABEL_SESSION,
    LocalDockerSandbox,
)
from runner.sandboxes.docker.snapshots import (
    LABEL_SNAPSHOT,
    LABEL_SNAPSHOT_CREATED,
    LABEL_SNAPSHOT_SOURCE,
    SNAPSHOT_MAX_AGE_SECONDS,
    collect_snapshots,
)
from runner.sandboxes.local import DangerousLocalWarning

#: One at a time across test processes (see ``snapshot_lock``).
pytestmark = pytest.mark.usefixtures("snapshot_lock")


@pytest.fixture
def snapshots(snapshot_lock: Any, docker_client: Any) -> Any:
    """The snapshot images made during the test; removed at the end."""
    before = {image.id for image in docker_client.images.list(filters={"label": LABEL_SNAPSHOT})}

    def made() -> list[Any]:
        found = docker_client.images.list(filters={"label": LABEL_SNAPSHOT})
        return [image for image in found if image.id not in before]

    yield made
    for image in made():
        docker_client.images.remove(image.id, force=True)
    assert made() == []


class SeedHook(agents.SandboxHook):
    """A slow seeding step whose result is random: reuse is visible."""

    cache = True

    def __init__(self, counter_dir: str, label: str = "v1") -> None:
        self.counter_dir = counter_dir
        self.label = label

    def _count(self, point: str) -> None:
        path = Path(self.counter_dir) / point
        path.write_text(str(int(path.read_text()) + 1 if path.exists() else 1))

    async def on_create(self, ctx: agents.SandboxCallbackContext) -> None:
        self._count("on_create")
        result = await ctx.sandbox.execute(
            "head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n' > seed.txt && sleep 2"
        )
        assert result.exit_code == 0, result.stderr

    async def on_destroy(self, ctx: agents.SandboxCallbackContext) -> None:
        self._count("on_destroy")


def count(directory: Path, point: str) -> int:
    path = directory / point
    return int(path.read_text()) if path.exists() else 0


async def one_session(
    environment: Any, client: Any = None
) -> tuple[str, float, list[dict[str, Any]]]:
    """Start and close one session: the seed file's content, the start time, the events.

    With ``client``, also check the container carries this session's labels,
    not the ones of the session its snapshot was taken from.
    """
    events: list[dict[str, Any]] = []
    started = time.perf_counter()
    with listen(events.append):
        async with await agents.Agent(model="m", environment=environment).start_session() as s:
            elapsed = time.perf_counter() - started
            seed = (await s.sandbox.read_file("seed.txt")).decode()
            if client is not None:
                labels = client.api.inspect_container(s.sandbox.container_id)["Config"]["Labels"]
                assert labels[LABEL_SESSION] == s.id
                assert labels[LABEL_OWNER_PID] == str(os.getpid())
                assert float(labels[LABEL_EXPIRES]) > time.time() + 3600
    return seed, elapsed, events


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["event"] for e in events]


@pytest.mark.anyio
@pytest.mark.docker
async def test_second_session_starts_from_the_snapshot(
    docker_backend: Any, docker_client: Any, snapshots: Any, tmp_path: Path
) -> None:
    environment = docker_backend.environment(hooks=[SeedHook(str(tmp_path))])
    first_seed, first_start, first_events = await one_session(environment)
    assert "snapshot_saved" in kinds(first_events)
    assert "snapshot_used" not in kinds(first_events)
    (image,) = snapshots()
    saved = next(e for e in first_events if e["event"] == "snapshot_saved")
    assert image.id == saved["image_id"]
    assert image.labels[LABEL_SNAPSHOT] == saved["key"]
    assert image.labels[LABEL_SNAPSHOT_SOURCE] == docker_client.images.get(TEST_IMAGE).id
    assert abs(int(image.labels[LABEL_SNAPSHOT_CREATED]) - time.time()) < 120

    second_seed, second_start, second_events = await one_session(environment, docker_client)
    used = next(e for e in second_events if e["event"] == "snapshot_used")
    assert used == {**used, "key": saved["key"], "image_id": image.id}
    assert second_seed == first_seed  # the workspace came from the snapshot
    assert count(tmp_path, "on_create") == 1  # ...and on_create did not run again
    assert count(tmp_path, "on_destroy") == 2  # on_destroy ran both times
    assert "snapshot_saved" not in kinds(second_events)
    assert not any(
        e["event"] == "hook_started" and e["point"] == "on_create" for e in second_events
    )
    assert second_start < first_start - 1.5  # the 2 s sleep is not paid again
    assert len(snapshots()) == 1


@pytest.mark.anyio
@pytest.mark.docker
async def test_a_changed_definition_is_a_new_key(
    docker_backend: Any, snapshots: Any, tmp_path: Path
) -> None:
    first = docker_backend.environment(hooks=[SeedHook(str(tmp_path), label="v1")])
    other = docker_backend.environment(hooks=[SeedHook(str(tmp_path), label="v2")])
    seed_1, _, events_1 = await one_session(first)
    seed_2, _, events_2 = await one_session(other)
    assert "snapshot_saved" in kinds(events_1) and "snapshot_saved" in kinds(events_2)
    assert "snapshot_used" not in kinds(events_2)
    assert seed_1 != seed_2
    assert count(tmp_path, "on_create") == 2
    keys = {e["key"] for e in events_1 + events_2 if e["event"] == "snapshot_saved"}
    assert len(keys) == 2 and len(snapshots()) == 2


@pytest.mark.anyio
@pytest.mark.docker
async def test_no_cache_neither_uses_nor_writes(
    docker_backend: Any, snapshots: Any, tmp_path: Path
) -> None:
    environment = docker_backend.environment(hooks=[SeedHook(str(tmp_path))])
    with snapshots_disabled():
        _, _, events = await one_session(environment)
    assert snapshots() == [] and "snapshot_saved" not in kinds(events)
    seed, _, _ = await one_session(environment)  # makes one
    with snapshots_disabled():
        again, _, events = await one_session(environment)
    assert "snapshot_used" not in kinds(events) and again != seed
    assert count(tmp_path, "on_create") == 3 and len(snapshots()) == 1


def test_only_a_leading_run_of_cacheable_hooks_is_cached(tmp_path: Path) -> None:
    plain = agents.SandboxHook()
    seed = SeedHook(str(tmp_path))
    assert cached_prefix([plain, seed]) == []
    assert len(cached_prefix([seed, plain, seed])) == 1


def test_a_hook_whose_arguments_cannot_be_read_is_refused() -> None:
    class Opaque(agents.SandboxHook):
        cache = True

        def __init__(self) -> None:
            self.handle = object()

    with pytest.raises(SnapshotError, match="'handle'.*cache_key"):
        agents.Agent(model="m", environment=LocalDockerSandbox(hooks=[Opaque()]))


def test_cache_key_method_wins_and_none_turns_caching_off() -> None:
    class Keyed(agents.SandboxHook):
        def __init__(self, key: str | None) -> None:
            self.key = key
            self.handle = object()  # not read: cache_key gives the key

        def cache_key(self) -> str | None:
            return self.key

    (definition,) = cached_prefix([Keyed("abc")])
    assert definition["cache_key"] == "abc" and definition["class"].endswith("Keyed")
    assert cached_prefix([Keyed(None)]) == []


class TreeHook(agents.SandboxHook):
    """Seeds the workspace and HOME with what a plain copy would lose: modes,
    owners, a symlink, a nested tree; its on_create runs once per key."""

    cache = True

    def __init__(self, counter_dir: str) -> None:
        self.counter_dir = counter_dir

    async def on_create(self, ctx: agents.SandboxCallbackContext) -> None:
        path = Path(self.counter_dir) / "on_create"
        path.write_text(str(int(path.read_text()) + 1 if path.exists() else 1))
        result = await ctx.sandbox.execute(
            "head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n' > seed.txt && "
            "mkdir -p deep/er && printf run > deep/er/tool && chmod 750 deep/er/tool && "
            "ln -s deep/er/tool link && printf '[user]\\n' > \"$HOME/.gitconfig\" && "
            "printf scratch > /tmp/scratch"
        )
        assert result.exit_code == 0, result.stderr


TREE = "stat -c '%n %a %u' seed.txt deep/er/tool link && readlink link && cat \"$HOME/.gitconfig\""


@pytest.mark.anyio
@pytest.mark.docker
@pytest.mark.parametrize(
    "options",
    [{"workspace_size": "64m"}, {"read_only_root": True}],
    ids=["workspace_size", "read_only_root"],
)
async def test_a_tmpfs_workspace_is_saved_explicitly(
    docker_backend: Any, docker_client: Any, snapshots: Any, tmp_path: Path, options: dict
) -> None:
    """A commit does not hold tmpfs mounts: the workspace (and, with a
    read-only root, HOME) is archived into the snapshot and unpacked into
    the next session's fresh tmpfs, files, modes, owners and links alike."""
    environment = docker_backend.environment(hooks=[TreeHook(str(tmp_path))], **options)
    listing: list[str] = []
    for _ in range(2):
        events: list[dict[str, Any]] = []
        with listen(events.append):
            async with await agents.Agent(model="m", environment=environment).start_session() as s:
                result = await s.sandbox.execute(TREE)
                assert result.exit_code == 0, result.stderr
                listing.append(result.stdout + (await s.sandbox.read_file("seed.txt")).decode())
                scratch = await s.sandbox.execute("cat /tmp/scratch")
                mounts = await s.sandbox.execute("grep ' /workspace ' /proc/mounts")
        assert "tmpfs" in mounts.stdout  # the workspace is still a tmpfs
    assert "snapshot_used" in kinds(events)
    assert count(tmp_path, "on_create") == 1
    assert listing[0] == listing[1]
    assert "deep/er/tool 750 1000" in listing[1] and "[user]" in listing[1]
    # /tmp: a tmpfs under read_only_root, not saved; else on the container's
    # disk, which the commit holds.
    assert (scratch.exit_code == 0) == ("workspace_size" in options), scratch
    (image,) = snapshots()
    assert image.id == next(e["image_id"] for e in events if e["event"] == "snapshot_used")
    # Neither the session's labels nor those of the container that added the archive.
    assert image.labels[LABEL_SESSION] == image.labels[LABEL_OWNER_PID] == ""
    assert docker_backend.leftovers() == []


@pytest.mark.anyio
@pytest.mark.docker
async def test_a_tmpfs_save_that_fails_leaves_no_image_and_the_session_goes_on(
    docker_backend: Any, docker_client: Any, snapshots: Any, tmp_path: Path, caplog: Any
) -> None:
    """An image without ``tar``: the archive cannot be made, the snapshot is
    not saved (a warning), and neither the filesystem's commit nor the
    container that adds the archive is left behind."""
    tag = f"sandbox-runner-test:no-tar-{os.getpid()}"
    container = docker_client.containers.run(
        TEST_IMAGE, ["sh", "-c", "rm -f /usr/bin/tar /bin/tar"], detach=True
    )
    try:
        assert container.wait()["StatusCode"] == 0
        container.commit(*tag.split(":"))
    finally:
        container.remove(force=True)

    def unfinished() -> set[str]:
        """Commits of runner containers (their labels blanked) that are no snapshot."""
        found = docker_client.images.list(all=True, filters={"label": LABEL_SESSION})
        return {image.id for image in found if LABEL_SNAPSHOT not in image.labels}

    before = unfinished()
    try:
        environment = docker_backend.environment(
            image=tag, hooks=[TreeHook(str(tmp_path))], workspace_size="64m"
        )
        with caplog.at_level("WARNING", logger="runner"):
            _, _, events = await one_session(environment)
    finally:
        docker_client.images.remove(tag, force=True)
    assert "snapshot_saved" not in kinds(events)
    assert "could not save a snapshot" in caplog.text and "tar of /workspace" in caplog.text
    assert snapshots() == [] and unfinished() == before
    assert docker_backend.leftovers() == []


@pytest.mark.anyio
@pytest.mark.docker
async def test_every_part_of_the_key_counts(docker_backend: Any, tmp_path: Path) -> None:
    """Image, setup script, user, env, shell and the tmpfs layout each change
    the key: a snapshot made under other settings would seed the wrong workspace."""
    hooks = [SeedHook(str(tmp_path))]

    async def key(**options: Any) -> str:
        environment = docker_backend.environment(hooks=hooks, **options)
        return await environment.snapshot_key(hooks=cached_prefix(hooks), inputs={})

    other_image = os.environ.get("RUNNER_TEST_IMAGE_BUSYBOX", "sandbox-runner-test-busybox:latest")
    keys = {
        "base": await key(),
        "image": await key(image=other_image),
        "setup_script": await key(setup_script="true"),
        "user": await key(user="root"),
        "env": await key(env={"A": "1"}),
        "shell": await key(shell="/bin/sh"),
        "workspace_size": await key(workspace_size="64m"),
        "read_only_root": await key(read_only_root=True),
    }
    assert len(set(keys.values())) == len(keys), keys
    assert await key() == keys["base"]  # and the same settings give the same key


@pytest.mark.docker
def test_gc_keeps_the_newest_snapshots_within_the_size_limit(
    docker_client: Any, snapshots: Any
) -> None:
    """The size bound: oldest first, those beyond ``max_total_bytes`` of their
    own go (their own: what each adds to the image it came from)."""
    source = docker_client.images.get(TEST_IMAGE).id
    made = []
    for age, name in ((300, "old"), (200, "middle"), (100, "new")):
        container = docker_client.containers.create(
            TEST_IMAGE, command=["sh", "-c", "head -c 3000000 /dev/urandom > /blob"]
        )
        try:
            container.start()
            assert container.wait()["StatusCode"] == 0
            labels = {
                LABEL_SNAPSHOT: f"size-{name}",
                LABEL_SNAPSHOT_CREATED: str(int(time.time()) - age),
                LABEL_SNAPSHOT_SOURCE: source,
                **SCOPE_LABELS,
            }
            made.append(
                container.commit(
                    repository="sandbox-runner-snapshot",
                    tag=f"test-size-{name}",
                    conf={"Labels": labels},
                )
            )
        finally:
            container.remove(force=True)
    # Two of them fit in 7 MB (3 MB each, plus a little), three do not.
    removed = collect_snapshots(docker_client, max_total_bytes=7_000_000)
    left = {image.id for image in snapshots()}
    assert removed == [made[0].id]
    assert left == {made[1].id, made[2].id}


def test_a_cached_hook_on_a_backend_that_cannot_snapshot_is_warned_of(tmp_path: Path) -> None:
    """Python's counterpart of YAML's validation error: the agent is built, the
    hook is not cached, and the warning says so (at the line that built it)."""
    with pytest.warns(DangerousLocalWarning):
        environment = agents.DangerousLocalSandbox(hooks=[SeedHook(str(tmp_path))])
    with pytest.warns(agents.SnapshotWarning, match="the local sandbox cannot snapshot") as seen:
        agents.Agent(model="m", environment=environment)
    (warning,) = [w for w in seen if issubclass(w.category, agents.SnapshotWarning)]
    assert warning.filename == __file__
    assert "hook SeedHook is cached" in str(warning.message)
    # No warning where nothing is cached, nor where the backend can snapshot.
    with pytest.warns(DangerousLocalWarning):
        plain = agents.DangerousLocalSandbox(hooks=[agents.SandboxHook()])
    with warnings.catch_warnings():
        warnings.simplefilter("error", agents.SnapshotWarning)
        agents.Agent(model="m", environment=plain)
        agents.Agent(model="m", environment=LocalDockerSandbox(hooks=[SeedHook(str(tmp_path))]))


# --- YAML ---------------------------------------------------------------------

YAML = """\
version: 1
inputs:
  demo.seed:
    as: seed
    schema:
      type: object
      properties: {{tag: {{type: string}}}}
      required: [tag]
agent:
  model: m
  environment:
    sandbox: {sandbox}
    image: {image}
    hooks:
      - name: seed
        cache: true
        on_create:
          - run: |
              {command}
              printf '%s' {{{{ seed.tag }}}} > tag.txt
      - name: keep
        on_destroy:
          - save: seed.txt
            to: seed-{{{{ session.id }}}}.txt
"""


def write_yaml(tmp_path: Path, *, command: str = "sleep 1", sandbox: str = "docker") -> Path:
    image = TEST_IMAGE if sandbox == "docker" else '""'
    text = YAML.format(sandbox=sandbox, image=image, command=command)
    if sandbox != "docker":
        text = text.replace(f"    image: {image}\n", "")
    path = tmp_path / f"agent-{uuid.uuid4().hex[:8]}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def run_cli(path: Path, tag: str, *extra: str) -> list[dict[str, Any]]:
    out = path.parent / "out"
    result = subprocess.run(
        [
            *RUNNER_CLI,
            "run",
            str(path),
            *("--input", f"demo.seed.tag={tag}", "--output-dir", str(out), "--json", "--quiet"),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.docker
def test_yaml_cache_reuses_by_key_and_no_cache_ignores(
    docker_client: Any, snapshots: Any, tmp_path: Path
) -> None:
    command = "head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \\n' > seed.txt"
    path = write_yaml(tmp_path, command=command)
    out = tmp_path / "out"

    def seeds() -> set[str]:
        return {p.read_text() for p in out.glob("seed-*.txt")}

    first = run_cli(path, "a")
    assert "snapshot_saved" in kinds(first)
    second = run_cli(path, "a")
    assert "snapshot_used" in kinds(second) and "snapshot_saved" not in kinds(second)
    assert len(seeds()) == 1  # both on_destroy saves ran and hold the same value
    assert len(list(out.glob("seed-*.txt"))) == 2

    other_input = run_cli(path, "b")
    assert "snapshot_saved" in kinds(other_input) and "snapshot_used" not in kinds(other_input)
    assert len(seeds()) == 2

    no_cache = run_cli(path, "a", "--no-cache")
    assert not {"snapshot_used", "snapshot_saved"} & set(kinds(no_cache))
    assert len(seeds()) == 3

    edited = write_yaml(tmp_path, command=command + " # edited")
    changed = run_cli(edited, "a")
    assert "snapshot_saved" in kinds(changed) and "snapshot_used" not in kinds(changed)
    assert len(snapshots()) == 3  # a, b, and the edited hook; --no-cache wrote none
    sessions = {
        e["session_id"]
        for run in (first, second, other_input, no_cache, changed)
        for e in run
        if "session_id" in e
    }
    assert len(sessions) == 5
    for session_id in sessions:  # every session's container is gone
        label = f"sandbox-runner.session-id={session_id}"
        assert docker_client.containers.list(all=True, filters={"label": label}) == []


@pytest.mark.docker
def test_gc_removes_expired_snapshots(docker_client: Any, snapshots: Any) -> None:
    old = str(int(time.time() - SNAPSHOT_MAX_AGE_SECONDS - 3600))
    fresh = str(int(time.time()))
    container = docker_client.containers.create(TEST_IMAGE, command=["true"])
    try:
        expired = container.commit(
            repository="sandbox-runner-snapshot",
            tag="test-expired",
            conf={
                "Labels": {LABEL_SNAPSHOT: "expired", LABEL_SNAPSHOT_CREATED: old, **SCOPE_LABELS}
            },
        )
        kept = container.commit(
            repository="sandbox-runner-snapshot",
            tag="test-fresh",
            conf={
                "Labels": {LABEL_SNAPSHOT: "fresh", LABEL_SNAPSHOT_CREATED: fresh, **SCOPE_LABELS}
            },
        )
    finally:
        container.remove(force=True)
    result = subprocess.run([*RUNNER_CLI, "gc"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    left = {image.id for image in snapshots()}
    # Judged by what is left, not by this gc's output: another worker's gc
    # may remove the expired snapshot first.
    assert expired.id not in left and kept.id in left
    # the count bound: with max_count=0 every snapshot goes
    collect_snapshots(docker_client, max_count=0)
    assert kept.id not in {image.id for image in snapshots()}


def problems_of(path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        compile_document(load_file(str(path)))
    return str(caught.value)


SECRET_YAML = """\
version: 1
secrets:
  token: {from_env: TOKEN}
agent:
  model: m
  environment:
    sandbox: docker
    hooks:
      - name: seed
        cache: true
        on_create:
          - run: echo "$TOKEN" > t
            secrets: {TOKEN: token}
"""


def test_a_secret_in_a_cached_yaml_hook_is_a_validation_error(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(SECRET_YAML, encoding="utf-8")
    message = problems_of(path)
    assert f"{path}:13:" in message and "may not use secrets" in message
    secret_file = SECRET_YAML.replace(
        '- run: echo "$TOKEN" > t\n            secrets: {TOKEN: token}',
        "- secret_file: t\n            secret: token",
    )
    path.write_text(secret_file, encoding="utf-8")
    message = problems_of(path)
    assert f"{path}:12:" in message and "may not use secrets" in message


def test_a_secret_input_in_a_cached_hooks_template_is_a_validation_error(
    tmp_path: Path,
) -> None:
    path = write_yaml(tmp_path)
    text = path.read_text().replace("    as: seed\n", "    as: seed\n    secret: true\n", 1)
    path.write_text(text)
    message = problems_of(path)
    assert "may not use the secret input 'demo.seed'" in message
    assert f"{path}:" in message


def test_a_tmpfs_workspace_can_be_cached(tmp_path: Path) -> None:
    path = write_yaml(tmp_path)
    text = path.read_text().replace("    hooks:\n", "    read_only_root: true\n    hooks:\n", 1)
    path.write_text(text)
    agent = compile_document(load_file(str(path))).agent
    (cached,) = agent.plan.cached
    assert cached["yaml"]["name"] == "seed"
    assert agent.environment.saved_tmpfs_dirs() == ["/workspace", "/home/sandbox"]


def test_cache_on_a_backend_that_cannot_snapshot_runs_the_hook_every_time(tmp_path: Path) -> None:
    """A file that says ``sandbox: local`` and ``cache: true`` runs (it was a
    validation error, against "one file runs everywhere it can"): the hook's
    on_create runs in every session, as with --no-cache, and the agent says
    so once (the CLI shows it as one notice)."""
    import warnings

    from runner.core.snapshot_keys import SnapshotWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compile_document(load_file(str(write_yaml(tmp_path, sandbox="local"))))
    said = [str(w.message) for w in caught if issubclass(w.category, SnapshotWarning)]
    assert len(said) == 1 and "cannot snapshot a workspace" in said[0]


def test_cache_with_save_or_session_id_is_a_validation_error(tmp_path: Path) -> None:
    path = write_yaml(tmp_path)
    text = write_yaml(tmp_path).read_text()
    text = text.replace("printf '%s' {{ seed.tag }}", "echo {{ session.id }}")
    path.write_text(text)
    assert "may not use session.id" in problems_of(path)
    text = write_yaml(tmp_path).read_text()
    text = text.replace(
        "      - name: keep\n", "      - name: keep\n        cache: true\n"
    ).replace("      - name: seed\n        cache: true\n", "      - name: seed\n")
    path.write_text(text)
    assert "only the leading run of cached hooks" in problems_of(path)


def test_snapshot_keys_do_not_depend_on_the_session(tmp_path: Path) -> None:
    """Two compilations of one file give the same definitions: a key can match."""
    path = write_yaml(tmp_path)
    first = compile_document(load_file(str(path))).agent.plan.cached
    second = compile_document(load_file(str(path))).agent.plan.cached
    assert first == second and len(first) == 1
    assert os.fspath(tmp_path) not in json.dumps(first)


def test_no_cache_context_is_scoped() -> None:
    from runner.core.snapshot_keys import snapshots_enabled

    with snapshots_disabled():
        assert not snapshots_enabled()
    assert snapshots_enabled()
