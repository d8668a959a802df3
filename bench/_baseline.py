"""The CPU one grade costs, this checkout beside the grader it is measured against.

An issue sets a target as a share of an earlier grader's cost ("at most half of
be0b979's"), and a share is only worth anything when both sides run on one machine in one
run. The earlier grader's tree comes out of this checkout's own history (``git archive``);
each side grades the same copy of the reference lab with its own rubric, in a fresh process
of its own (so neither keeps what the other warmed), under the same wall. What a grade
costs is that process's CPU and that of every process it started, as the kernel counts them
in a cgroup of their own: the grader, its hosts, every sandboxed run. Where no cgroup can be
made, it is the CPU of the processes reaped when the grade returns (the measuring process
is bubblewrap's orphans' subreaper), which misses a run whose pid namespace ended unreaped.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

from bench._grader_data import REPO
from bench._table import Row, note_row, timed
from bench._timing import summarize

__all__ = ["BASELINE", "baseline_rows"]

BASELINE = "be0b979"  # the grader issue 43 set its CPU target against
SHARE_TARGET = 0.5  # this checkout's CPU a grade, at most this share of the baseline's

# Run in a fresh interpreter with PYTHONPATH at one grader's tree: grade the reference
# N + 1 times (the first warms the process), print each grade's CPU in ns and its children.
_SCRIPT = r"""
import ctypes, json, os, resource, sys, time
from pathlib import Path
tree, reference, rubric_file, wall_name, scratch, repeats, usage_file = sys.argv[1:8]
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans come here
import grader
from grader.grading import grade_submission
from grader.rubric import load_rubric
from grader.sandbox import choose_wall
assert Path(grader.__file__).resolve().is_relative_to(Path(tree).resolve()), grader.__file__


def cpu():
    if usage_file:  # the kernel's count for this process's cgroup: every descendant
        settle = time.monotonic() + 0.2
        while time.monotonic() < settle:  # what a run's end still spends, counted
            time.sleep(0.02)
        text = open(usage_file).read()
        if usage_file.endswith("cpu.stat"):
            return int(text.split("usage_usec")[1].split()[0]) * 1000
        return int(text)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:  # every child that is done, reaped
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            time.sleep(0.001)
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), \
        resource.getrusage(resource.RUSAGE_CHILDREN)
    return round((own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime) * 1e9)


rubric, wall = load_rubric(Path(rubric_file)), choose_wall(wall_name)
spent, children = [], set()
for number in range(int(repeats) + 1):
    before = cpu()
    graded = grade_submission(Path(reference), rubric, submission="reference",
                              scratch=Path(scratch) / str(number), wall=wall)
    after = cpu()
    if number:
        spent.append(after - before)
        children.add(getattr(graded, "children", 0))
print(json.dumps({"spent": spent, "children": sorted(children),
                  "total": str(graded.report.total)}))
"""


def baseline_rows(reference: Path, folder: Path, wall_name: str, repeats: int) -> list[Row]:
    """This checkout's CPU a grade and the baseline's, measured alike in this run, and the
    share of one in the other against ``SHARE_TARGET``."""
    operation = f"CPU a grade, --wall {wall_name}, in a fresh process"
    tree = folder / f"baseline-{BASELINE}"
    if not tree.is_dir():
        made = _archive(tree)
        if made is not None:
            return [
                note_row(f"{operation}: {BASELINE} beside this checkout", value=f"not run: {made}")
            ]
    measured: dict[str, list[float]] = {}
    rows: list[Row] = []
    for name, root in ((BASELINE, tree), ("this checkout", REPO)):
        got = _measure(
            root,
            reference,
            folder / f"baseline-scratch-{name.replace(' ', '-')}",
            wall_name,
            repeats,
        )
        if isinstance(got, str):
            return [*rows, note_row(f"{operation}, {name}", value=f"not run: {got}")]
        spent, counts = got
        measured[name] = spent
        shown = (
            "/".join(str(n) for n in counts) + " children a grade"
            if counts
            else "children not counted there"
        )
        rows.append(timed(f"{operation}, {name}", shown, summarize(spent)))
    ours, theirs = (summarize(measured[name]).median_ns for name in ("this checkout", BASELINE))
    share = ours / theirs if theirs else float("inf")
    verdict = "met" if share <= SHARE_TARGET else "missed"
    rows.append(
        note_row(
            f"{operation}: this checkout as a share of {BASELINE}",
            value=f"{share:.2f} (target at most {SHARE_TARGET:.2f}: {verdict})",
        )
    )
    return rows


def _archive(tree: Path) -> str | None:
    """Unpack the baseline's tree at ``tree``; None, or why it could not be."""
    found = subprocess.run(
        ["git", "-C", str(REPO), "cat-file", "-e", f"{BASELINE}^{{commit}}"],
        capture_output=True,
        check=False,
    )
    if found.returncode != 0:
        return (
            f"this clone does not hold {BASELINE} (a shallow clone?): "
            f"`git fetch --unshallow` brings it"
        )
    tree.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", BASELINE], capture_output=True, check=False
    )
    if archive.returncode != 0:
        return archive.stderr.decode(errors="replace").strip() or "git archive failed"
    unpacked = subprocess.run(
        ["tar", "-x", "-C", str(tree)], input=archive.stdout, capture_output=True, check=False
    )
    return None if unpacked.returncode == 0 else "tar could not unpack the baseline"


def _measure(
    tree: Path, reference: Path, scratch: Path, wall_name: str, repeats: int
) -> tuple[list[float], list[int]] | str:
    """Grade ``reference`` with the grader at ``tree`` in a process of its own: each grade's
    CPU (ns) and the children a grade started (none where that grader does not count
    them), or why it failed."""
    scratch.mkdir(parents=True, exist_ok=True)
    scratch.chmod(0o711)  # a root grader's children, uid 65534, pass through it
    env = {**os.environ, "PYTHONPATH": str(tree)}
    group = _cgroup(scratch.name)
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                _SCRIPT,
                str(tree),
                str(reference),
                str(tree / "rubric" / "bootcamp.toml"),
                wall_name,
                str(scratch),
                str(repeats),
                "" if group is None else str(group[1]),
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=scratch,
            check=False,
            preexec_fn=None if group is None else lambda: _join(group[0]),
        )
    finally:
        if group is not None:
            with contextlib.suppress(OSError):
                group[0].rmdir()
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or ["failed"])[-1][:200]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return [float(n) for n in figures["spent"]], [int(n) for n in figures["children"] if n]


def _cgroup(name: str) -> tuple[Path, Path] | None:
    """A cgroup of its own for one measured process, and the file that counts its CPU and
    its descendants' (cgroup v1's cpuacct, else v2's cpu.stat); None where none can be
    made (the CPU is then the reaped processes', which misses runs whose pid namespace
    ended before anything reaped them)."""
    for root, usage in (
        (Path("/sys/fs/cgroup/cpuacct"), "cpuacct.usage"),
        (Path("/sys/fs/cgroup"), "cpu.stat"),
    ):
        if not (root / usage).is_file():
            continue
        folder = root / f"gradekit-bench-{os.getpid()}-{name}"
        try:
            folder.mkdir()
        except OSError:
            continue
        return folder, folder / usage
    return None


def _join(folder: Path) -> None:
    """In the child, before it runs: into ``folder``'s cgroup (pid 0: itself)."""
    with open(folder / "cgroup.procs", "w") as procs:
        procs.write("0")
