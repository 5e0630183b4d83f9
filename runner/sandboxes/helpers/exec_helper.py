"""The helper process that serves one sandbox's commands over one stream.

This file is not imported by the runner: its source is passed to
``python3 -c`` inside the container, once per sandbox, and it then runs every
``execute``, ``read_file`` and ``write_file`` that arrives on its stdin.
Standard library only, Python 3.6+; it runs on ``python3-minimal`` too
(no ``json``, ``shutil`` or ``ctypes``: see ``mini_dumps`` and ``seal``).

Frames, both ways: a 4-byte big-endian header length, the header as JSON, an
8-byte body length, then the body.  Requests run concurrently, a thread
each (threads are reused: ``Relay``); every command gets its own process
group, timeout, cwd and env, and its output is kept up to a cap (head and
tail), so a command printing 1 GB costs bounded memory; the totals are
reported.

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
    import os
    import re
    import select
    import selectors
    import signal
    import socket
    import stat
    import struct
    import subprocess
    import threading
    import time
    import warnings
except ImportError:  # a standard library too incomplete: the shell helper takes over
    sys.exit(3)
try:
    from json import dumps, loads
except ImportError:  # python3-minimal has no json: a small codec of our own below
    dumps = loads = None  # type: ignore[assignment]  # replaced by mini_dumps/mini_loads below

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
    data = dumps(header).encode("utf-8")
    frame = struct.pack(">I", len(data)) + data + struct.pack(">Q", len(body))
    with WRITE_LOCK:
        OUT.write(frame)
        OUT.write(body)
        OUT.flush()


def read_exact(size):
    """``size`` bytes of the request stream, read straight into one buffer
    (a file's piece is 16 MiB: no chunks joined, no copy made)."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        count = IN.readinto(view[got:])
        if not count:
            raise EOFError
        got += count
    return buffer


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


def read_until(deadline, pipes, on_chunk=None):
    """Read ``pipes`` ([(pipe, Capped)]) to their end or until ``deadline``;
    True if they all ended.  ``on_chunk(capped, chunk)``: each piece as it
    is read (a streamed exec: see ``chunk_sender``)."""
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
                chunk = os.read(key.fd, CHUNK_BYTES)
                if chunk:
                    key.data.add(chunk)
                    if on_chunk is not None:
                        on_chunk(key.data, chunk)
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


def run_command(request, on_output=None):
    """Run one ``exec`` request: (answer header, stdout, stderr).
    ``on_output(stream, chunk)``: its output as it comes (``stream``:
    "stdout" or "stderr"), for a request that asked (``"stream": true``)."""
    spawner = spawner_for(request.get("user"))
    if spawner is not None:
        try:
            return spawner.run(request, on_output)
        except SpawnerGone:  # the request never reached it: start the command here
            pass
    return run_here(request, on_output)


def run_here(request, on_output=None):
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
    # The sandbox user's command inherits oom_score_adj 1000 from this
    # process, raised for the moment it starts (a vfork: nothing runs in the
    # child before exec), under a lock so no other command starts meanwhile.
    sandbox_user = request.get("user") is not None or os.getuid() != 0
    with OOM_SCORE_LOCK:
        if sandbox_user:
            set_oom_score(USER_OOM_SCORE_ADJ)
        try:
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
        finally:
            if sandbox_user:
                set_oom_score(b"0")
    out, err = Capped(cap), Capped(cap)
    deadline = started + timeout
    on_chunk = None
    if on_output is not None:

        def on_chunk(capped, chunk):
            on_output("stdout" if capped is out else "stderr", chunk)

    # Both pipes read in this thread, as output arrives: no thread per pipe.
    pipes = [(process.stdout, out), (process.stderr, err)]
    timed_out = not read_until(deadline, pipes, on_chunk)
    if timed_out:  # it, or something it started, still holds a pipe open
        kill_group(process.pid)
        # A process that left the group (setsid) may hold the pipe for
        # ever: answer with what arrives in a short while.
        read_until(time.time() + 2.0, pipes, on_chunk)
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


class SpawnerGone(Exception):
    """The spawner was gone before it took the request: nothing ran."""


#: One spawner per sandbox user ((uid, gid) -> Spawner, or False where one
#: could not start: then that user's commands are forked here, as before).
SPAWNERS = {}  # type: dict[tuple[int, int], Spawner | bool]
SPAWNERS_LOCK = threading.Lock()
#: How long past a command's timeout the spawner's answer may take (its
#: own grace for output held open is 2 s) before the helper gives up on it.
SPAWNER_GRACE_SECONDS = 4.0
#: What a spawner sends first, once it has read a request and before it
#: starts anything: the helper then knows whether the command may have run.
TAKEN = b"T"
#: The largest answer header a spawner may send (a body is bounded by the cap).
SPAWNER_MAX_HEADER = 1 << 16


def spawner_for(user):
    """The running spawner for ``user`` ([uid, gid]), started on first use;
    None for the helper's own user, root, or where no spawner can run."""
    if user is None or not hasattr(os, "setresuid") or not hasattr(socket, "SOCK_SEQPACKET"):
        return None
    key = (int(user[0]), int(user[1]))
    if key[0] == 0:
        return None
    with SPAWNERS_LOCK:
        spawner = SPAWNERS.get(key)
        if spawner is False:
            return None
        if spawner is not None and spawner.alive():
            return spawner
        if spawner is not None:
            spawner.stop()
        spawner = Spawner.start(*key)
        SPAWNERS[key] = spawner if spawner is not None else False
        return spawner


class Spawner:
    """A child of the helper that became one sandbox user, and starts that
    user's commands.

    Starting a command as another user makes Python fork the whole helper
    (it can vfork only a child that keeps the parent's user), and the
    command's exec then tears the copy down: about 0.9 ms a command on a
    small VM, a third of a round trip.  The spawner switched user once, so
    it starts each command with vfork.  It runs ``run_here`` for every
    request that reaches it over a socket pair, and answers there.

    It is as far out of the agent's reach as the helper: not dumpable (the
    change of user reset the flag, and ``seal`` sets it again), so the
    agent, with the same uid, can neither trace it, read its memory nor
    open its descriptors.  The agent can signal it, as it can signal its own
    commands: a stopped or killed spawner costs only the command in flight
    (answered as an error once its timeout and ``SPAWNER_GRACE_SECONDS``
    have passed); the helper then kills it and starts a new one.  One
    killed before it took a command (it says ``TAKEN`` first) costs
    nothing: the helper starts that command itself.
    """

    def __init__(self, pid, control):
        self.pid = pid  # None once reaped: never signal a number that may be reused
        self.control = control

    @classmethod
    def start(cls, uid, gid):
        """Fork a spawner and wait for it to say it is ready; None if it fails."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:  # the child: only this thread runs here
            try:
                ours.close()
                spawner_main(uid, gid, theirs)
            finally:
                os._exit(0)
        theirs.close()
        spawner = cls(pid, ours)
        try:
            ready = select_recv(ours, time.time() + 10.0, 16)
        except OSError:
            ready = b""
        if ready != b"ready":
            spawner.stop()
            return None
        return spawner

    def alive(self):
        if self.pid is not None and os.waitpid(self.pid, os.WNOHANG) != (0, 0):
            self.pid = None
        return self.pid is not None

    def stop(self):
        """Kill and reap it (it is the helper's child); idempotent."""
        self.control.close()
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            os.waitpid(self.pid, 0)
            self.pid = None

    def run(self, request, on_output=None):
        """Hand ``request`` to the spawner and wait for its answer (passing
        its output chunks, if streamed, to ``on_output``)."""
        ours, theirs = socket.socketpair()
        try:
            fds = array.array("i", [theirs.fileno()])
            # Never blocks: a spawner stopped with its queue full did not take
            # it (BlockingIOError), and the command starts here instead.
            self.control.sendmsg(
                [b"r"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)], socket.MSG_DONTWAIT
            )
        except OSError:
            ours.close()
            raise SpawnerGone() from None
        finally:
            theirs.close()
        try:
            header, stdout, stderr = self._exchange(ours, request, on_output)
        except SpawnerGone:
            with SPAWNERS_LOCK:
                self.stop()
            raise
        except (EOFError, OSError, ValueError, KeyError, TypeError) as exc:
            # Stopped, killed or broken: it may have run part of the command.
            with SPAWNERS_LOCK:
                self.stop()
            raise OSError(
                errno.EIO,
                "the process that starts the sandbox user's commands stopped answering "
                "({}); the command may or may not have run".format(type(exc).__name__),
            ) from None
        finally:
            ours.close()
        if "error" in header:  # the command could not start (no such shell, ...)
            raise OSError(header.get("errno") or errno.EIO, header["message"])
        return header, stdout, stderr

    @staticmethod
    def _exchange(conn, request, on_output):
        data = dumps(request).encode("utf-8")
        deadline = time.time() + float(request["timeout"]) + SPAWNER_GRACE_SECONDS
        # A request bigger than the socket's buffer (a long command or env)
        # waits for a stopped spawner only until the deadline (socket.timeout).
        conn.settimeout(max(0.01, deadline - time.time()))
        conn.sendall(struct.pack(">I", len(data)) + data)
        conn.settimeout(None)
        try:
            taken = recv_exact(conn, len(TAKEN), deadline)
        except (EOFError, ConnectionResetError):
            # Gone before it took the request (killed with it queued: the
            # sweep of the agent's processes after a turn kills the spawner
            # too, and a command may reach it as it dies): nothing ran.
            raise SpawnerGone() from None
        if taken != TAKEN:
            raise ValueError("no answer to a request")
        while True:
            size = struct.unpack(">I", recv_exact(conn, 4, deadline))[0]
            if size > SPAWNER_MAX_HEADER:
                raise ValueError("an answer header of {} bytes".format(size))
            header = loads(recv_exact(conn, size, deadline).decode("utf-8"))
            if "output" not in header:
                break
            # A chunk of a streamed command's output, before its answer.
            stream, length = header["output"], header["size"]
            if stream not in ("stdout", "stderr") or not 0 < length <= CHUNK_BYTES:
                raise ValueError("an output chunk of {} bytes".format(length))
            chunk = recv_exact(conn, length, deadline)
            if on_output is None:
                raise ValueError("an output chunk nobody asked for")
            on_output(stream, chunk)
        if "error" in header:
            return header, b"", b""
        size, stdout_len = header.pop("size"), header.pop("stdout_len")
        limit = max(1, int(request.get("cap", 8 << 20)) // 2) * 4 + 200
        if not 0 <= stdout_len <= size <= limit:
            raise ValueError("an answer body of {} bytes".format(size))
        body = recv_exact(conn, size, deadline)
        return header, body[:stdout_len], body[stdout_len:]


def spawner_main(uid, gid, control):
    """The spawner's life: drop everything of the helper's, become the user,
    then start commands until the helper goes away."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)  # the channel is the helper's alone
    os.dup2(null, 1)
    for name in os.listdir("/proc/self/fd"):
        if int(name) > 2 and int(name) != control.fileno():
            try:
                os.close(int(name))
            except OSError:  # the listing's own descriptor, already closed
                pass
    global OOM_SCORE_FD
    try:  # opened as root: once sealed, its /proc/self is root's (set_oom_score)
        OOM_SCORE_FD = os.open("/proc/self/oom_score_adj", os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        pass
    os.setsid()
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if not seal() and not reset_by_the_change_of_user():
        return  # the agent could trace it: the helper forks commands itself
    control.send(b"ready")

    def take():
        try:
            message, ancillary, _flags, _address = control.recvmsg(1, socket.CMSG_SPACE(4))
        except OSError:
            message = b""
        if not message:  # the helper is gone, and with it any use for the spawner
            raise EOFError
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS and len(payload) >= 4:
                return array.array("i", payload[:4])[0]
        return None

    Relay(take, lambda fd: fd is None or spawn_one(fd)).serve()


class Relay:
    """Threads that each take the next request themselves (one at a time)
    and then run it; one about to run a request first starts another if
    none would be left taking.  A request thus goes straight to the thread
    that runs it, with no hand-over and, once two threads take turns, no
    thread started per request.  ``take`` blocks for the next request and
    raises EOFError at the end of the stream: then the process exits once
    the requests in flight have ended.  The end of the stream is the runner
    gone (a server killed mid-step): each command in flight still ends at
    its own deadline, its process group killed by ``run_here`` (the
    in-sandbox watchdog), instead of running on unwatched until a restart
    finds it.  No answer reaches anyone; none is needed."""

    def __init__(self, take, run):
        self.take = take
        self.run = run
        self.lock = threading.Lock()
        self.taking = threading.Lock()
        self.waiting = 0
        self.running = 0

    def finish(self):
        """The stream ended: exit once no request is in flight."""
        while True:
            with self.lock:
                if self.running == 0:
                    os._exit(0)
            time.sleep(0.05)

    def serve(self):
        while True:
            with self.lock:
                self.waiting += 1
            try:
                with self.taking:
                    request = self.take()
                    with self.lock:  # in flight before another taker can see the end
                        self.running += 1
            except EOFError:
                self.finish()
            except Exception as exc:  # a request that cannot be read: the stream is lost
                sys.stderr.write("unreadable request: {!r}\n".format(exc))
                sys.stderr.flush()
                os._exit(1)
            with self.lock:
                self.waiting -= 1
                alone = self.waiting == 0
            if alone:
                waiter = threading.Thread(target=self.serve)
                waiter.daemon = True
                waiter.start()
            try:
                self.run(request)
            finally:
                with self.lock:
                    self.running -= 1


def reset_by_the_change_of_user():
    """Whether the kernel made this process non-dumpable when it changed
    user: it sets the flag to fs.suid_dumpable then, and 0 or 2 both mean
    not dumpable by the user.  (Without ctypes, ``seal`` cannot do it here:
    its other way needs root.)"""
    try:
        with open("/proc/sys/fs/suid_dumpable") as handle_:
            return handle_.read().strip() in ("0", "2")
    except OSError:
        return False


def spawn_one(fd):
    """In the spawner: read one request from ``fd``, run it, answer there."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fd)
    try:
        with conn:
            deadline = time.time() + 30.0
            size = struct.unpack(">I", recv_exact(conn, 4, deadline))[0]
            request = loads(recv_exact(conn, size, deadline).decode("utf-8"))
            request["user"] = None  # it already is that user
            # Taken, before anything runs: an end before this proves the
            # command never started, and the helper starts it itself.
            conn.sendall(TAKEN)

            def on_output(stream, chunk):
                data = dumps({"output": stream, "size": len(chunk)}).encode("utf-8")
                conn.sendall(struct.pack(">I", len(data)) + data + chunk)

            try:
                header, stdout, stderr = run_here(
                    request, on_output if request.get("stream") else None
                )
                header["stdout_len"], header["size"] = len(stdout), len(stdout) + len(stderr)
                body = stdout + stderr
            except Exception as exc:
                number = exc.errno if isinstance(exc, OSError) else None
                message = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                header, body = (
                    {"error": type(exc).__name__, "errno": number, "message": message},
                    b"",
                )
            data = dumps(header).encode("utf-8")
            conn.sendall(struct.pack(">I", len(data)) + data + body)
    except Exception:  # the helper gave up on it: nobody to answer
        pass


def recv_exact(conn, size, deadline):
    data = bytearray()
    while len(data) < size:
        chunk = select_recv(conn, deadline, min(size - len(data), 1 << 20))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)


def select_recv(conn, deadline, size):
    """``conn.recv(size)`` that gives up at ``deadline`` (socket.timeout)."""
    left = deadline - time.time()
    if left <= 0 or not select.select([conn], [], [], left)[0]:
        raise socket.timeout("timed out")
    return conn.recv(size)


#: The sandbox user's processes start with this oom_score_adj: the kernel's
#: out-of-memory killer takes them before root's helper, the TTL clock and
#: docker-init (all at 0).  Raising needs no capability; the user can lower
#: it again, but not below 0 (that would need CAP_SYS_RESOURCE).
USER_OOM_SCORE_ADJ = b"1000"
OOM_SCORE_LOCK = threading.Lock()
#: The spawner's own /proc/self/oom_score_adj, opened before it became the
#: sandbox user: not dumpable, its /proc files are root's from then on.
OOM_SCORE_FD = None


def set_oom_score(value):
    """This process's oom_score_adj (bytes); best effort.  Lowering it
    again is allowed down to 0 (without CAP_SYS_RESOURCE)."""
    try:
        if OOM_SCORE_FD is not None:
            os.write(OOM_SCORE_FD, value)
            return
        fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.write(fd, value)
    except OSError:
        pass
    finally:
        os.close(fd)


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
    set_oom_score(USER_OOM_SCORE_ADJ)
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


#: How long a child of the sandbox user's may take to open a file for the
#: helper, unless the request says (``deadline``): the agent can stop it.
OPEN_SECONDS = 60.0


def open_as(user, path, flags, make_parents=False, seconds=OPEN_SECONDS):
    """``open_regular`` with the rights of ``user`` ([uid, gid]; None: the helper's).

    The open happens in a child forked for it, which drops to the user and
    hands the descriptor back over a socket (SCM_RIGHTS): what the agent could
    not open itself, the helper does not open for it, whatever links it
    planted, and the reading and writing then happen here.

    The child is the agent's to stop (same uid: ``kill -STOP -1``), so it
    gets ``seconds`` to answer; then it is killed and the open fails with
    ``TimeoutError``.  It is killed in any case before it is reaped: one
    stopped after it answered must not hold the wait for its exit either.
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
                theirs.sendall(dumps([number, message]).encode("utf-8"))
            except BaseException:
                pass
        os._exit(code)
    theirs.close()
    try:
        if not select.select([ours], [], [], seconds)[0]:
            raise TimeoutError(
                errno.ETIMEDOUT,
                "the sandbox user's process did not open the file within {:g} s (it was "
                "stopped?); the move was stopped".format(seconds),
            )
        data, ancillary, _flags, _address = ours.recvmsg(65536, socket.CMSG_SPACE(4))
    finally:
        ours.close()
        try:
            os.kill(pid, signal.SIGKILL)  # not reaped yet: the pid is still the child's
        except OSError:
            pass
        os.waitpid(pid, 0)
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS and len(payload) >= 4:
            return array.array("i", payload[:4])[0]
    try:
        number, message = loads(data.decode("utf-8"))
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


def send_file_piece(request_id, user, path, offset, limit, seconds=OPEN_SECONDS):
    """Answer a read: up to ``limit`` bytes of the file from ``offset``, and its
    size when opened.  The bytes go from the file to the stream by
    ``sendfile``, never through Python; a file that shrank meanwhile is
    padded with zeros to the length announced (its bytes are the agent's to
    choose anyway)."""
    fd = open_as(user, path, os.O_RDONLY, seconds=seconds)
    try:
        size = os.fstat(fd).st_size
        length = max(0, min(limit, size - offset))
        data = dumps({"id": request_id, "ok": True, "size": size}).encode("utf-8")
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


def write_file(user, path, offset, data, seconds=OPEN_SECONDS):
    """Write ``data`` at ``offset``; at offset 0 the file is created (0644 less
    the umask) or emptied first, keeping the mode of one that exists."""
    flags = os.O_WRONLY | (os.O_CREAT if offset == 0 else 0)
    fd = open_as(user, path, flags, True, seconds)
    with os.fdopen(fd, "wb") as handle_:
        if offset == 0:
            os.ftruncate(fd, 0)  # only now that it is known to be a regular file
        handle_.seek(offset)
        handle_.write(data)


#: The most bytes one output chunk frame carries (one read of a pipe).
CHUNK_BYTES = 65536


def chunk_sender(request_id, request):
    """For an exec that asked for its output as it comes (``"stream":
    true``, sent when the runner shows progress): a function sending each
    chunk in an output frame (``{"id": ID, "output": "stdout", "gap":
    false}``, the chunk as its body) before the answer.  The answer is unchanged: it
    still carries the whole (capped) output, so a runner that streams gets
    exactly the result of one that does not.  None for any other request."""
    if request.get("stream") is not True:
        return None

    def on_output(stream, chunk):
        # gap: never (the shell helper's relay may drop a piece: see there)
        send({"id": request_id, "output": stream, "gap": False}, chunk)

    return on_output


def handle(header, body):
    request_id = header.get("id")
    try:
        op = header["op"]
        if op == "ping":
            # Also what the sandbox needs to know about the image, so starting
            # the helper doubles as the image probe.
            found = {name: found_on_path(name) for name in ("bash", "timeout", "sleep")}
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
            result, stdout, stderr = run_command(header, chunk_sender(request_id, header))
            result["id"] = request_id
            result["stdout_len"] = len(stdout)
            send(result, stdout + stderr)
        elif op == "read":
            user, offset, limit = header.get("user"), header["offset"], header["max_bytes"]
            seconds = float(header.get("deadline") or OPEN_SECONDS)
            send_file_piece(request_id, user, header["path"], offset, limit, seconds)
        elif op == "write":
            seconds = float(header.get("deadline") or OPEN_SECONDS)
            write_file(header.get("user"), header["path"], header["offset"], body, seconds)
            send({"id": request_id, "ok": True})
        else:
            send({"id": request_id, "error": "ValueError", "message": "unknown op " + op})
    except Exception as exc:  # reported to the caller, never fatal for the helper
        message = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        send({"id": request_id, "error": type(exc).__name__, "message": message})


#: F_SETPIPE_SZ (Linux): how much a pipe holds.
F_SETPIPE_SZ = 1031
#: What the helper asks its stdout pipe to hold (64 KiB by default).  Not
#: more: without CAP_SYS_RESOURCE, every root process on the host without a
#: user namespace shares one budget of pipe pages (``pipe-user-pages-soft``,
#: 64 MiB), and once it is spent the kernel gives *new* pipes of such
#: processes, in any container, 2 pages; at 256 KiB a helper, ~250 helpers
#: fit in it.
PIPE_BYTES = 256 << 10


def widen_stdout():
    """Let the pipe from the helper to the container's shim hold 256 KiB: a
    file's piece then crosses it in fewer wake-ups of the helper, the shim
    and dockerd (reads of 100 MB took ~0.85x the time; 1 MiB, ~0.7x, is
    more than the shared budget above should give).  Writes did not gain:
    stdin is left alone.  Where it cannot (no fcntl, not a pipe, the budget
    spent), the pipe stays as it is."""
    try:
        import fcntl
    except ImportError:
        return
    try:
        fcntl.fcntl(1, F_SETPIPE_SZ, PIPE_BYTES)
    except OSError:
        pass


def main():
    global SEALED
    if sys.argv[1:2] == [""]:  # LC_CTYPE was unset: Python's locale coercion set it
        os.environ.pop("LC_CTYPE", None)
    widen_stdout()
    SEALED = seal()
    OUT.write(b"python\n")  # which helper answers: the runner reads this first
    OUT.flush()
    # Python 3.12+ warns about fork() in a threaded process; open_as's child
    # only switches user, opens and sends a descriptor, then _exit()s.
    warnings.simplefilter("ignore", DeprecationWarning)
    Relay(read_request, lambda request: handle(*request)).serve()


def read_request():
    size = struct.unpack(">I", read_exact(4))[0]
    header = loads(read_exact(size).decode("utf-8"))
    return header, read_exact(struct.unpack(">Q", read_exact(8))[0])


# --- JSON for a Python without the json module (python3-minimal) ------------
#
# Requests come from the runner alone (json.dumps, ASCII only) and answers
# go to it, so these need only the JSON the two exchange, but they are
# strict: anything else is a ValueError, as json.loads would raise.

_TOKEN = re.compile(
    r'[ \t\n\r]*(?:([\[\]{}:,])|"((?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*)"'
    r"|(-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?)|(true|false|null))"
)
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|(.))")
_SIMPLE = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_SHORT = {value: "\\" + key for key, value in _SIMPLE.items()}  # as json.dumps escapes
_UNSAFE = re.compile(r"[^ !#-\[\]-~]")  # all but printable ASCII, '"' and '\\'


def mini_loads(text):
    """``json.loads`` for the JSON the runner sends."""
    tokens = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            if text[position:].strip(" \t\n\r"):
                raise ValueError("not JSON at {}".format(position))
            break
        tokens.append(match)
        position = match.end()
    value, index = _parse(tokens, 0)
    if index != len(tokens):
        raise ValueError("extra data")
    return value


def _parse(tokens, index):
    if index >= len(tokens):
        raise ValueError("unexpected end")
    token = tokens[index]
    punctuation, string, number, fraction, exponent, word = token.groups()
    if string is not None:
        return _unescape(string), index + 1
    if number is not None:
        return (float(number) if fraction or exponent else int(number)), index + 1
    if word is not None:
        return {"true": True, "false": False, "null": None}[word], index + 1
    if punctuation == "[":
        items, index = [], index + 1
        if index < len(tokens) and tokens[index].group(1) == "]":
            return items, index + 1
        while True:
            item, index = _parse(tokens, index)
            items.append(item)
            punctuation, index = _expect(tokens, index, ",]")
            if punctuation == "]":
                return items, index
    if punctuation == "{":
        members, index = {}, index + 1
        if index < len(tokens) and tokens[index].group(1) == "}":
            return members, index + 1
        while True:
            if index >= len(tokens) or tokens[index].group(2) is None:
                raise ValueError("a key must be a string")
            key = _unescape(tokens[index].group(2))
            _, index = _expect(tokens, index + 1, ":")
            members[key], index = _parse(tokens, index)
            punctuation, index = _expect(tokens, index, ",}")
            if punctuation == "}":
                return members, index
    raise ValueError("unexpected {!r}".format(token.group().strip()))


def _expect(tokens, index, allowed):
    """(the punctuation at ``index``, the next index); ValueError unless it is in ``allowed``."""
    punctuation = tokens[index].group(1) if index < len(tokens) else None
    if not punctuation or punctuation not in allowed:
        raise ValueError("expected one of {!r}".format(allowed))
    return punctuation, index + 1


def _unescape(string):
    def replace(match):
        code, simple = match.groups()
        if code is not None:
            return chr(int(code, 16))
        return _SIMPLE.get(simple, simple)

    text = _ESCAPE.sub(replace, string)
    # \ud83d\ude00 is one character: join surrogate pairs as json.loads does
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")


def mini_dumps(value):
    """``json.dumps`` (ASCII only) for the answers the helper sends."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return '"' + _UNSAFE.sub(_escape, value) + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(mini_dumps(item) for item in value) + "]"
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(
                mini_dumps(str(key)) + ": " + mini_dumps(item) for key, item in value.items()
            )
            + "}"
        )
    raise TypeError("cannot encode {}".format(type(value).__name__))


def _escape(match):
    character = match.group()
    if character in '"\\':
        return "\\" + character
    if character in _SHORT:
        return _SHORT[character]
    code = ord(character)
    if code > 0xFFFF:  # as a surrogate pair, as json.dumps writes it
        code -= 0x10000
        return "\\u{:04x}\\u{:04x}".format(0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF))
    return "\\u{:04x}".format(code)


if dumps is None:
    dumps, loads = mini_dumps, mini_loads


def found_on_path(name):
    """Whether ``name`` is an executable file in a ``PATH`` directory
    (``shutil.which``, which python3-minimal lacks)."""
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(directory or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return True
    return False


if __name__ == "__main__":  # python3 -c runs it as __main__
    main()
