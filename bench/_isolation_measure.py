"""The grader benchmark's walls side by side: a child's start, a hanging submission, and
where one submission's time goes (sections 5 to 7; the batch under both walls is section 4).

A wall is ``--wall process`` (the in-process wall alone) or ``--wall
namespaces`` (bubblewrap around every sandboxed child). Without a working bubblewrap the
namespaces rows say so instead of failing the run.
"""

from __future__ import annotations

import ast
import contextlib
import csv
import io
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from bench._grader_data import REPO, copy_reference, tree_size
from bench._grader_measure import GraderPlan, bubblewrap_missing, progress, run_gradekit
from bench._table import Row, Table, fmt_bytes, fmt_ns, fmt_size, note_row, timed
from bench._timing import Costs, Stats, interleaved, summarize
from grader._model import Limits
from grader.batch._batch import _worker_environment
from grader.batch._worker import EXIT_BAD_REQUEST
from grader.batch._zygote import REQUEST, STDERR, Zygote
from grader.grading._grade import grade_submission
from grader.rubric._rubric import load_rubric
from grader.sandbox import RunPlan, Sandbox, Serving, wall_named
from grader.sandbox._channel import HARNESS, PYTHON_FLAGS, Child
from grader.sandbox._harness import copy_submission
from grader.sandbox._layout import IGNORED_NAMES
from grader.sandbox._namespaces import (
    KIT,
    Bind,
    bubblewrap,
    bwrap_argv,
    interpreter,
    package_folders,
)
from grader.sandbox._seccomp import filter_pipe

__all__ = ["WALLS", "breakdown_table", "hang_table", "start_table"]

WALLS = ("process", "namespaces")  # --wall, as the command line takes it
HANG_TIMEOUT_S = 2  # the hanging submission's rubric: bootcamp.toml with this timeout_s
GOAL_S, GOAL_CORES, GOAL_BATCH = 15, 2, 200  # the goal: 200 submissions in 15 s on 2 cores
_LIMITS = Limits(timeout_s=600)
_NO_CALL = "gradekit_bench_nocall"
_NO_CALL_AGENT = '''"""Benchmark agent: no provider call, no tool call; returns at once."""


def run(provider, task):
    return ""
'''
_HANG = """

def run(provider, task):  # hangs in every case: never calls, never returns
    import time

    while True:
        time.sleep(3600)
"""
# A grade's runs, in the order a grading starts them (what it names each run's folder; the
# folder itself has a made-up name, which ``_children_patched`` maps back). The probes,
# ``loud-<case>-<kind>-<call>``, and the seed runs follow in name order.
_RUNS = ("primary", "label-2", "label-3", "label-4", "label-5", "again", "probe", "second-set")
_GRACE_S = 1.0  # CPU passes: how long a child may take to exit by itself before the kill
CPU_CAVEAT = (
    "The grader kills each child's process group as soon as its run is over; under "
    "namespaces that kills bubblewrap, whose namespace init then dies too, and the kernel "
    "discards the CPU time of a sandboxed interpreter not yet reaped by it. So the CPU "
    f"passes let each child take up to {_GRACE_S:g} s to exit by itself first (it does, "
    "within milliseconds), and this process adopts bubblewrap's orphaned init to reap it."
)


# -- section 5: one sandboxed child's start, behind each wall ------------------------------


