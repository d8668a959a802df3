"""How cost grows with the cohort: each step of the grader timed on synthetic cohorts of
200, 2 000 and 10 000 submissions (``bench._cohort``), with the growth ratios and a verdict.

Every step is one whole command, ``python -m grader ...``, in a fresh process, so each
time holds a fixed cost (start-up, imports) that would flatter the smaller sizes' cost per
submission. Each step is therefore also timed on a cohort of ``BASE`` submissions, and the
cost per cohort submission at size N is ``(t(N) - t(BASE)) / (N - BASE)``: what the
cohort adds, per submission in it. A step is linear or better when that cost at each
larger size is at most ``TOLERANCE`` times the smaller size's (a difference under
``NOISE_NS`` of CPU counts as that much: timing noise).

``grade`` is judged per graded submission instead (a handful graded into a copy of the
cohort): grading into a cohort must cost the same per submission whatever the cohort's
size, or a cohort graded a few at a time costs more than linear. Its second row is the
part of it that the cohort adds, per cohort submission, judged like the other steps.
``history`` reads the ledger and one student's reports: a last row sets it against
``ledger verify``, which reads the ledger and nothing else. ``review`` (one override)
brings the whole gradebook up to date: it runs last, since it appends to the ledger.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from bench._cohort import student_name, synthetic_grades
from bench._grader_data import REPO, copy_reference
from bench._table import fmt_ns, fmt_size
from bench._timing import cpu_ns
from grader.grading import grade_submission
from grader.ledger import GRADEBOOK, LEDGER, read_ledger
from grader.rubric import load_rubric
from grader.sandbox import choose_wall

__all__ = [
    "BASE",
    "FASTER",
    "FULL",
    "LINEAR",
    "NOISE_NS",
    "QUICK",
    "TOLERANCE",
    "Cost",
    "GrowthPlan",
    "GrowthTable",
    "Step",
    "growth_table",
    "render_growth",
    "verdict",
]

TOLERANCE = 1.5  # per-item cost may grow this much from one size to the next: timing noise
NOISE_NS = 20e6  # CPU a command's time may differ by from run to run, at least
BASE = 2  # the cohort whose times are the fixed cost of each command (student-00001's
# history there already holds two gradings)
LINEAR = "linear or better"
FASTER = "GROWS FASTER THAN LINEAR"
_PARTS = 4  # the gradebook is cut into this many parts for `gradebook merge`
_LATE = "late-"  # graded submissions not in the cohort yet; the others regrade cohort students
_REVIEWED = student_name(0)  # `gradekit review` overrides this student's written summary


@dataclass(frozen=True, slots=True)
class GrowthPlan:
    """Cohort sizes (smallest first) and how much is timed at each."""

    name: str
    sizes: tuple[int, ...]
    graded: int  # real submissions graded into a copy of each cohort
    repeats: int  # runs of the quick steps (ledger verify, history, merge, review): the median
    budget_s: float  # a command still running after this is stopped; its row says so

    def sized(self, sizes: Sequence[int]) -> GrowthPlan:
        """This plan at other cohort sizes (at least two, each larger than the one before)."""
        if len(sizes) < 2 or any(a >= b for a, b in pairwise(sizes)) or sizes[0] <= BASE:
            raise ValueError(
                f"cohort sizes {list(sizes)}: give two or more, smallest first, "
                f"each larger than the one before and than {BASE}, such as "
                "200,2000,10000"
            )
        return GrowthPlan(self.name, tuple(sizes), self.graded, self.repeats, self.budget_s)


FULL = GrowthPlan("full", (200, 2_000, 10_000), graded=4, repeats=3, budget_s=600.0)
QUICK = GrowthPlan("quick", (50, 500, 2_500), graded=2, repeats=1, budget_s=300.0)


@dataclass(frozen=True, slots=True)
class Cost:
    """One step at one size: median wall clock, CPU of the command and its children, CPU
    of the command's own process, or why there is no number."""

    wall_ns: float = 0.0
    cpu_ns: float = 0.0
    own_ns: float = 0.0  # the command's process alone: no worker, no sandboxed child
    problem: str = ""  # "" when measured


