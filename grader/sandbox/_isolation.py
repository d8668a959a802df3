"""How the namespaces wall is built: bubblewrap's command line, its seccomp filter, and the
interpreter and packages a sandboxed child is shown.

``bubblewrap()`` says whether bubblewrap can build a sandbox here; ``package_folders()`` are
the grader environment's packages, which a child behind either wall imports from. The wall
classes themselves, and the choice between them, are in ``grader.sandbox._walls``.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import site
import struct
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "INSTALL_HINT", "KIT", "SANDBOX", "Bind", "bubblewrap", "bwrap_argv", "interpreter",
    "no_new_processes_filter", "package_folders",
]

INSTALL_HINT = "install bubblewrap (Debian and Ubuntu: `sudo apt-get install bubblewrap`)"


@functools.cache
def bubblewrap() -> tuple[str | None, str]:
    """The path of a bubblewrap that can build a sandbox here, or None and why not."""
    path = shutil.which("bwrap")
    if path is None:
        return None, "bubblewrap (bwrap) is not installed"
    probe = [path, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
             "--unshare-uts", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
             "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]
    try:
        done = subprocess.run(probe, stdin=subprocess.DEVNULL, capture_output=True, timeout=30,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"bubblewrap could not be started ({type(exc).__name__})"
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        why = said[-1] if said else f"exit status {done.returncode}"
        return None, f"bubblewrap cannot create namespaces here ({why})"
    return path, ""


# -- the namespaces wall: one bubblewrap command line per sandboxed child ---------------

SANDBOX = "/sandbox"  # the child's only writable place: a tmpfs of limits.disk_mb
KIT = "/gradekit"  # read-only: the harness, the original submission, the packages
SANDBOX_UID = 65534  # "nobody", inside the user namespace
_SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")


@dataclass(frozen=True, slots=True)
class Bind:
    """One host path shown inside the sandbox; read-only unless ``writable``."""

    source: str
    dest: str
    writable: bool = False


@functools.cache
def package_folders() -> tuple[str, ...]:
    """The grader environment's package folders, which a sandboxed child imports from.

    A child starts without ``site`` (``-S``): it gets these folders on its path, but their
    ``.pth`` files do not run, so the grader's own editable install and whatever this
    machine's ``site`` imports at start stay out of the sandbox, and out of its start time.
    """
    found = (os.path.realpath(s) for s in site.getsitepackages())
    return tuple(dict.fromkeys(s for s in found if os.path.isdir(s)))


@functools.cache
def interpreter() -> tuple[str, tuple[Bind, ...], tuple[str, ...]]:
    """The interpreter to run inside, the binds it needs, and its package folders there.

    The base interpreter, not the grader's virtual environment: the environment's
    packages are shown read-only at ``/gradekit/site-N``, and the environment itself
    (its scripts, its ``pyvenv.cfg``) is not visible at all.
    """
    binary = os.path.realpath(sys.executable)
    prefixes = {os.path.realpath(sys.base_prefix), os.path.dirname(os.path.dirname(binary))}
    binds = [Bind(p, p) for p in sorted(prefixes) if not _under(p, "/usr")]
    inside: list[str] = []
    for folder in package_folders():
        if any(_under(folder, p) for p in prefixes):
            inside.append(folder)  # already visible with the interpreter's prefix
            continue
        shown = f"{KIT}/site-{sum(b.dest.startswith(f'{KIT}/site-') for b in binds)}"
        binds.append(Bind(folder, shown))
        inside.append(shown)
    return binary, tuple(binds), tuple(inside)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def bwrap_argv(bwrap_path: str, binds: Sequence[Bind], *, disk_mb: int,
               seccomp_fd: int | None) -> list[str]:
    """The bubblewrap options of one child, up to (not including) the command."""
    argv = [bwrap_path, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--disable-userns", "--die-with-parent",
            "--new-session", "--cap-drop", "ALL", "--uid", str(SANDBOX_UID),
            "--gid", str(SANDBOX_UID), "--hostname", "sandbox"]
    for name in _SYSTEM:
        path = f"/{name}"
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    argv += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
             "--proc", "/proc", "--dev", "/dev",
             "--perms", "0700", "--size", str(disk_mb << 20), "--tmpfs", SANDBOX,
             "--dir", f"{SANDBOX}/tmp"]
    for bind in binds:
        argv += ["--bind" if bind.writable else "--ro-bind", bind.source, bind.dest]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    return [*argv, "--chdir", SANDBOX]


# A seccomp filter: no new process inside the sandbox (threads still work). The audit hook
# refuses the same in Python, but C code and unaudited routes (_posixsubprocess) meet this.
_LD_ABS, _JEQ, _JSET, _RET = 0x20, 0x15, 0x45, 0x06
_ALLOW, _KILL, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_CLONE_THREAD = 0x00010000
# machine -> (audit arch, clone, clone3, other process-making syscalls)
_SYSCALLS = {
    "x86_64": (0xC000003E, 56, 435, (57, 58)),  # fork, vfork
    "aarch64": (0xC00000B7, 220, 435, ()),
}


def no_new_processes_filter(machine: str) -> bytes | None:
    """A classic BPF seccomp program refusing fork, vfork and clone without CLONE_THREAD.

    clone3 answers ENOSYS, so the C library falls back to clone, whose flags a classic
    filter can read. None on a machine whose system call numbers are not listed here.
    """
    if machine not in _SYSCALLS:
        return None
    arch, clone, clone3, others = _SYSCALLS[machine]
    deny, enosys = _ERRNO | errno.EPERM, _ERRNO | errno.ENOSYS
    # Each row: (code, k, jump-if-true target label, jump-if-false target label); None: next.
    rows: list[tuple[int, int, str | None, str | None]] = [
        (_LD_ABS, 4, None, None),
        (_JEQ, arch, None, "kill"),
        (_LD_ABS, 0, None, None),
        (_JSET, 0x40000000, "deny", None),  # the x32 ABI's numbers
        (_JEQ, clone3, "enosys", None),
        *((_JEQ, number, "deny", None) for number in others),
        (_JEQ, clone, None, "allow"),
        (_LD_ABS, 16, None, None),  # clone's flags: the low half of its first argument
        (_JSET, _CLONE_THREAD, "allow", "deny"),
    ]
    ends = {"allow": _ALLOW, "deny": deny, "enosys": enosys, "kill": _KILL}
    at = {label: len(rows) + n for n, label in enumerate(ends)}
    program = b""
    for index, (code, k, true, false) in enumerate(rows):
        jt = at[true] - index - 1 if true else 0
        jf = at[false] - index - 1 if false else 0
        program += struct.pack("=HBBI", code, jt, jf, k)
    for value in ends.values():
        program += struct.pack("=HBBI", _RET, 0, 0, value)
    return program