def start_table(plan: GraderPlan, folder: Path) -> Table:
    """Section 5: ``Sandbox.run`` on one case whose agent makes no call, under both walls."""
    tiny = folder / "start-tiny"
    tiny.mkdir()
    (tiny / f"{_NO_CALL}.py").write_text(_NO_CALL_AGENT, encoding="utf-8")
    whole = _reference(folder)
    lab = folder / "start-reference"
    shutil.copytree(whole, lab)
    (lab / f"{_NO_CALL}.py").write_text(_NO_CALL_AGENT, encoding="utf-8")
    missing = bubblewrap_missing()
    rows: list[Row] = []
    for name, root in (("one-file submission", tiny), ("reference lab + no-call agent", lab)):
        progress(f"Sandbox.run, one case, no call, {name}, both walls")
        size = f"{name}: {_files(tree_size(root))}"
        starts = {
            wall: _one_start(root, folder / f"start-scratch-{wall}", wall)
            for wall in _walls(missing)
        }
        walls = interleaved(starts, plan.repeats)
        with _children_patched(folder, grace_s=_GRACE_S):
            cpus = interleaved(starts, plan.repeats)
        rows += _start_rows(size, walls, cpus, missing)
    return Table(
        "5. One sandboxed child's start, with and without bubblewrap (Sandbox.run, one case, "
        "no call: copy, start the child, import, reap)",
        rows,
        [
            f"Median and p90 of {plan.repeats} starts per wall after one warm-up, the two "
            "walls taking turns. The ratio rows divide the namespaces median by the process "
            "median, and the p90 by the p90.",
            f"CPU: a second pass of {plan.repeats} starts per wall: user and system time of "
            "this process (the grader's side: under process it copies the submission) and of "
            f"every process below it. {CPU_CAVEAT}",
            "Under process the grader copies the submission and starts the grader's own "
            "interpreter on the harness. Under namespaces the run forks from the sandbox's "
            "host for its hash seed (started once, by the warm-up: bubblewrap, the base "
            "interpreter, the harness and the kit), whose fork builds the run's namespaces, "
            "its tmpfs and its overlay copy of the submission. Where hosts cannot run, each "
            "run starts its own bubblewrap instead (docs/sandbox.md). A forked run is the "
            "host's child, reaped by the host, which outlives the pass: its CPU time is not "
            "in the namespaces CPU rows (bench._sandbox_profile counts it, by cgroup).",
            "Size: what one start copies; the reference lab is a clean copy of this checkout "
            f"with a one-line agent ({_NO_CALL}.py) added.",
        ],
    )


def _walls(missing: str | None) -> tuple[str, ...]:
    return tuple(wall for wall in WALLS if wall == "process" or missing is None)


def _one_start(root: Path, scratch: Path, wall: str) -> Callable[[], None]:
    sandbox = Sandbox(root, scratch, _LIMITS, wall_named(wall))
    plan = RunPlan("provider-a", 0, Serving(_no_answer))

    def start() -> None:
        result = sandbox.run(f"{_NO_CALL}:run", [("empty", "")], plan)
        outcome = result.outcomes["empty"]
        if outcome.status != "returned":
            raise RuntimeError(
                f"--wall {wall}: {outcome.status} {outcome.detail} "
                f"{result.import_error or ''} {result.stderr}"
            )

    return start


def _start_rows(
    size: str, walls: Mapping[str, Costs], cpus: Mapping[str, Costs], missing: str | None
) -> list[Row]:
    rows = [timed(f"Sandbox.run, --wall {wall}", size, walls[wall].wall) for wall in walls]
    if missing is not None:
        rows.append(note_row("Sandbox.run, --wall namespaces", size, f"not run: {missing}"))
        return [*rows, timed("  CPU per start, process", size, cpus["process"].cpu)]
    rows.append(
        _ratio(
            "  namespaces / process, wall", size, walls["namespaces"].wall, walls["process"].wall
        )
    )
    rows += [timed(f"  CPU per start, {wall}", size, cpus[wall].cpu) for wall in cpus]
    rows.append(
        _ratio("  namespaces / process, CPU", size, cpus["namespaces"].cpu, cpus["process"].cpu)
    )
    return rows


def _ratio(operation: str, size: str, numerator: Stats, denominator: Stats) -> Row:
    return Row(
        operation,
        size,
        f"{numerator.median_ns / denominator.median_ns:.2f}x",
        f"{numerator.p90_ns / denominator.p90_ns:.2f}x",
    )


def _no_answer(case: str, prompt: str) -> str | None:
    """The no-call agent asks nothing: any call would miss."""
    return None


# -- section 6: a submission that hangs in every case --------------------------------------


