"""Grade many submissions: discovery, sharding, one worker process each, the gradebook.

Each submission is graded by its own worker (``grader.batch._worker``), started in a session
of its own with the grader's code only, so nothing a submission does can stop the
batch: a worker that overruns the rubric's ``budget_s`` is killed with its process
group, and one that dies (a signal, out of memory, any exit status) leaves an error row
that says why. Each worker writes its submission's outputs once, through the grades
folder's home (``grader.ledger._folder``), and the batch, the one process that holds the
instructor's key, signs them once. Ctrl-C stops starting workers, kills the running ones
and raises ``BatchInterrupted``.

A batch into a grades folder that already has a gradebook updates it (``earlier_rows``):
a submission graded again replaces its own row (by folder name), every other row stays as
it was, and the rows whose folder the paths no longer hold are kept and listed as absent;
``--replace`` keeps only this batch's rows and lists the ones it drops. ``gradebook.csv``
is rewritten whole (a temporary file, then ``os.replace``) from the earlier rows with the
finished ones over them, so no rewrite holds fewer rows than before: at once, for the first
finished row, then once a share of its rows are new (or a minute has passed; never more
than once a second), at the end and on Ctrl-C, so that its cost grows with the rows, not
with their square (``_Gradebook``). A crash loses at most the rows of that last window,
never an earlier row.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal, TypeVar

import gradekit
from gradekit import UsageError
from gradekit.internal import commands
from grader._late import Late, lateness
from grader._model import IGNORED_NAMES
from grader.batch._copies import Comparison, compare_cohort
from grader.batch._idle import IdleHelper
from grader.batch._worker import (
    CASE,
    EXIT_OUT_OF_MEMORY,
    WorkerRequest,
    decode_row,
    encode_request,
)
from grader.batch._zygote import REQUEST, ROW, STDERR, Zygote, ZygoteGone
from grader.grading import cohort_packages, seed_pool
from grader.ledger import (
    GRADEBOOK,
    LEDGER,
    draw_key,
    read_ledger,
    refuse_clashes,
    reserved_for,
    sign_outputs,
    temporary_path,
)
from grader.outputs import (
    REPORTED,
    GradebookError,
    GradebookRow,
    error_row,
    gradebook_csv,
    load_key,
    points_text,
    read_gradebook,
    without_signing_key,
)
from grader.rubric import Rubric
from grader.sandbox import PROCESS_WALL, Wall, scratch_folder
from grader.submission import Identity, Roster, identify

__all__ = [
    "HEARTBEAT_S",
    "INTERRUPTED",
    "BatchInterrupted",
    "Earlier",
    "Heartbeat",
    "Progress",
    "Shard",
    "discover",
    "earlier_rows",
    "grade_batch",
    "not_a_submission",
    "parse_shard",
    "print_heartbeat",
    "print_progress",
]

_TICK_S = 0.2  # how often a waiting thread looks at its worker's budget and at Ctrl-C
_GRACE_S = 10.0  # for a killed worker to be reaped
_OUTPUT_CAP = 1 << 20  # of a worker's row and of its stderr: both are a few lines
# While rows finish, the gradebook is rewritten at most every _WRITE_EVERY_S seconds (and
# _WRITE_SHARE times its last rewrite's duration), once 1/_WRITE_SHARE of its rows are new,
# and at least every _WRITE_AT_MOST_S seconds: see _Gradebook.
_WRITE_EVERY_S = 1.0
_WRITE_SHARE = 32
_WRITE_AT_MOST_S = 60.0
_Picked = TypeVar("_Picked", Path, Identity)


@dataclass(frozen=True, slots=True)
class Shard:
    """Part ``index`` (1-based) of ``count``: every count-th submission in name order."""

    index: int
    count: int

    def pick(self, submissions: Sequence[_Picked]) -> list[_Picked]:
        """The submissions (folders, or their identities) of this shard."""
        return list(submissions[self.index - 1 :: self.count])


def parse_shard(text: str) -> Shard:
    """Parse ``K/N`` with 1 <= K <= N."""
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count)):
        raise UsageError(f"--shard {text!r}: use K/N with 1 <= K <= N, e.g. --shard 2/4")
    return Shard(int(index), int(count))


def discover(paths: Sequence[Path], out: Path | None = None) -> list[Path]:
    """Submissions named by ``paths``: a folder with a pyproject.toml is one submission,
    any other folder holds one submission per sub-folder, hidden ones left out. Sorted by
    folder name.

    A folder named like an entry of the grades folder (its ledger, gradebook, ...:
    ``grader.ledger.reserved_for``), hidden or not, is a ``UsageError`` naming each, for
    the whole batch whatever part of it is graded, before anything is written (``out``,
    the grades folder, is named in it)."""
    found: dict[Path, Path] = {}
    hidden: list[Path] = []  # left out like .git, but not in silence when named like an entry
    for path in paths:
        if not path.is_dir():
            raise UsageError(f"{path} is not a folder: pass a submission or a folder of them")
        if (path / "pyproject.toml").is_file():
            found.setdefault(path.resolve(), path)
            continue
        for child in sorted(path.iterdir()):
            if child.is_dir() and not child.name.startswith("."):
                found.setdefault(child.resolve(), child)
            elif child.is_dir() and reserved_for(child.name):
                hidden.append(child)
    ordered = sorted(found.values(), key=lambda p: (p.resolve().name, str(p.resolve())))
    refuse_clashes(((path, path.resolve().name) for path in (*hidden, *ordered)), out)
    return ordered


INTERRUPTED = (
    "Ctrl-C stopped the batch before this submission was graded, so this "
    "gradebook is partial: grade it again"
)


def _laid_out_when_graded(folder: Path) -> bool:
    """Whether grading ``folder`` lays it out: it is a submission (gone, or not one, it
    gets an error row and no copy)."""
    try:
        return not not_a_submission(folder)
    except OSError:
        return False


def not_a_submission(folder: Path) -> str:
    """Why ``folder`` is no submission at all ("" when it is one): it has no pyproject.toml.
    A zip download often wraps the submission in one more folder: the reason names it."""
    if (folder / "pyproject.toml").is_file():
        return ""
    inner = sorted(
        child.name
        for child in folder.iterdir()
        if child.is_dir() and (child / "pyproject.toml").is_file()
    )
    if len(inner) == 1:
        return (
            f"no pyproject.toml: the submission seems to be one folder deeper, in "
            f"{folder.name}/{inner[0]}/; move its files up into {folder.name}/ (or grade "
            f"{folder.name}/{inner[0]}) and grade it again"
        )
    return (
        "no pyproject.toml, so this folder is not a submission: a submission is a copy of "
        "the lab with its pyproject.toml at the top; add it, or remove the folder from "
        "the batch"
    )


Mode = Literal["update", "replace"]


@dataclass(frozen=True, slots=True)
class Earlier:
    """The gradebook already in a grades folder, and what a batch does with its rows.

    ``update`` (the default): a submission graded now replaces its own row, matched by
    folder name; every other row is kept as it was. ``replace``: the gradebook holds only
    this batch's rows; the others are dropped (and listed). A submission graded now keeps
    its earlier row until its new one is written, and for good when Ctrl-C stops it first.
    """

    mode: Mode = "update"
    kept_rows: tuple[GradebookRow, ...] = ()  # rows kept without being graded now
    regraded: tuple[GradebookRow, ...] = ()  # earlier rows of the folders graded now
    absent: tuple[str, ...] = ()  # folders of kept rows that the paths no longer hold, sorted
    dropped: tuple[str, ...] = ()  # folders whose rows ``replace`` drops, sorted

    @property
    def kept(self) -> tuple[str, ...]:
        """The folders of the rows kept without being graded now, sorted."""
        return tuple(sorted({row.submission for row in self.kept_rows}))

    @property
    def rows(self) -> tuple[GradebookRow, ...]:
        """What every rewrite of the gradebook starts from; finished rows go over them."""
        return (*self.kept_rows, *self.regraded)

    def noted(self, comparison: Comparison) -> Earlier:
        """These rows with their copy notes as ``comparison`` has them: a row kept without
        being graded is still named when a classmate graded now copied it."""
        return dataclasses.replace(
            self,
            kept_rows=tuple(map(comparison.noted, self.kept_rows)),
            regraded=tuple(map(comparison.noted, self.regraded)),
        )


def earlier_rows(
    out: Path,
    criterion_ids: Sequence[str],
    graded: Iterable[str],
    discovered: Iterable[str],
    *,
    replace: bool = False,
) -> Earlier:
    """What a batch grading the folders ``graded`` (among ``discovered``, those its paths
    hold) does with ``out``'s gradebook; nothing when there is none yet.

    A gradebook that cannot be read, or (updating) whose criteria are not the rubric's
    while some of its rows are not graded again, is a ``UsageError`` before anything is
    graded: those rows could not be kept, and nothing is lost by stopping. (When every row
    is graded again, the new criteria simply replace the old columns; a row interrupted
    then gets an ``interrupted`` line, its old one having the old columns.)
    """
    path = out / GRADEBOOK
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Earlier("replace" if replace else "update")
    try:
        ids, rows = read_gradebook(data)
    except GradebookError as exc:
        raise UsageError(
            f"{path}: {exc}. This batch cannot keep its rows, or list them: move "
            f"it out of {out} (nothing else there changes) and grade again"
        ) from None
    now, found = set(graded), set(discovered)
    regraded = tuple(row for row in rows if row.submission in now)
    others = [row for row in rows if row.submission not in now]
    if replace:
        return Earlier(
            "replace",
            regraded=regraded if list(ids) == list(criterion_ids) else (),
            dropped=tuple(sorted({row.submission for row in others})),
        )
    if rows and list(ids) != list(criterion_ids):
        if not others:  # every row is graded again: the new columns replace the old ones
            return Earlier("update")
        raise UsageError(
            f"{path} has the criteria {','.join(ids)}, but this rubric has "
            f"{','.join(criterion_ids)}: its {len(others)} rows that this batch does not grade "
            f"({', '.join(sorted(row.submission for row in others)[:5])}"
            f"{' ...' if len(others) > 5 else ''}) cannot share a gradebook with this "
            "batch's. Grade every submission again (the whole cohort), or with --replace "
            "(the gradebook then holds only this batch's rows, and each row it drops is "
            "listed), or pass another --out"
        )
    return Earlier(
        "update",
        kept_rows=tuple(others),
        regraded=regraded,
        absent=tuple(sorted({row.submission for row in others if row.submission not in found})),
    )


Progress = Callable[[int, int, GradebookRow, float], None]  # done, total, the row, elapsed s
Heartbeat = Callable[[str, float, str], None]  # folder, seconds so far, the case running now
HEARTBEAT_S = 15.0  # how long a submission runs before the batch says it is still at it


class BatchInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped the batch; ``gradebook.csv`` holds ``rows`` (and the earlier rows it
    kept), ``not_graded`` never ran to the end (folder names, in batch order)."""

    def __init__(self, rows: Sequence[GradebookRow], not_graded: Sequence[str]) -> None:
        super().__init__(f"interrupted with {len(not_graded)} submissions not graded")
        self.rows = list(rows)
        self.not_graded = list(not_graded)


