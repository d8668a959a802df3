"""An allow-list seccomp filter (classic BPF) for a sandboxed child, on x86_64 and aarch64.

``allow_list_filter(machine)`` is the program bubblewrap loads (``--seccomp FD``) just before it
runs the child: every system call the child makes afterwards goes through it. It allows the
calls in ``ALLOWED``, which CPython, its standard library, httpx and the official SDKs need,
and refuses everything else with EPERM (CPython raises PermissionError: no dead child, no
mystery); only a call from another architecture kills the process.
``REFUSED_BY_NAME`` are the dangerous calls it must refuse, for documentation and tests. What
the filter holds, beside the other walls: docs/sandbox.md.

The program's shape, in order (each special call's block ends in returns, so a call either
skips a block or meets its verdict there):

1. the architecture (``seccomp_data.arch``) is this machine's, or the process is killed: a
   call through another ABI (x86's ``int 0x80``) would mean other numbers;
2. x86_64 only: a number with the x32 bit set is refused (x32's calls are another table);
3. ``clone3`` answers ENOSYS, so the C library falls back to ``clone``, whose flags a
   classic filter can read (clone3's are behind a pointer);
4. ``socket`` and ``socketpair`` are allowed for AF_UNIX only (no network, no netlink, no
   packet or vsock sockets, whatever the namespaces allow);
5. ``clone`` is allowed for threads only (the flags glibc's pthread_create passes), so no new
   process can be made (``fork`` and ``vfork`` are not in ``ALLOWED``); a host's program
   lets one more through, a plain fork that carries the host's 64-bit secret where such a
   fork ignores an argument (``copy_cookie``): the harness's copy of a run at a case's
   start, which nothing else in the run knows how to make;
6. ``ioctl`` is allowed except TIOCSTI and TIOCLINUX (typing into, or driving, a terminal);
7. a number past Linux 6.1's last answers ENOSYS: a call newer than this table, which the C
   library then replaces with the older one it knows, as on an older kernel;
8. the allowed numbers, collapsed into sorted ranges ``lo..hi``, each tested as "below lo:
   refuse; up to hi: allow; else the next range"; past the last range: refuse.

Classic BPF jumps only forward and at most 255 instructions (``jt``/``jf`` are 8 bits), so
a jump to an outcome lands on the nearest ``ret`` of that outcome after it, and the ranges
come in chunks, each followed by its own ``ret ALLOW``/``ret EPERM`` pair; ``_assemble``
checks every offset. Steps 1, 2, 7 and 8 read only the number and the architecture, which lets
the kernel (5.11+) cache "always allowed" per number and skip the program for those calls.

Arguments are read as their low 32 bits (``seccomp_data.args[i]`` at ``16 + 8 * i``, low half
first: both machines here are little-endian); each one read is a C ``int`` or ``unsigned int``
in the kernel, so its high half never matters.
"""

from __future__ import annotations

import contextlib
import errno
import os
import platform
import struct
from collections.abc import Iterator

__all__ = ["ALLOWED", "REFUSED_BY_NAME", "allow_list_filter", "filter_pipe"]

# -- what the program allows: by group, sorted within each --------------------------------

