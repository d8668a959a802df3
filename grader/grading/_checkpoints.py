"""``gradekit check``: the three one-minute checkpoints of the lab."""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path

from gradekit.internal import commands
from grader._model import Report
from grader.grading._draws import Draw, draw
from grader.grading._grade import Graded, grade_submission
from grader.grading._preload import imported_packages, shipped_packages
from grader.outputs import report_digest
from grader.rubric import Rubric
from grader.sandbox import PROCESS_WALL, Hosts, LaidOut, Sandbox, Wall, scratch_root
from grader.scoring import (
    ESCAPED,
    STABLE,
    STUB_ERROR,
    Evidence,
    loudness,
    stability_advice,
    stability_detail,
    unstable_cause,
)
from grader.submission import load_manifest

__all__ = ["Checkpoint", "CheckpointRun", "predicted", "run_checkpoints"]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One checkpoint's verdict."""

    number: int
    title: str
    passed: bool
    seconds: float
    reason: str


@dataclass(frozen=True, slots=True)
class CheckpointRun:
    """The three checkpoints, and the report the grader would write now (None only when the
    submission could not be graded at all)."""

    checkpoints: tuple[Checkpoint, ...]
    report: Report | None
    unrecorded: tuple[str, ...] = ()  # cases whose primary run asked a prompt not recorded
    recorded_with: Mapping[str, str] = field(default_factory=dict)  # the settings that
    # record the provider the cassettes name (empty when their names do not tell)