def grade_batch(
    submissions: Sequence[Path] | Sequence[Identity],
    rubric: Rubric,
    *,
    out: Path,
    jobs: int,
    label: str | None = None,
    progress: Progress | None = None,
    wall: Wall = PROCESS_WALL,
    roster: Roster | None = None,
    heartbeat: Heartbeat | None = None,
    key_file: Path | None = None,
    earlier: Earlier | None = None,
    comparison: Comparison | None = None,
) -> list[GradebookRow]:
    """Grade every submission in a worker process of its own, at most ``jobs`` at once.

    One submission never stops the others, and ``out/gradebook.csv`` holds ``earlier``'s
    rows (by default: ``out``'s gradebook, updated) with each finished row over its
    folder's, rewritten as rows finish. ``submissions`` are the identities the command line computed
    (``grader.submission.identify``, with ``roster`` naming the roster they came from), or
    folders, whose identities then come from ``roster`` (else the folder names); two
    submissions of one identity, and a folder whose output folder would take the place of
    an entry of ``out`` (``grader.ledger.refuse_clashes``), are a ``UsageError`` before
    anything runs or is written. Ctrl-C kills
    the running workers, writes the finished rows and raises ``BatchInterrupted``.
    ``progress`` hears of each finished row; ``heartbeat`` of each submission still running
    every ``HEARTBEAT_S`` seconds, with the case its sandbox runs. Each results.json is
    written with the current reviews of its report that ``out``'s ledger holds now. With an
    instructor key (``key_file``, else ``GRADEKIT_SIGNING_KEY_FILE`` or
    ``GRADEKIT_SIGNING_KEY``) every report.json and results.json is signed here, in the
    batch, once: no worker sees the key.

    ``comparison`` is the cohort's comparison for copies (``compare_cohort`` over every
    folder the batch's paths hold; by default, over ``submissions``): it is written as
    ``out/copies.json`` before anything is graded, and every row, written now or kept,
    ends its ``reason`` with its copy note. No report, and no digest, changes.
    """
    identities = _identities(submissions, roster)
    # A folder named like the grades folder's own entries, or like a file it holds that no
    # grading wrote, stops the whole batch before anything is written.
    refuse_clashes(((identity.path, identity.folder) for identity in identities), out, held=True)
    key = load_key(key_file)  # a bad signing key stops the batch before anything is graded
    criterion_ids = tuple(c.id for c in rubric.criteria)
    if comparison is None:
        comparison = compare_cohort([(i.folder, i.path) for i in identities], out)
    if earlier is None:
        folders = [identity.folder for identity in identities]
        earlier = earlier_rows(out, criterion_ids, folders, folders)
    earlier = earlier.noted(comparison)  # a note once given is not given twice
    reviews = _reviews_by_student(read_ledger(out / LEDGER).events)
    out.mkdir(parents=True, exist_ok=True)
    drawing = draw_key(out, key)
    book = _Gradebook(out / GRADEBOOK, criterion_ids, earlier.rows)
    book.write([])  # at once: the rows ``replace`` drops go, and the header is this rubric's
    comparison.write(out)
    workers = _Workers(
        rubric,
        out=out,
        label=label,
        wall=wall,
        roster=Path(roster.source).name if roster else "",
        heartbeat=heartbeat,
        key=key,
        draw_key=drawing,
        reviews=reviews,
        preload=cohort_packages((i.path for i in identities), rubric.packages)
        if wall.name == "namespaces"
        else (),
    )
    finished: dict[int, GradebookRow] = {}
    futures: dict[Future[GradebookRow | None], int] = {}
    started = time.monotonic()
    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="gradekit-batch")
    workers.plan(identities, jobs)
    try:
        for number, identity in enumerate(identities):
            futures[pool.submit(workers.grade, identity)] = number
        for future in as_completed(futures):
            row = future.result()
            if row is None:
                continue
            finished[futures[future]] = row = comparison.noted(row)
            book.finished(finished.values())
            if progress:
                progress(len(finished), len(identities), row, time.monotonic() - started)
    except KeyboardInterrupt:
        with _sigint_ignored():
            workers.stop()
            pool.shutdown(wait=True, cancel_futures=True)
            finished |= {n: comparison.noted(row) for n, row in _rows_of(futures).items()}
            # Every submission keeps a line: its earlier row when it had one (the grade it
            # had), else one that says it was stopped, so the gradebook reads as what it
            # is, partial, and nobody takes a missing line for a zero.
            had = {row.submission for row in earlier.regraded}
            book.write(
                [
                    *finished.values(),
                    *(
                        comparison.noted(
                            error_row(
                                identity.folder, identity.student, INTERRUPTED, status="interrupted"
                            )
                        )
                        for number, identity in enumerate(identities)
                        if number not in finished and identity.folder not in had
                    ),
                ]
            )
        rows = [finished[number] for number in sorted(finished)]
        raise BatchInterrupted(
            rows,
            [
                identity.folder
                for number, identity in enumerate(identities)
                if number not in finished
            ],
        ) from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        workers.close()
    book.write(finished.values())  # the rows of the last window
    return [finished[number] for number in sorted(finished)]