# Open files, pipes and descriptors: reading, writing, copying, syncing, locking.
_DESCRIPTORS = (
    "close",
    "close_range",
    "copy_file_range",
    "dup",
    "dup3",
    "fadvise64",
    "fallocate",
    "fcntl",
    "fdatasync",
    "flock",
    "fstat",
    "fstatfs",
    "fsync",
    "ftruncate",
    "getdents64",
    "lseek",
    "pipe2",
    "pread64",
    "preadv",
    "preadv2",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "read",
    "readahead",
    "readv",
    "sendfile",
    "splice",
    "sync",
    "sync_file_range",
    "syncfs",
    "tee",
    "vmsplice",
    "write",
    "writev",
)
# Paths and directories. mknodat makes only FIFOs and sockets without CAP_MKNOD (os.mkfifo).
_PATHS = (
    "chdir",
    "faccessat",
    "faccessat2",
    "fchdir",
    "fchmod",
    "fchmodat",
    "fchown",
    "fchownat",
    "getcwd",
    "linkat",
    "mkdirat",
    "mknodat",
    "newfstatat",
    "openat",
    "openat2",
    "readlinkat",
    "renameat",
    "renameat2",
    "statfs",
    "statx",
    "symlinkat",
    "truncate",
    "umask",
    "unlinkat",
    "utimensat",
)
# Extended attributes: what the filesystem and the missing capabilities allow (user.*).
_XATTRS = (
    "fgetxattr",
    "flistxattr",
    "fremovexattr",
    "fsetxattr",
    "getxattr",
    "lgetxattr",
    "listxattr",
    "llistxattr",
    "lremovexattr",
    "lsetxattr",
    "removexattr",
    "setxattr",
)
# Waiting: poll, select, epoll, event, signal and timer descriptors (not inotify: below).
_EVENTS = (
    "epoll_create1",
    "epoll_ctl",
    "epoll_pwait",
    "epoll_pwait2",
    "eventfd2",
    "ppoll",
    "pselect6",
    "signalfd4",
    "timerfd_create",
    "timerfd_gettime",
    "timerfd_settime",
)
# Memory. mlock* pin pages already counted in RLIMIT_AS, up to RLIMIT_MEMLOCK (no capability
# in the sandbox lifts that); get_mempolicy only reads.
_MEMORY = (
    "brk",
    "get_mempolicy",
    "madvise",
    "membarrier",
    "mincore",
    "mlock",
    "mlock2",
    "mlockall",
    "mmap",
    "mprotect",
    "mremap",
    "msync",
    "munlock",
    "munlockall",
    "munmap",
    "pkey_alloc",
    "pkey_free",
    "pkey_mprotect",
    "remap_file_pages",
)
# Signals. Each reaches only the processes kill() could (the sandbox's PID namespace holds
# the child and bubblewrap's init); pidfd_open makes no more than a handle for them.
_SIGNALS = (
    "kill",
    "pidfd_open",
    "pidfd_send_signal",
    "restart_syscall",
    "rt_sigaction",
    "rt_sigpending",
    "rt_sigprocmask",
    "rt_sigqueueinfo",
    "rt_sigreturn",
    "rt_sigsuspend",
    "rt_sigtimedwait",
    "rt_tgsigqueueinfo",
    "sigaltstack",
    "tgkill",
    "tkill",
)
# Reading clocks, sleeping, timers (setting a clock is refused).
_TIME = (
    "clock_getres",
    "clock_gettime",
    "clock_nanosleep",
    "getitimer",
    "gettimeofday",
    "nanosleep",
    "setitimer",
    "timer_create",
    "timer_delete",
    "timer_getoverrun",
    "timer_gettime",
    "timer_settime",
    "times",
)
# Threads and scheduling: futexes, glibc's per-thread setup, CPU affinity (within the CPUs
# the sandbox was given) and reading the scheduler's settings.
_THREADS = (
    "futex",
    "futex_waitv",
    "get_robust_list",
    "getcpu",
    "gettid",
    "rseq",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_getaffinity",
    "sched_getattr",
    "sched_getparam",
    "sched_getscheduler",
    "sched_rr_get_interval",
    "sched_setaffinity",
    "sched_yield",
    "set_robust_list",
    "set_tid_address",
)
# This process: running a program (bubblewrap execs the harness after loading the filter),
# exiting, waiting, its limits (the harness lowers its own with setrlimit, which glibc makes
# prlimit64), prctl, and the calls that only restrict it further (seccomp, landlock).
_PROCESS = (
    "execve",
    "execveat",
    "exit",
    "exit_group",
    "getpriority",
    "getrlimit",
    "getrusage",
    "ioprio_get",
    "ioprio_set",
    "landlock_add_rule",
    "landlock_create_ruleset",
    "landlock_restrict_self",
    "prctl",
    "prlimit64",
    "seccomp",
    "setpriority",
    "setrlimit",
    "wait4",
    "waitid",
)
# Who and where it is. The set*id calls can only move among ids it already holds: the
# sandbox has no capability and one mapped uid.
_IDENTITY = (
    "capget",
    "capset",
    "getegid",
    "geteuid",
    "getgid",
    "getgroups",
    "getpgid",
    "getpid",
    "getppid",
    "getrandom",
    "getresgid",
    "getresuid",
    "getsid",
    "getuid",
    "setfsgid",
    "setfsuid",
    "setgid",
    "setgroups",
    "setpgid",
    "setregid",
    "setresgid",
    "setresuid",
    "setreuid",
    "setsid",
    "setuid",
    "sysinfo",
    "uname",
)
# Socket calls: socket and socketpair make AF_UNIX sockets only (step 4).
_SOCKETS = (
    "accept",
    "accept4",
    "bind",
    "connect",
    "getpeername",
    "getsockname",
    "getsockopt",
    "listen",
    "recvfrom",
    "recvmmsg",
    "recvmsg",
    "sendmmsg",
    "sendmsg",
    "sendto",
    "setsockopt",
    "shutdown",
)
# x86_64 only: the older calls the generic table (aarch64's) left out, which glibc, CPython
# and compiled packages may still make, and arch_prctl (the dynamic loader sets TLS with it).
_X86_64_ONLY = (
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
)
ALLOWED: tuple[str, ...] = (
    *_DESCRIPTORS,
    *_PATHS,
    *_XATTRS,
    *_EVENTS,
    *_MEMORY,
    *_SIGNALS,
    *_TIME,
    *_THREADS,
    *_PROCESS,
    *_IDENTITY,
    *_SOCKETS,
    *_X86_64_ONLY,
)

