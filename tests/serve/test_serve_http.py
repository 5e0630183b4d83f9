"""The HTTP options ``runner serve`` passes to uvicorn: ``--limit-concurrency``,
``--root-path``, TLS.  Real server process, real sockets."""

from __future__ import annotations

import socket
import ssl
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from agent_files import agent_yaml
from serve_process import TOKEN, Server


def agent_file(tmp_path: Path) -> Path:
    return agent_yaml(
        tmp_path,
        "agent.yaml",
        """\
            version: 1
            agent:
              name: plain
              model: local-model
              environment: {sandbox: local}
            """,
    )


def test_connections_beyond_limit_concurrency_get_503_until_they_go(tmp_path: Path) -> None:
    server = Server([agent_file(tmp_path)], tmp_path, args=["--limit-concurrency", "3"])
    with server:
        address = urlsplit(server.url)
        idle = [socket.create_connection((address.hostname, address.port)) for _ in range(3)]
        try:
            with server.client() as client:
                refused = client.get("/v1/sessions")
            assert refused.status_code == 503
        finally:
            for sock in idle:
                sock.close()
        with server.client() as client:

            def answered() -> bool:
                return client.get("/v1/sessions").status_code == 200

            from serve_process import wait_for

            wait_for(answered, what="the connections to be counted out")
        assert server.process.poll() is None


def test_root_path_strips_the_prefix_a_proxy_serves_under(tmp_path: Path) -> None:
    server = Server([agent_file(tmp_path)], tmp_path, args=["--root-path", "/runner/"])
    with server, server.client() as client:
        # The proxy strips /runner before forwarding: the routes are unchanged.
        assert client.get("/v1/sessions").json() == {"sessions": []}
        missing = client.get("/v2/nothing")
        assert missing.status_code == 404
        assert missing.json()["message"] == "no route /v2/nothing"


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def test_tls_with_a_certificate_and_key(tmp_path: Path, certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    args = ["--ssl-certfile", str(cert), "--ssl-keyfile", str(key)]
    with Server([agent_file(tmp_path)], tmp_path, args=args) as server:
        assert server.url.startswith("https://")
        headers = {"Authorization": f"Bearer {TOKEN}"}
        trusted = ssl.create_default_context(cafile=str(cert))
        with httpx.Client(base_url=server.url, headers=headers, verify=trusted) as client:
            assert client.get("/v1/sessions").status_code == 200
        with pytest.raises(httpx.HTTPError):  # plain HTTP on the TLS port
            httpx.get(server.url.replace("https", "http") + "/v1/sessions", timeout=10)
        assert server.process.poll() is None


def test_a_key_that_is_not_the_certificates_stops_the_start(
    tmp_path: Path, certificate: tuple[Path, Path]
) -> None:
    cert, _ = certificate
    args = ["--ssl-certfile", str(cert), "--ssl-keyfile", str(cert)]
    server = Server([agent_file(tmp_path)], tmp_path, args=args)
    with pytest.raises(AssertionError, match="exited 2"):
        server.start()
    assert f"cannot use --ssl-certfile {cert} with --ssl-keyfile {cert}" in server.stderr()


def test_an_event_stream_open_at_sigterm_ends_cleanly(tmp_path: Path) -> None:
    """A stopping server ends its event streams at an event's end (the client
    reconnects with Last-Event-ID), rather than cutting them off."""
    import threading

    from serve_process import wait_status

    server = Server([agent_file(tmp_path)], tmp_path)
    server.start()
    ended: list[str] = []
    try:
        with server.client() as client:
            session_id = client.post("/v1/sessions", json={"agent": "plain"}).json()["id"]
            wait_status(client, session_id, "waiting")

            opened = threading.Event()

            def follow() -> None:
                try:
                    with client.stream("GET", f"/v1/sessions/{session_id}/events") as response:
                        for _ in response.iter_lines():
                            opened.set()
                    ended.append("cleanly")
                except httpx.HTTPError as exc:
                    ended.append(type(exc).__name__)

            following = threading.Thread(target=follow)
            following.start()
            assert opened.wait(timeout=30)
            assert server.terminate() == 0
            following.join(timeout=30)
    finally:
        server.stop()
    assert ended == ["cleanly"]
    assert "Traceback" not in server.stderr(), server.stderr()


def test_a_client_that_sends_half_a_head_is_cut_off_at_head_timeout(tmp_path: Path) -> None:
    """The head deadline (``--head-timeout``; 30 s by default), which uvicorn
    lacks: a slow client cannot hold a connection for ever."""
    server = Server([agent_file(tmp_path)], tmp_path, args=["--head-timeout", "1"])
    with server:
        address = urlsplit(server.url)
        with socket.create_connection((address.hostname, address.port)) as slow:
            slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # no blank line: more to come
            slow.settimeout(60)  # a bound for a broken server only: the deadline is 1 s
            assert slow.recv(1024) == b""  # closed, unanswered
        assert "closed a connection: its head took over 1 s" in server.stderr()
        with server.client() as client:
            assert client.get("/healthz").status_code == 200  # the server serves on


@pytest.mark.parametrize(
    ("allowed", "client_address"),
    [("127.0.0.1", "203.0.113.9"), ("10.9.9.9", "127.0.0.1")],
    ids=["from-an-allowed-proxy", "from-another-peer"],
)
def test_x_forwarded_for_is_believed_only_from_forwarded_allow_ips(
    tmp_path: Path, allowed: str, client_address: str
) -> None:
    """The request log names the client: the address X-Forwarded-For gives
    when the peer (here 127.0.0.1) is an allowed proxy, else the peer."""
    server = Server([agent_file(tmp_path)], tmp_path, args=["--forwarded-allow-ips", allowed])
    with server, server.client() as client:
        forwarded = {"X-Forwarded-For": "203.0.113.9"}
        assert client.get("/v1/sessions", headers=forwarded).status_code == 200
    assert f" {client_address} GET /v1/sessions 200 " in server.stderr()