def _identities(
    submissions: Sequence[Path] | Sequence[Identity], roster: Roster | None
) -> list[Identity]:
    """The identities the command line computed, as they are; else the folders', from
    ``roster`` (computed once either way)."""
    given = [s for s in submissions if isinstance(s, Identity)]
    if given and len(given) == len(submissions):
        return given
    folders = [s for s in submissions if isinstance(s, Path)]
    if len(folders) != len(submissions):
        raise TypeError(
            "grade_batch takes folders or their identities, not both: pass "
            "identify(folders, roster), or the folders alone"
        )
    return identify(folders, roster)


def _reviews_by_student(
    events: Sequence[Mapping[str, Any]],
) -> dict[str, tuple[Mapping[str, Any], ...]]:
    """The ledger's review events by student, in ledger order: a worker gets its student's
    and finds among them the current reviews of the report it writes."""
    found: dict[str, list[Mapping[str, Any]]] = {}
    for event in events:
        if event.get("event") == "review":
            found.setdefault(str(event.get("student")), []).append(event)
    return {student: tuple(reviews) for student, reviews in found.items()}


def _rows_of(futures: Mapping[Future[GradebookRow | None], int]) -> dict[int, GradebookRow]:
    """The rows of the futures that finished with one."""
    rows = {}
    for future, number in futures.items():
        if future.done() and not future.cancelled() and future.exception() is None:
            row = future.result()
            if row is not None:
                rows[number] = row
    return rows


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """The first Ctrl-C stops the batch; more while it cleans up must not cut that short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class _Gradebook:
    """The batch's gradebook: the earlier rows with this batch's over their folders' rows.

    Rewriting it whole costs time in proportion to its rows, so while rows finish it is
    rewritten only once ``1/_WRITE_SHARE`` of its rows are new since the last rewrite (or
    ``_WRITE_AT_MOST_S`` seconds of monotonic time have passed), and never sooner than
    ``_WRITE_EVERY_S`` seconds, nor than ``_WRITE_SHARE`` times the last rewrite took,
    after it: the rows written over a batch grow with its rows (each new row pays for at
    most ``_WRITE_SHARE`` rows written), not with their square, and a crash loses at most
    the rows of one window. The first finished row is written at once; ``write``
    rewrites it now (the batch calls it at once, at the end and on Ctrl-C).
    """

    def __init__(
        self,
        path: Path,
        criterion_ids: Sequence[str],
        earlier: Sequence[GradebookRow] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path, self.criterion_ids = path, tuple(criterion_ids)
        self._earlier = tuple(earlier)
        self._clock = clock
        self._last = 0.0  # when the last rewrite ended
        self._pause = 0.0  # how long after it the next may come, at the soonest
        self._written = 0  # the finished rows it held
        self._size = len(self._earlier)  # and all its rows
        self._first = True
        self.writes = 0  # how many rewrites so far

    def finished(self, rows: Collection[GradebookRow]) -> None:
        """A row finished; ``rows`` are all that have: rewrite if it is time to."""
        waited = self._clock() - self._last
        new = len(rows) - self._written
        due = waited >= self._pause and (
            new * _WRITE_SHARE >= self._size or waited >= _WRITE_AT_MOST_S
        )
        if self._first or due:
            self._first = False
            self.write(rows)

    def write(self, rows: Iterable[GradebookRow]) -> None:
        """Rewrite the whole gradebook: a reader, or a crash, sees the old bytes or the new."""
        started = self._clock()
        rows = list(rows)
        self._written = len(rows)
        done = {row.submission for row in rows}
        rows += [row for row in self._earlier if row.submission not in done]
        _replace_file(self.path, gradebook_csv(rows, self.criterion_ids))
        self.writes, self._size = self.writes + 1, len(rows)
        self._last = self._clock()
        self._pause = max(_WRITE_EVERY_S, _WRITE_SHARE * (self._last - started))


def _replace_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and ``os.replace``.

    No fsync: this guards against the grader dying mid-write, not the machine.
    """
    temporary = temporary_path(path, str(os.getpid()))
    try:
        temporary.write_bytes(data)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)  # only left when writing or replacing failed