# Allowed or refused by their arguments (steps 3 to 6): in neither list.
_CHECKED = ("clone", "clone3", "ioctl", "socket", "socketpair")

# Refused, by name; everything else not allowed is refused too. Where a call has no number
# on a machine (fork on aarch64), nothing there can make it.
REFUSED_BY_NAME: tuple[str, ...] = (
    # other processes, new processes, namespaces
    "fork",
    "kcmp",
    "pidfd_getfd",
    "process_madvise",
    "process_mrelease",
    "process_vm_readv",
    "process_vm_writev",
    "ptrace",
    "setns",
    "unshare",
    "vfork",
    # mounts (old and new API) and the root
    "chroot",
    "fsconfig",
    "fsmount",
    "fsopen",
    "fspick",
    "mount",
    "mount_setattr",
    "move_mount",
    "open_tree",
    "pivot_root",
    "umount2",
    # much kernel to attack: io_uring, BPF, perf, userfaultfd, keyrings, execution domains, LDT
    "add_key",
    "bpf",
    "io_uring_enter",
    "io_uring_register",
    "io_uring_setup",
    "keyctl",
    "modify_ldt",
    "perf_event_open",
    "personality",
    "request_key",
    "userfaultfd",
    # the machine: modules, kexec, reboot, swap, accounting, quotas, clocks, kernel log, ports,
    # host names, and the terminal's hangup
    "acct",
    "adjtimex",
    "clock_adjtime",
    "clock_settime",
    "delete_module",
    "finit_module",
    "init_module",
    "ioperm",
    "iopl",
    "kexec_file_load",
    "kexec_load",
    "quotactl",
    "quotactl_fd",
    "reboot",
    "setdomainname",
    "sethostname",
    "settimeofday",
    "swapoff",
    "swapon",
    "syslog",
    "vhangup",
    # any inode by its handle, whole-filesystem event watching
    "fanotify_init",
    "fanotify_mark",
    "lookup_dcookie",
    "name_to_handle_at",
    "open_by_handle_at",
    # a budget of the whole host's, per user: inotify instances (128 a user by default) and
    # watches; a run that took them all would leave the grader's user, or a classmate's run
    # under the same uid, none
    "inotify_add_watch",
    "inotify_init",
    "inotify_init1",
    "inotify_rm_watch",
    # gone from the kernel, or 32-bit only (segment-based TLS)
    "create_module",
    "get_kernel_syms",
    "get_thread_area",
    "nfsservctl",
    "query_module",
    "set_thread_area",
    "uselib",
    # NUMA placement: it moves pages of the whole machine's nodes, other processes' with
    # migrate_pages and move_pages (Docker allows them only with CAP_SYS_NICE); no user here
    "mbind",
    "migrate_pages",
    "move_pages",
    "set_mempolicy",
    "set_mempolicy_home_node",
    # a realtime policy needs only RLIMIT_RTPRIO, which the harness leaves as it finds it
    "sched_setattr",
    "sched_setparam",
    "sched_setscheduler",
    # memory outside RLIMIT_AS: memfd and System V shared memory hold pages after unmapping,
    # message queues hold kernel memory; memfd_secret takes pages out of the kernel's map.
    # No user here: multiprocessing would want /dev/shm, which the sandbox does not have.
    "memfd_create",
    "memfd_secret",
    "mq_getsetattr",
    "mq_notify",
    "mq_open",
    "mq_timedreceive",
    "mq_timedsend",
    "mq_unlink",
    "msgctl",
    "msgget",
    "msgrcv",
    "msgsnd",
    "semctl",
    "semget",
    "semop",
    "semtimedop",
    "shmat",
    "shmctl",
    "shmdt",
    "shmget",
    # Linux AIO: its contexts come from one pool for the whole machine (fs.aio-max-nr)
    "io_cancel",
    "io_destroy",
    "io_getevents",
    "io_pgetevents",
    "io_setup",
    "io_submit",
)