def hang_table(plan: GraderPlan, folder: Path) -> Table:
    """Section 6: the whole ``gradekit grade`` of a submission whose agent never returns."""
    hanging, rubric = _hanging(folder)
    cases = len(load_rubric(rubric).cases)
    size = f"{cases} cases, timeout_s = {HANG_TIMEOUT_S}"
    missing = bubblewrap_missing()
    totals: Counter[str] = Counter()
    progress(f"gradekit grade of a hanging submission, both walls, {plan.hang_repeats} runs")
    costs = interleaved(
        {wall: _hang_command(hanging, rubric, folder, wall, totals) for wall in _walls(missing)},
        plan.hang_repeats,
        warmup=0,
    )
    floor = Stats(cases * HANG_TIMEOUT_S * 1e9, cases * HANG_TIMEOUT_S * 1e9, 1)
    rows = [
        timed(f"gradekit grade, hanging submission, --wall {wall}", size, costs[wall].wall)
        for wall in costs
    ]
    if missing is not None:
        rows.append(
            note_row(
                "gradekit grade, hanging submission, --wall namespaces", size, f"not run: {missing}"
            )
        )
    rows.append(
        Row(
            f"floor: one timeout per case ({cases} x {HANG_TIMEOUT_S} s)",
            size,
            fmt_ns(floor.median_ns),
            "—",
        )
    )
    rows += [
        timed(f"  above the floor, --wall {wall}", size, costs[wall].wall.minus(floor.median_ns))
        for wall in costs
    ]
    if plan.hang_counted:
        progress("grade_submission of the hanging submission in process, children counted")
        counted = _counted_grade(hanging, rubric, folder / "hang-counted", "process")
        rows.append(
            note_row(
                "sandboxed children started (grade_submission, process wall)",
                size,
                str(counted.children),
            )
        )
        children = (
            f"Children started, by run: {counted.by_run()}; case outcomes of the "
            f"primary run: {counted.statuses}."
        )
    else:
        children = f"Children not counted in the {plan.name} run (the full run counts them)."
    shown = ", ".join(f"{total}: {count}" for total, count in sorted(totals.items()))
    return Table(
        "6. A submission that hangs in every case (its agent sleeps forever), one grade",
        rows,
        [
            f"Whole `gradekit grade PATH --rubric R --wall W --jobs 1` in a fresh "
            f"process; median and p90 of {plan.hang_repeats} runs per wall, the walls taking "
            "turns, no warm-up. R: rubric/bootcamp.toml with timeout_s = "
            f"{HANG_TIMEOUT_S} in [limits]; the submission: the reference lab whose "
            "lab/agent.py ends with a `run` that sleeps forever.",
            "A case that timed out is not run again under the other labels, so a grade is "
            "one timeout per case (each ends its child; a fresh one runs the next case) plus "
            "the own-Replay probe, which does not call the agent.",
            children,
            f"Totals in the gradebooks: {shown} (every run graded, none hit budget_s).",
        ],
    )


def _hanging(folder: Path) -> tuple[Path, Path]:
    """The hanging submission and its rubric, both written under ``folder``."""
    hanging = folder / "hang" / "hanging"
    shutil.copytree(_reference(folder), hanging)
    with (hanging / "lab" / "agent.py").open("a", encoding="utf-8") as agent:
        agent.write(_HANG)
    text = (REPO / "rubric" / "bootcamp.toml").read_text("utf-8")
    old = "\ntimeout_s = 30\n"
    if old not in text:
        raise RuntimeError(f"rubric/bootcamp.toml no longer holds {old.strip()!r}: update bench")
    rubric = folder / "hang-rubric" / "bootcamp.toml"
    rubric.parent.mkdir()
    rubric.write_text(text.replace(old, f"\ntimeout_s = {HANG_TIMEOUT_S}\n"), encoding="utf-8")
    return hanging, rubric


