"""A cohort graded end to end, as ``gradekit grade`` and the Gradescope autograder grade it.

``grade_cohort`` is the whole workflow in one place: the idempotency key (a batch the
grades folder's ledger already holds under it is reused: nothing is graded or appended),
the rubric's lineage (a rubric changed without a new version is refused), discovery and
identities (the roster's), ``--only`` or ``--shard``, the gradebook found in the grades
folder (``earlier_rows``), the wall, the cohort compared for copies, the batch itself
(``grade_batch``), then the ledger's batch event (``append_grading``, also when Ctrl-C
stops the batch: ``CohortInterrupted``) and the ledger's reviews brought into the gradebook
(``apply_reviews``). It prints nothing: what a caller shows comes back in ``GradedCohort``,
and what happens on the way is told to a ``CohortListener``, in the order it happens.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gradekit import UsageError
from grader.batch._batch import (
    BatchInterrupted,
    Earlier,
    Heartbeat,
    Progress,
    Shard,
    discover,
    earlier_rows,
    grade_batch,
)
from grader.batch._copies import Comparison, compare_cohort
from grader.ledger import (
    LEDGER,
    BatchInfo,
    ReviewState,
    append_grading,
    apply_reviews,
    batch_time,
    grader_version,
    keyed_batch,
    rubric_lineage,
)
from grader.outputs import GradebookRow
from grader.rubric import Rubric, load_rubric
from grader.sandbox import Wall, choose_wall
from grader.scoring import shown_keys
from grader.submission import Identity, Roster, identify, load_roster

__all__ = ["CohortInterrupted", "CohortListener", "GradedCohort", "grade_cohort"]

_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}")


class CohortListener:
    """What ``grade_cohort`` tells as it goes, each when it happens; every method does
    nothing here: a caller overrides those it shows (the command line prints them)."""

    def loaded(self, rubric: Rubric) -> None:
        """The rubric, loaded and its lineage checked, before anything is discovered."""

    def walled(self, wall: Wall) -> None:
        """The wall every submission's runs stand behind, before the cohort is compared."""

    def compared(self, comparison: Comparison, compared: int, seconds: float) -> None:
        """The cohort compared for copies: ``compared`` submissions (every one the paths
        hold, whatever part is graded) in ``seconds``."""

    def selected(self, identities: Sequence[Identity], roster: Roster | None) -> None:
        """The submissions to grade (``only`` or ``shard`` applied), and the roster their
        identities came from (``grader.submission.unclaimed`` says which of its lines have
        no folder among them)."""

    def found(self, earlier: Earlier) -> None:
        """What the batch does with the gradebook it found (rows dropped, rows kept whose
        folder is gone), just before grading starts."""


@dataclass(frozen=True, slots=True)
class GradedCohort:
    """What ``grade_cohort`` did. A batch reused under its idempotency key has ``reused``,
    the ledger's batch event, and nothing else: nothing was graded or appended."""

    rows: tuple[GradebookRow, ...] = ()  # as graded, in batch order (``grade_batch``'s)
    reviewed: tuple[GradebookRow, ...] = ()  # the same rows, review and final cells filled
    states: tuple[ReviewState, ...] = ()  # each row's reviews: current, stale, pending
    notes: tuple[str, ...] = ()  # a line for each row with current reviews or a stale one
    unchanged: Mapping[str, str] = field(default_factory=dict)  # folder -> earlier run's seq
    earlier: Earlier = field(default_factory=Earlier)  # the gradebook the batch found
    comparison: Comparison | None = None
    wall: Wall | None = None
    reused: Mapping[str, Any] | None = None  # the batch event reused under the key

    @property
    def kept(self) -> int:
        """How many rows of earlier batches the gradebook kept without grading them now."""
        return len(self.earlier.kept_rows)

    @property
    def all_graded(self) -> bool:
        """Whether every row graded now is ``graded`` (none degraded, ungradable, ...)."""
        return all(row.status == "graded" for row in self.rows)


class CohortInterrupted(BatchInterrupted):
    """Ctrl-C stopped a cohort's batch. As ``BatchInterrupted``: the gradebook holds
    ``rows`` (and the rows it kept); and the ledger holds the batch's event, its finished
    rows' runs and ``not_graded`` as interrupted. ``earlier`` is the gradebook the batch
    found (a folder not graded that had a row there keeps it)."""

    def __init__(
        self, rows: Sequence[GradebookRow], not_graded: Sequence[str], earlier: Earlier
    ) -> None:
        super().__init__(rows, not_graded)
        self.earlier = earlier