# -- the program ------------------------------------------------------------------------------

# platform.machine() -> (column in _NUMBERS, AUDIT_ARCH_* from <linux/audit.h>)
_MACHINES = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}

_LD_W_ABS, _RET_K = 0x20, 0x06  # BPF_LD | BPF_W | BPF_ABS, BPF_RET | BPF_K
_JEQ, _JGT, _JGE, _JSET = 0x15, 0x25, 0x35, 0x45  # BPF_JMP | BPF_J* | BPF_K
_JUMPS = (_JEQ, _JGT, _JGE, _JSET)
_BPF_MAXINSNS, _MAX_JUMP = 4096, 255
_NR, _ARCH, _ARG0, _ARG1, _ARG2 = 0, 4, 16, 24, 32  # seccomp_data offsets (low halves)
_SIGCHLD = 17  # the same on both machines: a plain fork's whole flags
_OUTCOMES = {
    "allow": 0x7FFF0000,  # SECCOMP_RET_ALLOW
    "deny": 0x00050000 | errno.EPERM,  # SECCOMP_RET_ERRNO
    "enosys": 0x00050000 | errno.ENOSYS,
    "kill": 0x80000000,  # SECCOMP_RET_KILL_PROCESS
}
_X32_BIT = 0x40000000  # __X32_SYSCALL_BIT
_AF_UNIX = 1
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C  # the same on both machines (asm-generic/ioctls.h)
_CLONE_THREAD = 0x00010000
# The flags glibc's pthread_create passes, and CLONE_DETACHED, which older glibc passes and the
# kernel ignores. Any other bit (a namespace, CLONE_VFORK, CLONE_PARENT, an exit signal in the
# low byte, as fork's SIGCHLD) is refused.
_THREAD_FLAGS = (
    0x00000100
    | 0x00000200
    | 0x00000400
    | 0x00000800  # VM, FS, FILES, SIGHAND
    | _CLONE_THREAD
    | 0x00040000
    | 0x00080000  # THREAD, SYSVSEM, SETTLS
    | 0x00100000
    | 0x00200000  # PARENT_SETTID, CHILD_CLEARTID
    | 0x00400000
)  # DETACHED
_RANGES_PER_CHUNK = 100  # 2 rows each: a chunk's first row is 201 rows from its `ret EPERM`

_Target = int | str  # rows to skip, or an outcome: the nearest `ret` of it further on
_Row = tuple[int, int, _Target, _Target]  # code, k, where to go if true, if false