class _Workers:
    """Starts one worker per submission, watches its budget, and stops them all on demand."""

    def __init__(
        self,
        rubric: Rubric,
        *,
        out: Path,
        label: str | None,
        wall: Wall,
        roster: str,
        heartbeat: Heartbeat | None = None,
        key: bytes | None = None,
        draw_key: bytes = b"",
        reviews: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
        preload: Sequence[str] = (),
    ) -> None:
        self._heartbeat = heartbeat
        self._reviews = reviews or {}  # the ledger's review events, by student
        self._key = key  # signs each graded row's outputs here: workers never see it
        self._draw_key = draw_key  # workers get this one: it draws, it signs nothing
        self._rubric, self._label, self._wall = rubric, label, wall
        self._out, self._roster = out.absolute(), roster  # workers start in another folder
        self._ids = frozenset(c.id for c in rubric.criteria)
        self._checks = _custom_check_folders(rubric)
        self._stopping = threading.Event()
        # -P and a folder of its own to start in: no folder can shadow the grader's code.
        self._home = scratch_folder("gradekit-zygote-")
        # What the gradings derive from files' bytes, for the gradings after them: in the
        # zygote's folder, which no run's host sees (grader._cache).
        self._derived = self._home / "derived"
        self._derived.mkdir(mode=0o700)
        # Every worker's scratch folder is in this one, which the runs' hosts see (the
        # namespaces wall's; each run sees its own folders only).
        self._scratch = scratch_folder("gradekit-batch-")
        self._scratch.chmod(0o711)  # searchable, not listable: see grade()
        # The hosts import the rubric's packages some submission imports (an SDK's import
        # is 0.5-1.3 s of CPU that every run of it paid): ``cohort_packages``.
        self._hosts: dict[str, object] | None = (
            {
                "root": str(self._scratch),
                "seeds": list(seed_pool(draw_key)),
                "preload": list(preload),
                "wall": wall.name,
            }
            if wall.name in ("namespaces", "process") and draw_key
            else None
        )
        self._zygote = Zygote(_worker_environment(), self._home, self._hosts)
        self._replacing = threading.Lock()
        # Lays out the next submissions and removes the graded ones' scratch, at the idle
        # priority: neither is on a grading's path any more (see grader.batch._idle).
        self._idle = IdleHelper()
        self._lock = threading.Lock()
        self._order: dict[str, int] = {}  # a submission's folder -> its place in the batch
        self._plan: list[Identity] = []
        self._ahead: dict[str, Path] = {}  # folder -> the scratch it is being laid out in
        self._asked = 0  # the places up to which lay-outs were asked for
        self._lead = 1

    def close(self) -> None:
        """End the zygote (and any worker still running): after the last row."""
        self._zygote.close()
        self._idle.close()
        shutil.rmtree(self._home, ignore_errors=True)
        shutil.rmtree(self._scratch, ignore_errors=True)

    def _replace(self, gone: Zygote) -> None:
        """A new zygote for one that ended (killed, or out of memory): the batch goes on."""
        with self._replacing:
            if self._zygote is gone:
                gone.close()
                self._zygote = Zygote(_worker_environment(), self._home, self._hosts)

    def stop(self) -> None:
        """Start no more workers; each running one is killed by the thread that watches it."""
        self._stopping.set()

    def grade(self, identity: Identity) -> GradebookRow | None:
        """The submission's row; None when the batch was stopped before it finished. It
        carries the roster's display name and, for a graded row, the late policy's verdict."""
        row = self._grade(identity)
        if row is None:
            return None
        late = self._late(identity)
        if late is None or row.status not in REPORTED:
            return dataclasses.replace(row, name=identity.display_name)
        return dataclasses.replace(
            row,
            name=identity.display_name,
            late=late.cell(),
            penalty=points_text(late.penalty) if late.penalty else "",
        )

    def _late(self, identity: Identity) -> Late | None:
        """What the lab's late policy makes of the submission's time; None without one."""
        policy = self._rubric.late
        if policy is None:
            return None
        most = Decimal(sum(criterion.weight for criterion in self._rubric.criteria))
        return lateness(
            policy, most, identity.submitted_at, identity.extension, identity.submitted_from
        )

    def _grade(self, identity: Identity) -> GradebookRow | None:
        if self._stopping.is_set():
            return None
        why = not_a_submission(identity.path)
        if why:
            return error_row(identity.folder, identity.student, why, status="ungradable")
        if not identity.student:
            return error_row(
                identity.folder,
                "",
                (
                    f"the folder {identity.folder!r} is not in the roster {self._roster}: add the "
                    f"line `{identity.folder},STUDENT_ID,DISPLAY NAME` to it, or move the folder "
                    "out of the batch, and grade it again"
                ),
            )
        scratch = self._scratch_for(identity)
        try:
            return self._run(identity, scratch)
        except Exception as exc:  # no worker could be started (no memory, no processes left)
            return error_row(
                identity.folder,
                identity.student,
                (
                    f"the grader could not run a worker for it ({type(exc).__name__}: {exc}): "
                    "nothing was scored; grade it again"
                ),
            )
        finally:
            _end_leftovers(scratch)
            self._idle.remove(scratch)

    def plan(self, identities: Sequence[Identity], lead: int) -> None:
        """The order ``grade`` will be asked for ``identities`` in: as each starts, the
        next ``lead`` are laid out ahead, by the idle helper."""
        with self._lock:
            self._plan = list(identities)
            self._order = {identity.folder: number for number, identity in enumerate(identities)}
            self._lead = max(1, lead)

    def _scratch_for(self, identity: Identity) -> Path:
        """The submission's scratch folder (the one it is being laid out in, if it is), and
        the next ones' lay-outs asked for."""
        with self._lock:
            scratch = self._ahead.pop(identity.folder, None)
            number = self._order.get(identity.folder)
            if number is not None:
                for coming in self._plan[max(self._asked, number + 1) : number + 1 + self._lead]:
                    if coming.student and _laid_out_when_graded(coming.path):
                        self._ahead[coming.folder] = ahead = self._new_scratch()
                        self._idle.lay_out(
                            coming.path, ahead, IGNORED_NAMES, limits=self._rubric.limits
                        )
                self._asked = max(self._asked, number + 1 + self._lead)
        return scratch or self._new_scratch()

    def _new_scratch(self) -> Path:
        scratch = Path(tempfile.mkdtemp(prefix="worker-", dir=self._scratch))
        scratch.chmod(0o711)  # searchable, not listable: a root grader's children are uid 65534
        return scratch

    def _run(self, identity: Identity, scratch: Path) -> GradebookRow | None:
        zygote, pid = self._fork(identity, scratch)
        try:
            code, why = self._watch(zygote, pid, scratch, identity.folder)
        except ZygoteGone:
            self._replace(zygote)
            _end_leftovers(scratch)
            return error_row(
                identity.folder,
                identity.student,
                (
                    "the grader's worker for it was lost: the process that starts workers ended "
                    "while it ran (killed, or out of memory); nothing was scored; grade it again"
                ),
            )
        stdout, stderr = _read_output(scratch / ROW), _read_output(scratch / STDERR)
        if why == "stopped":
            return None
        if why == "budget":
            return error_row(
                identity.folder,
                identity.student,
                (
                    f"the submission used its whole {self._rubric.limits.budget_s} s budget: its "
                    "grading was stopped and nothing was scored; look for an agent that hangs or "
                    "loops, or raise budget_s in the rubric's [limits] and grade it again"
                ),
            )
        if code != 0:
            return error_row(identity.folder, identity.student, _died(code, stderr, self._rubric))
        _relay(identity.folder, stderr)
        return sign_outputs(self._checked(identity, stdout), self._out, self._key)

    def _fork(self, identity: Identity, scratch: Path) -> tuple[Zygote, int]:
        """A worker for the submission, from the zygote (a new one if the last one ended)."""
        late = self._late(identity)
        for _ in range(2):
            zygote = self._zygote
            # The request is a file, never a pipe: writing a pipe could block.
            (scratch / REQUEST).write_bytes(
                encode_request(
                    WorkerRequest(
                        parent=zygote.pid,
                        root=identity.path.absolute(),
                        folder=identity.folder,
                        student=identity.student,
                        out=self._out / identity.folder,
                        scratch=scratch,
                        label=self._label,
                        isolation=self._wall.name,
                        rubric=self._rubric,
                        check_folders=self._checks,
                        draw_key=self._draw_key,
                        reviews=self._reviews.get(identity.student, ()),
                        derived=self._derived,
                        late=None if late is None else late.document(),
                    )
                )
            )
            try:
                return zygote, zygote.fork(scratch, identity.folder)
            except ZygoteGone:
                self._replace(zygote)
        raise ZygoteGone("the grader's zygote ended twice in a row")

    def _watch(self, zygote: Zygote, pid: int, scratch: Path, folder: str) -> tuple[int, str]:
        """The worker's exit status, and why it was killed: "budget", "stopped" or ""."""
        started = time.monotonic()
        deadline, beat = started + self._rubric.limits.budget_s, started + HEARTBEAT_S
        while True:
            if self._heartbeat is not None and time.monotonic() >= beat:
                beat += HEARTBEAT_S
                self._heartbeat(folder, time.monotonic() - started, _running(scratch))
            tick = max(0.0, min(_TICK_S, deadline - time.monotonic()))
            code = zygote.wait(pid, tick)
            if code is not None:
                return code, ""
            why = (
                "stopped"
                if self._stopping.is_set()
                else "budget"
                if time.monotonic() >= deadline
                else ""
            )
            if why:
                zygote.kill(pid)
                code = zygote.wait(pid, _GRACE_S)
                _end_leftovers(scratch)
                return -signal.SIGKILL if code is None else code, why

    def _checked(self, identity: Identity, stdout: bytes) -> GradebookRow:
        """The worker's row, if it is one for this submission and this rubric."""
        try:
            row = decode_row(stdout)
        except ValueError as exc:
            return error_row(
                identity.folder,
                identity.student,
                (
                    f"the grader's worker gave no usable answer ({exc}): nothing was scored; grade "
                    "it again, and report a grader bug if it happens again"
                ),
            )
        if (row.submission, row.student) != (identity.folder, identity.student) or not set(
            row.criteria
        ) <= self._ids:
            return error_row(
                identity.folder,
                identity.student,
                (
                    "the grader's worker answered for another submission or rubric: nothing was "
                    "scored; report a grader bug"
                ),
            )
        return row