@dataclass(frozen=True, slots=True)
class Step:
    """A row of the growth table: one step's whole cost at each size, and at ``BASE``."""

    key: str  # grade, verify, history, merge, dashboard; grade-share for grade's second row
    name: str
    item: str  # what one item is: "cohort submission", "graded submission"
    sizes: tuple[int, ...]
    costs: tuple[Cost, ...]  # the whole command, by size
    base: Cost  # the whole command on the cohort of BASE submissions
    graded: int = 0  # not 0: the item is a graded submission, ``graded`` of them a command
    measure: str = "cpu_ns"  # the CPU judged: "own_ns" for the command's process alone

    def per_item(self, number: int, field: str = "") -> float:
        """The cost per item at size ``sizes[number]`` (``field``: the judged CPU, unless
        "wall_ns"): per graded submission, or what the cohort adds per cohort submission
        (CPU under the noise floor counts as the floor)."""
        field = field or self.measure
        whole = getattr(self.costs[number], field)
        if self.graded:
            return float(whole) / self.graded
        added = whole - getattr(self.base, field)
        if field != "wall_ns":
            added = max(added, NOISE_NS)
        return float(added) / (self.sizes[number] - BASE)

    def floored(self, number: int) -> bool:
        """Whether the judged CPU the cohort adds at ``sizes[number]`` is under the floor."""
        added = getattr(self.costs[number], self.measure) - getattr(self.base, self.measure)
        return not self.graded and added < NOISE_NS

    def problem(self, number: int) -> str:
        """Why size ``sizes[number]`` has no number ("" when it has one)."""
        return self.costs[number].problem or ("" if self.graded else self.base.problem)


@dataclass(frozen=True, slots=True)
class GrowthTable:
    """The growth section: its steps at each size, and notes."""

    title: str
    sizes: tuple[int, ...]
    steps: list[Step]
    notes: list[str]
    children: int = 0  # the sandboxed children one grade of a graded submission starts


def growth_table(
    plan: GrowthPlan, folder: Path, progress: Callable[[str], None] | None = None
) -> GrowthTable:
    """Build a cohort of each size (and of ``BASE``) in ``folder`` and time every step."""
    say = progress or (lambda what: None)
    say("growth: the real submissions graded into each cohort")
    submissions = _submissions(folder / "growth-submissions", plan.graded)
    children = _children(next(iter(sorted(submissions.iterdir()))), folder / "children")
    costs: dict[str, list[Cost]] = {}
    built: list[float] = []
    problems: list[str] = []
    student = ""
    for size in (BASE, *plan.sizes):
        cohort = folder / f"cohort-{size}"
        say(f"growth: a synthetic cohort of {fmt_size(size)} submissions")
        began = time.process_time_ns()
        synthetic_grades(cohort, size)
        built.append((time.process_time_ns() - began) / size)
        student = student or _with_history(cohort)
        for key, cost in _measure(plan, folder, cohort, size, submissions, student, say, problems):
            costs.setdefault(key, []).append(cost)
        for scratch in ("site", "graded", "parts"):  # the largest are big
            shutil.rmtree(folder / f"{scratch}-{size}", ignore_errors=True)
        if size != BASE:
            shutil.rmtree(cohort)
    shutil.rmtree(folder / f"cohort-{BASE}")
    steps = []
    for key, name, item in _steps(plan, student):
        base, *sized = costs["grade" if key == "grade-share" else key]
        steps.append(
            Step(
                key,
                name,
                item,
                plan.sizes,
                tuple(sized),
                base,
                plan.graded if key == "grade" else 0,
                "own_ns" if key == "grade-share" else "cpu_ns",
            )
        )
    return GrowthTable(
        f"8. How cost grows: each step at {', '.join(fmt_size(s) for s in plan.sizes)} submissions",
        plan.sizes,
        steps,
        _notes(plan, built[1:], problems),
        children,
    )


def _children(submission: Path, scratch: Path) -> int:
    """The sandboxed children one grade of ``submission`` starts, behind the wall
    ``gradekit grade`` picks here: what the grade step's cost is made of."""
    rubric = load_rubric(REPO / "rubric" / "bootcamp.toml")
    return grade_submission(
        submission, rubric, submission=submission.name, scratch=scratch, wall=choose_wall("auto")
    ).children


def _steps(plan: GrowthPlan, student: str) -> list[tuple[str, str, str]]:
    """Each row: its key (its times' in ``_measure``), its name and its item."""
    cohort = "cohort submission"
    return [
        (
            "grade",
            f"gradekit grade: {plan.graded} real submissions into the cohort",
            "graded submission",
        ),
        (
            "grade-share",
            "  its own process (gradebook, ledger, reviews): what the cohort adds",
            cohort,
        ),
        ("verify", "gradekit ledger verify", cohort),
        ("history", f"gradekit history {student}", cohort),
        ("merge", f"gradekit gradebook merge ({_PARTS} parts)", cohort),
        ("dashboard", "gradekit dashboard", cohort),
        ("review", f"gradekit review {_REVIEWED} (one written summary)", cohort),
    ]