def allow_list_filter(machine: str, copy_cookie: int | None = None) -> bytes | None:
    """The program for ``machine`` (as ``platform.machine()`` names it); None for one not
    listed here, whose system call numbers this module does not know.

    ``copy_cookie`` (64 bits, a host's secret): the one ``clone`` the program lets make a
    process, a plain fork (flags SIGCHLD alone) whose ``parent_tid`` argument, which such a
    fork ignores, is the cookie. A host's runs copy themselves that way at a case's start
    (a loud-failure probe's copy, ``copy_call``); any other fork is refused as before."""
    if machine not in _MACHINES:
        return None
    column, arch = _MACHINES[machine]
    number = {name: n for name, pair in _NUMBERS.items() if (n := pair[column]) is not None}
    rows: list[_Row] = [_load(_ARCH), (_JEQ, arch, 1, 0), _ret("kill"), _load(_NR)]
    if machine == "x86_64":
        rows.append((_JSET, _X32_BIT, "deny", 0))
    rows += _when([number["clone3"]], [_ret("enosys")])
    rows += _when(
        [number["socket"], number["socketpair"]],
        [_load(_ARG0), (_JEQ, _AF_UNIX, "allow", "deny"), *_RETURNS],
    )
    # The kernel keeps only the low 32 bits of clone's flags (lower_32_bits() in its clone),
    # so checking the low half of the first argument is enough.
    copying: list[_Row] = (
        []
        if copy_cookie is None
        else [
            (_JEQ, _SIGCHLD, 0, 4),  # else on to the threads' test, the flags still loaded
            _load(_ARG2),
            (_JEQ, copy_cookie & 0xFFFFFFFF, 0, "deny"),
            _load(_ARG2 + 4),
            (_JEQ, copy_cookie >> 32 & 0xFFFFFFFF, "allow", "deny"),
        ]
    )
    rows += _when(
        [number["clone"]],
        [
            _load(_ARG0),
            *copying,
            (_JSET, ~_THREAD_FLAGS & 0xFFFFFFFF, "deny", 0),
            (_JSET, _CLONE_THREAD, "allow", "deny"),
            *_RETURNS,
        ],
    )
    rows += _when(
        [number["ioctl"]],
        [_load(_ARG1), (_JEQ, _TIOCSTI, "deny", 0), (_JEQ, _TIOCLINUX, "deny", "allow"), *_RETURNS],
    )
    # A number past the table's is a call newer than it: ENOSYS, as an older kernel would
    # answer, so the C library falls back to the older call it knows (glibc 2.39's lchmod
    # tries fchmodat2 first).
    rows += [(_JGT, _NEWEST, 0, 1), _ret("enosys")]
    rows += _ranges(sorted(number[name] for name in ALLOWED if name in number))
    return _assemble(rows)


def _load(offset: int) -> _Row:
    return (_LD_W_ABS, offset, 0, 0)


def _ret(outcome: str) -> _Row:
    return (_RET_K, _OUTCOMES[outcome], 0, 0)


_RETURNS = (_ret("allow"), _ret("deny"))


def _when(numbers: list[int], block: list[_Row]) -> list[_Row]:
    """``block`` (which returns) for a call in ``numbers``; past it for any other."""
    last = len(numbers) - 1
    tests: list[_Row] = [
        (_JEQ, n, last - i, 0 if i < last else len(block)) for i, n in enumerate(numbers)
    ]
    return tests + block