def _read_output(path: Path) -> bytes:
    """What a worker wrote to one of its files, up to ``_OUTPUT_CAP`` bytes."""
    try:
        with open(path, "rb") as handle:
            return handle.read(_OUTPUT_CAP)
    except OSError:
        return b""


def _died(code: int, stderr: bytes, rubric: Rubric) -> str:
    """Why a worker that exited by itself, or by a signal, left no row."""
    if code == EXIT_OUT_OF_MEMORY:
        return (
            f"grading it took more memory than the grader's worker may use "
            f"(grader_memory_mb = {rubric.limits.grader_memory_mb}): nothing was scored; "
            "raise grader_memory_mb in the rubric's [limits] and grade it again"
        )
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return (
            f"the grader's worker for it was killed by {name}: nothing was scored; grade "
            "it again, and if it dies again look in the system log for an out-of-memory "
            "kill, or in its agent for code that signals other processes (grade it with "
            "--wall namespaces)"
        )
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    said = f" ({lines[-1][:300]})" if lines else ""
    return (
        f"the grader's worker for it stopped with exit status {code}{said}: nothing was "
        "scored; grade that folder again on its own, with GRADEKIT_DEBUG=1"
    )


def _relay(folder: str, stderr: bytes) -> None:
    """A graded submission's worker may still have warned about something: pass it on."""
    text = stderr[:4096].decode("utf-8", "replace").strip()
    for line in text.splitlines():
        print(f"{folder}: {line}", file=sys.stderr)


