"""A local stand-in for the cloud sandbox service that koyeb-sdk talks to.

It implements, over real HTTP on 127.0.0.1, the subset of the control-plane
API (apps, services, deployments) and of the sandbox executor API (health,
run, write_file, read_file) that the SDK uses, and records every request.
Behind it, each "cloud sandbox" is a real Docker container from the test
image with no network, so commands really run and files really persist.
Only the cloud is simulated: the SDK, its HTTP clients and our backend are
the real code.  Knobs let a test make the platform fail at each step.

The stand-in enforces the rules of sources nobody here wrote, so that it is
no kinder than the real service:

* Control plane (koyeb-sdk's generated client, ``koyeb/api``): every body is
  parsed with the SDK's own request model (``CreateApp``, ``CreateService``
  and the models they nest); a field the model does not declare, or a value
  of the wrong type, is a 400 in the ``ErrorWithFields`` shape; an unknown
  app, service or deployment is a 404 and a missing or wrong bearer token a
  401, both in the ``Error`` shape (the status-to-model map is each generated
  method's ``_response_types_map``).  The ``code``/``message`` texts are ours:
  only the shapes and statuses come from the SDK.
* Deployments step through pre-ready states (``DeploymentStatus`` values that
  ``koyeb/sandbox/status.py`` classifies as in progress) before ``HEALTHY``;
  until then the instance's executor is not reachable (503, as a gateway
  with no healthy backend answers).
* Executor (koyeb/sandbox-container, ``pkg/server``): every call but
  ``/health`` needs ``Authorization: Bearer <SANDBOX_SECRET>`` (the secret
  the SDK put in the deployment's env), else 401 ``Unauthorized``; the
  deployment's env (the sandbox ``env=``, SANDBOX_SECRET included) is the
  environment of every command, a run's own ``env`` added on top; ``run``
  reads stdout to the end before stderr and answers 400 ``Invalid working
  directory`` for a missing ``cwd``; ``write_file`` is ``os.WriteFile``: it
  creates no parent directory and reports the error in its JSON answer.
* Catalogue: a create-service request naming a region or an instance type
  that is not in ``tests/data/koyeb_catalogue.json`` (written from the SDK's
  models and defaults; each entry says where its id comes from) is a 400 in
  the ``ErrorWithFields`` shape, and nothing is created.  The catalogue is
  also served at ``/v1/catalog/regions`` and ``/v1/catalog/instances``.
* Faults on demand: a run call's answer lost after the command ran (a 5xx
  status, or ``DROP``: the connection closes with no answer at all, which
  the SDK retries as a network error); sleep (``sleep``: the deployment
  reports ``SLEEPING``, a state the SDK models, and the container is paused)
  and wake (the next executor request wakes it, as the platform wakes a
  scaled-to-zero service on traffic, after ``wake_seconds``).  A light
  sleep keeps the container; a deep one wakes a fresh container, files gone
  (whether the real platform keeps the disk through a deep sleep is not
  known here).
* Pause (``POST /v1/services/{id}/pause``, the real API's "Pause Service"):
  the service's instance stops (the container is stopped, its disk kept);
  its deployment then reports ``STOPPED`` (an assumption: the real platform's
  exact state names while paused are not recorded here) and the executor
  answers 503, as with no healthy backend.  ``pause(app_id)`` does the same
  from the test, behind the client's back.
* List (``GET /v1/services``, the real API's "List Services", query
  parameters ``app_id``, ``name``, ``types``, ``limit``, ``offset``): the
  answer in the SDK's ``ListServicesReply`` shape.  The real API documents
  ``name`` only as "a filter for name"; here it matches the whole name (a
  caller that needs one name checks it again, as ours does).
"""

from __future__ import annotations

import functools
import io
import itertools
import json
import os
import tarfile
import threading
import time
import types
import typing
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import BaseModel, ValidationError


