"""``gradekit check``: the three one-minute checkpoints of the lab."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from grader._grade import draw, grade_submission
from grader._isolation import Isolation
from grader._manifest import load_manifest
from grader._model import ReplayProbe, Report
from grader._probe import probe_replay
from grader._report import report_digest
from grader._rubric import Rubric
from grader._sandbox import run_cases

__all__ = ["CheckRun", "Checkpoint", "predicted", "run_checkpoints"]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One checkpoint's verdict."""

    number: int
    title: str
    passed: bool
    seconds: float
    reason: str


@dataclass(frozen=True, slots=True)
class CheckRun:
    """The three checkpoints, and the report the grader would write now (None only when the
    submission could not be graded at all)."""

    checkpoints: tuple[Checkpoint, ...]
    report: Report | None


def run_checkpoints(root: Path, rubric: Rubric, *,
                    isolation: Isolation = "process") -> CheckRun:
    """Run the three checkpoints against the submission at ``root``, behind ``isolation``,
    and predict its grade: checkpoint 3 grades it twice, exactly as ``gradekit grade``
    does, and the first of those reports is the prediction.

    ``rubric`` must come from the instructor's side: its custom checks run in this process.
    """
    manifest = load_manifest(root)
    with tempfile.TemporaryDirectory(prefix="gradekit-check-") as folder:
        scratch = Path(folder)
        probes: list[ReplayProbe] = []
        reports: list[Report] = []

        def whitespace() -> tuple[bool, str]:
            drawn = draw()
            probes.append(probe_replay(root, manifest.replay, drawn.probe, limits=rubric.limits,
                                       scratch=scratch / "probe", unknown=drawn.unknown))
            probe = probes[0]
            if not probe.loaded:
                return False, f"your Replay could not be used: {probe.detail}"
            if not probe.whitespace_hit:
                return False, "a prompt with extra outer whitespace missed: strip before hashing"
            return True, "leading and trailing whitespace hit the same recording"

        def loud() -> tuple[bool, str]:
            if not probes[0].miss_raised:
                return False, "your Replay answered an unrecorded prompt instead of raising"
            if not probes[0].raised_miss:
                return False, (f"your Replay raised {probes[0].exception} on an unrecorded "
                               "prompt: raise CassetteMiss")
            pairs = [(case.id, case.task) for case in rubric.cases]
            drawn = draw()
            run = run_cases(root, manifest.agent, pairs, answer=lambda case, prompt: None,
                            label=drawn.labels[0], hashseed=drawn.seeds[0], limits=rubric.limits,
                            scratch=scratch / "unanswerable")
            quiet = [o.case for o in run.outcomes.values() if not o.miss_escaped]
            if run.import_error or quiet:
                why = run.import_error or f"the miss did not escape run() in {', '.join(quiet)}"
                return False, why
            return True, "the miss escaped run() in every case"

        def two_providers() -> tuple[bool, str]:
            # Two gradings, each with its own labels and hash seeds, as the grader draws them.
            reports.extend(grade_submission(root, rubric, submission=root.resolve().name,
                                            scratch=scratch / f"grading-{number}",
                                            isolation=isolation).report for number in (1, 2))
            digests = [report_digest(report) for report in reports]
            if digests[0] != digests[1]:
                return False, f"the digests differ: {digests[0]} vs {digests[1]}"
            return True, f"digest {digests[0]}"

        checkpoints = (
            _timed(1, "Whitespace is not a new prompt", whitespace),
            _timed(2, "A miss is loud", loud),
            _timed(3, "Two providers, one score", two_providers),
        )
        return CheckRun(checkpoints, reports[0] if reports else None)


def predicted(run: CheckRun) -> tuple[bool, list[str]]:
    """Whether the submission passes ``check`` (every checkpoint, and no point lost), and
    the lines that say so: the grade ``gradekit grade`` would give now, every lost point
    with what the grader saw and the fix, and what a person will review."""
    report = run.report
    if report is None:
        return False, ["grade now: not graded (the checkpoints above say why)"]
    total, most = sum(c.points for c in report.criteria), sum(c.max for c in report.criteria)
    lines = [f"grade now: {total:.2f} / {most:.2f} (what gradekit grade gives this "
             "submission, same rubric, same grading)"]
    for criterion in report.criteria:
        if criterion.points < criterion.max:
            lines.append(f"  lost {criterion.max - criterion.points:.2f} of "
                         f"{criterion.title} ({criterion.points:.2f} / {criterion.max:.2f}):")
            failed = [check for check in criterion.checks if not check.passed]
            lines += [f"    - {check.id}: {check.detail}" for check in failed[:_SHOWN]]
            if len(failed) > _SHOWN:
                lines.append(f"    - and {len(failed) - _SHOWN} more (see the report)")
            lines += [f"    fix: {advice}" for advice in criterion.advice]
        if criterion.review:
            lines.append(f"  {criterion.title}: a person reviews these points too")
    lines += [f"  finding: {finding}" for finding in report.findings]
    passed = all(point.passed for point in run.checkpoints) and total == most
    return passed, lines


_SHOWN = 6  # failed checks listed per criterion


def _timed(number: int, title: str, check: Callable[[], tuple[bool, str]]) -> Checkpoint:
    started = time.monotonic()
    passed, reason = check()
    return Checkpoint(number, title, passed, time.monotonic() - started, reason)
