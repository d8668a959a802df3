"""Grade many submissions: discovery, sharding, parallel jobs, outputs, the gradebook."""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from grader._checks import Evidence
from grader._grade import Graded, grade_submission
from grader._gradebook import GradebookRow, gradebook_csv
from grader._report import (
    points_text,
    render_gradescope,
    render_markdown,
    render_report_json,
    report_digest,
)
from grader._rubric import Rubric
from lab import UsageError

__all__ = ["Shard", "discover", "grade_batch", "parse_shard", "print_progress", "write_outputs"]


@dataclass(frozen=True, slots=True)
class Shard:
    """Part ``index`` (1-based) of ``count``: every count-th submission in name order."""

    index: int
    count: int

    def pick(self, submissions: Sequence[Path]) -> list[Path]:
        """The submissions of this shard."""
        return list(submissions[self.index - 1 :: self.count])


def parse_shard(text: str) -> Shard:
    """Parse ``K/N`` with 1 <= K <= N."""
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count)):
        raise UsageError(f"--shard {text!r}: use K/N with 1 <= K <= N, e.g. --shard 2/4")
    return Shard(int(index), int(count))


def discover(paths: Sequence[Path]) -> list[Path]:
    """Submissions named by ``paths``: a folder with a pyproject.toml is one submission,
    any other folder holds one submission per sub-folder. Sorted by folder name."""
    found: dict[Path, Path] = {}
    for path in paths:
        if not path.is_dir():
            raise UsageError(f"{path} is not a folder: pass a submission or a folder of them")
        if (path / "pyproject.toml").is_file():
            found.setdefault(path.resolve(), path)
            continue
        for child in sorted(path.iterdir()):
            if child.is_dir() and not child.name.startswith("."):
                found.setdefault(child.resolve(), child)
    return sorted(found.values(), key=lambda p: (p.resolve().name, str(p.resolve())))


def write_outputs(graded: Graded, folder: Path) -> str:
    """Write report.json, report.md, results.json and the agent's output; return the digest."""
    report = graded.report
    folder.mkdir(parents=True, exist_ok=True)
    digest = report_digest(report)
    (folder / "report.json").write_bytes(render_report_json(report))
    (folder / "report.md").write_text(render_markdown(report), encoding="utf-8")
    (folder / "results.json").write_bytes(render_gradescope(report, digest))
    (folder / "output.txt").write_text(_child_output(graded.evidence), encoding="utf-8")
    return digest


def _child_output(evidence: Evidence) -> str:
    """What the agent printed in each run, size-capped: feedback only, never graded."""
    runs = (("primary run", evidence.primary), ("second label", evidence.secondary),
            ("unanswerable cassette", evidence.unanswerable),
            ("second cassette set", evidence.second_set))
    parts = [
        f"== {title}: {stream} ==\n{text.rstrip()}\n"
        for title, run in runs if run is not None
        for stream, text in (("stdout", run.stdout), ("stderr", run.stderr)) if text.strip()
    ]
    return "".join(parts) or "The agent printed nothing.\n"


Progress = Callable[[int, int, str, float], None]


def grade_batch(submissions: Sequence[Path], rubric: Rubric, *, out: Path, jobs: int,
                label: str, progress: Progress | None = None) -> list[GradebookRow]:
    """Grade every submission (one failing never stops the others); write the gradebook."""
    out.mkdir(parents=True, exist_ok=True)
    names = [path.resolve().name for path in submissions]
    started, finished, lock = time.monotonic(), [0], threading.Lock()

    def one(path: Path) -> GradebookRow:
        row = _grade_one(path, rubric, out=out, label=label,
                         duplicate=names.count(path.resolve().name) > 1)
        with lock:
            finished[0] += 1
            if progress:
                progress(finished[0], len(submissions), row.submission,
                         time.monotonic() - started)
        return row

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        rows = list(pool.map(one, submissions))
    (out / "gradebook.csv").write_bytes(gradebook_csv(rows, [c.id for c in rubric.criteria]))
    return rows


def _grade_one(path: Path, rubric: Rubric, *, out: Path, label: str,
               duplicate: bool) -> GradebookRow:
    name = path.resolve().name
    if duplicate:
        return _error_row(name, "two submissions share this folder name: rename one")
    scratch = Path(tempfile.mkdtemp(prefix=f"gradekit-{name}-"))
    try:
        graded = grade_submission(path, rubric, label=label, scratch=scratch)
        digest = write_outputs(graded, out / name)
        report = graded.report
    except Exception as exc:  # one submission's failure must never stop the batch
        return _error_row(name, f"the grader failed: {type(exc).__name__}: {exc}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return GradebookRow(
        submission=name, student=report.submission, status="graded",
        total=points_text(report.total), max=points_text(report.max),
        criteria={c.id: points_text(c.points) for c in report.criteria},
        digest=digest, reason="",
    )


def _error_row(name: str, reason: str) -> GradebookRow:
    return GradebookRow(submission=name, student="", status="error", total="", max="",
                        criteria={}, digest="", reason=reason)


def print_progress(done: int, total: int, submission: str, elapsed: float) -> None:
    """The default progress line on stderr."""
    print(f"[{done}/{total}] {submission} ({elapsed:.1f}s elapsed)", file=sys.stderr)
