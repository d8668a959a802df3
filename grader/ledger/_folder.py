"""The grades folder in one place: the name of every file in it, each submission's outputs
written once, and signed once.

``gradekit grade --out GRADES`` (default ``grades/``) fills this folder; docs/formats.md
describes each file::

    GRADES/
      gradebook.csv        GRADEBOOK  one row per submission, rewritten as rows finish
      ledger.jsonl         LEDGER     every batch, run and review, append-only
      archive/DIGEST.json  ARCHIVE    every graded report, kept under its digest
      .gradekit-draw-key   DRAW_KEY   the secret its draws are keyed with, without a key
      dashboard/           DASHBOARD  the cohort's site, where the dashboard command builds it
      copies.json          COPIES     the pairs of submissions that look copied, for review
      FOLDER/                         one per submission, named as its folder
        report.json        REPORT     the report, canonical, with its digest
        report.md          MARKDOWN   the report for people
        results.json       RESULTS    Gradescope's results, reviews included
        output.txt         OUTPUT     what the agent printed, cut at OUTPUT_CAP bytes
        calls.json         CALLS      what each case asked, as the grader saw it

A submission's outputs are written once, by ``write_submission``, in the worker that
graded it: its results.json already carries the current reviews of its report (those
the ledger held when the batch began). They are signed once, by ``sign_outputs``, in the
batch (the one process that holds the instructor's key), once both verify. Only a review
recorded later (``gradekit review``) writes results.json again (``rewrite_results``),
signed again when it was signed. The rest of the grader names these files through the
constants here, and ``gradekit report verify`` finds a file's neighbours through
``report_beside`` and ``ledger_above``.

The folder's own entries (``ENTRIES``) share it with the submission folders, so no
submission folder may take one's name: ``reserved_for`` says which entry a name would
collide with, itself or a name made from it (a write's temporary file,
``temporary_path``, or a torn ledger line set aside, ``torn_path``), whatever the case of
its letters (a case-insensitive disk takes ``Ledger.JSONL`` for ``ledger.jsonl``).
``refuse_clashes`` refuses a batch that holds such a folder, or one whose output folder
is something the grades folder holds that no grading wrote (a file, a link), before
anything is graded or written: the whole batch, not one row, since an error row of that
folder would itself be written into the folder it clashes with, and every shard of the
batch refuses it alike.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gradekit import UsageError
from gradekit.internal import write_atomic
from grader._late import Late, late_from_document
from grader._model import HumanReview, Report
from grader.outputs import (
    REPORTED,
    GradebookRow,
    calls_document,
    error_row,
    render_calls,
    render_gradescope,
    render_markdown,
    render_report_json,
    report_digest,
    report_from_document,
    sign_file,
    verify_report,
    verify_results,
)
from grader.scoring import Evidence

__all__ = [
    "ARCHIVE",
    "CALLS",
    "COPIES",
    "DASHBOARD",
    "DRAW_KEY",
    "ENTRIES",
    "GRADEBOOK",
    "LEDGER",
    "MARKDOWN",
    "OUTPUT",
    "OUTPUT_CAP",
    "REPORT",
    "RESULTS",
    "archive_path",
    "capped",
    "draw_key",
    "ledger_above",
    "read_document",
    "refuse_clashes",
    "report_beside",
    "reserved_for",
    "rewrite_results",
    "sign_outputs",
    "temporary_path",
    "torn_path",
    "write_submission",
]

GRADEBOOK = "gradebook.csv"
LEDGER = "ledger.jsonl"
ARCHIVE = "archive"
DRAW_KEY = ".gradekit-draw-key"
DASHBOARD = "dashboard"
COPIES = "copies.json"
# Every name the grader gives an entry of the grades folder beside the submission folders.
ENTRIES = (GRADEBOOK, LEDGER, ARCHIVE, DRAW_KEY, DASHBOARD, COPIES)
REPORT = "report.json"
MARKDOWN = "report.md"
RESULTS = "results.json"
OUTPUT = "output.txt"
CALLS = "calls.json"

OUTPUT_CAP = 256 * 1024  # bytes of output.txt: feedback only, and 200 of them stay small
_DRAW_KEY_CONTEXT = b"gradekit-draw-key/1\n"  # a draw key derived from a signing key


# -- finding a file's neighbours -------------------------------------------------------------


def archive_path(out: Path, digest: str) -> Path:
    """Where the grades folder ``out`` keeps the report of ``digest``."""
    return out / ARCHIVE / f"{digest}.json"


def report_beside(path: Path) -> Path:
    """The report.json in the submission folder of ``path`` (a results.json is checked
    against it)."""
    return path.with_name(REPORT)


def ledger_above(path: Path) -> Path:
    """The ledger of the grades folder whose submission folder holds ``path``."""
    return path.parent.parent / LEDGER


def temporary_path(path: Path, tag: str) -> Path:
    """Where a file of the grades folder is written before it replaces ``path``
    (``.NAME.TAG.tmp``; ``write_atomic``'s are ``.NAME.RANDOM.tmp``)."""
    return path.with_name(f".{path.name}.{tag}.tmp")


def torn_path(ledger: Path, offset: int) -> Path:
    """Where an append sets aside the torn last line that started at byte ``offset``."""
    return ledger.with_name(f"{ledger.name}.torn-{offset}")


def reserved_for(name: str) -> str:
    """The entry of ``ENTRIES`` whose place a submission folder named ``name`` would take in
    a grades folder ("" when none): the entry itself, or a name made from it
    (``temporary_path``, ``torn_path``: ``NAME.*`` or ``.NAME.*``), in any case."""
    folded = name.casefold()
    for entry in ENTRIES:
        own = entry.casefold()
        if folded == own or folded.startswith((f"{own}.", f".{own}.")):
            return entry
    return ""


_ENTRY_IS = {
    GRADEBOOK: "gradebook",
    LEDGER: "ledger (every batch, run and review)",
    ARCHIVE: "archive (every graded report, under its digest)",
    DRAW_KEY: "draw key (the secret its provider labels and hash seeds are drawn with)",
    DASHBOARD: "dashboard (the cohort's site, built there by default)",
    COPIES: "list of submissions that look copied",
}


def refuse_clashes(
    folders: Iterable[tuple[Path, str]], out: Path | None = None, *, held: bool = False
) -> None:
    """Refuse the submission folders (each as given, with its name: its output folder's)
    whose output folder in the grades folder ``out`` would take the place of one of its own
    entries (``reserved_for``), and with ``held``, of what ``out`` holds now that no grading
    wrote (a file, a link): a ``UsageError`` that names each, why, and the fix. Called before
    anything is graded or written."""
    grades = out if out is not None else Path("GRADES")
    problems = []
    for path, name in folders:
        entry, place = reserved_for(name), grades / name
        if entry:
            how = ""
            if name.casefold() == entry.casefold() and name != entry:
                how = f", which a case-insensitive disk takes for {grades / entry}"
            elif name != entry:
                how = f", a name the grader gives the files it makes from {grades / entry}"
            problems.append(
                f"{path}: a submission folder cannot be named {name}: its outputs would go "
                f"to {place}{how}, the grades folder's {_ENTRY_IS[entry]}, a name every "
                "grades folder keeps for itself; rename the submission folder (with a "
                "roster, list it under its new name too)"
            )
        elif held and (place.is_symlink() or (place.exists() and not place.is_dir())):
            problems.append(
                f"{path}: its outputs would go to {place}, which is a "
                f"{'link' if place.is_symlink() else 'file'} that no grading wrote; move it "
                "out of the grades folder, rename the submission folder, or grade into "
                "another --out"
            )
    if problems:
        raise UsageError(
            "a submission folder clashes with the grades folder, so nothing was "
            "graded or written:\n" + "\n".join(problems)
        )


def read_document(path: Path) -> dict[str, Any] | None:
    """The JSON object at ``path``; None when it is missing, unreadable or no object."""
    try:
        document = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


# -- writing a submission's outputs ----------------------------------------------------------


def write_submission(
    folder: Path,
    report: Report,
    evidence: Evidence,
    *,
    isolation: str,
    reviews: Sequence[HumanReview] = (),
    late: Late | None = None,
) -> str:
    """Write every output of one graded submission into ``folder``, each once; return the
    report's digest.

    ``isolation`` says which wall the code ran behind (report.md and results.json show it;
    the digest never covers it). ``reviews`` are the current reviews of this report, in
    ledger order: results.json carries them, report.json and report.md never do. ``late``:
    what the lab's late policy made of the submission's time; report.md and results.json
    show it, report.json never does.
    """
    folder.mkdir(parents=True, exist_ok=True)
    digest = report_digest(report)
    (folder / REPORT).write_bytes(render_report_json(report))
    (folder / MARKDOWN).write_text(
        render_markdown(report, isolation=isolation, digest=digest, late=late), encoding="utf-8"
    )
    (folder / RESULTS).write_bytes(
        render_gradescope(report, digest, isolation=isolation, reviews=reviews, late=late)
    )
    (folder / OUTPUT).write_bytes(capped(_agent_output(evidence)))
    cases = tuple(case.id for case in evidence.cases)
    (folder / CALLS).write_bytes(render_calls(calls_document(evidence.primary, cases)))
    return digest


def _agent_output(evidence: Evidence) -> str:
    """What the agent printed in each run: feedback only, never graded."""
    runs = (
        ("primary run", evidence.primary),
        *((f"provider label {n}", run) for n, run in enumerate(evidence.others, 2)),
        *((f"loud-failure probe, {withhold} withheld", run) for withhold, run in evidence.loud),
        ("second cassette set", evidence.second_set),
    )
    parts = [
        f"== {title}: {stream} ==\n{text.rstrip()}\n"
        for title, run in runs
        if run is not None
        for stream, text in (("stdout", run.stdout), ("stderr", run.stderr))
        if text.strip()
    ]
    return "".join(parts) or "The agent printed nothing.\n"


def capped(text: str, cap: int = OUTPUT_CAP) -> bytes:
    """``text`` as UTF-8, at most ``cap`` bytes; a cut one ends with a line that says so."""
    data = text.encode("utf-8")
    if len(data) <= cap:
        return data
    marker = (
        f"\n[gradekit cut {OUTPUT} here: it keeps the first {cap // 1024} KiB of the "
        f"agent's {len(data)} bytes of output]\n"
    ).encode("ascii")
    # "ignore" drops a character cut in half, so the file stays valid UTF-8.
    kept = data[: cap - len(marker)].decode("utf-8", "ignore").encode("utf-8")
    return kept + marker


# -- signing -----------------------------------------------------------------------------------


def sign_outputs(row: GradebookRow, out: Path, key: bytes | None) -> GradebookRow:
    """Sign a graded row's report.json and results.json in ``out/<folder>``, once both
    verify; the row itself, or an error row when they do not verify or cannot be signed.

    Called by the batch, the one process that holds the key, once the worker has written
    them. results.json already holds its reviews: whether they are still the ledger's is
    not asked here (a review appended while the batch ran writes it again, signed).
    """
    if key is None or row.status not in REPORTED:
        return row
    folder = out / row.submission
    try:
        report = (folder / REPORT).read_bytes()
        for name, (ok, why) in (
            (REPORT, verify_report(report)),
            (RESULTS, verify_results((folder / RESULTS).read_bytes(), report)),
        ):
            if not ok:
                raise ValueError(f"{name} does not verify before signing: {why}")
        sign_file(folder / REPORT, "report", key)
        sign_file(folder / RESULTS, "results", key)
    except (OSError, ValueError) as exc:
        return error_row(
            row.submission,
            row.student,
            (
                f"its outputs could not be signed ({exc}): nothing was scored; grade it again, and "
                "report a grader bug if it happens again"
            ),
        )
    return row


def rewrite_results(
    folder: Path,
    digest: str,
    report: Mapping[str, Any],
    reviews: Sequence[HumanReview],
    key: bytes | None,
) -> bool:
    """Write ``folder``'s results.json again from ``report`` (the verified archived report
    of ``digest``) and its current ``reviews``, when the one there is that report's;
    signed again when it was signed. Whether it was written."""
    path = folder / RESULTS
    existing = read_document(path)
    extra = existing.get("extra_data") if existing is not None else None
    if not isinstance(extra, dict) or extra.get("digest") != digest:
        return False
    isolation = extra.get("isolation")
    kept = extra.get("late")  # the grading's: a review changes no submission time
    late = late_from_document(kept) if isinstance(kept, dict) else None
    write_atomic(
        path,
        render_gradescope(
            report_from_document(report),
            digest,
            reviews=reviews,
            isolation=isolation if isinstance(isolation, str) else "",
            late=late,
        ),
    )
    if "signature" in extra:
        if key is None:  # append_review refuses before this
            raise UsageError(f"{path} was signed: pass the signing key with --key-file FILE")
        sign_file(path, "results", key)
    return True


# -- the draw key ------------------------------------------------------------------------------


def draw_key(out: Path, signing: bytes | None) -> bytes:
    """The secret a batch's draws (provider labels, hash seeds, the Replay probe) are keyed
    with, beside each submission's content: grading the same submission again draws the
    same, and a student without it cannot predict what is drawn.

    Derived from the instructor's signing key when there is one (every grades folder and
    machine, shards included, then draws alike; the derived key reveals nothing of the
    signing key), else kept in ``out/.gradekit-draw-key``, made on first use and readable
    by its owner only. ``UsageError`` for a kept key that is not one.
    """
    if signing is not None:
        return hmac.new(signing, _DRAW_KEY_CONTEXT, hashlib.sha256).digest()
    path = out / DRAW_KEY
    out.mkdir(parents=True, exist_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _kept_draw_key(path)
    key = secrets.token_bytes(32)
    with os.fdopen(descriptor, "w", encoding="ascii") as file:
        file.write(key.hex() + "\n")
    return key


def _kept_draw_key(path: Path) -> bytes:
    try:
        text = path.read_text("ascii").strip()
        if len(text) == 64:
            return bytes.fromhex(text)
    except (OSError, ValueError):
        pass
    raise UsageError(
        f"{path} is not a draw key (64 hex digits): restore it from a backup to "
        "draw as earlier gradings did, or delete it and a new one is made (later "
        "gradings then draw other labels and seeds; an honest submission's grade "
        "does not change)"
    )