def run_checkpoints(root: Path, rubric: Rubric, *, wall: Wall = PROCESS_WALL) -> CheckpointRun:
    """Run the three checkpoints against the submission at ``root``, its gradings behind
    ``wall`` (checkpoint 1's probe too), and predict its grade. Checkpoints 2 and 3 read the
    grader's own evidence: the first grading's loud-failure probes and its runs under every
    provider label, and a second grading (other labels, each run under another of the
    first's hash seeds) whose digest must be the first's. The first report is the
    prediction.

    ``rubric`` must come from the instructor's side: its custom checks run in this process.

    The second grading runs beside the first (a thread of this process, whose runs are
    children like the first's), started once checkpoint 1 has started a child, so that
    what a process sets up once for its children is set up: on two CPUs the check takes
    about one grading's time, not two. Checkpoint 3's seconds are its own grading's.
    Both gradings and checkpoint 1's probe fork their runs from one set of hosts
    (``grader.sandbox.Hosts``), started side by side as the check begins: the second
    grading deals the first's hash seeds out to its runs anew (a seed is an interpreter's,
    fixed as it starts: one host each), so the check starts five hosts, not eleven.
    """
    manifest = load_manifest(root)
    drawn = _drawn()
    hosts = Hosts()
    # Ctrl-C leaves without waiting for the second grading, whose runs may still write in
    # the folder as it is removed.
    with (
        tempfile.TemporaryDirectory(
            prefix="gradekit-check-", dir=scratch_root(), ignore_cleanup_errors=True
        ) as folder,
        contextlib.closing(hosts),
    ):
        scratch = Path(folder)
        scratch.chmod(0o711)  # searchable, not listable: a root grader's children are uid 65534
        hosts.scratch = scratch.resolve()

        def grading(number: int) -> Graded:
            return grade_submission(
                root,
                rubric,
                submission=root.resolve().name,
                scratch=scratch / f"grading-{number}",
                wall=wall,
                drawn=drawn[number - 1],
                hosts=hosts,
            )

        beside: list[Graded | BaseException] = []
        took: list[float] = []

        def second_grading() -> None:
            started = time.monotonic()
            try:
                beside.append(grading(2))
            except BaseException as exc:  # raised where checkpoint 3 reads it
                beside.append(exc)
            took.append(time.monotonic() - started)

        gradings: list[Graded] = []

        def whitespace() -> tuple[bool, str]:
            first = drawn[0]
            sandbox = Sandbox(
                root, scratch / "whitespace", rubric.limits, wall, LaidOut(hosts=hosts, lent=True)
            )
            try:
                sandbox.ahead(
                    first.seeds,
                    imported_packages(root, manifest, rubric.packages),
                    shipped_packages(root, rubric.packages),
                )
                probe = sandbox.probe_replay(
                    manifest.replay, first.probe, unknown=first.unknown, hashseed=first.seeds[0]
                )
            finally:
                sandbox.close()
            if not probe.loaded:
                return False, f"your Replay could not be used: {probe.detail}"
            if not probe.whitespace_hit:
                return False, "a prompt with extra outer whitespace missed: strip before hashing"
            return True, "leading and trailing whitespace hit the same recording"

        def loud() -> tuple[bool, str]:
            gradings.append(grading(1))
            return _loud(gradings[0])

        def two_providers() -> tuple[bool, str]:
            thread.join()
            if isinstance(beside[0], BaseException):
                raise beside[0]
            first, second = gradings[0], beside[0]
            unstable = _label_or_seed(first)
            if unstable:
                return False, unstable
            digests = [report_digest(graded.report) for graded in (first, second)]
            if digests[0] != digests[1]:
                return (
                    False,
                    f"two gradings gave different digests: {digests[0]} vs "
                    f"{digests[1]}; compare their reports to see which case moved",
                )
            return (
                True,
                f"digest {digests[0]} under {len(first.evidence.others) + 1} provider "
                "labels and hash seeds, in two gradings",
            )

        first = _timed(1, "Whitespace is not a new prompt", whitespace)
        thread = threading.Thread(
            target=second_grading, name="gradekit-check-grading-2", daemon=True
        )  # Ctrl-C ends the check without waiting
        thread.start()
        try:
            second = _timed(2, "A miss is loud", loud)
        except Exception:
            thread.join()  # its runs write under this scratch folder: they end first
            raise
        third = _timed(3, "Two providers, one score", two_providers)
        checkpoints: tuple[Checkpoint, ...] = (first, second, replace(third, seconds=took[0]))
        unwritten = _unwritten(gradings[0].evidence, manifest.agent)
        if unwritten:
            checkpoints = tuple(
                replace(point, passed=False, reason=unwritten) for point in checkpoints
            )
        evidence = gradings[0].evidence
        outcomes = evidence.primary.outcomes if evidence.primary else {}
        unrecorded = tuple(
            case
            for case, outcome in outcomes.items()
            if outcome is not None
            and any(
                not call.served and not call.withheld and call.tool is None
                for call in outcome.calls
            )
        )
        return CheckpointRun(checkpoints, gradings[0].report, unrecorded, evidence.recorded_with)


def _drawn() -> tuple[Draw, Draw]:
    """The check's two draws, under one fresh key: the second has other labels, clocks and
    probes, and deals the first's hash seeds out anew, none to the run of the same place
    (its primary run gets the first's second label's seed, and so on)."""
    key = secrets.token_bytes(32)
    first, second = draw(key, "grading 1"), draw(key, "grading 2")
    seeds = first.seeds[1:] + first.seeds[:1]
    return first, replace(
        second, seeds=seeds, more=tuple(seed for seed in second.more if seed not in seeds)
    )


def _loud(graded: Graded) -> tuple[bool, str]:
    """Checkpoint 2 from a grading: every probed miss escaped, in every case, and the
    submission's own Replay raises on a miss; else the first case and call that did not."""
    evidence = graded.evidence
    if evidence.blocked:
        return False, evidence.blocked
    for case in evidence.cases:
        detail = loudness(case.id, evidence)
        if not detail.startswith(ESCAPED):
            return False, f"case {case.id}, {detail}"
    probe = evidence.probe
    if probe is not None and not probe.miss_raised:
        return False, "your Replay answered an unrecorded prompt instead of raising"
    if probe is not None and not probe.raised_miss:
        return (
            False,
            f"your Replay raised {probe.exception} on an unrecorded prompt: raise CassetteMiss",
        )
    return (
        True,
        f"the miss escaped run() in all {len(evidence.loud)} probes (each call of "
        "each case withheld in turn, where its run stood)",
    )


