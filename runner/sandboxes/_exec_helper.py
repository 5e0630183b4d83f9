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

The commands it runs are hostile.  The helper runs as root and starts each
command as the sandbox user the request names (``user``: uid and gid), who
can neither signal nor trace it; it opens every file as that user too
(``open_as``), so a symlink the agent planted cannot make it read or write
what the agent could not.  It still seals itself (``seal``) for ``user:
root`` sandboxes, where commands share its uid, and opens files so that a
FIFO, a device or a symlink swapped in cannot block or mislead it
(``open_regular``).  Everything it sends is still checked by the runner,
which trusts nothing it reads.
"""

import sys

try:
    import array
    import errno
    import json
    import os
    import selectors
    import signal
    import socket
    import stat
    import struct
    import subprocess
    import threading
    import time
    import warnings
    from shutil import which
except ImportError:  # python3-minimal has no json: the shell helper takes over
    sys.exit(3)

OUT = sys.stdout.buffer
IN = sys.stdin.buffer
WRITE_LOCK = threading.Lock()
PR_SET_DUMPABLE = 4
SEALED = False  # set by main(): whether seal() worked, reported by ping
#: Never block (a FIFO with nobody at the other end), never follow a symlink
#: swapped in after the path was resolved, never leak the descriptor into a
#: command.
OPEN_FLAGS = os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


def seal():
    """Make this process non-dumpable; True if that worked.

    A command running as the helper's user (root, usually) could otherwise
    open /proc/<helper>/fd/0 and fd/1 to read requests (ids, other commands'
    env) and write answers in the helper's place, read its memory, or ptrace
    it.  The kernel allows all of these on a non-dumpable process only with
    CAP_SYS_PTRACE, which Docker does not grant by default.  Commands are not
    affected: exec makes them dumpable again.  Without ctypes, a change of
    effective gid does the same: the kernel then resets the flag to
    fs.suid_dumpable (0 or 2 both mean not dumpable by the user).  If neither
    works, the runner's checks of every answer stand alone.
    """
    try:
        import ctypes

        if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0:
            return True
    except Exception:  # a Python without ctypes (built without libffi)
        pass
    try:
        with open("/proc/sys/fs/suid_dumpable") as handle_:
            if handle_.read().strip() == "1":
                return False
        gid = os.getegid()
        os.setegid(65534 if gid != 65534 else 0)  # needs CAP_SETGID (root)
        os.setegid(gid)
        return True
    except Exception:
        return False


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


def read_until(deadline, pipes):
    """Read ``pipes`` ([(pipe, Capped)]) to their end or until ``deadline``;
    True if they all ended."""
    selector = selectors.DefaultSelector()
    for pipe, capped in pipes:
        if not pipe.closed:
            selector.register(pipe, selectors.EVENT_READ, capped)
    try:
        while selector.get_map():
            left = deadline - time.time()
            if left <= 0:
                return False
            for key, _events in selector.select(left):
                chunk = os.read(key.fd, 65536)
                if chunk:
                    key.data.add(chunk)
                else:
                    selector.unregister(key.fileobj)
                    key.fileobj.close()
        return True
    finally:
        selector.close()


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
    prefix, switch = as_user(request.get("user"))
    process = subprocess.Popen(
        prefix + list(request["argv"]),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        **switch,
    )
    out, err = Capped(cap), Capped(cap)
    deadline = started + timeout
    # Both pipes read in this thread, as output arrives: no thread per pipe.
    timed_out = not read_until(deadline, [(process.stdout, out), (process.stderr, err)])
    if timed_out:  # it, or something it started, still holds a pipe open
        kill_group(process.pid)
        # A process that left the group (setsid) may hold the pipe for
        # ever: answer with what arrives in a short while.
        read_until(time.time() + 2.0, [(process.stdout, out), (process.stderr, err)])
    try:
        process.wait(timeout=max(0.0, deadline - time.time()))
    except subprocess.TimeoutExpired:  # it closed its output but runs on
        timed_out = True
        kill_group(process.pid)
        process.wait()
    for pipe in (process.stdout, process.stderr):
        pipe.close()
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


def as_user(user):
    """(argv prefix, Popen arguments) that start a command as ``user`` ([uid,
    gid]), with no supplementary groups; nothing for ``None`` (the helper's
    own user).

    Python 3.9+ switches in the forked child before exec, in C; older ones
    through ``preexec_fn``.  (Through setpriv instead, Python could vfork:
    measured, the exec of setpriv costs what the fork saves.)
    """
    if user is None:
        return [], {}
    uid, gid = int(user[0]), int(user[1])
    if sys.version_info >= (3, 9):
        return [], {"user": uid, "group": gid, "extra_groups": []}
    return [], {"preexec_fn": lambda: become(uid, gid)}


def become(uid, gid):
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def open_as(user, path, flags, make_parents=False):
    """``open_regular`` with the rights of ``user`` ([uid, gid]; None: the helper's).

    The open happens in a child forked for it, which drops to the user and
    hands the descriptor back over a socket (SCM_RIGHTS): what the agent could
    not open itself, the helper does not open for it, whatever links it
    planted, and the reading and writing then happen here.
    """
    if user is None:
        if make_parents:
            make_parent_dirs(path)
        return open_regular(path, flags)
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the child: one thread, so setuid here affects nobody else
        code = 0
        try:
            ours.close()
            become(int(user[0]), int(user[1]))
            if make_parents:
                make_parent_dirs(path)
            fd = open_regular(path, flags)
            fds = array.array("i", [fd])
            theirs.sendmsg([b"{}"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        except BaseException as exc:
            code = 1
            try:
                number = exc.errno if isinstance(exc, OSError) and exc.errno else errno.EIO
                message = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                theirs.sendall(json.dumps([number, message]).encode("utf-8"))
            except BaseException:
                pass
        os._exit(code)
    theirs.close()
    try:
        data, ancillary, _flags, _address = ours.recvmsg(65536, socket.CMSG_SPACE(4))
    finally:
        ours.close()
        os.waitpid(pid, 0)
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS and len(payload) >= 4:
            return array.array("i", payload[:4])[0]
    try:
        number, message = json.loads(data.decode("utf-8"))
    except ValueError:
        number, message = errno.EIO, "the file could not be opened"
    raise OSError(number, message, path)


def make_parent_dirs(path):
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)


def open_regular(path, flags):
    """Open ``path`` and return the descriptor, if (and only if) it is a regular file.

    Checked with fstat on the open descriptor, not with stat before opening:
    a command can swap the file for a FIFO in between, and a blocking open
    of a FIFO waits for ever for the other end.  O_NONBLOCK makes that open
    return at once, so the check sees what was really opened, and nothing is
    read, written or truncated before it passed.

    Symbolic links are followed, as ``cat`` follows them on the per-command
    path (``open_as`` makes that the user's rights, not root's), by resolving
    the path first; the open itself then follows none, so a link swapped in after
    the resolution is an error, not a detour.
    """
    resolved = os.path.realpath(path)
    try:
        fd = os.open(resolved, flags | OPEN_FLAGS, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "a symbolic link appeared while opening") from None
        if exc.errno == errno.ENXIO:  # opened for writing: a FIFO nobody reads
            raise OSError(errno.EINVAL, "not a regular file") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise OSError(errno.EISDIR, "Is a directory")
        raise OSError(errno.EINVAL, "not a regular file")  # a FIFO, a device, a socket
    return fd


def send_file_piece(request_id, user, path, offset, limit):
    """Answer a read: up to ``limit`` bytes of the file from ``offset``, and its
    size when opened.  The bytes go from the file to the stream by
    ``sendfile``, never through Python; a file that shrank meanwhile is
    padded with zeros to the length announced (its bytes are the agent's to
    choose anyway)."""
    fd = open_as(user, path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        length = max(0, min(limit, size - offset))
        data = json.dumps({"id": request_id, "ok": True, "size": size}).encode("utf-8")
        frame = struct.pack(">I", len(data)) + data + struct.pack(">Q", length)
        with WRITE_LOCK:
            OUT.write(frame)
            OUT.flush()
            sent = 0
            while sent < length:
                try:
                    count = os.sendfile(OUT.fileno(), fd, offset + sent, length - sent)
                except OSError:
                    count = 0
                if count == 0:  # the file shrank (or cannot be sent): pad
                    OUT.write(b"\0" * (length - sent))
                    OUT.flush()
                    break
                sent += count
    finally:
        os.close(fd)


def write_file(user, path, offset, data):
    """Write ``data`` at ``offset``; at offset 0 the file is created (0644 less
    the umask) or emptied first, keeping the mode of one that exists."""
    fd = open_as(user, path, os.O_WRONLY | (os.O_CREAT if offset == 0 else 0), True)
    with os.fdopen(fd, "wb") as handle_:
        if offset == 0:
            os.ftruncate(fd, 0)  # only now that it is known to be a regular file
        handle_.seek(offset)
        handle_.write(data)


def handle(header, body):
    request_id = header.get("id")
    try:
        op = header["op"]
        if op == "ping":
            # Also what the sandbox needs to know about the image, so starting
            # the helper doubles as the image probe.
            found = {name: bool(which(name)) for name in ("bash", "timeout", "sleep")}
            send(
                {
                    "id": request_id,
                    "ok": True,
                    "pid": os.getpid(),
                    "found": found,
                    "sealed": SEALED,
                    "can_drop": True,
                }
            )
        elif op == "exec":
            result, stdout, stderr = run_command(header)
            result["id"] = request_id
            result["stdout_len"] = len(stdout)
            send(result, stdout + stderr)
        elif op == "read":
            user, offset, limit = header.get("user"), header["offset"], header["max_bytes"]
            send_file_piece(request_id, user, header["path"], offset, limit)
        elif op == "write":
            write_file(header.get("user"), header["path"], header["offset"], body)
            send({"id": request_id, "ok": True})
        else:
            send({"id": request_id, "error": "ValueError", "message": "unknown op " + op})
    except Exception as exc:  # reported to the caller, never fatal for the helper
        message = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        send({"id": request_id, "error": type(exc).__name__, "message": message})


def main():
    global SEALED
    SEALED = seal()
    OUT.write(b"python\n")  # which helper answers: the runner reads this first
    OUT.flush()
    # Python 3.12+ warns about fork() in a threaded process; open_as's child
    # only switches user, opens and sends a descriptor, then _exit()s.
    warnings.simplefilter("ignore", DeprecationWarning)
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