def _hang_command(
    hanging: Path, rubric: Path, folder: Path, wall: str, totals: Counter[str]
) -> Callable[[], None]:
    def grade() -> None:
        out = Path(tempfile.mkdtemp(prefix=f"hang-out-{wall}-", dir=folder))
        args = [
            "grade",
            str(hanging),
            "--rubric",
            str(rubric),
            "--wall",
            wall,
            "--jobs",
            "1",
            "--out",
            str(out),
        ]
        done = run_gradekit(args, folder)
        rows = list(csv.DictReader(io.StringIO((out / "gradebook.csv").read_text("utf-8"))))
        if done.returncode != 0 or [r["status"] for r in rows] != ["graded"]:
            raise RuntimeError(
                f"gradekit {' '.join(args)} exited {done.returncode}:\n"
                f"{done.stdout.decode('utf-8', 'replace')[-2000:]}"
            )
        totals[rows[0]["total"]] += 1

    return grade


# -- section 7: where one submission's time goes -------------------------------------------


@dataclass
class _ChildLog:
    """The sandboxed children one grade started: per run, each one's start-to-reap time."""

    scratch: Path
    lifetimes: dict[str, list[float]] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)  # made-up folder name -> run

    def add(self, cwd: Path, ns: float) -> None:
        folder = cwd.resolve().relative_to(self.scratch).parts[0]
        run = self.roles.get(folder, folder)
        self.lifetimes.setdefault(run, []).append(ns)


@dataclass(frozen=True, slots=True)
class _Counted:
    """One grade with its children counted."""

    children: int
    runs: Mapping[str, int]
    child_ns: float  # summed start-to-reap time of its children
    statuses: str  # the primary run's case outcomes, counted

    def by_run(self) -> str:
        order = [run for run in _RUNS if run in self.runs] + sorted(set(self.runs) - {*_RUNS})
        return ", ".join(f"{run} {self.runs[run]}" for run in order)


@contextlib.contextmanager
def _children_patched(scratch: Path, *, grace_s: float = 0.0) -> Iterator[_ChildLog]:
    """Count and time every sandboxed child started under ``scratch`` meanwhile; with
    ``grace_s``, each child may take that long to exit by itself before it is killed."""
    log = _ChildLog(scratch.resolve())

    class Counted(Child):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._began, self._cwd = time.perf_counter_ns(), Path(kwargs.get("cwd", args[1]))
            self._logged = False
            super().__init__(*args, **kwargs)

        def finish(self, deadline: float) -> tuple[int, bool]:
            ended = super().finish(max(deadline, time.monotonic() + grace_s))
            if not self._logged:
                self._logged = True
                log.add(self._cwd, time.perf_counter_ns() - self._began)
            return ended

    within = Sandbox.within

    def named(self: Sandbox, folder: str) -> Sandbox:
        inner = within(self, folder)
        log.roles[inner.scratch.name] = folder  # the run a made-up folder name stands for
        return inner

    # Wherever the grader's modules import Child by name, they start the counted one.
    users = [
        module
        for name, module in sorted(sys.modules.items())
        if name.startswith("grader.") and getattr(module, "Child", None) is Child
    ]
    if not users:
        raise RuntimeError("no grader module starts grader.sandbox._channel.Child: update bench")
    with contextlib.ExitStack() as patches:
        for module in users:
            patches.enter_context(mock.patch.object(module, "Child", Counted))
        patches.enter_context(mock.patch.object(Sandbox, "within", named))
        yield log


def _counted_grade(
    root: Path, rubric: Path, scratch: Path, wall: str, *, grace_s: float = 0.0
) -> _Counted:
    """Grade ``root`` in process, counting its children (``grace_s``: as for
    ``_children_patched``)."""
    scratch.mkdir(parents=True, exist_ok=True)
    with _children_patched(scratch, grace_s=grace_s) as log:
        graded = grade_submission(
            root, load_rubric(rubric), submission=root.name, scratch=scratch, wall=wall_named(wall)
        )
    if not log.lifetimes:
        raise RuntimeError("grade_submission started no counted child: update bench")
    primary = graded.evidence.primary
    statuses = Counter(
        f"{o.status} ({o.detail})" if o.detail else o.status
        for o in (primary.outcomes.values() if primary else ())
    )
    return _Counted(
        sum(len(times) for times in log.lifetimes.values()),
        {run: len(times) for run, times in log.lifetimes.items()},
        sum(sum(times) for times in log.lifetimes.values()),
        ", ".join(f"{status} {count}" for status, count in sorted(statuses.items())),
    )


