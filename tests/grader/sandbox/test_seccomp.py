"""The allow-list seccomp filter: its program run here by a small classic-BPF interpreter, on
both machines, then loaded by bubblewrap under a real interpreter on this one.

It tests ``grader.sandbox._seccomp``'s private tables on purpose: the filter's program is
checked against its own system call numbers.
"""

from __future__ import annotations

import errno
import json
import os
import platform
import re
import struct
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import pytest

from grader.sandbox import _seccomp, bubblewrap
from grader.sandbox._seccomp import _NUMBERS, ALLOWED, REFUSED_BY_NAME, allow_list_filter
from tests.conftest import require_namespaces

MACHINES = ("x86_64", "aarch64")
COLUMN = {"x86_64": 0, "aarch64": 1}
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
OTHER_ARCHES = (0, 0x40000003, 0x40000028, 0x4000003E)  # none, i386, arm, x86_64 without 64BIT
HEADERS = {
    "x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    "aarch64": Path("/usr/include/asm-generic/unistd.h"),
}

ALLOW, KILL = 0x7FFF0000, 0x80000000
EPERM, ENOSYS = 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
X32 = 0x40000000
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_PACKET, AF_VSOCK = 1, 2, 10, 16, 17, 40
TIOCSTI, TIOCLINUX, TCGETS, TIOCGWINSZ, FIONREAD = 0x5412, 0x541C, 0x5401, 0x5413, 0x541B
SIGCHLD, CLONE_VM, CLONE_VFORK, CLONE_PARENT, CLONE_THREAD = 17, 0x100, 0x4000, 0x8000, 0x10000
CLONE_DETACHED, CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = (
    0x00400000,
    0x00020000,
    0x10000000,
    0x20000000,
    0x40000000,
)
CLONE_CHILD_SETTID, CLONE_CHILD_CLEARTID, CLONE_PIDFD = 0x01000000, 0x00200000, 0x1000
# glibc's pthread_create: CLONE_VM, FS, FILES, SIGHAND, THREAD, SYSVSEM, SETTLS, PARENT_SETTID,
# CHILD_CLEARTID
THREAD_FLAGS = 0x003D0F00
FORK_FLAGS = CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD  # glibc's fork()

# What the issue names: to be refused, and to be allowed.
REQUIRED_REFUSED = frozenset(
    (
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "add_key",
        "request_key",
        "keyctl",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "kcmp",
        "personality",
        "mount",
        "umount2",
        "pivot_root",
        "move_mount",
        "open_tree",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "mount_setattr",
        "unshare",
        "setns",
        "fork",
        "vfork",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "reboot",
        "swapon",
        "swapoff",
        "acct",
        "quotactl",
        "quotactl_fd",
        "lookup_dcookie",
        "open_by_handle_at",
        "name_to_handle_at",
        "iopl",
        "ioperm",
        "settimeofday",
        "clock_settime",
        "clock_adjtime",
        "adjtimex",
        "syslog",
        "vhangup",
        "chroot",
        "pidfd_getfd",
        "nfsservctl",
        "uselib",
        "create_module",
        "get_kernel_syms",
        "query_module",
        "fanotify_init",
        "memfd_secret",
    )
)
REQUIRED_ALLOWED = frozenset(
    (
        "openat",
        "read",
        "write",
        "pread64",
        "pwrite64",
        "readv",
        "writev",
        "lseek",
        "close",
        "close_range",
        "fstat",
        "newfstatat",
        "statx",
        "getdents64",
        "mkdirat",
        "unlinkat",
        "renameat2",
        "fchmod",
        "ftruncate",
        "fallocate",
        "fsync",
        "fdatasync",
        "readlinkat",
        "faccessat",
        "faccessat2",
        "getcwd",
        "chdir",
        "fchdir",
        "dup",
        "dup3",
        "fcntl",
        "flock",
        "pipe2",
        "mmap",
        "munmap",
        "mprotect",
        "mremap",
        "madvise",
        "brk",
        "membarrier",
        "rt_sigaction",
        "rt_sigprocmask",
        "rt_sigreturn",
        "sigaltstack",
        "kill",
        "tgkill",
        "tkill",
        "clock_gettime",
        "clock_getres",
        "clock_nanosleep",
        "nanosleep",
        "gettimeofday",
        "times",
        "futex",
        "futex_waitv",
        "set_robust_list",
        "get_robust_list",
        "set_tid_address",
        "rseq",
        "gettid",
        "sched_yield",
        "sched_getaffinity",
        "prlimit64",
        "getrlimit",
        "setrlimit",
        "poll",
        "ppoll",
        "select",
        "pselect6",
        "epoll_create1",
        "epoll_ctl",
        "epoll_wait",
        "epoll_pwait",
        "epoll_pwait2",
        "eventfd2",
        "timerfd_create",
        "timerfd_settime",
        "timerfd_gettime",
        "getpid",
        "getppid",
        "getuid",
        "geteuid",
        "getgid",
        "getegid",
        "getgroups",
        "getpgid",
        "getpgrp",
        "getsid",
        "getresuid",
        "getresgid",
        "uname",
        "sysinfo",
        "getrandom",
        "getcpu",
        "getrusage",
        "prctl",
        "arch_prctl",
        "wait4",
        "waitid",
        "exit",
        "exit_group",
        "execve",
        "execveat",
        "seccomp",
        "sendmsg",
        "recvmsg",
        "sendto",
        "recvfrom",
        "connect",
        "bind",
        "listen",
        "accept4",
        "getsockname",
        "getpeername",
        "getsockopt",
        "setsockopt",
        "shutdown",
        "statfs",
        "fstatfs",
        "umask",
        "utimensat",
        "sendfile",
        "copy_file_range",
        "splice",
        "tee",
        "open",
        "stat",
        "lstat",
        "access",
        "pipe",
        "dup2",
        "mkdir",
        "rmdir",
        "unlink",
        "rename",
        "readlink",
        "getdents",
        "time",
        "epoll_create",
        "eventfd",
        "alarm",
        "pause",
        "chmod",
        "chown",
        "lchown",
        "utime",
        "utimes",
    )
)
CHECKED = ("clone", "clone3", "ioctl", "socket", "socketpair")  # allowed by their arguments