def _label_or_seed(graded: Graded) -> str:
    """Checkpoint 3's failure: the cases whose runs do not agree, or are not served from the
    recordings (two gradings that miss alike agree on nothing), each with its cause and
    fix; "" when there is none."""
    evidence = graded.evidence
    if evidence.blocked:
        return evidence.blocked
    found = []
    for case in evidence.cases:
        cause = unstable_cause(case.id, evidence)
        if cause is not None:
            found.append(f"case {case.id}: {cause}")
        elif (detail := stability_detail(case.id, evidence)) != STABLE:
            found.append(f"case {case.id}: {detail}; fix: {stability_advice(case.id, evidence)}")
    return "; ".join(found)


UNWRITTEN = (
    "run() is not written yet: it raises NotImplementedError in every case. Write "
    "it first in {agent} (its docstring says what it must do), then record its "
    "answers once with `make record`"
)


def _unwritten(evidence: Evidence, agent: str) -> str:
    """The reason every checkpoint fails for a hand-out whose run() is still the stub
    (``agent`` is the manifest's ``module:function``)."""
    outcomes = list(evidence.primary.outcomes.values()) if evidence.primary else []
    if outcomes and all(o.status == "raised" and o.exception == STUB_ERROR for o in outcomes):
        module = agent.partition(":")[0].replace(".", "/")
        return UNWRITTEN.format(agent=f"{module}.py")
    return ""


def predicted(run: CheckpointRun) -> tuple[bool, list[str]]:
    """Whether the submission passes ``check`` (every checkpoint, and no point lost), and
    the lines that say so: the grade ``gradekit grade`` would give now, every lost point
    with what the grader saw and the fix, and what a person will review."""
    report = run.report
    if report is None:
        return False, ["grade now: not graded (the checkpoints above say why)"]
    total, most = sum(c.points for c in report.criteria), sum(c.max for c in report.criteria)
    review = [c for c in report.criteria if c.review]
    at_stake = sum((c.max for c in review), Decimal(0))
    pending = (
        (f"; {at_stake:.2f} of it pending human review ({', '.join(c.title for c in review)})")
        if review
        else ""
    )
    lines = [
        f"grade now: {total:.2f} / {most:.2f} (what gradekit grade gives this "
        f"submission, same rubric, same grading){pending}"
    ]
    if run.unrecorded:  # one recording run fixes every case at once: the cheapest fix first
        settings = {} if os.environ.get("GRADEKIT_PROVIDER", "").strip() else run.recorded_with
        lines.append(
            f"  fix first: `{commands.configured(commands.RECORD(), settings)}` "
            "records every prompt the cassettes lack, in one run (cases "
            f"{', '.join(run.unrecorded)}), keeping the answers they hold; then "
            "check again"
        )
    for criterion in report.criteria:
        if criterion.points < criterion.max:
            lines.append(
                f"  lost {criterion.max - criterion.points:.2f} of "
                f"{criterion.title} ({criterion.points:.2f} / {criterion.max:.2f}):"
            )
            failed = [check for check in criterion.checks if not check.passed]
            lines += [f"    - {check.id}: {check.detail}" for check in failed[:_SHOWN]]
            if len(failed) > _SHOWN:
                lines.append(f"    - and {len(failed) - _SHOWN} more (see the report)")
            lines += [f"    fix: {advice}" for advice in criterion.advice]
    lines += [f"  finding: {finding}" for finding in report.findings]
    passed = all(point.passed for point in run.checkpoints) and total == most
    return passed, lines


_SHOWN = 6  # failed checks listed per criterion


def _timed(number: int, title: str, check: Callable[[], tuple[bool, str]]) -> Checkpoint:
    started = time.monotonic()
    passed, reason = check()
    return Checkpoint(number, title, passed, time.monotonic() - started, reason)
