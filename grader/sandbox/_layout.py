"""One sandboxed run's folders, the wall they are laid out for, and what the child is told.

A run's ``Layout`` and the ``Wall`` it is laid out for are in ``grader.sandbox._wall``;
``LaidOut`` is the submission laid out once for all the runs of one grading, each run
copying from it; ``prepare_run`` makes a run's folders, the wall laying out its part;
``child_config`` and
``child_environment`` are what the child is told; ``captured_output`` and ``read_regular``
are how the parent reads what it left.
"""

from __future__ import annotations

import contextlib
import importlib.util
import marshal
import os
import secrets
import shutil
import stat
import sys
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, ClassVar, Literal

from gradekit import GradekitError
from grader._cache import Derived, content_key
from grader._exits import EXIT_FAILED
from grader._model import IGNORED_NAMES, Limits
from grader.sandbox._bounds import DEPTH, ENTRIES, SIZE, measure, refusal
from grader.sandbox._harness import copy_submission
from grader.sandbox._host import Hosts
from grader.sandbox._wall import Layout, Wall

__all__ = [
    "BOUNDS",
    "DEFAULT_LIMITS",
    "IGNORED_NAMES",
    "LAID_AHEAD",
    "LaidOut",
    "SubmissionTooLarge",
    "bounded",
    "captured_output",
    "child_config",
    "child_environment",
    "child_outputs",
    "compile_package",
    "compile_tree",
    "copy_caps",
    "prepare_run",
    "read_regular",
    "readable",
]

# In a grading's scratch folder: its submission laid out before the grading began (a
# batch's idle helper does it, under another name renamed to this one once whole).
LAID_AHEAD = "laid-ahead"


DEFAULT_LIMITS = Limits()  # a rubric's without a [limits] table
# The walk that bounds a copy, a file of the standard library only: the batch's idle helper
# loads it by this path, as it loads the harness.
BOUNDS = Path(__file__).with_name("_bounds.py")
_COMPILED_MAX = 1 << 20  # bytes: a larger source is left for the child to compile


@dataclass(slots=True)
class LaidOut:
    """The submission laid out once for all the runs of one grading, read-only to them.

    The first run copies the instructor's folder here (ignored names left out, links kept
    as links, nothing but folders, files and links) and every later run copies from this
    copy, so all the runs of a grading see the same files however the original changes
    meanwhile. Each run still gets a writable copy of its own (a run writes in its copy;
    no run sees another's writes); only the reading of the original, the filtering and the
    compiling are done once.

    The packages the runs import from (``lab`` of ``lab.agent:run``) are compiled here,
    each once, into ``__pycache__`` beside their sources: checked-hash pycs, which Python
    uses only while the source's hash matches, so a run that edits a module imports its
    edit, and timestamps never matter. A source that does not compile without a warning is
    left for the child, which compiles it as before and says what Python says.
    """

    folder: Path | None = None
    compiled: set[str] = field(default_factory=set)
    hosts: Hosts = field(default_factory=Hosts)  # the runs' hosts (namespaces only)
    lent: bool = False  # ``hosts`` are the caller's, who ends them (check's two gradings')
    ahead: Path | None = None  # where a copy laid out before the grading began would be
    derived: Derived | None = None  # where a batch keeps bytecode (None: compiled here)
    # Files of the submission (relative paths) that no run sees: its recordings, which
    # the parent alone reads and serves, so that a run cannot tell a withheld answer from
    # a missing one by looking.
    hidden: tuple[str, ...] = ()
    children: int = 0  # the sandboxed children its runs started, for the grade's cost

    def source(
        self, root: Path, scratch: Path, packages: Sequence[str], limits: Limits = DEFAULT_LIMITS
    ) -> Path:
        """The laid-out copy of ``root`` (made under ``scratch`` on the first call, unless
        one was laid out ahead), its ``packages`` (top-level names) compiled.

        ``SubmissionTooLarge`` before anything is copied when the copy would pass one of
        ``limits``' caps (``copy_caps``; a ``Sandbox`` gives the rubric's, the default is a
        rubric's without ``[limits]``); a copy laid out ahead was held to the same caps by
        the batch's idle helper before it was made."""
        if (
            self.folder is None
            and self.ahead is not None
            and _whole_folder(self.ahead)
            and _whole_folder(self.ahead / "copy")
        ):
            self.folder = self.ahead / "copy"
            _leave_out(self.folder, self.hidden)
        if self.folder is None:
            bounded(root, limits)
            scratch.mkdir(parents=True, exist_ok=True)
            folder = Path(tempfile.mkdtemp(prefix="submission-", dir=scratch)).resolve()
            os.chmod(folder, 0o755)  # uid 65534 reads it, behind namespaces as root
            copy_submission(str(root), str(folder / "copy"), IGNORED_NAMES, shared=True)
            self.folder = folder / "copy"
            _leave_out(self.folder, self.hidden)
        for package in packages:
            if package not in self.compiled:
                self.compiled.add(package)
                compile_package(self.folder, package, self.derived)
        return self.folder


