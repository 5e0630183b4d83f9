"""What travels over the exec channel: requests to the shell helper, and the
checks every answer passes before the runner uses it.

The Python helper reads JSON frames (``python_request``); the
shell helper reads text a shell can read with builtins (``shell_request``).
Both answer in the same frames (``take_head``), checked field by field
against the request they answer (``check_answer``): an answer may be
forged by the agent, so nothing in it is used unchecked.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

#: The longest single argument or environment entry Linux passes to a
#: program (MAX_ARG_STRLEN, 32 pages of 4 KiB, with its NUL).
MAX_ARG_BYTES = 131072 - 1
#: A string of more lines than this goes to the shell helper as a byte count
#: and raw bytes, not line by line (joining lines in sh is quadratic).
MAX_STRING_LINES = 64


def python_request(header: dict[str, Any], request_id: int, body_size: int) -> bytes:
    """A request to the Python helper: its JSON header, then its body's size
    (the body follows as it is)."""
    data = json.dumps({**header, "id": request_id}).encode("utf-8")
    return struct.pack(">I", len(data)) + data + struct.pack(">Q", body_size)


def shell_strings(header: dict[str, Any]) -> tuple[bytes, dict[str, str] | None]:
    """The strings of a request, encoded for the shell helper, or the error
    the Python helper would answer for them (its Popen refuses the same)."""
    strings: list[str] = []
    if header["op"] == "exec":
        shell, flag, command = header["argv"]
        assert flag == "-c"
        strings = [header.get("cwd") or "/", shell, command]
        strings += [f"{key}={value}" for key, value in (header.get("env") or {}).items()]
    elif header["op"] in ("read", "write"):
        strings = [header["path"]]
    parts = []
    for text in strings:
        if "\0" in text:
            return b"", {"error": "ValueError", "message": "embedded null byte"}
        try:
            data = text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError as exc:
            return b"", {"error": "UnicodeEncodeError", "message": str(exc)[:200]}
        if len(data) > MAX_ARG_BYTES and header["op"] == "exec":
            return b"", {"error": "OSError", "message": "Argument list too long"}
        lines = data.count(b"\n") + 1
        if lines > MAX_STRING_LINES:
            parts.append(b"b%d\n%s" % (len(data), data))
        else:
            parts.append(b"%d\n%s\n" % (lines, data))
    return b"".join(parts), None


def shell_request(header: dict[str, Any], request_id: int, body_size: int, strings: bytes) -> bytes:
    """A request as the shell helper reads it (see ``helpers/exec_helper.sh``):
    ``OP ID USER A B N`` and the N strings ``shell_strings`` encoded."""
    op, user = header["op"], header.get("user")
    if op == "exec" and header.get("stream"):
        op = "stream"  # an exec that sends its output as it comes, too
    who = "-" if user is None else f"{int(user[0])}:{int(user[1])}"
    count = a = b = 0
    if op in ("exec", "stream"):
        count = 3 + len(header.get("env") or {})
        a = int(header.get("cap", 8 << 20))
        # Whole seconds: the helper's own deadline once the runner is gone.
        b = math.ceil(float(header.get("timeout") or 0))
    elif op == "read":
        count, a, b = 1, int(header["offset"]), int(header["max_bytes"])
    elif op == "write":
        count, a, b = 1, int(header["offset"]), body_size
    return f"{op} {request_id} {who} {a} {b} {count}\n".encode() + strings


#: No honest answer header comes near this size.
MAX_HEADER_BYTES = 64 << 10


def take_head(buffer: bytearray, *, max_body: int) -> tuple[Any, int] | None:
    """Remove and return a frame's header and its body's size from ``buffer``,
    once they are complete (the body is read after it, as it arrives).

    Sizes are checked as soon as they are known, before anything is buffered
    for them: oversized frames raise ValueError, which ends the channel.
    """
    if len(buffer) < 4:
        return None
    header_size = struct.unpack(">I", buffer[:4])[0]
    if header_size > MAX_HEADER_BYTES:
        raise ValueError(f"an answer header of {header_size} bytes")
    body_at = 4 + header_size + 8
    if len(buffer) < body_at:
        return None
    body_size = struct.unpack(">Q", buffer[4 + header_size : body_at])[0]
    if body_size > max_body:
        raise ValueError(f"an answer body of {body_size} bytes")
    try:
        header = json.loads(bytes(buffer[4 : 4 + header_size]).decode("utf-8"))
    except RecursionError as exc:  # JSON nested thousands deep
        raise ValueError("an answer header nested too deep") from exc
    del buffer[:body_at]
    return header, body_size


#: The fields of each kind of answer, with their exact types (``bool`` is an
#: ``int`` subclass, so types are compared exactly, not with isinstance).
ANSWER_FIELDS: dict[str, dict[str, type]] = {
    "ping": {"id": int, "ok": bool, "pid": int, "found": dict, "sealed": bool, "can_drop": bool},
    "exec": {
        "id": int,
        "exit_code": int,
        "timed_out": bool,
        "stdout_total": int,
        "stdout_len": int,
        "stderr_total": int,
    },
    "read": {"id": int, "ok": bool, "size": int},
    "write": {"id": int, "ok": bool},
}
#: An exec that asked for it (``"stream": true``) gets its output as it
#: comes, in output frames before its answer: ``output`` is "stdout" or
#: "stderr", the body is the chunk; ``gap`` says bytes before this chunk
#: were not sent (the shell helper drops what the runner is too slow to
#: take: see ``relay`` there).  The answer still carries the whole output.
OUTPUT_FIELDS: dict[str, type] = {"id": int, "output": str, "gap": bool}
#: The most an output frame carries (one read of a pipe, or the shell
#: helper's gathered pieces).
MAX_CHUNK_BYTES = 65536
#: Any op may fail instead (the helper's exception).
ERROR_FIELDS: dict[str, type] = {"id": int, "error": str, "message": str}
#: What the helper prints in a stream's cut output besides the kept bytes
#: ("[... N bytes omitted ...]").
CUT_MARKER_BYTES = 64


def check_answer(request: dict[str, Any], header: dict[str, Any], body_size: int) -> None:
    """Raise ValueError unless ``header`` and a body of ``body_size`` bytes
    are an answer the helper could have sent to ``request``: nothing missing,
    nothing extra, every type exact, every length possible.  Checked before
    the body is read; callers then use the fields without further checks."""
    op = request["op"]
    failed = "error" in header
    fields = ERROR_FIELDS if failed else ANSWER_FIELDS[op]
    if header.keys() != fields.keys():
        raise ValueError(f"{op} answer with fields {sorted(header)}, not {sorted(fields)}")
    for name, kind in fields.items():
        if type(header[name]) is not kind:
            raise ValueError(f"{op} answer with {name} of type {type(header[name]).__name__}")
    if header.get("ok") is False:
        raise ValueError(f"{op} answer with ok false")
    if failed or op in ("ping", "write"):
        if body_size:
            raise ValueError(f"{op} answer with a body")
    elif op == "exec":
        _check_exec(header, body_size)
    elif body_size > request["max_bytes"] or not 0 <= header["size"] < 1 << 63:
        raise ValueError(f"read answer of {body_size} bytes (asked {request['max_bytes']})")
    if op == "ping" and not failed:
        found = header["found"]
        flags = all(type(value) is bool for value in found.values())
        if found.keys() != {"bash", "timeout", "sleep"} or not flags:
            raise ValueError("ping answer with other found flags")


def check_output(request: dict[str, Any], header: dict[str, Any], body_size: int) -> None:
    """Raise ValueError unless ``header`` and a body of ``body_size`` bytes
    are an output frame the helper could send for ``request``: an exec that
    asked for its output as it comes, a stream's name, a chunk of 1 to
    ``MAX_CHUNK_BYTES`` bytes."""
    if request["op"] != "exec" or request.get("stream") is not True:
        raise ValueError(f"an output frame for a {request['op']} that did not ask for one")
    if header.keys() != OUTPUT_FIELDS.keys():
        raise ValueError(f"output frame with fields {sorted(header)}")
    for name, kind in OUTPUT_FIELDS.items():
        if type(header[name]) is not kind:
            raise ValueError(f"output frame with {name} of type {type(header[name]).__name__}")
    if header["output"] not in ("stdout", "stderr"):
        raise ValueError(f"output frame for a stream {header['output'][:20]!r}")
    if not 0 < body_size <= MAX_CHUNK_BYTES:
        raise ValueError(f"output frame of {body_size} bytes")


def _check_exec(header: dict[str, Any], body_size: int) -> None:
    """An exec answer's numbers must be ones a real command could give."""
    code, stdout_len = header["exit_code"], header["stdout_len"]
    if not 0 <= code <= 255 or (header["timed_out"] and code != 124):
        raise ValueError(f"exit code {code} (timed out: {header['timed_out']})")
    if not 0 <= stdout_len <= body_size:
        raise ValueError(f"stdout of {stdout_len} bytes in a body of {body_size}")
    for name, kept in (("stdout", stdout_len), ("stderr", body_size - stdout_len)):
        total = header[f"{name}_total"]
        # All of it was kept, or it was cut: then at most the cut marker more.
        cut = min(kept, total) > 0 and kept <= total + CUT_MARKER_BYTES
        if not (kept == total or cut) or total >= 1 << 63:
            raise ValueError(f"{name} of {kept} bytes kept out of {total}")