def _ranges(numbers: list[int]) -> list[_Row]:
    """Allow ``numbers`` (sorted), refuse the rest, one range of consecutive numbers at a time."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    rows: list[_Row] = []
    for start in range(0, len(spans), _RANGES_PER_CHUNK):
        chunk = spans[start : start + _RANGES_PER_CHUNK]
        for index, (lo, hi) in enumerate(chunk):
            # above hi: the next range, past this chunk's returns, or, after the last, refuse
            above: _Target = (
                0 if index < len(chunk) - 1 else 2 if start + len(chunk) < len(spans) else "deny"
            )
            rows += [(_JGE, lo, 0, "deny"), (_JGT, hi, above, "allow")]
        rows += _RETURNS
    return rows


def _assemble(rows: list[_Row]) -> bytes:
    """The ``struct sock_filter`` array, every jump resolved and checked to fit."""
    if len(rows) > _BPF_MAXINSNS:
        raise ValueError(f"{len(rows)} instructions: the kernel takes {_BPF_MAXINSNS} at most")
    program = bytearray()
    for at, (code, k, true, false) in enumerate(rows):
        jumps = (_jump(rows, at, true), _jump(rows, at, false)) if code in _JUMPS else (0, 0)
        program += struct.pack("=HBBI", code, *jumps, k)
    return bytes(program)


def _jump(rows: list[_Row], at: int, target: _Target) -> int:
    skip = target
    if isinstance(target, str):
        ret = _ret(target)
        skip = next((n for n, row in enumerate(rows[at + 1 :]) if row == ret), -1)
    if not (isinstance(skip, int) and 0 <= skip <= _MAX_JUMP and at + skip + 1 < len(rows)):
        raise ValueError(f"instruction {at}: {target!r} is not within a jump's reach")
    return skip


_NEWEST = 450  # the last number both of Linux 6.1's tables assign (set_mempolicy_home_node)
# (x86_64, aarch64) from unistd_64.h, asm-generic/unistd.h (Linux 6.1; __NR3264_* resolved)
_NUMBERS: dict[str, tuple[int | None, int | None]] = {
    "accept": (43, 202),
    "accept4": (288, 242),
    "access": (21, None),
    "acct": (163, 89),
    "add_key": (248, 217),
    "adjtimex": (159, 171),
    "alarm": (37, None),
    "arch_prctl": (158, None),
    "bind": (49, 200),
    "bpf": (321, 280),
    "brk": (12, 214),
    "capget": (125, 90),
    "capset": (126, 91),
    "chdir": (80, 49),
    "chmod": (90, None),
    "chown": (92, None),
    "chroot": (161, 51),
    "clock_adjtime": (305, 266),
    "clock_getres": (229, 114),
    "clock_gettime": (228, 113),
    "clock_nanosleep": (230, 115),
    "clock_settime": (227, 112),
    "clone": (56, 220),
    "clone3": (435, 435),
    "close": (3, 57),
    "close_range": (436, 436),
    "connect": (42, 203),
    "copy_file_range": (326, 285),
    "creat": (85, None),
    "create_module": (174, None),
    "delete_module": (176, 106),
    "dup": (32, 23),
    "dup2": (33, None),
    "dup3": (292, 24),
    "epoll_create": (213, None),
    "epoll_create1": (291, 20),
    "epoll_ctl": (233, 21),
    "epoll_pwait": (281, 22),
    "epoll_pwait2": (441, 441),
    "epoll_wait": (232, None),
    "eventfd": (284, None),
    "eventfd2": (290, 19),
    "execve": (59, 221),
    "execveat": (322, 281),
    "exit": (60, 93),
    "exit_group": (231, 94),
    "faccessat": (269, 48),
    "faccessat2": (439, 439),
    "fadvise64": (221, 223),
    "fallocate": (285, 47),
    "fanotify_init": (300, 262),
    "fanotify_mark": (301, 263),
    "fchdir": (81, 50),
    "fchmod": (91, 52),
    "fchmodat": (268, 53),
    "fchown": (93, 55),
    "fchownat": (260, 54),
    "fcntl": (72, 25),
    "fdatasync": (75, 83),
    "fgetxattr": (193, 10),
    "finit_module": (313, 273),
    "flistxattr": (196, 13),
    "flock": (73, 32),
    "fork": (57, None),
    "fremovexattr": (199, 16),
    "fsconfig": (431, 431),
    "fsetxattr": (190, 7),
    "fsmount": (432, 432),
    "fsopen": (430, 430),
    "fspick": (433, 433),
    "fstat": (5, 80),
    "fstatfs": (138, 44),
    "fsync": (74, 82),
    "ftruncate": (77, 46),
    "futex": (202, 98),
    "futex_waitv": (449, 449),
    "futimesat": (261, None),
    "get_kernel_syms": (177, None),
    "get_mempolicy": (239, 236),
    "get_robust_list": (274, 100),
    "get_thread_area": (211, None),
    "getcpu": (309, 168),
    "getcwd": (79, 17),
    "getdents": (78, None),
    "getdents64": (217, 61),
    "getegid": (108, 177),
    "geteuid": (107, 175),
    "getgid": (104, 176),
    "getgroups": (115, 158),
    "getitimer": (36, 102),
    "getpeername": (52, 205),
    "getpgid": (121, 155),
    "getpgrp": (111, None),
    "getpid": (39, 172),
    "getppid": (110, 173),
    "getpriority": (140, 141),
    "getrandom": (318, 278),
    "getresgid": (120, 150),
    "getresuid": (118, 148),
    "getrlimit": (97, 163),
    "getrusage": (98, 165),
    "getsid": (124, 156),
    "getsockname": (51, 204),
    "getsockopt": (55, 209),
    "gettid": (186, 178),
    "gettimeofday": (96, 169),
    "getuid": (102, 174),
    "getxattr": (191, 8),
    "init_module": (175, 105),
    "inotify_add_watch": (254, 27),
    "inotify_init": (253, None),
    "inotify_init1": (294, 26),
    "inotify_rm_watch": (255, 28),
    "io_cancel": (210, 3),
    "io_destroy": (207, 1),
    "io_getevents": (208, 4),
    "io_pgetevents": (333, 292),
    "io_setup": (206, 0),
    "io_submit": (209, 2),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "io_uring_setup": (425, 425),
    "ioctl": (16, 29),
    "ioperm": (173, None),
    "iopl": (172, None),
    "ioprio_get": (252, 31),
    "ioprio_set": (251, 30),
    "kcmp": (312, 272),
    "kexec_file_load": (320, 294),
    "kexec_load": (246, 104),
    "keyctl": (250, 219),
    "kill": (62, 129),
    "landlock_add_rule": (445, 445),
    "landlock_create_ruleset": (444, 444),
    "landlock_restrict_self": (446, 446),
    "lchown": (94, None),
    "lgetxattr": (192, 9),
    "link": (86, None),
    "linkat": (265, 37),
    "listen": (50, 201),
    "listxattr": (194, 11),
    "llistxattr": (195, 12),
    "lookup_dcookie": (212, 18),
    "lremovexattr": (198, 15),
    "lseek": (8, 62),
    "lsetxattr": (189, 6),
    "lstat": (6, None),
    "madvise": (28, 233),
    "mbind": (237, 235),
    "membarrier": (324, 283),
    "memfd_create": (319, 279),
    "memfd_secret": (447, 447),
    "migrate_pages": (256, 238),
    "mincore": (27, 232),
    "mkdir": (83, None),
    "mkdirat": (258, 34),
    "mknod": (133, None),
    "mknodat": (259, 33),
    "mlock": (149, 228),
    "mlock2": (325, 284),
    "mlockall": (151, 230),
    "mmap": (9, 222),
    "modify_ldt": (154, None),
    "mount": (165, 40),
    "mount_setattr": (442, 442),
    "move_mount": (429, 429),
    "move_pages": (279, 239),
    "mprotect": (10, 226),
    "mq_getsetattr": (245, 185),
    "mq_notify": (244, 184),
    "mq_open": (240, 180),
    "mq_timedreceive": (243, 183),
    "mq_timedsend": (242, 182),
    "mq_unlink": (241, 181),
    "mremap": (25, 216),
    "msgctl": (71, 187),
    "msgget": (68, 186),
    "msgrcv": (70, 188),
    "msgsnd": (69, 189),
    "msync": (26, 227),
    "munlock": (150, 229),
    "munlockall": (152, 231),
    "munmap": (11, 215),
    "name_to_handle_at": (303, 264),
    "nanosleep": (35, 101),
    "newfstatat": (262, 79),
    "nfsservctl": (180, 42),
    "open": (2, None),
    "open_by_handle_at": (304, 265),
    "open_tree": (428, 428),
    "openat": (257, 56),
    "openat2": (437, 437),
    "pause": (34, None),
    "perf_event_open": (298, 241),
    "personality": (135, 92),
    "pidfd_getfd": (438, 438),
    "pidfd_open": (434, 434),
    "pidfd_send_signal": (424, 424),
    "pipe": (22, None),
    "pipe2": (293, 59),
    "pivot_root": (155, 41),
    "pkey_alloc": (330, 289),
    "pkey_free": (331, 290),
    "pkey_mprotect": (329, 288),
    "poll": (7, None),
    "ppoll": (271, 73),
    "prctl": (157, 167),
    "pread64": (17, 67),
    "preadv": (295, 69),
    "preadv2": (327, 286),
    "prlimit64": (302, 261),
    "process_madvise": (440, 440),
    "process_mrelease": (448, 448),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "pselect6": (270, 72),
    "ptrace": (101, 117),
    "pwrite64": (18, 68),
    "pwritev": (296, 70),
    "pwritev2": (328, 287),
    "query_module": (178, None),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    "read": (0, 63),
    "readahead": (187, 213),
    "readlink": (89, None),
    "readlinkat": (267, 78),
    "readv": (19, 65),
    "reboot": (169, 142),
    "recvfrom": (45, 207),
    "recvmmsg": (299, 243),
    "recvmsg": (47, 212),
    "remap_file_pages": (216, 234),
    "removexattr": (197, 14),
    "rename": (82, None),
    "renameat": (264, 38),
    "renameat2": (316, 276),
    "request_key": (249, 218),
    "restart_syscall": (219, 128),
    "rmdir": (84, None),
    "rseq": (334, 293),
    "rt_sigaction": (13, 134),
    "rt_sigpending": (127, 136),
    "rt_sigprocmask": (14, 135),
    "rt_sigqueueinfo": (129, 138),
    "rt_sigreturn": (15, 139),
    "rt_sigsuspend": (130, 133),
    "rt_sigtimedwait": (128, 137),
    "rt_tgsigqueueinfo": (297, 240),
    "sched_get_priority_max": (146, 125),
    "sched_get_priority_min": (147, 126),
    "sched_getaffinity": (204, 123),
    "sched_getattr": (315, 275),
    "sched_getparam": (143, 121),
    "sched_getscheduler": (145, 120),
    "sched_rr_get_interval": (148, 127),
    "sched_setaffinity": (203, 122),
    "sched_setattr": (314, 274),
    "sched_setparam": (142, 118),
    "sched_setscheduler": (144, 119),
    "sched_yield": (24, 124),
    "seccomp": (317, 277),
    "select": (23, None),
    "semctl": (66, 191),
    "semget": (64, 190),
    "semop": (65, 193),
    "semtimedop": (220, 192),
    "sendfile": (40, 71),
    "sendmmsg": (307, 269),
    "sendmsg": (46, 211),
    "sendto": (44, 206),
    "set_mempolicy": (238, 237),
    "set_mempolicy_home_node": (450, 450),
    "set_robust_list": (273, 99),
    "set_thread_area": (205, None),
    "set_tid_address": (218, 96),
    "setdomainname": (171, 162),
    "setfsgid": (123, 152),
    "setfsuid": (122, 151),
    "setgid": (106, 144),
    "setgroups": (116, 159),
    "sethostname": (170, 161),
    "setitimer": (38, 103),
    "setns": (308, 268),
    "setpgid": (109, 154),
    "setpriority": (141, 140),
    "setregid": (114, 143),
    "setresgid": (119, 149),
    "setresuid": (117, 147),
    "setreuid": (113, 145),
    "setrlimit": (160, 164),
    "setsid": (112, 157),
    "setsockopt": (54, 208),
    "settimeofday": (164, 170),
    "setuid": (105, 146),
    "setxattr": (188, 5),
    "shmat": (30, 196),
    "shmctl": (31, 195),
    "shmdt": (67, 197),
    "shmget": (29, 194),
    "shutdown": (48, 210),
    "sigaltstack": (131, 132),
    "signalfd": (282, None),
    "signalfd4": (289, 74),
    "socket": (41, 198),
    "socketpair": (53, 199),
    "splice": (275, 76),
    "stat": (4, None),
    "statfs": (137, 43),
    "statx": (332, 291),
    "swapoff": (168, 225),
    "swapon": (167, 224),
    "symlink": (88, None),
    "symlinkat": (266, 36),
    "sync": (162, 81),
    "sync_file_range": (277, 84),
    "syncfs": (306, 267),
    "sysinfo": (99, 179),
    "syslog": (103, 116),
    "tee": (276, 77),
    "tgkill": (234, 131),
    "time": (201, None),
    "timer_create": (222, 107),
    "timer_delete": (226, 111),
    "timer_getoverrun": (225, 109),
    "timer_gettime": (224, 108),
    "timer_settime": (223, 110),
    "timerfd_create": (283, 85),
    "timerfd_gettime": (287, 87),
    "timerfd_settime": (286, 86),
    "times": (100, 153),
    "tkill": (200, 130),
    "truncate": (76, 45),
    "umask": (95, 166),
    "umount2": (166, 39),
    "uname": (63, 160),
    "unlink": (87, None),
    "unlinkat": (263, 35),
    "unshare": (272, 97),
    "uselib": (134, None),
    "userfaultfd": (323, 282),
    "utime": (132, None),
    "utimensat": (280, 88),
    "utimes": (235, None),
    "vfork": (58, None),
    "vhangup": (153, 58),
    "vmsplice": (278, 75),
    "wait4": (61, 260),
    "waitid": (247, 95),
    "write": (1, 64),
    "writev": (20, 66),
}


@contextlib.contextmanager
def filter_pipe() -> Iterator[int | None]:
    """This machine's filter on the read end of a pipe, for bubblewrap's ``--seccomp FD``
    (None where no filter is built for this machine), closed on leaving: the child that
    loads it holds its own copy of the fd."""
    program = allow_list_filter(platform.machine())
    if program is None:
        yield None
        return
    read_end, write_end = os.pipe()
    with os.fdopen(write_end, "wb") as pipe:
        pipe.write(program)  # a few hundred bytes: far below a pipe's buffer
    try:
        yield read_end
    finally:
        os.close(read_end)