def _leave_out(copy: Path, hidden: Sequence[str]) -> None:
    """Take each of ``hidden`` (paths relative to the submission) out of the grader's own
    copy of it. A path that leaves the copy, or runs through a link, is not touched: the
    copy keeps links as links, and only what lies inside it is ever removed."""
    for relative in hidden:
        parts = PurePosixPath(relative).parts
        if not parts or parts[0] == "/" or ".." in parts:
            continue
        path, through_link = copy, False
        for part in parts[:-1]:
            path = path / part
            through_link = through_link or path.is_symlink() or not _whole_folder(path)
        if through_link:
            continue
        path = path / parts[-1]
        if _whole_folder(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)


class SubmissionTooLarge(GradekitError):
    """The grader's copy of a submission would pass a cap of the rubric's ``[limits]``
    (``disk_mb`` of apparent size, ``submission_entries``, ``submission_depth``): nothing
    was copied, the submission is not graded. The message names the limit, what was
    found, the path inside the submission and the fix; ``status`` is the row's."""

    exit_code = EXIT_FAILED
    status: ClassVar[Literal["ungradable"]] = "ungradable"  # it cannot be graded as it stands


# The rubric limit behind each cap of ``copy_caps``, as a refusal names it.
_CAPPED = {SIZE: "disk_mb", ENTRIES: "submission_entries", DEPTH: "submission_depth"}


def copy_caps(limits: Limits) -> dict[str, int]:
    """The caps of the grader's copy of a submission (``grader.sandbox._bounds.measure``'s
    keywords): its apparent size is held to ``disk_mb``, the writable space of each run,
    which a submission larger than it could never be copied into."""
    return {
        "size": limits.disk_mb << 20,
        "entries": limits.submission_entries,
        "depth": limits.submission_depth,
    }


def bounded(root: Path, limits: Limits) -> None:
    """``SubmissionTooLarge`` when the grader's copy of ``root`` would pass a cap of
    ``limits``; one walk of what the copy would hold, nothing copied."""
    over = measure(str(root), IGNORED_NAMES, **copy_caps(limits))
    if over is not None:
        raise SubmissionTooLarge(refusal(over, _CAPPED))


