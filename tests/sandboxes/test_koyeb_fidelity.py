"""MistralSandbox against a stricter Koyeb stand-in (issue 16, what was left).

tests/support/koyeb_server.py now checks create requests against a recorded catalogue
of regions and instance types (tests/data/koyeb_catalogue.json), can drop the
connection of a run call after the command ran, and can put an instance to
sleep; the real koyeb-sdk and MistralSandbox run against it.
"""

from __future__ import annotations

import json

import httpx
import pytest
from conftest import TEST_IMAGE
from koyeb_server import (
    CATALOGUE,
    DROP,
    Catalogue,
    FakeCloud,
    containers_left_by,
    point_sdk_at,
    sdk,
)

import runner as agents

pytestmark = [pytest.mark.anyio]


@pytest.fixture
def cloud(docker_client, monkeypatch):
    with FakeCloud(docker_client, TEST_IMAGE) as fake:
        point_sdk_at(monkeypatch, fake)
        yield fake
    assert containers_left_by(fake, docker_client) == []


def sandbox(**options) -> agents.MistralSandbox:
    options.setdefault("readiness_timeout_seconds", 10)
    options.setdefault("default_exec_timeout_seconds", 20)
    return agents.MistralSandbox(**options)


# --- the catalogue -------------------------------------------------------------


def test_the_catalogue_says_where_every_value_comes_from() -> None:
    with open(CATALOGUE, encoding="utf-8") as file:
        data = json.load(file)
    for entry in data["regions"] + data["instances"]:
        assert entry["source"].startswith("["), entry
    catalogue = Catalogue.load()
    # The runner's defaults are in it (from the project contract, unverified)...
    assert {"nl-north-1", "fra"} <= catalogue.region_ids()
    assert {"medium", "large"} <= catalogue.instance_ids()
    # ...and so are the SDK's own defaults.
    assert "na" in catalogue.region_ids() and "micro" in catalogue.instance_ids()


async def test_the_catalogue_is_served_in_the_sdks_reply_shapes(docker_client) -> None:
    # The SDK's models are imported here, not at the top: importing koyeb
    # takes seconds, which every test process would pay while it collects.
    from koyeb.api.models.catalog_instance_list_item import CatalogInstanceListItem
    from koyeb.api.models.list_catalog_instances_reply import ListCatalogInstancesReply
    from koyeb.api.models.list_regions_reply import ListRegionsReply

    with FakeCloud(docker_client, TEST_IMAGE) as cloud:
        headers = {"Authorization": f"Bearer {cloud.token}"}
        regions = httpx.get(f"{cloud.url}/v1/catalog/regions", headers=headers, timeout=10)
        instances = httpx.get(f"{cloud.url}/v1/catalog/instances", headers=headers, timeout=10)
    assert "nl-north-1" in [r.id for r in ListRegionsReply.from_dict(regions.json()).regions]
    listed = ListCatalogInstancesReply.from_dict(instances.json()).instances
    assert all(isinstance(item, CatalogInstanceListItem) for item in listed)
    assert "medium" in [item.id for item in listed]


@pytest.mark.docker
@pytest.mark.parametrize(
    ("options", "field", "words"),
    [
        (
            {"region": "mars-1", "network": agents.Network.all()},
            "definition.regions.0",
            "unknown region 'mars-1'",
        ),
        (
            {"instance_type": "gigantic"},
            "definition.instance_types.0.type",
            "unknown instance type 'gigantic'",
        ),
    ],
)
async def test_an_unknown_region_or_instance_type_is_a_clear_error_and_creates_nothing(
    cloud, options, field, words
) -> None:
    with pytest.raises(agents.SandboxUnavailableError) as caught:
        await agents.Agent(model="m", environment=sandbox(**options)).start_session()
    message = str(caught.value)
    assert f"{field}: {words}" in message  # which field, and why: not just "validation error"
    assert "\n" not in message
    (refused,) = [r for r in cloud.calls("POST", "/v1/services")]
    assert refused["status"] == 400
    assert cloud.containers == {}
    assert len(cloud.calls("DELETE", "/v1/apps/")) == 1  # the app made first is deleted