def breakdown_table(plan: GraderPlan, folder: Path) -> Table:
    """Section 7: one submission's children, what one child's start is made of, the worker."""
    reference = _reference(folder)
    rubric = REPO / "rubric" / "bootcamp.toml"
    missing = bubblewrap_missing()
    walls = _walls(missing)
    progress("grade_submission in process, children counted, both walls")
    counts: dict[str, list[_Counted]] = {wall: [] for wall in walls}
    serial = iter(range(1_000))

    def grade(wall: str, grace_s: float = 0.0) -> Callable[[], None]:
        return lambda: counts[wall].append(
            _counted_grade(
                reference,
                rubric,
                folder / f"breakdown-{wall}-{next(serial)}",
                wall,
                grace_s=grace_s,
            )
        )

    grades = interleaved({wall: grade(wall) for wall in walls}, plan.repeats)
    progress("grade_submission in process, children let exit by themselves, CPU")
    cpus = interleaved({wall: grade(wall, _GRACE_S) for wall in walls}, plan.repeats)
    progress("interpreter, bubblewrap, harness and worker start-up")
    parts = _parts(plan, reference, folder, missing)
    size = "reference lab, as shipped"
    rows: list[Row] = []
    for wall in walls:
        done = counts[wall][1 : plan.repeats + 1]  # the timed grades, not the warm-up
        children = Counter(c.children for c in done)
        rows.append(
            note_row(
                f"sandboxed children per grade, --wall {wall}",
                size,
                " or ".join(str(n) for n in sorted(children)),
            )
        )
        rows.append(timed(f"  grade_submission in process, --wall {wall}", size, grades[wall].wall))
        lifetimes = [c.child_ns / c.children for c in done]
        rows.append(
            timed(
                "    one child, start to reaped (mean over the grade's children)",
                size,
                summarize(lifetimes),
            )
        )
        rows.append(
            timed(
                "    CPU of a grade (the grader and every process below it)", size, cpus[wall].cpu
            )
        )
    rows += [timed(part.name, part.size, part.costs.wall) for part in parts]
    return Table(
        f"7. Where one submission's time goes (the goal: {GOAL_BATCH} submissions in "
        f"{GOAL_S} s on {GOAL_CORES} cores)",
        rows,
        _breakdown_notes(plan, counts, cpus, parts, missing),
    )


@dataclass(frozen=True, slots=True)
class _Part:
    """One piece of a child's or a worker's start, timed on its own."""

    name: str
    size: str
    costs: Costs


_WORKER = "worker: forked by the batch's zygote, an empty request (how the batch starts one)"
_FRESH = "worker: a fresh python -P -m grader.batch._worker, an empty request (imports, then exits)"