def _whole_folder(path: Path) -> bool:
    """Whether ``path`` is a folder (a link to one is not)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def readable(top: Path) -> None:
    """Make every folder and file under ``top`` readable by every user, whatever the umask
    (uid 65534 copies them behind namespaces as root). Each is opened without following a
    link, so a link (even one put in place meanwhile) is never followed out of ``top``."""
    for here, _, files in os.walk(top):
        _chmod(here, 0o755, os.O_DIRECTORY)
        for name in files:
            _chmod(os.path.join(here, name), 0o644, 0)


def _chmod(path: str, mode: int, flags: int) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | flags)
    except OSError:  # a link, or gone
        return
    try:
        kind = os.fstat(fd).st_mode
        if stat.S_ISDIR(kind) or stat.S_ISREG(kind):
            os.fchmod(fd, mode)
    finally:
        os.close(fd)


def compile_package(folder: Path, package: str, derived: Derived | None = None) -> None:
    """Compile the top-level ``package`` (a folder or a module) of the copy at ``folder``,
    its bytecode readable by every user; ``derived``: where a batch keeps bytecode."""
    if not package.isidentifier():
        return
    top = folder / package
    if top.is_dir() and not top.is_symlink():
        compile_tree(top, derived, base=folder)
        readable(top)
    module = folder / f"{package}.py"
    if module.is_file() and not module.is_symlink():
        _compile_file(module, derived, folder)
        if os.path.isdir(folder / "__pycache__"):
            readable(folder / "__pycache__")


def compile_tree(top: Path, derived: Derived | None = None, *, base: Path | None = None) -> None:
    """Compile every module in the folder ``top`` and the packages below it, each named in
    its bytecode by its path under ``base`` (the folder holding ``top`` when None)."""
    for here, folders, files in os.walk(top):
        folders[:] = sorted(f for f in folders if f.isidentifier())
        for name in sorted(files):
            if name.endswith(".py"):
                _compile_file(Path(here, name), derived, base or top.parent)


def _compile_file(source: Path, derived: Derived | None, base: Path) -> None:
    """A checked-hash pyc beside ``source`` (in ``__pycache__``), as ``py_compile`` writes
    it, or none where the source does not compile without a warning. The code is named by
    the source's path under ``base`` (an import names it again by where it finds it), so the
    bytecode of one source is the same bytes in every submission, and ``derived`` keeps it."""
    if source.is_symlink() or not source.is_file() or source.stat().st_size > _COMPILED_MAX:
        return
    target = source.parent / "__pycache__" / f"{source.stem}.{sys.implementation.cache_tag}.pyc"
    written = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        data = source.read_bytes()
        name = source.relative_to(base).as_posix()
        key = content_key(
            _PYC_VERSION,
            sys.implementation.cache_tag.encode("ascii"),
            name.encode("utf-8", "surrogateescape"),
            data,
        )
        code = derived.read("pyc", key) if derived is not None else None
        if code is None:
            code = _bytecode(data, name)
            if derived is not None:
                derived.write("pyc", key, code)
        if not code:  # the child compiles it, and says what Python says
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
            return
        target.parent.mkdir(exist_ok=True)
        written.write_bytes(code)
        os.replace(written, target)
    except (OSError, ValueError):
        for left in (written, target):  # no half-written pyc stays in the runs' copy
            with contextlib.suppress(OSError):
                left.unlink()


_PYC_VERSION = b"gradekit.pyc/1"  # in each kept bytecode's key: what it was made with


def _bytecode(source: bytes, name: str) -> bytes:
    """``source`` compiled as a checked-hash pyc (PEP 552: magic, flags, the source's hash,
    the marshalled code), exactly as ``py_compile`` would; b"" when it does not compile
    without a warning (a warning is the child's to print)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            code = compile(source, name, "exec", dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError, Warning):
            return b""
    checked = 0b11  # a hash-based pyc whose hash Python checks against the source
    return (
        importlib.util.MAGIC_NUMBER
        + checked.to_bytes(4, "little")
        + importlib.util.source_hash(source)
        + marshal.dumps(code)
    )


def prepare_run(
    root: Path, scratch: Path, wall: Wall, source: Path | None = None, hosts: Hosts | None = None
) -> Layout:
    """A fresh run's folders under ``scratch``, laid out for the child behind ``wall``;
    the run copies the submission from ``source`` (a ``LaidOut`` copy), else from ``root``,
    and may be forked by one of ``hosts``."""
    scratch.mkdir(parents=True, exist_ok=True)
    run = Path(tempfile.mkdtemp(prefix="run-", dir=scratch)).resolve()
    layout = Layout(
        root.resolve(),
        (source or root).resolve(),
        run,
        run / "submission",
        run / "work",
        run / "output",
        wall,
        hosts,
    )
    wall.prepare(layout)
    layout.output.mkdir()
    return layout


def child_environment(layout: Layout, hashseed: int) -> dict[str, str]:
    """The child's whole environment: nothing inherited, so no credentials and no proxies."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": layout.child_copy,
        "TMPDIR": f"{layout.child_work}/tmp",
        "TZ": "UTC",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": str(hashseed),
        "PYTHONIOENCODING": "utf-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def child_config(layout: Layout, limits: Limits, **fields: object) -> dict[str, object]:
    """The child's configuration, the first line it reads: the mode's ``fields``, then what
    its wall adds (see ``Wall.configure``)."""
    return {
        "root": layout.child_copy,
        "roots": [layout.child_copy, layout.child_work],
        "seal": secrets.token_hex(16),  # on every verdict the harness sends (its ``sealer``)
        "sleep_s": limits.timeout_s,  # a sleep within the case's limit costs no wall time
        **fields,
        **layout.wall.configure(layout, limits),
    }


@contextlib.contextmanager
def child_outputs(layout: Layout) -> Iterator[tuple[IO[bytes], IO[bytes]]]:
    """The child's stdout and stderr files, shared by every child of one run."""
    with open(layout.output / "stdout", "wb") as out, open(layout.output / "stderr", "wb") as err:
        yield out, err


def captured_output(layout: Layout, limits: Limits) -> tuple[str, str]:
    """What the children printed, capped and scrubbed; for feedback, never parsed."""
    cap = limits.output_kb * 1024

    def text(name: str) -> str:
        data = read_regular(layout.output / name, cap) or b""
        return layout.scrub(data[:cap].decode("utf-8", "replace"))

    return text("stdout"), text("stderr")


def read_regular(path: Path, cap: int, *, offset: int = 0) -> bytes | None:
    """Up to ``cap + 1`` bytes of a regular file, from ``offset``; None if it is missing or
    anything else.

    The child may plant a symlink or a FIFO where the parent reads: neither may
    steer the parent elsewhere or stall it.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        handle.seek(offset)
        return handle.read(cap + 1)
