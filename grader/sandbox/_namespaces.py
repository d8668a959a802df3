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
from collections.abc import Sequence
from dataclasses import dataclass

from gradekit import UsageError
from grader.sandbox._harness import PROC_READ_ONLY
from grader.sandbox._readable import interpreter_parts, readable_copy

__all__ = [
    "ALLOW_HOST_ROOT",
    "INSTALL_HINT",
    "KIT",
    "LOADER_PATH",
    "SANDBOX",
    "UNPRIVILEGED_UID",
    "Bind",
    "as_root",
    "become",
    "bubblewrap",
    "bwrap_argv",
    "host_root_allowed",
    "host_root_refusal",
    "host_user",
    "interpreter",
    "package_folders",
    "process_interpreter",
    "readable_path",
    "unreadable_of",
]

INSTALL_HINT = "install bubblewrap (Debian and Ubuntu: `sudo apt-get install bubblewrap`)"


@functools.cache
def bubblewrap() -> tuple[str | None, str]:
    """The path of a bubblewrap that can build a sandbox here, or None and why not."""
    path = shutil.which("bwrap")
    if path is None:
        return None, "bubblewrap (bwrap) is not installed"
    probe = [
        path,
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "true",
    ]
    try:
        done = subprocess.run(
            probe, stdin=subprocess.DEVNULL, capture_output=True, timeout=30, check=False
        )
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
_DEVICE_LINKS = (
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
)


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
    (its scripts, its ``pyvenv.cfg``) is not visible at all. As root, a prefix or package
    folder uid 65534 cannot read is shown from its readable copy (``readable_path``), at
    the original's path for a prefix: the child sees the paths an unprivileged grader's does.
    """
    binary = os.path.realpath(sys.executable)
    prefixes = {os.path.realpath(sys.base_prefix), os.path.dirname(os.path.dirname(binary))}
    binds = [Bind(readable_path(p, binary), p) for p in sorted(prefixes) if not _under(p, "/usr")]
    inside: list[str] = []
    for folder in package_folders():
        if any(_under(folder, p) for p in prefixes):
            inside.append(folder)  # already visible with the interpreter's prefix
            continue
        shown = f"{KIT}/site-{sum(b.dest.startswith(f'{KIT}/site-') for b in binds)}"
        binds.append(Bind(readable_path(folder), shown))
        inside.append(shown)
    return binary, tuple(binds), tuple(inside)


@functools.cache
def process_interpreter() -> tuple[str, dict[str, str], tuple[str, ...]]:
    """What the process wall's child runs: the base interpreter (for a root grader, from
    its readable copy where uid 65534 cannot read it, the loader told where the shared
    library is, as the binary names its original folder), the environment that needs
    besides the child's own, and the package folders it imports from."""
    binary = os.path.realpath(sys.executable)
    prefix = os.path.dirname(os.path.dirname(binary))
    copy = prefix if _under(prefix, "/usr") else readable_path(prefix, binary)
    if copy == prefix:
        return sys.executable, {}, package_folders()
    folders = tuple(
        os.path.join(copy, os.path.relpath(f, prefix)) if _under(f, prefix) else readable_path(f)
        for f in package_folders()
    )
    return (
        os.path.join(copy, os.path.relpath(binary, prefix)),
        {LOADER_PATH: os.path.join(copy, "lib")},
        folders,
    )


LOADER_PATH = "LD_LIBRARY_PATH"  # the harness removes it, and its trace, before the agent


@functools.cache
def readable_path(folder: str, binary: str | None = None) -> str:
    """``folder`` itself, or, for a root grader where uid 65534 cannot read it, its readable
    copy (``grader.sandbox._readable``; ``binary``: the folder is that interpreter's prefix,
    of which only what a child needs is copied, with the package folders under it). Where no
    copy can be made, ``folder``: the check of what uid 65534 can read then says so."""
    if not as_root() or _readable_to_others(folder):
        return folder
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    keep = tuple(os.path.relpath(f, folder) for f in package_folders() if _under(f, folder))
    try:
        return readable_copy(
            folder,
            interpreter_parts(binary, version, keep)
            if binary is not None
            else lambda relative: True,
        )
    except OSError:
        return folder


# -- whom a child runs as on the host --------------------------------------------------

UNPRIVILEGED_UID = 65534  # "nobody": the host uid of a child when the grader is root
# The one way to let a root grader's children run as root on the host: by name, on the
# command line (``--allow-host-root``, which sets it for every process of the grading).
ALLOW_HOST_ROOT = "GRADEKIT_ALLOW_HOST_ROOT"


def host_root_allowed() -> bool:
    """Whether the instructor allowed children to run as root on the host, by name."""
    return os.environ.get(ALLOW_HOST_ROOT) == "1"


