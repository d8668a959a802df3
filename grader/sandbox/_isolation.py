"""How the namespaces wall is built: bubblewrap's command line, whom a child runs as on the
host, and the interpreter and packages a sandboxed child is shown (its seccomp filter is in
``grader.sandbox._seccomp``).

``bubblewrap()`` says whether bubblewrap can build a sandbox here; ``package_folders()`` are
the grader environment's packages, which a child behind either wall imports from. The wall
classes themselves, and the choice between them, are in ``grader.sandbox._walls``.
"""

from __future__ import annotations

import functools
import os
import shutil
import site
import stat
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "INSTALL_HINT", "KIT", "SANDBOX", "UNPRIVILEGED_UID", "Bind", "as_root", "become", "bubblewrap",
    "bwrap_argv",
    "host_user", "interpreter", "package_folders", "unreadable_of",
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
# What a host keeps, in its own user namespace only, and every run it forks drops: the
# mounts and namespaces (SYS_ADMIN), an overlay's work folder (DAC_OVERRIDE), emptying the
# run's bounding set (SETPCAP).
_HOST_CAPABILITIES = ("CAP_SYS_ADMIN", "CAP_DAC_OVERRIDE", "CAP_SETPCAP")
_SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
# The devices a child gets, writable by nature and harmless (a write to urandom mixes in,
# credits nothing), and the links the C library and shells expect beside them.
_DEVICES = ("null", "zero", "urandom")
_DEVICE_LINKS = (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                 ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2"))


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


# -- whom a child runs as on the host --------------------------------------------------

UNPRIVILEGED_UID = 65534  # "nobody": the host uid of a child when the grader is root


def host_user(kit: Sequence[str], read: Sequence[str], search: Sequence[str] = (), *,
              unreadable: Callable[[], str] = lambda: "") -> tuple[int | None, str]:
    """The host uid a child behind namespaces takes (None: the grader's), and what the
    isolation line says about it.

    As root, a child inside a user namespace is still root on the host: RLIMIT_NPROC does not
    hold it, and whatever escapes the namespaces escapes as root. So a root grader starts it
    as uid 65534, where that uid can run bubblewrap here, read ``kit`` (the interpreter,
    the packages, the harness and the library) and ``read`` (the submission's files, the
    files of the run it sees) and search ``search`` (the folder of the run's folders):
    bubblewrap binds each by its path, as that uid. ``unreadable()``: what the caller found
    unreadable already ("" for nothing), asked only as root.
    """
    if not as_root():
        return None, "children run as the grader's own unprivileged user"
    why = (_unprivileged_missing(tuple(kit)) or unreadable() or unreadable_of(read)
           or next((f"{p} is not searchable by uid {UNPRIVILEGED_UID}" for p in search
                    if not _searchable(p)), ""))
    if why:
        return None, f"children run as root on the host ({why})"
    return UNPRIVILEGED_UID, f"children run as uid {UNPRIVILEGED_UID} on the host"


@functools.cache
def _unprivileged_missing(kit: tuple[str, ...]) -> str:
    """Why uid 65534 cannot run the kit behind bubblewrap here, or "" when it can."""
    why = unreadable_of(kit)
    if why:
        return why
    path, _ = bubblewrap()
    if path is None:
        return "bubblewrap cannot be started"

    probe = [path, "--unshare-user", "--unshare-pid", "--unshare-net", "--die-with-parent",
             "--ro-bind", "/", "/", "true"]
    try:
        done = subprocess.run(probe, stdin=subprocess.DEVNULL, capture_output=True, timeout=30,
                              check=False, cwd="/",
                              preexec_fn=lambda: become(UNPRIVILEGED_UID))
    except (OSError, subprocess.SubprocessError):
        return f"uid {UNPRIVILEGED_UID} cannot start bubblewrap"
    if done.returncode != 0:
        return f"uid {UNPRIVILEGED_UID} cannot create namespaces with bubblewrap here"
    return ""


def as_root() -> bool:
    """Whether the grader runs as root (then a child would be root on the host too)."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


def become(user: int) -> None:
    """Take ``user`` as this process's every uid and gid, with no other group: in a forked
    child before it execs, once the grader's own privileges did what needed them."""
    os.setgroups([])
    os.setresgid(user, user, user)
    os.setresuid(user, user, user)


def unreadable_of(paths: Sequence[str]) -> str:
    """The first of ``paths`` another user cannot read (every folder above it searchable,
    it readable, a folder searchable too), as "PATH is not readable to uid 65534"."""
    for path in paths:
        if not _readable_to_others(path):
            return f"{path} is not readable to uid {UNPRIVILEGED_UID}"
    return ""


def _readable_to_others(path: str) -> bool:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    need = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(mode) else 0)
    return mode & need == need and _searchable(os.path.dirname(path))


@functools.lru_cache(maxsize=256)
def _searchable(folder: str) -> bool:
    """Whether another user can pass through ``folder`` and every folder above it."""
    try:
        if not os.stat(folder).st_mode & stat.S_IXOTH:
            return False
    except OSError:
        return False
    parent = os.path.dirname(folder)
    return parent == folder or _searchable(parent)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def bwrap_argv(bwrap_path: str, binds: Sequence[Bind], *, disk_mb: int,
               seccomp_fd: int | None, host: bool = False) -> list[str]:
    """The bubblewrap options of one child, up to (not including) the command.

    Only ``/sandbox`` (a tmpfs of ``disk_mb``) and the binds marked writable can be written:
    the root and ``/dev`` are remounted read-only once built, ``/dev`` holds null, zero and
    urandom alone, and there is no ``/dev/shm``. Each in-memory filesystem a child could
    write is host memory outside every other limit.

    A ``host`` (``grader.sandbox._host``) keeps ``_HOST_CAPABILITIES`` in its user
    namespace, to build each forked run's walls, so it may make the namespaces a run needs
    (no ``--disable-userns``); it gets the folders each run mounts over.
    """
    argv = [bwrap_path, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", *([] if host else ["--disable-userns"]),
            "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            *(arg for cap in _HOST_CAPABILITIES for arg in ("--cap-add", cap) if host),
            "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "sandbox"]
    for name in _SYSTEM:
        path = f"/{name}"
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    argv += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache", "--proc", "/proc",
             "--tmpfs", "/dev"]
    for device in _DEVICES:
        argv += ["--dev-bind", f"/dev/{device}", f"/dev/{device}"]
    for name, target in _DEVICE_LINKS:
        argv += ["--symlink", target, f"/dev/{name}"]
    argv += ["--remount-ro", "/dev",
             "--perms", "0700", "--size", str(disk_mb << 20), "--tmpfs", SANDBOX,
             "--dir", f"{SANDBOX}/tmp"]
    for bind in binds:
        argv += ["--bind" if bind.writable else "--ro-bind", bind.source, bind.dest]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    if host:
        argv += ["--dir", f"{KIT}/original", "--dir", f"{KIT}/shown", "--dir", f"{KIT}/layer"]
    return [*argv, "--remount-ro", "/", "--chdir", SANDBOX]