def _custom_check_folders(rubric: Rubric) -> dict[str, str]:
    """Where this process imported each custom check from (``load_rubric`` did, from the
    rubric's folder), so that every worker imports the very same module."""
    folders = {}
    for criterion in rubric.criteria:
        top = sys.modules.get(criterion.check.partition(":")[0].split(".")[0])
        if not criterion.custom or top is None:
            continue  # a worker imports it from its own path, as grading in process would
        origin = getattr(top, "__file__", None)
        if origin is None:  # a namespace package
            places = list(getattr(top, "__path__", []))
            if places:
                folders[criterion.check] = str(Path(places[0]).parent)
        else:
            package = Path(origin).name == "__init__.py"
            folders[criterion.check] = str(Path(origin).parents[1 if package else 0])
    return folders


def _worker_environment() -> dict[str, str]:
    """The grader's own environment, with this grader's ``grader`` and ``gradekit`` first on the
    import path: the worker starts elsewhere, with ``-P``, so it finds them only there."""
    grader_folder = Path(__file__).resolve().parents[1]  # grader/batch/_batch.py
    roots = [
        str(Path(folder).resolve().parent) for folder in (str(grader_folder), *gradekit.__path__)
    ]
    inherited = os.environ.get("PYTHONPATH", "")
    paths = [*dict.fromkeys(roots), *([inherited] if inherited else [])]
    # The commands its reports print are this process's lab's: workers start elsewhere.
    return {
        **without_signing_key(os.environ),
        "PYTHONPATH": os.pathsep.join(paths),
        commands.FORM: commands.current_form(),
    }