def host_user(
    kit: Sequence[str], search: Sequence[str] = (), *, bubblewrapped: bool = True
) -> tuple[int | None, str]:
    """The host uid a child takes (None: the grader's), and what the isolation line says.

    A root grader's child never runs as root on the host unless the instructor allowed it by
    name (``host_root_allowed``): it runs as uid 65534, which must read ``kit`` (the
    interpreter or its readable copy, the packages, the harness and the library), search
    ``search`` (the folder of the run's folders) and, behind namespaces
    (``bubblewrapped``), start bubblewrap. Where it cannot, this raises ``UsageError``
    saying why and how to allow it.
    """
    if not as_root():
        return None, "children run as the grader's own unprivileged user"
    why = _unprivileged_missing(tuple(kit), bubblewrapped) or next(
        (f"{p} is not searchable by uid {UNPRIVILEGED_UID}" for p in search if not _searchable(p)),
        "",
    )
    if not why:
        return UNPRIVILEGED_UID, f"children run as uid {UNPRIVILEGED_UID} on the host"
    if host_root_allowed():
        return None, f"children run as root on the host ({why}; allowed by --allow-host-root)"
    raise UsageError(host_root_refusal(why))


def host_root_refusal(why: str) -> str:
    """Why a root grader will not run submissions, and the fixes (the first: a scratch
    folder under ``TMPDIR``, which the grader's scratch follows, is ``TMPDIR``'s fault)."""
    tmp = os.environ.get("TMPDIR", "").rstrip("/")
    first = (
        "set TMPDIR to a folder every user can pass through (mode 0711), or unset it"
        if tmp and why.startswith(tmp + "/")
        else f"make it readable and searchable by uid {UNPRIVILEGED_UID}"
    )
    return (
        f"submission code would run as root on the host: {why}. {first[0].upper()}"
        f"{first[1:]}, or grade as another user; to run the children as root anyway, "
        "allow it by name: pass --allow-host-root"
    )


@functools.cache
def _unprivileged_missing(kit: tuple[str, ...], bubblewrapped: bool = True) -> str:
    """Why uid 65534 cannot run the kit (behind bubblewrap) here, or "" when it can."""
    why = unreadable_of(kit)
    if why or not bubblewrapped:
        return why
    path, _ = bubblewrap()
    if path is None:
        return "bubblewrap cannot be started"

    probe = [
        path,
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--die-with-parent",
        "--ro-bind",
        "/",
        "/",
        "true",
    ]
    try:
        done = subprocess.run(
            probe,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            check=False,
            cwd="/",
            preexec_fn=lambda: become(UNPRIVILEGED_UID),
        )
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


def bwrap_argv(
    bwrap_path: str,
    binds: Sequence[Bind],
    *,
    disk_mb: int,
    seccomp_fd: int | None,
    host: bool = False,
) -> list[str]:
    """The bubblewrap options of one child, up to (not including) the command.

    Only ``/sandbox`` (a tmpfs of ``disk_mb``) and the binds marked writable can be written:
    the root and ``/dev`` are remounted read-only once built, ``/dev`` holds null, zero and
    urandom alone, and there is no ``/dev/shm``. Each in-memory filesystem a child could
    write is host memory outside every other limit.

    A ``host`` (``grader.sandbox._host``) keeps ``_HOST_CAPABILITIES`` in its user
    namespace, to build each forked run's walls, so it may make the namespaces a run needs
    (no ``--disable-userns``); it gets the folders each run mounts over.
    """
    argv = [
        bwrap_path,
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        *([] if host else ["--disable-userns"]),
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        *(arg for cap in _HOST_CAPABILITIES for arg in ("--cap-add", cap) if host),
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--hostname",
        "sandbox",
    ]
    for name in _SYSTEM:
        path = f"/{name}"
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    argv += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache", "--proc", "/proc"]
    # The machine's kernel settings: read-only, whatever the uid. A host runs no student
    # code, and each run it forks mounts a /proc of its own and covers the same parts: the
    # host's own mounts would only be copied into every run's mount namespace.
    for part in () if host else PROC_READ_ONLY:
        argv += ["--ro-bind-try", f"/proc/{part}", f"/proc/{part}"]
    argv += ["--tmpfs", "/dev"]
    for device in _DEVICES:
        argv += ["--dev-bind", f"/dev/{device}", f"/dev/{device}"]
    for name, target in _DEVICE_LINKS:
        argv += ["--symlink", target, f"/dev/{name}"]
    argv += [
        "--remount-ro",
        "/dev",
        "--perms",
        "0700",
        "--size",
        str(disk_mb << 20),
        "--tmpfs",
        SANDBOX,
        "--dir",
        f"{SANDBOX}/tmp",
    ]
    for bind in binds:
        argv += ["--bind" if bind.writable else "--ro-bind", bind.source, bind.dest]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    if host:
        argv += ["--dir", f"{KIT}/original", "--dir", f"{KIT}/shown", "--dir", f"{KIT}/layer"]
    return [*argv, "--remount-ro", "/", "--chdir", SANDBOX]