@functools.cache
def sdk() -> types.SimpleNamespace:
    """The SDK's models, imported on first use: importing koyeb takes
    seconds (pydantic builds a validator for each of its ~1,100 API
    functions), which every test process would otherwise pay while it
    collects, whether or not it runs a test of the cloud sandbox."""
    from koyeb.api.models.catalog_instance_list_item import CatalogInstanceListItem
    from koyeb.api.models.create_app import CreateApp
    from koyeb.api.models.create_service import CreateService
    from koyeb.api.models.deployment_status import DeploymentStatus
    from koyeb.api.models.error import Error
    from koyeb.api.models.error_field import ErrorField
    from koyeb.api.models.error_with_fields import ErrorWithFields
    from koyeb.api.models.list_services_reply import ListServicesReply
    from koyeb.api.models.region_list_item import RegionListItem

    return types.SimpleNamespace(
        CatalogInstanceListItem=CatalogInstanceListItem,
        CreateApp=CreateApp,
        CreateService=CreateService,
        DeploymentStatus=DeploymentStatus,
        Error=Error,
        ErrorField=ErrorField,
        ErrorWithFields=ErrorWithFields,
        ListServicesReply=ListServicesReply,
        RegionListItem=RegionListItem,
    )


FAKE_LABEL = "sandbox-runner-test.fake-cloud"
DEFAULT_TOKEN = "koyeb-test-token"

#: States a deployment passes through before HEALTHY, in the order the
#: platform moves through them (all "in_progress" for the SDK's readiness wait).
PRE_READY_STATUSES = ("PENDING", "PROVISIONING", "STARTING")
#: Deployment states the SDK treats as ready (koyeb/sandbox/status.py).
READY_STATUSES = ("HEALTHY", "DEGRADED")
#: The executor's only route without authentication (sandbox-container README).
OPEN_EXECUTOR_ACTIONS = frozenset({"health"})
#: A run fault: the connection closes after the command ran, with no answer.
DROP = "drop"
#: The recorded catalogue of regions and instance types (see its "about").
CATALOGUE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "koyeb_catalogue.json")

#: Runs in the instance: the executor's way of running a command, pipes read
#: one after the other (stdout to its end, then stderr).
SEQUENTIAL_RUN = """
import json, os, subprocess, sys
command, cwd = sys.argv[1], sys.argv[2]
if not os.path.isdir(cwd):
    print(json.dumps({"error": "Invalid working directory: " + cwd}))
    sys.exit()
process = subprocess.Popen(["sh", "-c", command], cwd=cwd, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
stdout = process.stdout.read()
stderr = process.stderr.read()
code = process.wait()
print(json.dumps({"stdout": stdout.decode("utf-8", "replace"),
                  "stderr": stderr.decode("utf-8", "replace"), "code": code}))
"""


# --- the platform's request and error models ----------------------------------


def error_reply(status: int, code: str, message: str) -> tuple[int, Any]:
    """An answer in the platform's ``Error`` shape."""
    return status, sdk().Error(status=status, code=code, message=message).to_dict()


def invalid_reply(problems: list[tuple[str, str]]) -> tuple[int, Any]:
    """A 400 in the platform's ``ErrorWithFields`` shape, one entry per field."""
    fields = [sdk().ErrorField(field=name, description=text) for name, text in problems]
    error = sdk().ErrorWithFields(
        status=400, code="invalid_argument", message="validation error", fields=fields
    )
    return 400, error.to_dict()


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The generated models an annotation (``Optional[List[Model]]``...) refers to."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in models_in(arg)]


def unknown_fields(model: type[BaseModel], data: Any, prefix: str = "") -> list[str]:
    """Dotted names of the keys in ``data`` that ``model`` (or a nested model) does not declare.

    The generated ``from_dict`` silently drops such keys; the real API does not.
    """
    if not isinstance(data, dict):
        return []
    declared = {info.alias or name: info for name, info in model.model_fields.items()}
    found: list[str] = []
    for key, value in data.items():
        info = declared.get(key)
        if info is None:
            found.append(prefix + key)
            continue
        for inner in models_in(info.annotation):
            for item in value if isinstance(value, list) else [value]:
                found += unknown_fields(inner, item, f"{prefix}{key}.")
    return found


def parse_request(model: type[BaseModel], body: Any) -> tuple[Any, tuple[int, Any] | None]:
    """``body`` as the SDK's ``model``, or the 400 the platform answers instead."""
    if not isinstance(body, dict):
        return None, invalid_reply([("body", "a JSON object is required")])
    unknown = unknown_fields(model, body)
    if unknown:
        return None, invalid_reply([(name, "unknown field") for name in unknown])
    try:
        return model.from_dict(body), None
    except ValidationError as exc:
        problems = [(".".join(map(str, e["loc"])) or "body", e["msg"]) for e in exc.errors()]
        return None, invalid_reply(problems)
    except (TypeError, ValueError, AttributeError) as exc:
        return None, invalid_reply([("body", str(exc))])