def grade_cohort(
    submissions: Sequence[Path] | Sequence[Identity],
    rubric: Path | Rubric,
    *,
    out: Path,
    jobs: int = 1,
    label: str | None = None,
    only: Sequence[str] = (),
    shard: Shard | None = None,
    replace: bool = False,
    roster: Path | None = None,
    handout: Path | None = None,
    wall: Wall | str = "auto",
    allow_host_root: bool = False,
    key_file: Path | None = None,
    operator: str | None = None,
    idempotency_key: str = "",
    progress: Progress | None = None,
    heartbeat: Heartbeat | None = None,
    listener: CohortListener | None = None,
) -> GradedCohort:
    """Grade a cohort into the grades folder ``out`` as ``gradekit grade`` does, ledger and
    reviews included.

    ``submissions`` are the paths ``gradekit grade`` takes (each a submission, or a folder
    of them: ``discover``), their identities from ``roster`` (a CSV), else the folder
    names; or identities already made (Gradescope's metadata), graded as they are. Of
    those, ``only`` (folder names) or ``shard`` picks the ones graded; every one is
    compared for copies (``handout``: the starter whose files are never a copy).
    ``wall`` is a wall, or the word ``--wall`` takes (chosen after the gradebook is read).
    ``operator`` is who runs the batch, for the ledger (default: ``$GRADEKIT_OPERATOR``,
    else the login name); ``idempotency_key`` names the batch: asked again under it, the
    ledger's batch is returned as ``reused`` and nothing is graded or appended.
    ``progress`` and ``heartbeat`` are ``grade_batch``'s; ``listener`` hears of each step.

    A usage error (``--only`` with ``--shard``, a bad key or operator, a rubric changed
    without a new version, a clash of names, a gradebook that cannot be kept) is a
    ``UsageError`` before anything is graded or appended. Ctrl-C during the batch appends
    what finished to the ledger and raises ``CohortInterrupted``.
    """
    listener = listener or CohortListener()
    if only and shard is not None:
        raise UsageError(
            "--only and --shard do not combine: --only names the submissions to "
            "grade already; drop --shard (or --only)"
        )
    key = _idempotency_key(idempotency_key)
    ledger = out / LEDGER
    reused = keyed_batch(ledger, key)
    if reused is not None:
        return GradedCohort(reused=reused)
    info = BatchInfo(_operator(operator), batch_time(), key)
    if not isinstance(rubric, Rubric):
        rubric = load_rubric(rubric)
    rubric_lineage(ledger, rubric)  # a changed rubric must bump its version first
    listener.loaded(rubric)
    students = load_roster(roster) if roster is not None else None
    cohort = _cohort(submissions, students, out)
    discovered = [identity.folder for identity in cohort]
    identities = cohort
    if only:
        identities = _only(identities, only, _shown(submissions))
    elif shard is not None:
        identities = shard.pick(identities)
    earlier = earlier_rows(
        out,
        [c.id for c in rubric.criteria],
        [identity.folder for identity in identities],
        discovered,
        replace=replace,
    )
    if isinstance(wall, str):
        wall = choose_wall(wall, allow_host_root=allow_host_root)
    listener.walled(wall)
    # Every folder the paths hold is compared, whatever part of them is graded: a late
    # submission graded alone is still compared with its classmates (files read, not run).
    comparison = _compare(cohort, out, handout, listener)
    earlier = earlier.noted(comparison)  # kept rows name a classmate graded now who copied
    listener.selected(identities, students)
    listener.found(earlier)
    part = f"{shard.index}/{shard.count}" if shard is not None else ""

    def append(rows: Sequence[GradebookRow], interrupted: Sequence[str] = ()) -> dict[str, str]:
        return append_grading(
            ledger,
            rubric,
            rows,
            out,
            grader_version(),
            interrupted=interrupted,
            mode=earlier.mode,
            kept=earlier.kept,
            absent=earlier.absent,
            dropped=earlier.dropped,
            shard=part,
            info=info,
        )

    try:
        rows = grade_batch(
            identities,
            rubric,
            out=out,
            jobs=jobs,
            label=label,
            progress=progress,
            heartbeat=heartbeat,
            wall=wall,
            roster=students,
            key_file=key_file,
            earlier=earlier,
            comparison=comparison,
        )
    except BatchInterrupted as stopped:  # the rows that finished are grades all the same
        append(stopped.rows, stopped.not_graded)
        raise CohortInterrupted(stopped.rows, stopped.not_graded, earlier) from None
    unchanged = append(rows)
    # Reviews tied to these reports apply again (results.json was written with them); any
    # tied to an earlier report do not: the gradebook says which need a new review. The
    # rows kept from earlier batches are written as they were.
    applied = apply_reviews(out, rows, earlier.kept_rows)
    return GradedCohort(
        tuple(rows),
        applied.rows,
        applied.states,
        applied.notes,
        unchanged,
        earlier,
        comparison,
        wall,
    )