def _end_leftovers(scratch: Path) -> int:
    """SIGKILL every process still working in ``scratch`` (a sandboxed child whose worker
    died before it could end it); how many. Reads ``/proc``: elsewhere it does nothing.

    The sandbox is meant to end its children with the worker; this is the batch's own
    check that none is left behind in the folder it handed out.
    """
    inside = str(scratch.resolve())
    killed = 0
    for _ in range(3):  # one that was starting a process while it was killed
        found = [pid for pid in _pids() if _works_in(pid, inside)]
        for pid in found:
            killed += _kill(pid, inside)
        if not found:
            break
    return killed


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def _works_in(pid: int, inside: str) -> bool:
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:  # gone, a zombie, or not ours to look at
        return False
    return cwd == inside or cwd.startswith(inside + os.sep)


def _kill(pid: int, inside: str) -> int:
    """Kill ``pid`` if, once pinned by a pidfd, it still works in ``inside``."""
    try:
        handle = os.pidfd_open(pid)
    except OSError:
        return 0
    try:
        if not _works_in(pid, inside):  # the pid was reused before it was pinned
            return 0
        signal.pidfd_send_signal(handle, signal.SIGKILL)
        return 1
    except OSError:
        return 0
    finally:
        os.close(handle)


def _running(scratch: Path) -> str:
    """The case a worker said its sandbox runs now ("" before the first)."""
    try:
        return (scratch / CASE).read_text("utf-8")[:200]
    except (OSError, UnicodeDecodeError):
        return ""


def print_progress(done: int, total: int, row: GradebookRow, elapsed: float) -> None:
    """The default progress line on stderr: counts, the row, time so far and an estimate."""
    shown = f"{row.total} / {row.max}" if row.status in REPORTED else row.status.upper()
    if row.status == "degraded":
        shown += " DEGRADED"
    left = elapsed / done * (total - done)
    estimate = f", about {_duration(left)} left" if done < total else ""
    print(
        f"[{done}/{total}] {row.submission}: {shown} ({_duration(elapsed)} elapsed{estimate})",
        file=sys.stderr,
    )


def print_heartbeat(folder: str, seconds: float, case: str) -> None:
    """The default heartbeat on stderr: a submission that takes long, and where it is."""
    where = f", case {case}" if case else ""
    print(f"    {folder}: still grading after {_duration(seconds)}{where}", file=sys.stderr)


def _duration(seconds: float) -> str:
    whole = round(seconds)
    return f"{seconds:.1f}s" if seconds < 60 else f"{whole // 60}m{whole % 60:02d}s"