@dataclass(frozen=True)
class Catalogue:
    """The regions and instance types the platform offers, as the SDK's models."""

    regions: tuple[Any, ...]  # the SDK's RegionListItem
    instances: tuple[Any, ...]  # the SDK's CatalogInstanceListItem

    @classmethod
    def load(cls, path: str = CATALOGUE) -> Catalogue:
        with open(path, encoding="utf-8") as file:
            data = json.load(file)

        def parse(model: type[BaseModel], entries: list[dict[str, Any]]) -> tuple[Any, ...]:
            items = []
            for entry in entries:
                assert entry.get("source"), f"a catalogue entry says where it comes from: {entry}"
                assert not unknown_fields(model, entry["item"]), entry
                items.append(model.from_dict(entry["item"]))
            return tuple(items)

        return cls(
            regions=parse(sdk().RegionListItem, data["regions"]),
            instances=parse(sdk().CatalogInstanceListItem, data["instances"]),
        )

    def region_ids(self) -> set[str]:
        return {region.id for region in self.regions if region.id}

    def instance_ids(self) -> set[str]:
        names = {item.id for item in self.instances if item.id}
        return names | {alias for item in self.instances for alias in item.aliases or ()}

    def problems(self, definition: dict[str, Any]) -> list[tuple[str, str]]:
        """What a service definition asks for that the catalogue does not have."""
        found = []
        for index, region in enumerate(definition.get("regions") or []):
            if region not in self.region_ids():
                found.append((f"definition.regions.{index}", f"unknown region {region!r}"))
        for index, scaling in enumerate(definition.get("instance_types") or []):
            kind = scaling.get("type")
            if kind not in self.instance_ids():
                found.append(
                    (f"definition.instance_types.{index}.type", f"unknown instance type {kind!r}")
                )
        return found

    def reply(self, kind: str) -> dict[str, Any]:
        """``GET /v1/catalog/<kind>``, in the ``List...Reply`` shape."""
        items = self.regions if kind == "regions" else self.instances
        return {
            kind: [item.to_dict() for item in items],
            "limit": 100,
            "offset": 0,
            "count": len(items),
        }


@dataclass
class Instance:
    """One sandbox service: its app, its deployment and the container behind it."""

    app_id: str
    service_id: str
    deployment_id: str
    name: str
    definition: dict[str, Any]
    env: dict[str, str]
    container: Any = None
    statuses_served: list[str] = field(default_factory=list)
    #: Asleep (scaled to zero): the deployment reports SLEEPING.
    sleeping: bool = False
    #: How many times an executor request woke it.
    wakes: int = 0
    #: Paused (``POST /v1/services/{id}/pause``): stopped until resumed.
    paused: bool = False

    @property
    def secret(self) -> str | None:
        return self.env.get("SANDBOX_SECRET")

    @property
    def ready(self) -> bool:
        return bool(self.statuses_served) and self.statuses_served[-1] in READY_STATUSES