def _parts(plan: GraderPlan, reference: Path, folder: Path, missing: str | None) -> list[_Part]:
    """The pieces of one child's start and of one worker's, each timed on its own."""
    python, base = sys.executable, interpreter()[0]
    flags = list(PYTHON_FLAGS)
    imports = _harness_imports()
    packages = f"sys.path.extend({list(package_folders())!r})"  # as the harness does
    agent = (
        f"import sys; sys.path.insert(0, {str(reference)!r}); {packages}; {imports}; "
        "import lab.agent"
    )
    worker_cwd = Path(tempfile.mkdtemp(prefix="worker-cwd-", dir=folder))
    copies = iter(range(1_000))
    runs: dict[str, tuple[str, Callable[[], None]]] = {
        f"python {' '.join(flags)} -c pass (either wall's interpreter: no site, no .pth files)": (
            "interpreter",
            _run([python, *flags, "-c", "pass"], folder),
        ),
        "python -s -P -B -c pass (with site and the environment's .pth files, as before)": (
            "interpreter",
            _run([python, "-s", "-P", "-B", "-c", "pass"], folder),
        ),
        "  + the harness's imports (-c 'import json, hashlib, inspect, ...')": (
            "interpreter",
            _run([python, *flags, "-c", imports], folder),
        ),
        "  + the harness's imports and the reference agent (import lab.agent)": (
            "reference lab",
            _run([python, *flags, "-c", agent], reference),
        ),
        "copy_submission of the reference lab (once per child, either wall)": (
            "reference lab",
            lambda: copy_submission(
                str(reference), str(folder / "copies" / str(next(copies))), IGNORED_NAMES
            ),
        ),
        f"base python {' '.join(flags)} -c pass (the interpreter the namespaces wall starts)": (
            "interpreter",
            _run([base, *flags, "-c", "pass"], folder),
        ),
    }
    if missing is None:
        runs["bubblewrap alone: the child's options and seccomp filter, then true"] = (
            "namespaces",
            _bwrap(reference, ["true"]),
        )
        runs[f"bubblewrap + base python {' '.join(flags)} -c pass"] = (
            "namespaces",
            _bwrap(reference, [base, *flags, "-c", "pass"]),
        )
    runs[_FRESH] = (
        "grader.batch._worker",
        _run(
            [python, "-P", "-W", "ignore::RuntimeWarning", "-m", "grader.batch._worker", "bench"],
            worker_cwd,
            _worker_environment(),
            EXIT_BAD_REQUEST,
        ),
    )
    costs = interleaved({name: run for name, (_, run) in runs.items()}, _part_runs(plan))
    parts = [_Part(name, size, costs[name]) for name, (size, _) in runs.items()]
    return [*parts, _Part(_WORKER, "grader.batch._worker", _forked(plan, folder, worker_cwd))]


def _forked(plan: GraderPlan, folder: Path, cwd: Path) -> Costs:
    """Fork workers on an empty request from one zygote, as the batch does; each must refuse
    the request. Wall clock only, and in both columns: a forked worker's CPU is reaped by the
    zygote, and the zygote, a child that stays, would stall ``cpu_ns``."""
    zygote = Zygote(_worker_environment(), cwd)
    walls: list[float] = []
    try:
        for number in range(1 + _part_runs(plan)):  # the first one is the warm-up
            scratch = folder / "forked" / str(number)
            scratch.mkdir(parents=True)
            (scratch / REQUEST).write_bytes(b"")
            began = time.perf_counter_ns()
            code = zygote.wait(zygote.fork(scratch, "bench"), 60)
            walls.append(float(time.perf_counter_ns() - began))
            if code != EXIT_BAD_REQUEST:
                raise RuntimeError(
                    f"a forked worker exited {code}, not {EXIT_BAD_REQUEST}: "
                    f"{(scratch / STDERR).read_bytes()[-2000:]!r}"
                )
    finally:
        zygote.close()
    wall = summarize(walls[1:])
    return Costs(wall, wall)


def _part_runs(plan: GraderPlan) -> int:
    """Runs of each start-up piece: a few tens of milliseconds each, so more than grades."""
    return 2 * plan.repeats


def _harness_imports() -> str:
    """``import a, b, ...``: the modules ``_harness.py`` imports at its top level."""
    tree = ast.parse(HARNESS.read_text("utf-8"))
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module != "__future__":
            names.append(node.module)
    return "import " + ", ".join(dict.fromkeys(names))


def _run(
    command: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None, expected: int = 0
) -> Callable[[], None]:
    """Run ``command`` to its end; its exit status must be ``expected``."""
    environment = dict(env) if env is not None else _child_environment(cwd)

    def run() -> None:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=environment,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
        if done.returncode != expected:
            raise RuntimeError(
                f"{' '.join(command)} exited {done.returncode}:\n"
                f"{done.stderr.decode('utf-8', 'replace')[-2000:]}"
            )

    return run


