"""No request, however malformed, and no shortage of descriptors stops
``runner serve`` (issue 28, item 1; on uvicorn since the ASGI move).

Before: one unauthenticated ``HEAD`` request ended the server (a body was
written for it: h11 raised, and one connection's error ended the task group
of all of them, failing the sessions in flight), and 1,100 half-open
connections under ``ulimit -n 1024`` ended it on ``accept`` (EMFILE).
Real server process, real sockets.
"""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

from agent_files import agent_yaml
from serve_process import Server, wait_for


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


def raw(server: Server, payload: bytes, *, read: bool = True) -> bytes:
    """Send ``payload`` on a new connection; what came back before it closed.

    A server that closes a connection with bytes of it unread (a request
    line too long to read on) makes the kernel reset it: the client then
    gets ``ECONNRESET`` (or ``EPIPE``, still sending), on a loaded machine
    before the answer.  That is the
    connection's end too, not the server's.
    """
    address = urlsplit(server.url)
    answer = b""
    with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
        try:
            sock.sendall(payload)
            if not read:
                return b""
            sock.shutdown(socket.SHUT_WR)
            while chunk := sock.recv(65536):
                answer += chunk
        except (ConnectionResetError, BrokenPipeError):
            pass
        return answer


def serving(server: Server) -> bool:
    with server.client() as client:
        return client.get("/v1/sessions").status_code == 200


#: Requests a scanner or a broken client sends, each on its own connection.
MALFORMED = [
    b"HEAD /v1/sessions HTTP/1.1\r\nHost: x\r\n\r\n",
    b"HEAD /nowhere HTTP/1.1\r\nHost: x\r\n\r\n",
    b"HEAD /v1/sessions HTTP/1.0\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"\r\n\r\n",
    b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 2000 + b"\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS hello
    b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
]


def test_no_malformed_request_stops_the_server(tmp_path: Path) -> None:
    with Server([agent_file(tmp_path)], tmp_path) as server:
        head = raw(server, MALFORMED[0])
        status_line, _, rest = head.partition(b"\r\n")
        assert status_line.startswith(b"HTTP/1.1 401 "), head  # uvicorn adds a reason phrase
        assert rest.endswith(b"\r\n\r\n"), "a HEAD answer carries no body"
        # and the connection goes on: a GET after it gets its own answer, body and all
        both = raw(server, MALFORMED[0] + b"GET /v1/sessions HTTP/1.1\r\nHost: x\r\n\r\n")
        assert both.count(b"HTTP/1.1 401 ") == 2, both
        assert both.endswith(b"}\n"), both
        for payload in MALFORMED[1:]:
            raw(server, payload)
            assert server.process.poll() is None, server.stderr()
        assert serving(server), server.stderr()
        with server.client() as client:  # an authenticated HEAD: GET's head, no body
            answer = client.head("/v1/sessions")
            assert answer.status_code == 200 and answer.content == b""
            assert int(answer.headers["content-length"]) > 0


def test_running_out_of_descriptors_pauses_accepting_and_recovers(tmp_path: Path) -> None:
    """Under RLIMIT_NOFILE 64, 120 half-open connections take every
    descriptor; once they go, the server answers again."""
    with Server([agent_file(tmp_path)], tmp_path, max_open_files=64) as server:
        address = urlsplit(server.url)
        flood = []
        try:
            for _ in range(120):
                flood.append(socket.create_connection((address.hostname, address.port)))
            wait_for(
                lambda: "cannot accept a connection" in server.stderr(),
                what="the server to run out of descriptors",
            )
            assert server.process.poll() is None, server.stderr()
        finally:
            for sock in flood:
                sock.close()
        assert wait_for(lambda: serving(server), what="the server to answer again")
        assert server.process.poll() is None


def test_http_details_a_client_expects(tmp_path: Path) -> None:
    """405 says what is allowed (Allow); the bearer scheme's case is free;
    Expect: 100-continue gets its 100 before the body is sent."""
    from serve_process import TOKEN

    with Server([agent_file(tmp_path)], tmp_path) as server:
        with server.client() as client:
            wrong = client.put("/v1/sessions")
            assert wrong.status_code == 405
            assert wrong.headers["allow"] == "GET, POST, HEAD"
        with server.client(token=None) as client:
            lower = client.get("/v1/sessions", headers={"authorization": f"bearer {TOKEN}"})
            assert lower.status_code == 200
            assert (
                client.get("/v1/sessions", headers={"authorization": f"Basic {TOKEN}"}).status_code
                == 401
            )
        address = urlsplit(server.url)
        body = b'{"agent": "plain"}'
        head = (
            b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + TOKEN.encode()
            + b"\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n"
            + b"Content-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
        )
        with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
            sock.sendall(head)
            assert sock.recv(65536).startswith(b"HTTP/1.1 100 ")  # before any body
            sock.sendall(body)
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += sock.recv(65536)
            assert answer.startswith(b"HTTP/1.1 201 "), answer