async def test_the_stand_in_answers_an_unknown_region_in_the_error_with_fields_shape(
    docker_client,
) -> None:
    with FakeCloud(docker_client, TEST_IMAGE) as cloud:
        headers = {"Authorization": f"Bearer {cloud.token}"}
        app = httpx.post(f"{cloud.url}/v1/apps", headers=headers, json={"name": "a"}, timeout=10)
        body = {
            "app_id": app.json()["app"]["id"],
            "definition": {"regions": ["atlantis"], "instance_types": [{"type": "micro"}]},
        }
        reply = httpx.post(f"{cloud.url}/v1/services", headers=headers, json=body, timeout=10)
        assert cloud.containers == {}
    assert reply.status_code == 400
    error = sdk().ErrorWithFields.from_dict(reply.json())
    assert [(f.var_field, f.description) for f in error.fields] == [
        ("definition.regions.0", "unknown region 'atlantis'")
    ]


# --- a run call whose connection drops -------------------------------------------


@pytest.fixture
async def cloud_box(cloud):
    agent = agents.Agent(model="m", environment=sandbox())
    async with await agent.start_session() as session:
        yield session.sandbox


def runs_of(cloud, marker: str) -> list:
    return [r for r in cloud.calls("POST", "/exec/") if marker in json.dumps(r["body"])]


@pytest.mark.docker
async def test_a_dropped_run_connection_runs_the_command_once(cloud_box, cloud) -> None:
    cloud.run_faults = [DROP]  # the command ran; its answer never comes back
    result = await cloud_box.execute("echo ran >> count.txt; cat count.txt")
    assert (result.exit_code, result.stdout) == (0, "ran\n")
    assert await cloud_box.read_file("count.txt") == b"ran\n"
    statuses = [r["status"] for r in runs_of(cloud, "echo ran")]
    assert statuses == [DROP, 200]  # the SDK asked again; the command did not run again


@pytest.mark.docker
async def test_connections_that_keep_dropping_give_a_clear_error_and_one_run(
    cloud_box, cloud
) -> None:
    cloud.run_faults = [DROP] * 4  # more than the SDK's three retries
    with pytest.raises(agents.SandboxUnavailableError) as caught:
        await cloud_box.execute("echo ran >> count.txt")
    message = str(caught.value)
    assert message.startswith("the cloud sandbox did not run the command")
    assert "may have run" in message  # the caller is told it cannot know
    assert len(runs_of(cloud, "echo ran")) == 4
    assert await cloud_box.read_file("count.txt") == b"ran\n"  # four requests, one run


# --- sleep and wake ------------------------------------------------------------------


@pytest.mark.docker
async def test_a_sleeping_instance_wakes_on_the_next_command_with_its_files(
    cloud_box, cloud
) -> None:
    await cloud_box.write_file("notes.txt", "kept\n")
    (instance,) = cloud.instances.values()
    cloud.sleep(instance.app_id)
    headers = {"Authorization": f"Bearer {cloud.token}"}
    deployment = httpx.get(
        f"{cloud.url}/v1/deployments/{instance.deployment_id}", headers=headers, timeout=10
    )
    assert deployment.json()["deployment"]["status"] == "SLEEPING"
    result = await cloud_box.execute("cat notes.txt")
    assert (result.exit_code, result.stdout) == (0, "kept\n")
    assert (instance.sleeping, instance.wakes) == (False, 1)
    assert result.duration_seconds >= cloud.wake_seconds


@pytest.mark.docker
async def test_an_instance_that_woke_without_its_files_is_reported_not_used(cloud) -> None:
    """A deep sleep (the SDK's mode when idle_timeout_seconds is set) is modelled
    as a fresh instance: the session's files are gone, and the sandbox says so
    instead of running commands on an empty instance."""
    env = sandbox(idle_timeout_seconds=300)
    async with await agents.Agent(model="m", environment=env).start_session() as session:
        box = session.sandbox
        await box.write_file("notes.txt", "kept?\n")
        (instance,) = cloud.instances.values()
        cloud.sleep(instance.app_id, deep=True)
        with pytest.raises(agents.SandboxUnavailableError) as caught:
            await box.execute("echo ran > ran.txt; cat notes.txt")
        assert str(caught.value).startswith(
            "the cloud sandbox restarted and lost its files (a deep sleep after "
            "idle_timeout_seconds, or a platform restart): the command was not run"
        )
        assert instance.wakes == 1
        with pytest.raises(agents.SandboxUnavailableError, match="restarted and lost its files"):
            await box.read_file("notes.txt")
        check = instance.container.exec_run(["sh", "-c", "ls /workspace/ran.txt"])
        assert check.exit_code != 0  # nothing ran on the fresh instance
    assert cloud.containers == {}  # and the session still deleted it
    service = cloud.calls("POST", "/v1/services")[0]["body"]
    scaling = service["definition"]["scalings"][0]
    assert scaling["min"] == 0  # idle_timeout_seconds > 0: it may sleep