def _child_environment(home: Path) -> dict[str, str]:
    """The sandboxed child's environment, as ``grader.sandbox._layout`` builds it from nothing."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "TMPDIR": str(home),
        "TZ": "UTC",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def _bwrap(reference: Path, command: Sequence[str]) -> Callable[[], None]:
    """``command`` behind the options a sandboxed child gets (as ``NamespacesWall.start`` starts
    one): the same binds, the same seccomp filter written to a fresh pipe."""
    path = bubblewrap()[0]
    if path is None:
        raise RuntimeError("bubblewrap is not available")
    _, binds, _ = interpreter()
    binds += (Bind(str(reference), f"{KIT}/original"), Bind(str(HARNESS), f"{KIT}/harness.py"))
    environment = _child_environment(Path("/sandbox"))

    def run() -> None:
        with filter_pipe() as read_end:
            argv = bwrap_argv(path, binds, disk_mb=_LIMITS.disk_mb, seccomp_fd=read_end)
            done = subprocess.run(
                [*argv, *command],
                env=environment,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                check=False,
                pass_fds=() if read_end is None else (read_end,),
            )
        if done.returncode != 0:
            raise RuntimeError(
                f"bubblewrap {' '.join(command)} exited {done.returncode}:\n"
                f"{done.stderr.decode('utf-8', 'replace')[-2000:]}"
            )

    return run


def _breakdown_notes(
    plan: GraderPlan,
    counts: Mapping[str, list[_Counted]],
    cpus: Mapping[str, Costs],
    parts: Sequence[_Part],
    missing: str | None,
) -> list[str]:
    share_ns = GOAL_S * GOAL_CORES * 1e9 / GOAL_BATCH
    # A forked worker's CPU lands on the zygote, not here: its wall clock stands in for it
    # (one thread, nothing to wait for).
    worker = next(part.costs.wall.median_ns for part in parts if part.name == _WORKER)
    notes = [
        f"The goal leaves {fmt_ns(share_ns)} of one core per submission ({GOAL_S} s x "
        f"{GOAL_CORES} cores / {GOAL_BATCH}), with both cores busy all the time.",
        "Children by run: "
        + "; ".join(f"--wall {wall}: {counts[wall][-1].by_run()}" for wall in counts)
        + ".",
    ]
    for wall, costs in cpus.items():
        children, grade = counts[wall][-1].children, costs.cpu.median_ns
        whole = grade + worker
        batch_s = whole * GOAL_BATCH / GOAL_CORES / 1e9
        notes.append(
            f"--wall {wall}: a grade's CPU ({fmt_ns(grade)}, {fmt_ns(grade / children)} "
            f"per child) plus a forked worker's start ({fmt_ns(worker)}) is {fmt_ns(whole)} "
            f"per submission, {whole / share_ns:.1f}x the goal's share: {GOAL_CORES} busy "
            f"cores would grade {GOAL_BATCH} submissions in {batch_s:.0f} s at best."
        )
    notes += [
        f"Grades: median and p90 of {plan.repeats} in-process grade_submission calls per wall "
        "after one warm-up, the walls taking turns, each child killed as soon as its run is "
        f"over, as the grader does; CPU: a second such pass. {CPU_CAVEAT}",
        f"Start-up pieces: median and p90 of {_part_runs(plan)} runs each after one warm-up, "
        "all taking turns, each a fresh process in the sandboxed child's environment (the "
        "worker rows: the batch's worker environment, started in an empty folder; the forked "
        "one by a zygote started once, as the batch does). The "
        "harness's imports are its own top-level imports, read from grader/sandbox/_harness.py; "
        "the "
        "agent's import adds the submission's `lab` package (lab.agent and what it imports).",
    ]
    if missing is not None:
        notes.append(f"Namespaces rows not run: {missing}.")
    return notes


def _reference(folder: Path) -> Path:
    """The clean copy of the reference lab that earlier sections made, or a new one."""
    reference = folder / "reference"
    return reference if reference.is_dir() else copy_reference(reference)


def _files(counted: tuple[int, int]) -> str:
    return f"{fmt_size(counted[0])} files, {fmt_bytes(counted[1])}"