def _submissions(folder: Path, count: int) -> Path:
    """``count`` copies of the reference lab: half regrade students of every cohort
    (``student-00000``, ...), half are new (``late-00000``, ...)."""
    reference = copy_reference(folder.parent / "growth-reference")
    for number in range(count):
        name = student_name(number // 2) if number % 2 == 0 else f"{_LATE}{number // 2:05d}"
        shutil.copytree(reference, folder / name)
    shutil.rmtree(reference)
    return folder


def _with_history(cohort: Path) -> str:
    """The first student graded twice in ``cohort`` (else the first one): their history is
    the longest a student of the synthetic cohort has."""
    runs: dict[str, int] = {}
    for event in read_ledger(cohort / LEDGER).events:
        if event.get("event") == "run":
            runs[str(event.get("student"))] = runs.get(str(event.get("student")), 0) + 1
    twice = sorted(student for student, count in runs.items() if count > 1)
    return twice[0] if twice else student_name(0)


def _measure(
    plan: GrowthPlan,
    folder: Path,
    cohort: Path,
    size: int,
    submissions: Path,
    student: str,
    say: Callable[[str], None],
    problems: list[str],
) -> list[tuple[str, Cost]]:
    """Every step on one cohort, in the order of ``_steps``."""
    say(f"growth: gradekit grade of {plan.graded} submissions into {fmt_size(size)}")
    graded = folder / f"graded-{size}"
    grades = []
    for _ in range(plan.repeats):  # grading changes the folder: a fresh copy each time
        shutil.rmtree(graded, ignore_errors=True)
        shutil.copytree(cohort, graded)
        grades.append(
            _timed(
                ["grade", str(submissions), "--out", str(graded), "--jobs", "1", "--quiet"],
                folder,
                1,
                plan.budget_s,
                graded_ok=True,
            )
        )
    grade = _median(grades)
    say(f"growth: ledger verify, history and gradebook merge at {fmt_size(size)}")
    verify = _timed(["ledger", "verify", str(cohort)], folder, plan.repeats, plan.budget_s)
    history = _timed(
        ["history", student, "--out", str(cohort)], folder, plan.repeats, plan.budget_s
    )
    parts = _cut(cohort / GRADEBOOK, folder / f"parts-{size}")
    merged = folder / f"parts-{size}" / "merged.csv"
    merge = _timed(
        ["gradebook", "merge", *map(str, parts), "--out", str(merged)],
        folder,
        plan.repeats,
        plan.budget_s,
    )
    if not merge.problem and merged.read_bytes() != (cohort / GRADEBOOK).read_bytes():
        problems.append(
            f"the {_PARTS} parts merged at {fmt_size(size)} are not the cohort's "
            "gradebook byte for byte"
        )
    say(f"growth: gradekit dashboard of {fmt_size(size)} submissions")
    site = folder / f"site-{size}"
    dashboards = []
    for _ in range(plan.repeats):  # a site is built into an empty folder
        shutil.rmtree(site, ignore_errors=True)
        dashboards.append(
            _timed(["dashboard", str(cohort), "--out", str(site)], folder, 1, plan.budget_s)
        )
    dashboard = _median(dashboards)
    say(f"growth: gradekit review at {fmt_size(size)} (last: it appends to the ledger)")
    review = _timed(
        [
            "review",
            _REVIEWED,
            "--criterion",
            "written_summary",
            "--points",
            "7",
            "--by",
            "bench",
            "--reason",
            "timed by the growth bench",
            "--out",
            str(cohort),
        ],
        folder,
        plan.repeats,
        plan.budget_s,
    )
    return [
        ("grade", grade),
        ("verify", verify),
        ("history", history),
        ("merge", merge),
        ("dashboard", dashboard),
        ("review", review),
    ]


def _median(costs: Sequence[Cost]) -> Cost:
    """The median of each figure of ``costs`` (one run each), or the first problem."""
    problems = [cost.problem for cost in costs if cost.problem]
    if problems:
        return Cost(problem=problems[0])
    return Cost(
        *(
            statistics.median(getattr(cost, name) for cost in costs)
            for name in ("wall_ns", "cpu_ns", "own_ns")
        )
    )


def _cut(gradebook: Path, folder: Path) -> list[Path]:
    """The gradebook cut into ``_PARTS`` gradebooks, every ``_PARTS``-th row in each."""
    folder.mkdir(parents=True, exist_ok=True)
    header, *rows = gradebook.read_bytes().splitlines(keepends=True)
    paths = []
    for number in range(_PARTS):
        path = folder / f"part-{number + 1}.csv"
        path.write_bytes(header + b"".join(rows[number::_PARTS]))
        paths.append(path)
    return paths


def _timed(
    args: Sequence[str], cwd: Path, repeats: int, budget_s: float, *, graded_ok: bool = False
) -> Cost:
    """The median wall clock and CPU of ``repeats`` runs of the gradekit command ``ARGS``
    (``_LAUNCH``: ``python -m grader ARGS``, which also says its own process's CPU); a
    grade exits 1 when a row is not "graded": ``graded_ok`` accepts that."""
    walls: list[float] = []
    cpus: list[float] = []
    owns: list[float] = []
    said_own = cwd / "own-cpu-ns"
    for _ in range(repeats):
        said_own.unlink(missing_ok=True)
        cpu = cpu_ns()
        began = time.perf_counter_ns()
        try:
            done = subprocess.run(
                [sys.executable, "-c", _LAUNCH, *args],
                cwd=cwd,
                env={**os.environ, _OWN_CPU: str(said_own)},
                capture_output=True,
                check=False,
                timeout=budget_s,
            )
        except subprocess.TimeoutExpired:
            return Cost(problem=f"stopped after {fmt_ns(budget_s * 1e9)}")
        walls.append(float(time.perf_counter_ns() - began))
        cpus.append(float(cpu_ns() - cpu))
        if done.returncode not in ((0, 1) if graded_ok else (0,)):
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            return Cost(problem=f"exit {done.returncode}: {said[-1] if said else 'no message'}")
        owns.append(float(said_own.read_text("ascii")))
    said_own.unlink(missing_ok=True)
    return Cost(statistics.median(walls), statistics.median(cpus), statistics.median(owns))


_OWN_CPU = "GRADEKIT_BENCH_OWN_CPU"  # where the launched command writes its own CPU, in ns
# `python -m grader ARGS` (grader/__main__.py), and the command's own CPU once it is done.
_LAUNCH = f"""\
import os, resource, sys
from grader.cli import main
try:
    code = main(sys.argv[1:])
finally:
    used = resource.getrusage(resource.RUSAGE_SELF)
    with open(os.environ["{_OWN_CPU}"], "w", encoding="ascii") as file:
        file.write(str(round((used.ru_utime + used.ru_stime) * 1e9)))
sys.exit(code)
"""


def _notes(plan: GrowthPlan, built: list[float], problems: list[str]) -> list[str]:
    runs = "one run" if plan.repeats == 1 else f"the median of {plan.repeats} runs"
    notes = [
        "Each cell: CPU per item (user and system time of the command and every process "
        "under it, from getrusage), wall clock in brackets. A cohort submission's cost is "
        f"what the cohort adds: the command's time at that size less its time on a cohort of "
        f"{BASE} (start-up, imports), divided by the submissions added; a CPU difference "
        f"under {fmt_ns(NOISE_NS)} counts as {fmt_ns(NOISE_NS)} (shown as ≤). grade is per "
        "graded submission, start-up included; its second row is the CPU of the grade "
        "command's own process alone (the batch's gradebook, ledger and reviews; not its "
        "workers or sandboxed runs), what the cohort adds per cohort submission. Growth: "
        "how much the cost grew from one size to the next, beside what linear growth "
        f"allows (the sizes' ratio; 1x per graded submission). Times: {runs} for every "
        "step (each grade into a fresh copy of the cohort, each dashboard into an empty "
        "folder).",
        f"Verdict, on CPU: {LINEAR} when the cost per item at each larger size is at most "
        f"{TOLERANCE}x the smaller size's (timing noise), else {FASTER}; a command stopped "
        f"after {fmt_ns(plan.budget_s * 1e9)} at a larger size is {FASTER} too.",
        "Cohorts: bench/_cohort.py's synthetic grades folders, written by the grader's own "
        "code (reports, ledger, reviews, gradebook): two batches, 10 % graded twice, 8 % of "
        "first reports reviewed, 2 % ungradable. Writing them took "
        + ", ".join(
            f"{fmt_ns(ns)} CPU per submission at {fmt_size(size)}"
            for ns, size in zip(built, plan.sizes, strict=True)
        )
        + ".",
        f"grade: {plan.graded} clean copies of the reference lab graded with --jobs 1 and the "
        "machine's --wall into a copy of each cohort: half regrade cohort students, half "
        "are new. Under namespaces its CPU is a lower bound (section 5).",
    ]
    if problems:
        notes.insert(0, "Problems: " + "; ".join(problems) + ".")
    return notes


# -- rendering -----------------------------------------------------------------------------------


def render_growth(table: GrowthTable) -> str:
    """The table as GitHub Markdown, in the bench's style: a title, rows, notes."""
    sizes = table.sizes
    pairs = list(pairwise(sizes))
    header = [
        "step",
        "per",
        *(f"at {fmt_size(s)}" for s in sizes),
        *(f"growth {fmt_size(a)} → {fmt_size(b)}" for a, b in pairs),
        "verdict",
        "children a grade",
    ]
    align = ["---", "---", *("---:" for _ in sizes), *("---:" for _ in pairs), "---", "---:"]
    lines = [f"## {table.title}", "", _line(header), _line(align)]
    for step in table.steps:
        cells = [
            step.name,
            step.item,
            *(_cell(step, n) for n in range(len(sizes))),
            *(_growth(step, n) for n in range(len(pairs))),
            verdict(step),
            str(table.children) if step.key == "grade" and table.children else "—",
        ]
        lines.append(_line(cells))
    steps = {step.key: step for step in table.steps}
    if "history" in steps and "verify" in steps:
        lines.append(_line([*_beside_ledger(steps["history"], steps["verify"]), "—"]))
    lines += ["", *(f"- {note}" for note in table.notes)]
    return "\n".join(lines)


def verdict(step: Step) -> str:
    """``LINEAR`` when no size's CPU per item exceeds ``TOLERANCE`` times the smaller one's;
    ``FASTER`` when one does, or a larger size was stopped; "—" and why without numbers."""
    if step.problem(0):
        return f"— ({step.problem(0)})"
    for smaller, larger in pairwise(range(len(step.sizes))):
        problem = step.problem(larger)
        if problem:
            return FASTER if problem.startswith("stopped") else f"— ({problem})"
        if step.per_item(larger) > TOLERANCE * max(step.per_item(smaller), 0.0):
            return FASTER
    return LINEAR


def _beside_ledger(history: Step, verify: Step) -> list[str]:
    """history's CPU per cohort submission as a multiple of ledger verify's, at each size
    where both are over the noise floor: one student's history may cost a multiple of
    reading the ledger, but that multiple may not grow."""
    count = len(history.sizes)
    ratios = [
        None
        if history.problem(n) or verify.problem(n) or history.floored(n) or verify.floored(n)
        else history.per_item(n) / verify.per_item(n)
        for n in range(count)
    ]
    grew = [f"{b / a:.3g}x of 1x" if a and b else "—" for a, b in pairwise(ratios)]
    known = [ratio for ratio in ratios if ratio is not None]
    if len(known) < 2:
        judged = "— (over the noise floor at fewer than two sizes)"
    elif all(b <= TOLERANCE * a for a, b in pairwise(known)):
        judged = "no faster than reading the ledger"
    else:
        judged = "GROWS FASTER THAN ITS LEDGER"
    return [
        f"  {history.name} ÷ ledger verify",
        "CPU ratio",
        *("—" if r is None else f"{r:.3g}x" for r in ratios),
        *grew,
        judged,
    ]


def _cell(step: Step, number: int) -> str:
    if step.problem(number):
        return step.problem(number)
    cpu = f"{'≤ ' if step.floored(number) else ''}{fmt_ns(step.per_item(number))}"
    if step.measure != "cpu_ns":  # the wall clock is the whole command's, in the row above
        return cpu
    wall = step.per_item(number, "wall_ns")
    return f"{cpu} ({fmt_ns(wall) if wall > 0 else '≤ 0'})"


def _growth(step: Step, number: int) -> str:
    """How much the cost grew from size ``number`` to the next, beside what linear allows."""
    if step.problem(number) or step.problem(number + 1) or step.per_item(number) <= 0:
        return "—"
    allowed = 1.0 if step.graded else step.sizes[number + 1] / step.sizes[number]
    grew = step.per_item(number + 1) / step.per_item(number) * allowed
    return f"{grew:.3g}x of {allowed:.3g}x"


def _line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"