def _cohort(
    submissions: Sequence[Path] | Sequence[Identity], roster: Roster | None, out: Path
) -> list[Identity]:
    """Every submission the batch's paths hold, identified once (every shard refuses the
    same clashes); identities given are taken as they are."""
    given = [s for s in submissions if isinstance(s, Identity)]
    if given and len(given) == len(submissions):
        return given
    paths = [s for s in submissions if isinstance(s, Path)]
    if len(paths) != len(submissions):
        raise TypeError("grade_cohort takes paths or identities, not both")
    return identify(discover(paths, out), roster)  # discover refuses the grades folder's names


def _shown(submissions: Sequence[Path] | Sequence[Identity]) -> str:
    """The paths as a message names them."""
    return " ".join(str(s.path if isinstance(s, Identity) else s) for s in submissions)


def _compare(
    identities: Sequence[Identity], out: Path, handout: Path | None, listener: CohortListener
) -> Comparison:
    """The cohort compared for copies; the listener hears what it found and how long it took."""
    if handout is not None and not (handout / "pyproject.toml").is_file():
        raise UsageError(
            f"--handout {handout}: no pyproject.toml there; pass the "
            "starter repository the students were given (the folder that holds "
            "its pyproject.toml)"
        )
    started = time.monotonic()
    comparison = compare_cohort([(i.folder, i.path) for i in identities], out, handout=handout)
    listener.compared(comparison, len(identities), time.monotonic() - started)
    return comparison


def _idempotency_key(text: str) -> str:
    if text and not _KEY.fullmatch(text):
        raise UsageError(
            f"--idempotency-key {text!r}: use 1 to 128 letters, digits and . _ : / "
            "@ + -, starting with a letter or digit (e.g. week3-final)"
        )
    return text


def _operator(given: str | None) -> str:
    """Who runs the batch: ``given``, else ``$GRADEKIT_OPERATOR``, else the login name: a
    label for people, never checked."""
    name = given if given is not None else os.environ.get("GRADEKIT_OPERATOR", "")
    if not name:
        import getpass  # here: every worker imports this room, and never needs it

        with contextlib.suppress(Exception):  # no login name in some containers
            name = getpass.getuser()
    name = name or "unknown"
    if not name.strip() or any(not char.isprintable() for char in name) or len(name) > 80:
        raise UsageError(f"--operator {name!r}: one line of at most 80 printable characters")
    return name


def _only(identities: Sequence[Identity], names: Sequence[str], paths: str) -> list[Identity]:
    """The identities whose folders ``--only`` names; a name that matches none is a
    ``UsageError`` naming the nearest folders the paths hold."""
    folders = [identity.folder for identity in identities]
    for name in dict.fromkeys(names):
        if name not in folders:
            near = difflib.get_close_matches(name, folders, n=3)
            hint = (
                f"did you mean {', '.join(near)}?"
                if near
                else f"they hold {shown_keys(sorted(folders), 5)}"
                if folders
                else "they hold none"
            )
            raise UsageError(
                f"--only {name}: no submission folder of that name among the {len(folders)} "
                f"that {paths} holds ({hint}); name a folder as the "
                "gradebook's submission column does, or add the path that holds it"
            )
    wanted = set(names)
    return [identity for identity in identities if identity.folder in wanted]