class FakeCloud:
    def __init__(
        self,
        docker_client: Any,
        image: str,
        token: str = DEFAULT_TOKEN,
        catalogue: Catalogue | None = None,
    ) -> None:
        self.docker = docker_client
        self.image = image
        self.token = token
        self.catalogue = catalogue or Catalogue.load()
        self.requests: list[dict[str, Any]] = []
        self.apps: dict[str, str] = {}  # app id -> name
        self.instances: dict[str, Instance] = {}  # service id -> instance
        self.containers: dict[str, Any] = {}  # app id -> container
        #: Every container this stand-in started (another test run on the same
        #: Docker daemon may have its own stand-in's containers).
        self.started: list[str] = []
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        # Failure knobs
        #: What a deployment reports after its pre-ready states (e.g. "ERROR").
        self.deployment_status = "HEALTHY"
        #: What it reports first, one state per poll.
        self.pre_ready_statuses: list[str] = list(PRE_READY_STATUSES)
        self.fail_service_create = False
        #: What the next run calls answer *after* running the command, as a
        #: gateway that loses the executor's answer would: a status (e.g. 502)
        #: or DROP (the connection closes with no answer).
        self.run_faults: list[int | str] = []
        #: Seconds an executor request waits while a sleeping instance wakes.
        self.wake_seconds = 0.5
        #: While set, every control-plane request answers this status (e.g.
        #: 503): an API outage.  The executor is not affected.
        self.outage: int | None = None
        cloud = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _body(self) -> Any:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    return json.loads(raw) if raw else None
                except ValueError:
                    return raw.decode("utf-8", "replace")

            def _reply(self, status: int, payload: Any) -> None:
                if isinstance(payload, str):  # the executor's http.Error: plain text
                    data, kind = payload.encode(), "text/plain; charset=utf-8"
                else:
                    data, kind = json.dumps(payload).encode(), "application/json"
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self) -> None:
                body = self._body()
                path, _, raw_query = self.path.partition("?")
                query = urllib.parse.parse_qs(raw_query)
                headers = {k.lower(): v for k, v in self.headers.items()}
                record = {"method": self.command, "path": path, "headers": headers, "body": body}
                if query:
                    record["query"] = query
                with cloud.lock:
                    cloud.requests.append(record)
                status, payload = cloud.route(self.command, path, body, headers, query=query)
                record["status"] = status
                if status == DROP:  # no answer: the connection just closes
                    self.close_connection = True
                    return
                self._reply(status, payload)

            do_GET = do_POST = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def calls(self, method: str | None = None, prefix: str = "") -> list[dict[str, Any]]:
        return [
            r
            for r in self.requests
            if (method is None or r["method"] == method) and r["path"].startswith(prefix)
        ]

    def instance_of_app(self, app_id: str) -> Instance | None:
        return next((i for i in self.instances.values() if i.app_id == app_id), None)

    # --- the control plane ---------------------------------------------------

    def route(
        self,
        method: str,
        path: str,
        body: Any,
        headers: dict[str, str],
        query: dict[str, list[str]] | None = None,
    ) -> tuple[int, Any]:
        parts = path.strip("/").split("/")
        if parts[:1] == ["exec"] and len(parts) >= 4:
            return self.execute(parts[1], parts[3], body, headers)
        if parts[:1] != ["v1"]:
            return error_reply(404, "not_found", f"no route {method} {path}")
        if headers.get("authorization") != f"Bearer {self.token}":
            return error_reply(401, "unauthenticated", "missing or invalid API token")
        if self.outage is not None:
            return error_reply(self.outage, "unavailable", "scripted outage")
        with self.lock:
            return self.control_plane(method, parts[1:], body, query or {})

    def control_plane(
        self, method: str, parts: list[str], body: Any, query: dict[str, list[str]] | None = None
    ) -> tuple[int, Any]:
        if method == "GET" and parts == ["services"]:
            return self.list_services(query or {})
        if method == "POST" and parts == ["apps"]:
            return self.create_app(body)
        if method == "POST" and parts == ["services"]:
            return self.create_service(body)
        if method == "GET" and len(parts) == 2 and parts[0] == "services":
            return self.get_service(parts[1])
        if method == "GET" and len(parts) == 2 and parts[0] == "deployments":
            return self.get_deployment(parts[1])
        if method == "POST" and len(parts) == 3 and parts[0] == "services" and parts[2] == "pause":
            return self.pause_service(parts[1])
        if method == "DELETE" and len(parts) == 2 and parts[0] == "apps":
            return self.delete_app(parts[1])
        if method == "GET" and parts in (["catalog", "regions"], ["catalog", "instances"]):
            return 200, self.catalogue.reply(parts[1])
        return error_reply(404, "not_found", f"no route {method} /v1/{'/'.join(parts)}")

    def create_app(self, body: Any) -> tuple[int, Any]:
        app, refused = parse_request(sdk().CreateApp, body)
        if refused:
            return refused
        app_id = f"app-{next(self.ids)}"
        self.apps[app_id] = app.name or app_id
        return 200, {"app": {"id": app_id, "name": self.apps[app_id]}}

    def create_service(self, body: Any) -> tuple[int, Any]:
        service, refused = parse_request(sdk().CreateService, body)
        if refused:
            return refused
        if service.app_id not in self.apps:
            return error_reply(404, "not_found", f"app {service.app_id} not found")
        if self.fail_service_create:
            return error_reply(500, "internal", "scripted failure")
        definition = service.definition.to_dict() if service.definition else {}
        unknown = self.catalogue.problems(definition)
        if unknown:
            return invalid_reply(unknown)
        env = {e["key"]: e.get("value", "") for e in definition.get("env", []) if "key" in e}
        number = next(self.ids)
        instance = Instance(
            app_id=service.app_id,
            service_id=f"svc-{number}",
            deployment_id=f"dep-{number}",
            name=service.name or "",
            definition=definition,
            env=env,
        )
        self.start_container(instance)
        self.instances[instance.service_id] = instance
        return 200, {"service": self.service_view(instance)}

    def start_container(self, instance: Instance) -> None:
        """A fresh container from the image, as the platform starts an instance."""
        instance.container = self.docker.containers.run(
            self.image,
            ["sleep", "3600"],
            detach=True,
            network_mode="none",
            init=True,
            environment=instance.env,
            labels={FAKE_LABEL: instance.app_id},
        )
        self.started.append(instance.container.id)
        self.containers[instance.app_id] = instance.container

    def service_view(self, instance: Instance) -> dict[str, Any]:
        return {
            "id": instance.service_id,
            "app_id": instance.app_id,
            "name": instance.name,
            "latest_deployment_id": instance.deployment_id,
        }

    def list_services(self, query: dict[str, list[str]]) -> tuple[int, Any]:
        """``GET /v1/services``: every sandbox service, filtered by app and name."""
        found = [
            instance
            for instance in self.instances.values()
            if ("app_id" not in query or instance.app_id in query["app_id"])
            and ("name" not in query or instance.name in query["name"])
        ]
        offset = int((query.get("offset") or ["0"])[0])
        limit = int((query.get("limit") or ["100"])[0])
        page = found[offset : offset + limit]
        services = [{**self.service_view(i), "type": "SANDBOX"} for i in page]
        reply = sdk().ListServicesReply.from_dict(
            {
                "services": services,
                "limit": limit,
                "offset": offset,
                "count": len(found),
                "has_next": offset + limit < len(found),
            }
        )
        return 200, reply.to_dict()

    def get_service(self, service_id: str) -> tuple[int, Any]:
        instance = self.instances.get(service_id)
        if instance is None:
            return error_reply(404, "not_found", f"service {service_id} not found")
        return 200, {"service": self.service_view(instance)}

    def next_status(self, instance: Instance) -> str:
        """One more poll: the next pre-ready state, then the final one.

        An instance whose definition carries no SANDBOX_SECRET never starts:
        the executor refuses to run without one (sandbox-container, auth.go).
        """
        if instance.paused:
            return "STOPPED"
        if instance.sleeping:
            return "SLEEPING"
        polls = len(instance.statuses_served)
        if polls < len(self.pre_ready_statuses):
            status = self.pre_ready_statuses[polls]
        else:
            status = self.deployment_status if instance.secret else "ERROR"
        sdk().DeploymentStatus(status)  # only states the platform has
        instance.statuses_served.append(status)
        return status

    def get_deployment(self, deployment_id: str) -> tuple[int, Any]:
        instance = next(
            (i for i in self.instances.values() if i.deployment_id == deployment_id), None
        )
        if instance is None:
            return error_reply(404, "not_found", f"deployment {deployment_id} not found")
        return 200, {
            "deployment": {
                "id": deployment_id,
                "app_id": instance.app_id,
                "service_id": instance.service_id,
                "status": self.next_status(instance),
                "definition": instance.definition,
                "metadata": {
                    "sandbox": {
                        "public_url": f"{self.url}/exec/{instance.app_id}",
                        "routing_key": instance.app_id,
                    }
                },
            }
        }

    def delete_app(self, app_id: str) -> tuple[int, Any]:
        if app_id not in self.apps:
            return error_reply(404, "not_found", f"app {app_id} not found")
        self.remove_app(app_id)
        return 200, {}

    def remove_app(self, app_id: str) -> None:
        """The app, its services and their containers go."""
        del self.apps[app_id]
        for service_id, instance in list(self.instances.items()):
            if instance.app_id == app_id:
                del self.instances[service_id]
        container = self.containers.pop(app_id, None)
        if container is not None:
            container.remove(force=True)

    # --- the executor --------------------------------------------------------

    def execute(
        self, app_id: str, action: str, body: Any, headers: dict[str, str]
    ) -> tuple[int, Any]:
        instance = self.instance_of_app(app_id)
        if instance is None:
            return 404, {"error": "sandbox not found"}
        if instance.sleeping:
            self.wake(instance)
        if instance.paused or not instance.ready:
            return 503, "no healthy upstream"
        if action not in OPEN_EXECUTOR_ACTIONS and (
            headers.get("authorization") != f"Bearer {instance.secret}"
        ):
            return 401, "Unauthorized\n"
        if not isinstance(body, dict) and action != "health":
            return 400, "Invalid request\n"
        if action == "health":
            return 200, {"status": "ok"}
        if action == "run":
            return self.run(instance.container, body)
        if action == "write_file":
            return 200, self.write_file(instance.container, body["path"], body["content"])
        if action == "read_file":
            exit_code, output = instance.container.exec_run(["cat", body["path"]])
            if exit_code != 0:
                return 200, {"error": f"open {body['path']}: no such file or directory"}
            return 200, {"content": output.decode("utf-8", "replace")}
        return 404, "404 page not found\n"

    def run(self, container: Any, body: dict[str, Any]) -> tuple[int, Any]:
        """The executor's run; the container's env (the deployment's) is inherited."""
        cwd = body.get("cwd") or "/"
        _, output = container.exec_run(
            ["python3", "-c", SEQUENTIAL_RUN, body["cmd"], cwd],
            environment=body.get("env") or None,
        )
        answer = json.loads(output)
        if answer.get("error"):
            return 400, answer["error"] + "\n"
        with self.lock:
            fault = self.run_faults.pop(0) if self.run_faults else None
        if fault:
            return fault, {"error": "upstream connect error"}
        if answer["code"] != 0:
            answer["error"] = "Non-zero exit code"
        return 200, answer

    def write_file(self, container: Any, path: str, content: str) -> dict[str, Any]:
        """``os.WriteFile``: no parent directories made, errors in the answer."""
        parent = os.path.dirname(path) or "/"
        if container.exec_run(["test", "-d", parent]).exit_code != 0:
            return {"success": False, "error": f"open {path}: no such file or directory"}
        if container.exec_run(["test", "-d", path]).exit_code == 0:
            return {"success": False, "error": f"open {path}: is a directory"}
        data = content.encode("utf-8")
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:") as tar:
            info = tarfile.TarInfo(os.path.basename(path))
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
        container.put_archive(parent, buffer.getvalue())
        return {"success": True}

    def pause_service(self, service_id: str) -> tuple[int, Any]:
        """Pause a service: its instance stops (disk kept), no traffic reaches it."""
        instance = self.instances.get(service_id)
        if instance is None:
            return error_reply(404, "not_found", f"service {service_id} not found")
        if not instance.paused and instance.container is not None:
            instance.container.stop(timeout=1)
        instance.paused = True
        return 200, {}

    def pause(self, app_id: str) -> None:
        """Pause the app's service behind the client's back (as from the console)."""
        with self.lock:
            instance = self.instance_of_app(app_id)
            assert instance is not None, f"no instance in app {app_id}"
            self.pause_service(instance.service_id)

    def sleep(self, app_id: str, *, deep: bool = False) -> None:
        """Scale the app's instance to zero.

        A light sleep keeps its memory and disk (the container is paused); a
        ``deep`` one stops it, and it wakes as a new instance from the image
        with nothing of the old one's files (an assumption: whether the real
        platform keeps an instance's disk through a deep sleep is not known
        here)."""
        with self.lock:
            instance = self.instance_of_app(app_id)
            assert instance is not None and instance.ready, "only a running instance sleeps"
            if deep:
                self.containers.pop(app_id, None)
                instance.container.remove(force=True)
                instance.container = None
            else:
                instance.container.pause()
            instance.sleeping = True

    def wake(self, instance: Instance) -> None:
        """Traffic reached a sleeping instance: it starts again, then the request goes on."""
        with self.lock:
            if not instance.sleeping:
                return
            time.sleep(self.wake_seconds)
            if instance.container is None:
                self.start_container(instance)
            else:
                instance.container.unpause()
            instance.sleeping = False
            instance.wakes += 1

    def expire(self, app_id: str) -> None:
        """Delete an app behind the client's back, as the platform does at its TTL."""
        with self.lock:
            self.remove_app(app_id)

    def __enter__(self) -> FakeCloud:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        for container in self.containers.values():
            container.remove(force=True)
        self.containers.clear()


def containers_left_by(cloud: FakeCloud, docker_client: Any) -> list[str]:
    """The containers this stand-in started that still exist (others' not counted)."""
    mine = set(cloud.started)
    every = docker_client.containers.list(all=True, filters={"label": FAKE_LABEL})
    return [c.id for c in every if c.id in mine]


def point_sdk_at(monkeypatch: Any, cloud: FakeCloud, token: str | None = None) -> None:
    monkeypatch.setenv("KOYEB_API_HOST", cloud.url)
    monkeypatch.setenv("KOYEB_API_TOKEN", cloud.token if token is None else token)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    os.environ.pop("KOYEB_REGION", None)