# -- a classic BPF interpreter, as the kernel runs a seccomp program ---------------------


class Verdict(NamedTuple):
    action: int  # what the program returned
    read: frozenset[int]  # the seccomp_data offsets it loaded on the way
    steps: int  # how many instructions it ran


_JUMPS: dict[int, Callable[[int, int], bool]] = {
    0x15: lambda a, k: a == k,  # BPF_JMP | BPF_JEQ | BPF_K
    0x25: lambda a, k: a > k,  # BPF_JGT
    0x35: lambda a, k: a >= k,  # BPF_JGE
    0x45: lambda a, k: a & k != 0,  # BPF_JSET
}
_LD_W_ABS, _ALU_AND_K, _JA, _RET_K = 0x20, 0x54, 0x05, 0x06
NR_AND_ARCH = frozenset({0, 4})  # the seccomp_data offsets of nr and arch


def instructions(program: bytes) -> list[tuple[int, int, int, int]]:
    assert len(program) % 8 == 0
    return list(struct.iter_unpack("=HBBI", program))


def verdict(program: bytes, nr: int, arch: int, args: Sequence[int] = ()) -> Verdict:
    """Run ``program`` over one ``struct seccomp_data`` (both machines are little-endian)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0x7F0000001000, *args, *[0] * (6 - len(args)))
    code_of = instructions(program)
    acc, pc, read = 0, 0, set()
    for steps in range(1, len(code_of) + 1):  # forward jumps only: each runs at most once
        code, jt, jf, k = code_of[pc]  # an IndexError: it ran off its end
        pc += 1
        if code == _LD_W_ABS:
            assert k % 4 == 0 and k + 4 <= len(data), f"a load at {k}"
            acc = int.from_bytes(data[k : k + 4], "little")
            read.add(k)
        elif code == _RET_K:
            return Verdict(k, frozenset(read), steps)
        elif code == _ALU_AND_K:
            acc &= k
        elif code == _JA:
            pc += k
        elif code in _JUMPS:
            pc += jt if _JUMPS[code](acc, k) else jf
        else:
            raise AssertionError(f"instruction {pc - 1}: opcode {code:#x} is not interpreted here")
    raise AssertionError("more steps than instructions: a jump went backwards")


def number(machine: str, name: str) -> int | None:
    return _NUMBERS[name][COLUMN[machine]]


def _spans(machine: str) -> list[tuple[int, int]]:
    """The allowed numbers as ranges of consecutive ones."""
    spans: list[tuple[int, int]] = []
    for nr in sorted(n for name in ALLOWED if (n := number(machine, name)) is not None):
        if spans and spans[-1][1] == nr - 1:
            spans[-1] = (spans[-1][0], nr)
        else:
            spans.append((nr, nr))
    return spans


def program_for(machine: str) -> bytes:
    program = allow_list_filter(machine)
    assert program is not None
    return program


def action(machine: str, name: str, *args: int) -> int:
    nr = number(machine, name)
    assert nr is not None, f"{name} has no number on {machine}"
    return verdict(program_for(machine), nr, AUDIT_ARCH[machine], args).action


# -- the lists ---------------------------------------------------------------------------


def test_the_lists_hold_what_the_issue_asks_and_never_overlap() -> None:
    assert len(set(ALLOWED)) == len(ALLOWED)
    assert set(ALLOWED) >= REQUIRED_ALLOWED, REQUIRED_ALLOWED - set(ALLOWED)
    assert set(REFUSED_BY_NAME) >= REQUIRED_REFUSED, REQUIRED_REFUSED - set(REFUSED_BY_NAME)
    assert not set(ALLOWED) & set(REFUSED_BY_NAME)
    assert not set(CHECKED) & (set(ALLOWED) | set(REFUSED_BY_NAME))
    for name in (*ALLOWED, *REFUSED_BY_NAME, *CHECKED):  # no typo, no dead entry
        assert _NUMBERS[name] != (None, None), name


def test_only_the_x86_64_group_lacks_an_aarch64_number() -> None:
    missing = {name for name in ALLOWED if number("aarch64", name) is None}
    assert missing == {
        "access",
        "alarm",
        "arch_prctl",
        "chmod",
        "chown",
        "creat",
        "dup2",
        "epoll_create",
        "epoll_wait",
        "eventfd",
        "futimesat",
        "getdents",
        "getpgrp",
        "lchown",
        "link",
        "lstat",
        "mkdir",
        "mknod",
        "open",
        "pause",
        "pipe",
        "poll",
        "readlink",
        "rename",
        "rmdir",
        "select",
        "signalfd",
        "stat",
        "symlink",
        "time",
        "unlink",
        "utime",
        "utimes",
    }
    assert all(number("x86_64", name) is not None for name in ALLOWED)


def _header_numbers(path: Path) -> dict[str, int]:
    """name -> number in a unistd header, ``__NR3264_*`` aliases resolved (every ``#if`` read as
    taken, which holds for the names used on aarch64): how ``_NUMBERS`` was made."""
    pairs: list[tuple[str, str]] = re.findall(
        r"^#define\s+(__NR(?:3264)?_\w+)\s+(\w+)", path.read_text(), re.M
    )
    defined = dict(pairs)
    resolved = {name: defined.get(value, value) for name, value in pairs}
    return {
        name.removeprefix("__NR_"): int(value)
        for name, value in resolved.items()
        if name.startswith("__NR_") and value.isdigit()
    }


@pytest.mark.parametrize("machine", MACHINES)
def test_the_table_matches_the_headers(machine: str) -> None:
    header = HEADERS[machine]
    if not header.is_file():
        pytest.skip(f"{header} is missing (Debian and Ubuntu: linux-libc-dev)")
    found = _header_numbers(header)
    assert found["read"] == (0 if machine == "x86_64" else 63)  # the reader reads
    wrong = {
        name: (pair[COLUMN[machine]], found.get(name))
        for name, pair in _NUMBERS.items()
        if pair[COLUMN[machine]] != found.get(name)
    }
    assert wrong == {}


# -- the program, interpreted ------------------------------------------------------------


def test_a_machine_not_listed_has_no_filter() -> None:
    for machine in ("riscv64", "i686", "armv7l", "aarch64_be", ""):
        assert allow_list_filter(machine) is None


@pytest.mark.parametrize("machine", MACHINES)
def test_the_program_is_well_formed(machine: str) -> None:
    code_of = instructions(program_for(machine))
    assert 0 < len(code_of) <= 4096
    assert code_of[-1][0] == _RET_K
    for at, (code, jt, jf, k) in enumerate(code_of):
        assert code in (_LD_W_ABS, _RET_K, *_JUMPS), f"instruction {at}: {code:#x}"
        if code in _JUMPS:
            assert at + 1 + max(jt, jf) < len(code_of), f"instruction {at} jumps out"
        if code == _LD_W_ABS:
            assert k in (0, 4, 16, 24), f"instruction {at} loads {k}"  # nr, arch, args 0-1
        if code == _RET_K:
            assert k in (ALLOW, EPERM, ENOSYS, KILL)


@pytest.mark.parametrize("machine", MACHINES)
def test_every_allowed_call_is_allowed_without_reading_its_arguments(machine: str) -> None:
    program = program_for(machine)
    for name in ALLOWED:
        nr = number(machine, name)
        if nr is not None:  # reading only nr and arch, it lets the kernel cache "allowed"
            assert verdict(program, nr, AUDIT_ARCH[machine])[:2] == (ALLOW, NR_AND_ARCH), name


@pytest.mark.parametrize("machine", MACHINES)
def test_every_refused_call_gets_eperm(machine: str) -> None:
    refused = [name for name in REFUSED_BY_NAME if number(machine, name) is not None]
    assert len(refused) > 80
    for name in refused:
        assert action(machine, name) == EPERM, name
        assert action(machine, name, 1, 2, 3, 4, 5, 6) == EPERM, name


def _beyond(machine: str, nr: int) -> int:
    """A number no table here lists: x32's are refused, past Linux 6.1's last one is not
    implemented (the C library then falls back), any other is refused."""
    unsigned = nr & 0xFFFFFFFF
    if machine == "x86_64" and unsigned & 0x40000000:
        return EPERM
    return ENOSYS if unsigned > _seccomp._NEWEST else EPERM


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("chunk", [None, 1, 2, 7])
def test_any_number_is_allowed_only_when_listed(
    machine: str, chunk: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every number up to 1023 and a few far ones: the ranges hide no hole and no extra, with
    the ranges in one chunk (as they are) or in many (as a longer list would put them)."""
    if chunk is not None:
        monkeypatch.setattr(_seccomp, "_RANGES_PER_CHUNK", chunk)
    program = program_for(machine)
    allows = sum(code == _RET_K and k == ALLOW for code, _, _, k in instructions(program))
    chunks = allows - 3  # one `ret ALLOW` ends each chunk, and each of 3 special blocks
    assert chunks == -(-len(_spans(machine)) // (chunk or _seccomp._RANGES_PER_CHUNK))
    allowed = {nr for name in ALLOWED if (nr := number(machine, name)) is not None}
    by_number = {number(machine, name): name for name in CHECKED}
    expected = {
        "clone3": ENOSYS,
        "ioctl": ALLOW,
        "socket": EPERM,
        "socketpair": EPERM,
        "clone": EPERM,
    }  # zero arguments: AF_UNSPEC, flags 0, ioctl command 0
    for nr in [*range(1024), 1 << 20, 0x3FFFFFFF, 0x7FFFFFFF, -1]:
        want = (
            expected[by_number[nr]]
            if nr in by_number
            else ALLOW
            if nr in allowed
            else _beyond(machine, nr)
        )
        assert verdict(program, nr, AUDIT_ARCH[machine]).action == want, nr
    assert 1000 not in allowed


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("call", ["socket", "socketpair"])
def test_sockets_are_unix_only(machine: str, call: str) -> None:
    assert action(machine, call, AF_UNIX, 1, 0) == ALLOW
    assert action(machine, call, AF_UNIX, 0x80801, 0) == ALLOW  # SOCK_STREAM|NONBLOCK|CLOEXEC
    for family in (AF_INET, AF_INET6, AF_NETLINK, AF_PACKET, AF_VSOCK, 0, 3, 255, 1 << 31):
        assert action(machine, call, family, 1, 0) == EPERM, family


@pytest.mark.parametrize("machine", MACHINES)
def test_clone_makes_threads_only(machine: str) -> None:
    assert action(machine, "clone", THREAD_FLAGS) == ALLOW
    assert action(machine, "clone", THREAD_FLAGS | CLONE_DETACHED) == ALLOW  # older glibc
    assert action(machine, "clone", THREAD_FLAGS | 0xFFFF << 32) == ALLOW  # ignored by the kernel
    for flags in (
        FORK_FLAGS,
        SIGCHLD,
        0,
        CLONE_VM | CLONE_VFORK | SIGCHLD,
        CLONE_VFORK | CLONE_VM,
        THREAD_FLAGS & ~CLONE_THREAD,
        THREAD_FLAGS | SIGCHLD,
        THREAD_FLAGS | CLONE_NEWUSER,
        THREAD_FLAGS | CLONE_NEWNS,
        THREAD_FLAGS | CLONE_NEWPID,
        THREAD_FLAGS | CLONE_NEWNET,
        THREAD_FLAGS | CLONE_PARENT,
        THREAD_FLAGS | CLONE_VFORK,
        THREAD_FLAGS | CLONE_PIDFD,
        THREAD_FLAGS | 1 << 31,
    ):
        assert action(machine, "clone", flags) == EPERM, hex(flags)


@pytest.mark.parametrize("machine", MACHINES)
def test_a_hosts_program_lets_through_one_fork_the_one_with_its_secret(machine: str) -> None:
    """A host's runs copy themselves at a case's start (a loud-failure probe): a plain fork
    whose parent_tid argument is the host's 64-bit secret. Every other fork, and the same
    fork with any other secret, half of it, or other flags, is refused as without one."""
    cookie = 0x8BADF00D_0123ABCD
    program = allow_list_filter(machine, copy_cookie=cookie)
    assert program is not None
    nr, arch = number(machine, "clone"), AUDIT_ARCH[machine]
    assert nr is not None

    def clone(*args: int) -> int:
        return verdict(program, nr, arch, args).action

    assert clone(SIGCHLD, 0, cookie) == ALLOW
    assert clone(SIGCHLD, 0, cookie, 7, 9) == ALLOW  # the other arguments: the kernel's
    for flags, secret in (
        (SIGCHLD, cookie ^ 1),
        (SIGCHLD, cookie ^ 1 << 63),
        (SIGCHLD, cookie & 0xFFFFFFFF),
        (SIGCHLD, cookie >> 32),
        (SIGCHLD, 0),
        (FORK_FLAGS, cookie),
        (SIGCHLD | CLONE_VM, cookie),
        (SIGCHLD | CLONE_NEWPID, cookie),
        (CLONE_VFORK | CLONE_VM, cookie),
    ):
        assert clone(flags, 0, secret) == EPERM, (hex(flags), hex(secret))
    assert clone(THREAD_FLAGS) == ALLOW  # threads as before
    assert action(machine, "clone", SIGCHLD, 0, cookie) == EPERM  # a program without one


@pytest.mark.parametrize("machine", MACHINES)
def test_clone3_says_enosys_so_glibc_falls_back_to_clone(machine: str) -> None:
    assert action(machine, "clone3") == ENOSYS
    assert action(machine, "clone3", 0x7FFC0000, 88) == ENOSYS


@pytest.mark.parametrize("machine", MACHINES)
def test_ioctl_refuses_only_the_terminal_injectors(machine: str) -> None:
    for request in (TCGETS, TIOCGWINSZ, FIONREAD, 0, TIOCSTI + 1):
        assert action(machine, "ioctl", 0, request, 0) == ALLOW, hex(request)
    for request in (TIOCSTI, TIOCLINUX, TIOCSTI | 1 << 32):  # the kernel reads 32 bits
        assert action(machine, "ioctl", 0, request, 0) == EPERM, hex(request)


@pytest.mark.parametrize("machine", MACHINES)
def test_another_architecture_is_killed(machine: str) -> None:
    program = program_for(machine)
    read = number(machine, "read")
    assert read is not None
    others = [AUDIT_ARCH[m] for m in MACHINES if m != machine]
    for arch in (*others, *OTHER_ARCHES):
        assert verdict(program, read, arch).action == KILL, hex(arch)


def test_x32_numbers_are_refused_on_x86_64() -> None:
    """By the x32 test itself, right after the number is loaded, not for being past every
    range (which would also refuse them, as long as no range reaches that far)."""
    program = program_for("x86_64")
    # load arch, test it, load nr, test the x32 bit, return
    refused_at_once = Verdict(EPERM, NR_AND_ARCH, 5)
    for name in ("read", "write", "openat", "clone3", "socket", "ioctl", "clone"):
        nr = number("x86_64", name)
        assert nr is not None
        assert verdict(program, nr | X32, AUDIT_ARCH["x86_64"], [AF_UNIX]) == refused_at_once
    assert verdict(program, 512 | X32, AUDIT_ARCH["x86_64"]) == refused_at_once  # x32's own


def test_a_jump_out_of_reach_is_an_error_not_a_wrong_program() -> None:
    far: list[_seccomp._Row] = [
        (0x15, 0, "allow", 0),
        *[(_LD_W_ABS, 0, 0, 0)] * 256,
        (_RET_K, ALLOW, 0, 0),
    ]
    with pytest.raises(ValueError, match="instruction 0"):
        _seccomp._assemble(far)
    near = [far[0], *far[2:]]  # 255 to skip: the most a jump can
    assert instructions(_seccomp._assemble(near))[0] == (0x15, 255, 0, 0)
    with pytest.raises(ValueError, match="instruction 0"):
        _seccomp._assemble([(0x15, 0, "kill", 0), (_RET_K, ALLOW, 0, 0)])  # no such ret


# -- live: bubblewrap loads the program, and a real interpreter meets it ------------------

PROBE = r"""
import ctypes, errno, json, os, socket, subprocess, sys

mode, syscalls = sys.argv[1], json.loads(sys.argv[2])
found = {}


def outcome(call):
    try:
        call()
    except OSError as exc:
        return type(exc).__name__
    return "ok"


if mode == "filtered":
    import asyncio, sqlite3, ssl, threading
    import anthropic, httpx, openai

    work = []
    thread = threading.Thread(target=work.append, args=("thread",))
    thread.start()
    thread.join()

    async def main():
        await asyncio.sleep(0.01)
        return "loop"

    work.append(asyncio.run(main()))
    with open("written.txt", "w") as out:
        out.write("file")
    with open("written.txt") as back:
        work.append(back.read())
    db = sqlite3.connect("data.sqlite")
    db.execute("create table t (x)")
    db.execute("insert into t values ('sqlite')")
    db.commit()
    work.append(db.execute("select x from t").fetchone()[0])
    db.close()
    ssl.create_default_context()
    httpx.Client().close()
    openai.OpenAI(api_key="none").close()
    anthropic.Anthropic(api_key="none").close()
    work.append("clients")
    found["work"] = work

kinds = {"AF_UNIX": (socket.AF_UNIX, socket.SOCK_STREAM),
         "AF_INET": (socket.AF_INET, socket.SOCK_STREAM),
         "AF_INET6": (socket.AF_INET6, socket.SOCK_STREAM),
         "AF_NETLINK": (socket.AF_NETLINK, socket.SOCK_RAW),
         "AF_VSOCK": (socket.AF_VSOCK, socket.SOCK_STREAM)}
found["socket"] = {name: outcome(lambda kind=kind: socket.socket(*kind).close())
                   for name, kind in kinds.items()}
found["socketpair"] = {
    name: outcome(lambda family=family: [s.close() for s in socket.socketpair(family)])
    for name, family in (("AF_UNIX", socket.AF_UNIX), ("AF_INET", socket.AF_INET))}


def fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


found["fork"] = outcome(fork)
found["spawn"] = outcome(lambda: subprocess.run(["/bin/true"], check=True))

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def raw(nr, args):
    args = [os.getpid() if arg == "pid" else arg for arg in args]
    ctypes.set_errno(0)
    if libc.syscall(ctypes.c_long(nr), *map(ctypes.c_long, args)) != -1:
        return "ok"
    return errno.errorcode[ctypes.get_errno()]


found["syscalls"] = {name: raw(nr, args) for name, nr, args in syscalls}
print(json.dumps(found))
"""

# Arguments the kernel refuses with another error than EPERM (or, personality's, accepts),
# checked before any permission: so an EPERM can only come from the filter. "pid": its own.
SYSCALL_PROBES: dict[str, list[int | str]] = {
    "ptrace": [7, "pid", 0, 0],  # PTRACE_CONT on itself, not traced: ESRCH
    "process_vm_readv": ["pid", 0, 0, 0, 0, 1],  # flags must be 0: EINVAL
    "process_vm_writev": ["pid", 0, 0, 0, 0, 1],
    "keyctl": [9999],  # no such operation: EOPNOTSUPP
    "add_key": [0, 0, 0, 0, 0],  # type at NULL: EFAULT
    "request_key": [0, 0, 0, 0],
    "bpf": [0, 0, 1 << 20],  # attr larger than a page: E2BIG
    "perf_event_open": [0, 0, -1, -1, 0],  # attr at NULL: EFAULT
    "userfaultfd": [5],  # UFFD_USER_MODE_ONLY and an unknown flag: EINVAL
    "kcmp": ["pid", "pid", 99, 0, 0],  # no such type: EINVAL
    "personality": [0xFFFFFFFF],  # a query: succeeds
    "unshare": [1],  # not a namespace flag: EINVAL
    "setns": [-1, 0],  # EBADF
    "mount": [0, 0, 0, 0, 0],  # target at NULL: EFAULT
    "io_uring_setup": [1, 0],  # params at NULL: EFAULT
    "pidfd_getfd": [-1, 0, 0],  # EBADF
    "memfd_create": [0, 0],  # name at NULL: EFAULT
}


class Live(NamedTuple):
    filtered: dict[str, object]
    control: dict[str, object]  # the same sandbox without the filter


def _sandboxed(bwrap: str, mode: str, program: bytes | None, folder: Path) -> dict[str, object]:
    machine = platform.machine()
    probes = [[name, number(machine, name), args] for name, args in SYSCALL_PROBES.items()]
    # A writable folder of its own, not a tmpfs over /tmp: the interpreter may live there
    # (a checkout cloned into /tmp).
    argv = [
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--bind",
        str(folder),
        str(folder),
        "--chdir",
        str(folder),
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
    ]
    fds: tuple[int, ...] = ()
    if program is not None:
        read_end, write_end = os.pipe()
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(program)
        fds = (read_end,)
        argv += ["--seccomp", str(read_end)]
    try:
        done = subprocess.run(
            [*argv, "--", sys.executable, "-I", "-c", PROBE, mode, json.dumps(probes)],
            pass_fds=fds,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        for fd in fds:
            os.close(fd)
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, object] = json.loads(done.stdout)
    return found


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Live:
    require_namespaces()
    program = allow_list_filter(platform.machine())
    if program is None:
        pytest.skip(f"no filter for this machine ({platform.machine()})")
    bwrap, _ = bubblewrap()
    assert bwrap is not None
    return Live(
        _sandboxed(bwrap, "filtered", program, tmp_path_factory.mktemp("filtered")),
        _sandboxed(bwrap, "control", None, tmp_path_factory.mktemp("control")),
    )


@pytest.mark.slow
def test_python_and_its_packages_work_behind_the_filter(live: Live) -> None:
    assert live.filtered["work"] == ["thread", "loop", "file", "sqlite", "clients"]
    assert live.filtered["socket"] == {
        "AF_UNIX": "ok",
        "AF_INET": "PermissionError",
        "AF_INET6": "PermissionError",
        "AF_NETLINK": "PermissionError",
        "AF_VSOCK": "PermissionError",
    }
    assert live.filtered["socketpair"] == {"AF_UNIX": "ok", "AF_INET": "PermissionError"}


@pytest.mark.slow
def test_no_process_and_no_dangerous_call_behind_the_filter(live: Live) -> None:
    assert live.filtered["fork"] == "PermissionError"
    assert live.filtered["spawn"] == "PermissionError"
    assert live.filtered["syscalls"] == dict.fromkeys(SYSCALL_PROBES, "EPERM")


@pytest.mark.slow
def test_without_the_filter_the_same_calls_get_no_eperm(live: Live) -> None:
    """The control: each refusal above is the filter's, not the sandbox's or the kernel's."""
    assert live.control["fork"] == live.control["spawn"] == "ok"
    sockets = live.control["socket"]
    assert isinstance(sockets, dict) and sockets["AF_UNIX"] == sockets["AF_INET"] == "ok"
    assert "PermissionError" not in sockets.values()
    pairs = live.control["socketpair"]
    assert isinstance(pairs, dict) and pairs["AF_UNIX"] == "ok"
    assert pairs["AF_INET"] not in ("ok", "PermissionError")  # EOPNOTSUPP
    calls = live.control["syscalls"]
    assert isinstance(calls, dict) and set(calls) == set(SYSCALL_PROBES)
    assert calls["personality"] == "ok"
    assert {name: said for name, said in calls.items() if said == "EPERM"} == {}
