"""The helper process that serves one sandbox's commands over one stream.

This file is not imported by the runner: its source is passed to
``python3 -c`` inside the container, once per sandbox, and it then runs every
``execute``, ``read_file`` and ``write_file`` that arrives on its stdin.
Standard library only, Python 3.6+.

Frames, both ways: a 4-byte big-endian header length, the header as JSON, an
8-byte body length, then the body.  Requests run concurrently, one thread
each; every command gets its own process group, timeout, cwd and env, and
its output is kept up to a cap (head and tail), so a command printing 1 GB
costs bounded memory; the totals are reported.
"""

import json
import os
import signal
import stat
import struct
import subprocess
import sys
import threading
import time
from shutil import which

OUT = sys.stdout.buffer
IN = sys.stdin.buffer
WRITE_LOCK = threading.Lock()


def send(header, body=b""):
    data = json.dumps(header).encode("utf-8")
    frame = struct.pack(">I", len(data)) + data + struct.pack(">Q", len(body))
    with WRITE_LOCK:
        OUT.write(frame)
        OUT.write(body)
        OUT.flush()


def read_exact(size):
    buffer = bytearray()
    while len(buffer) < size:
        chunk = IN.read(size - len(buffer))
        if not chunk:
            raise EOFError
        buffer += chunk
    return bytes(buffer)


class Capped:
    """Keeps the first and last ``cap // 2`` bytes of a stream, counts all of it."""

    def __init__(self, cap):
        self.half = max(1, cap // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk):
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    def value(self):
        if self.total <= len(self.head) + len(self.tail):
            return bytes(self.head + self.tail)
        omitted = self.total - len(self.head) - len(self.tail)
        marker = "\n[... {} bytes omitted ...]\n".format(omitted).encode()
        return bytes(self.head) + marker + bytes(self.tail)


def drain(pipe, capped):
    for chunk in iter(lambda: pipe.read1(65536), b""):  # whatever has arrived
        capped.add(chunk)
    pipe.close()


def kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def run_command(request):
    started = time.time()
    timeout = float(request["timeout"])
    cap = int(request.get("cap", 8 << 20))
    cwd = request.get("cwd") or "/"
    if not os.path.isdir(cwd):
        message = "cannot change directory to {}: no such directory\n".format(cwd)
        return (
            {"exit_code": 126, "timed_out": False, "stdout_total": 0, "stderr_total": len(message)},
            b"",
            message.encode(),
        )
    env = dict(os.environ)
    env.update(request.get("env") or {})
    process = subprocess.Popen(
        request["argv"],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    out, err = Capped(cap), Capped(cap)
    readers = [
        threading.Thread(target=drain, args=(process.stdout, out)),
        threading.Thread(target=drain, args=(process.stderr, err)),
    ]
    for reader in readers:
        reader.daemon = True
        reader.start()
    timed_out = False
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(process.pid)
        process.wait()
    for reader in readers:
        reader.join(max(0.0, started + timeout - time.time()))
        if reader.is_alive():  # something it started still holds the pipe open
            timed_out = True
            kill_group(process.pid)
            # A process that left the group (setsid) may hold the pipe for
            # ever: answer with what arrived rather than wait for it.
            reader.join(2.0)
    code = process.returncode
    if timed_out:
        code = 124
    elif code < 0:
        code = 128 - code
    stdout, stderr = out.value(), err.value()
    header = {
        "exit_code": code,
        "timed_out": timed_out,
        "stdout_total": out.total,
        "stderr_total": err.total,
        "stdout_len": len(stdout),
    }
    return header, stdout, stderr


def handle(header, body):
    request_id = header.get("id")
    try:
        op = header["op"]
        if op == "ping":
            # Also what the sandbox needs to know about the image, so starting
            # the helper doubles as the image probe.
            found = {name: bool(which(name)) for name in ("bash", "timeout", "sleep")}
            send({"id": request_id, "ok": True, "pid": os.getpid(), "found": found})
        elif op == "exec":
            result, stdout, stderr = run_command(header)
            result["id"] = request_id
            result["stdout_len"] = len(stdout)
            send(result, stdout + stderr)
        elif op == "read":
            path = header["path"]
            info = os.stat(path)
            if stat.S_ISDIR(info.st_mode):
                raise IsADirectoryError(path)
            if not stat.S_ISREG(info.st_mode):  # a FIFO or a device never ends
                raise OSError("not a regular file: " + path)
            size = info.st_size
            limit = header.get("max_bytes")
            if limit is not None and size > limit:
                send({"id": request_id, "error": "TooLarge", "message": str(size)})
                return
            with open(path, "rb") as handle_:
                data = handle_.read()
            send({"id": request_id, "ok": True}, data)
        elif op == "write":
            path = header["path"]
            parent = os.path.dirname(path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            with open(path, "wb") as handle_:
                handle_.write(body)
            os.chmod(path, 0o644)
            send({"id": request_id, "ok": True})
        else:
            send({"id": request_id, "error": "ValueError", "message": "unknown op " + op})
    except Exception as exc:  # reported to the caller, never fatal for the helper
        send({"id": request_id, "error": type(exc).__name__, "message": str(exc)})


def main():
    while True:
        try:
            size = struct.unpack(">I", read_exact(4))[0]
            header = json.loads(read_exact(size).decode("utf-8"))
            body = read_exact(struct.unpack(">Q", read_exact(8))[0])
        except EOFError:
            return
        worker = threading.Thread(target=handle, args=(header, body))
        worker.daemon = True
        worker.start()


if __name__ == "__main__":  # python3 -c runs it as __main__
    main()
