"""A local stand-in for the cloud sandbox service that koyeb-sdk talks to.

It implements, over real HTTP on 127.0.0.1, the subset of the control-plane
API (apps, services, deployments) and of the sandbox executor API (health,
run, write_file, read_file) that the SDK uses, and records every request.
Behind it, each "cloud sandbox" is a real Docker container from the test
image with no network, so commands really run and files really persist.
Only the cloud is simulated: the SDK, its HTTP clients and our backend are
the real code.  Knobs let a test make the platform fail at each step.

Where the real service is less forgiving than a naive fake, the stand-in
follows the real one: the executor's ``run`` reads a command's stdout to the
end before its stderr (a command filling the stderr pipe blocks), answers 400
for a ``cwd`` that does not exist, and the control plane answers 404 (its
``Error`` shape) for an app that is already gone.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAKE_LABEL = "sandbox-runner-test.fake-cloud"

#: Runs in the instance: the executor's way of running a command, pipes read
#: one after the other (stdout to its end, then stderr).
SEQUENTIAL_RUN = """
import json, os, subprocess, sys
command, cwd = sys.argv[1], sys.argv[2]
if not os.path.isdir(cwd):
    print(json.dumps({"error": "chdir " + cwd + ": no such file or directory"}))
    sys.exit()
process = subprocess.Popen(["sh", "-c", command], cwd=cwd, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
stdout = process.stdout.read()
stderr = process.stderr.read()
code = process.wait()
print(json.dumps({"stdout": stdout.decode("utf-8", "replace"),
                  "stderr": stderr.decode("utf-8", "replace"), "code": code}))
"""


class FakeCloud:
    def __init__(self, docker_client: Any, image: str) -> None:
        self.docker = docker_client
        self.image = image
        self.requests: list[dict[str, Any]] = []
        self.containers: dict[str, Any] = {}  # app id -> container
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        # Failure knobs
        self.deployment_status = "HEALTHY"  # e.g. "ERROR", or "STARTING" forever
        self.fail_service_create = False
        #: Statuses the next run calls answer *after* running the command, as a
        #: gateway that loses the executor's answer would (e.g. [502]).
        self.run_faults: list[int] = []
        cloud = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _body(self) -> Any:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                return json.loads(raw) if raw else None

            def _reply(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self) -> None:
                body = self._body()
                path = self.path.split("?")[0]
                with cloud.lock:
                    cloud.requests.append(
                        {
                            "method": self.command,
                            "path": path,
                            "headers": {k.lower(): v for k, v in self.headers.items()},
                            "body": body,
                        }
                    )
                status, payload = cloud.route(self.command, path, body, self.server)
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

    # --- the API -------------------------------------------------------------

    def route(self, method: str, path: str, body: Any, server: Any) -> tuple[int, Any]:
        parts = path.strip("/").split("/")
        if method == "POST" and path == "/v1/apps":
            app_id = f"app-{next(self.ids)}"
            return 200, {"app": {"id": app_id, "name": body["name"]}}
        if method == "POST" and path == "/v1/services":
            if self.fail_service_create:
                return 500, {"error": "scripted failure", "code": "internal"}
            app_id = body["app_id"]
            container = self.docker.containers.run(
                self.image,
                ["sleep", "3600"],
                detach=True,
                network_mode="none",
                init=True,
                labels={FAKE_LABEL: app_id},
            )
            self.containers[app_id] = container
            return 200, {
                "service": {
                    "id": f"svc-{app_id}",
                    "app_id": app_id,
                    "name": body["name"],
                    "latest_deployment_id": f"dep-{app_id}",
                }
            }
        if method == "GET" and len(parts) == 3 and parts[:2] == ["v1", "services"]:
            app_id = parts[2].removeprefix("svc-")
            return 200, {
                "service": {
                    "id": parts[2],
                    "app_id": app_id,
                    "name": "x",
                    "latest_deployment_id": f"dep-{app_id}",
                }
            }
        if method == "GET" and len(parts) == 3 and parts[:2] == ["v1", "deployments"]:
            app_id = parts[2].removeprefix("dep-")
            return 200, {
                "deployment": {
                    "id": parts[2],
                    "status": self.deployment_status,
                    "metadata": {
                        "sandbox": {
                            "public_url": f"{self.url}/exec/{app_id}",
                            "routing_key": app_id,
                        }
                    },
                }
            }
        if method == "DELETE" and len(parts) == 3 and parts[:2] == ["v1", "apps"]:
            container = self.containers.pop(parts[2], None)
            if container is None:
                return 404, {"status": 404, "code": "not_found", "message": "Not Found"}
            container.remove(force=True)
            return 200, {}
        if parts[:1] == ["exec"] and len(parts) >= 4:
            return self.execute(parts[1], parts[3], body or {})
        return 404, {"error": f"no route {method} {path}"}

    def execute(self, app_id: str, action: str, body: dict[str, Any]) -> tuple[int, Any]:
        container = self.containers.get(app_id)
        if container is None:
            return 404, {"error": "sandbox not found"}
        if action == "health":
            return 200, {"status": "ok"}
        if action == "run":
            cwd = body.get("cwd") or "/"
            _, output = container.exec_run(
                ["python3", "-c", SEQUENTIAL_RUN, body["cmd"], cwd],
                environment=body.get("env") or None,
            )
            answer = json.loads(output)
            if answer.get("error"):
                return 400, {"error": answer["error"]}
            with self.lock:
                fault = self.run_faults.pop(0) if self.run_faults else None
            if fault:
                return fault, {"error": "upstream connect error"}
            return 200, answer
        if action == "write_file":
            data = body["content"].encode("utf-8")
            buffer = io.BytesIO()
            with tarfile.open(fileobj=buffer, mode="w:") as tar:
                info = tarfile.TarInfo(body["path"].lstrip("/"))
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            container.put_archive("/", buffer.getvalue())
            return 200, {"success": True}
        if action == "read_file":
            exit_code, output = container.exec_run(["cat", body["path"]])
            if exit_code != 0:
                return 200, {"error": f"open {body['path']}: no such file or directory"}
            return 200, {"content": output.decode("utf-8", "replace")}
        return 404, {"error": f"no executor action {action}"}

    def expire(self, app_id: str) -> None:
        """Delete an app behind the client's back, as the platform does at its TTL."""
        container = self.containers.pop(app_id)
        container.remove(force=True)

    def __enter__(self) -> FakeCloud:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        for container in self.containers.values():
            container.remove(force=True)
        self.containers.clear()


def leftover_cloud_containers(docker_client: Any) -> list[str]:
    return [c.id for c in docker_client.containers.list(all=True, filters={"label": FAKE_LABEL})]


def point_sdk_at(monkeypatch: Any, cloud: FakeCloud, token: str = "koyeb-test-token") -> None:
    monkeypatch.setenv("KOYEB_API_HOST", cloud.url)
    monkeypatch.setenv("KOYEB_API_TOKEN", token)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    os.environ.pop("KOYEB_REGION", None)
