"""The grader benchmark's measurements: the pipe, one grade, the checkpoints, a batch under
both walls (the other wall-by-wall sections are in ``bench._isolation_measure``)."""

from __future__ import annotations

import csv
import importlib.util
import io
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import cast

from bench._baseline import BASELINE, baseline_rows
from bench._data import PROMPT_BYTES
from bench._grader_data import REPO, build_loop_lab, copy_reference, make_batch, tree_size
from bench._grader_pingpong import ping_pong
from bench._grader_tools import LOOKUP, RESULT_BYTES, build_tool_lab, lookup_args, lookup_result
from bench._sdk_lab import build_sdk_lab
from bench._table import Row, Table, Target, fmt_bytes, fmt_ns, fmt_size, note_row, timed
from bench._timing import Stats, cpu_ns, repeated, summarize
from gradekit import Replay, ToolReplay
from grader._model import Limits
from grader.grading._checkpoints import run_checkpoints
from grader.grading._grade import _serve, _serve_tools, grade_submission
from grader.outputs._report import render_report_json
from grader.rubric import Rubric
from grader.rubric._rubric import load_rubric
from grader.sandbox import RunPlan, Sandbox, Serving, ToolAnswer
from grader.sandbox._namespaces import bubblewrap
from grader.sandbox._sandbox import no_tools
from grader.sandbox._walls import choose_wall

__all__ = [
    "FULL",
    "QUICK",
    "GraderPlan",
    "batch_table",
    "bubblewrap_missing",
    "check_table",
    "grade_table",
    "pipe_table",
    "progress",
    "run_gradekit",
]

PIPE_TARGET = Target(100_000)  # parent-served replay or tool: under 100 µs a call over the pipe
CHECK_TARGET = Target(1e9)  # `gradekit check`: all three checkpoints in a second
SDK_CHECK_TARGET = Target(5e9)  # ... and in 5 s for an SDK agent with the SDK's retries
CHECKPOINT_TARGET = Target(60e9)  # each checkpoint: within one minute
BATCH_TARGET = 60e9  # 200 submissions behind the process wall: within a minute
# Isolated (namespaces), 200 submissions: the target (on 2 cores) by --jobs; 3 is the
# default there (the cores plus one).
ISOLATED_BATCH_TARGETS = {2: 15e9, 3: 15e9}
TARGET_BATCH = 200  # the batch size the targets are set for
BATCH_WALLS = ("namespaces", "process")  # --wall, as the command line takes it
EARLIER_BATCH = (
    "Earlier figures without isolation (before the namespaces wall): 101 s at "
    "--jobs 2, 155 s at --jobs 1."
)
PEERS = (
    "Peers: none exist for sandboxed grading (a child process per run, the replay served "
    "by the parent over a pipe), so no other tool stands in this table."
)
_DISTINCT_PROMPTS = 100


@dataclass(frozen=True, slots=True)
class GraderPlan:
    """Sizes and repetitions of one grader benchmark run."""

    name: str
    calls: int  # provider calls in one timed loop of the call-loop agent
    loops: int  # timed loops (cases in one sandboxed child, or in-process runs)
    warmup: int  # loops run first and not counted
    repeats: int  # whole commands and in-process grades timed after one warm-up
    batch: int  # generated submissions graded together
    jobs: tuple[int, ...]
    hang_repeats: int  # whole grades of the hanging submission per wall, no warm-up
    hang_counted: bool  # also grade it once in process, its sandboxed children counted


FULL = GraderPlan(
    "full",
    calls=2_000,
    loops=15,
    warmup=3,
    repeats=5,
    batch=200,
    jobs=(1, 2, 3),
    hang_repeats=3,
    hang_counted=True,
)
QUICK = GraderPlan(
    "quick",
    calls=500,
    loops=5,
    warmup=1,
    repeats=2,
    batch=6,
    jobs=(1, 2),
    hang_repeats=1,
    hang_counted=False,
)


def progress(what: str) -> None:
    """Progress on stderr, so that stdout is only the tables."""
    print(f"bench: {what}...", file=sys.stderr, flush=True)


def pipe_table(plan: GraderPlan, folder: Path) -> Table:
    """Section 1: the same call loops against the pipe and in process: provider calls
    (``lab.Replay``) and tool calls (``lab.ToolReplay``)."""
    progress(f"{plan.calls} provider calls per loop, in process and in the sandbox")
    lab = build_loop_lab(folder / "loop-lab", _DISTINCT_PROMPTS)
    total = plan.warmup + plan.loops
    agent = _load_function(lab.root / "benchagent.py", "run")
    replay = Replay(lab.cassette, name="provider-a")
    local = [int(agent(replay, str(plan.calls))) / plan.calls for _ in range(total)]
    cases = [(f"loop-{number:02d}", str(plan.calls)) for number in range(total)]
    serve = _serve({case: lab.answers for case, _ in cases})
    piped = _sandboxed_loops(
        plan, lab.root, "benchagent:run", cases, folder / "loop-scratch", answer=serve
    )

    progress(f"{plan.calls} tool calls per loop, in process and in the sandbox")
    tool_lab = build_tool_lab(folder / "tool-lab", _DISTINCT_PROMPTS)
    tool_agent = _load_function(tool_lab.root / "benchtools.py", "run")
    toolbox = ToolReplay(tool_lab.fixture)
    tool_local = [
        int(tool_agent(None, str(plan.calls), toolbox.for_run())) / plan.calls for _ in range(total)
    ]
    tools = _serve_tools({case: tool_lab.results for case, _ in cases})
    tool_piped = _sandboxed_loops(
        plan,
        tool_lab.root,
        "benchtools:run",
        cases,
        folder / "tool-scratch",
        answer=_no_answer,
        tools=tools,
        tool=LOOKUP,
    )

    progress("bare JSON-lines ping-pong between two processes, provider- and tool-shaped")
    floor = summarize(ping_pong(plan.calls, total)[plan.warmup :])
    tool_request = {"op": "tool", "case": "c", "tool": LOOKUP, "args": lookup_args(0)}
    tool_floor = summarize(
        ping_pong(plan.calls, total, tool_request, {"response": lookup_result(0)})[plan.warmup :]
    )
    in_sandbox, in_process = summarize(piped[plan.warmup :]), summarize(local[plan.warmup :])
    tool_sandbox = summarize(tool_piped[plan.warmup :])
    tool_process = summarize(tool_local[plan.warmup :])
    size = f"{fmt_size(plan.calls)} calls"
    return Table(
        f"1. Parent-served replay over the pipe, per call (provider: {PROMPT_BYTES // 1024} KB "
        f"prompt, 1 KB answer; tool: {RESULT_BYTES // 1024} KB JSON result)",
        [
            timed(
                "agent in the sandbox: replay served by the parent over the pipe", size, in_sandbox
            ),
            timed("same agent in process: lab.Replay.complete", size, in_process),
            timed(
                "overhead of the pipe per provider call (sandbox minus in-process)",
                size,
                in_sandbox.minus(in_process.median_ns),
                PIPE_TARGET,
            ),
            timed("reference: bare JSON-lines ping-pong over two pipes, no sandbox", size, floor),
            timed(
                "agent in the sandbox: tool call served by the parent over the pipe",
                size,
                tool_sandbox,
            ),
            timed("same agent in process: lab.ToolReplay.call", size, tool_process),
            timed(
                "overhead of the pipe per tool call (sandbox minus in-process)",
                size,
                tool_sandbox.minus(tool_process.median_ns),
                PIPE_TARGET,
            ),
            timed(
                "reference: bare ping-pong, tool-call-shaped lines, no sandbox", size, tool_floor
            ),
        ],
        [
            f"Per call: the agent's own perf_counter_ns around a loop of {fmt_size(plan.calls)} "
            f"calls over {_DISTINCT_PROMPTS} distinct prompts (tools: {_DISTINCT_PROMPTS} "
            f"distinct `{LOOKUP}` arguments), divided by the calls; median and p90 of "
            f"{plan.loops} loops after {plan.warmup} warm-up loops (in the sandbox: "
            "consecutive cases of one child). The parent's record confirms every call was "
            "served.",
            "A piped provider call is: JSON line to the parent, prompt_key and dict lookup "
            "there, JSON line back, with the child's audit hook installed. A piped tool call "
            f'is: `tools.call("{LOOKUP}", q=...)` in the child, a JSON line to the parent, '
            "tool_key and a lookup in the case's in-memory fixture map (as grader.grading._grade "
            "serves it), the recorded result as a JSON line back. In process, "
            "ToolReplay.call computes the same tool_key and reads the result back from its "
            "JSON text. The overhead rows subtract the in-process median from both columns.",
            "The reference rows are the floor any two-process JSON-lines design pays here: the "
            "same lines (1 KB each way for a provider call; a short request and a 1 KB reply "
            "for a tool call), a selector on the parent's side, nothing else.",
            "In-process replay peers (vcrpy, agent-chronicle) are in the main `make bench` "
            f"tables; ToolReplay.call alone is its section 6. A child's start, under both "
            f"walls, is section 5 here. {PEERS}",
        ],
    )


_LIMITS = Limits(timeout_s=600)


def _no_answer(case: str, prompt: str) -> str | None:
    """The tool loop makes no provider call: any would miss."""
    return None


def _sandboxed_loops(
    plan: GraderPlan,
    root: Path,
    agent: str,
    cases: Sequence[tuple[str, str]],
    scratch: Path,
    *,
    answer: Callable[[str, str], str | None],
    tools: ToolAnswer = no_tools,
    tool: str | None = None,
) -> list[float]:
    """Per-call nanoseconds of each case, one child running them all; every call must have
    been served by the parent, and be a call of ``tool`` (or a provider call, without one)."""
    result = Sandbox(root, scratch, _LIMITS).run(
        agent, cases, RunPlan("provider-a", 0, Serving(answer, tools))
    )
    per_call = []
    for case, _ in cases:
        outcome = result.outcomes[case]
        served = sum(call.served and call.tool == tool for call in outcome.calls)
        if outcome.status != "returned" or served != plan.calls or outcome.answer is None:
            raise RuntimeError(
                f"{case}: {outcome.status}, {served} of {plan.calls} served, "
                f"{outcome.detail or result.import_error or result.stderr}"
            )
        per_call.append(int(outcome.answer) / plan.calls)
    return per_call


def _load_function(path: Path, name: str) -> Callable[..., str]:
    """The agent function, imported in this process from its file."""
    spec = importlib.util.spec_from_file_location(f"gradekit_bench_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return cast(Callable[..., str], getattr(module, name))


def grade_table(plan: GraderPlan, folder: Path) -> Table:
    """Section 2: one submission, the reference lab with its 4 cases, graded end to end."""
    reference = copy_reference(folder / "reference")
    clean, checkout = tree_size(reference), tree_size(REPO)
    rubric = load_rubric(REPO / "rubric" / "bootcamp.toml")
    digests: Counter[str] = Counter()

    progress("gradekit grade, one submission, in a fresh process")
    whole = _commands(["grade", str(reference), "--jobs", "1"], folder, plan.repeats, digests)
    progress("grade_submission in process")
    counter = iter(range(1_000))

    def in_process() -> None:
        graded = grade_submission(
            reference,
            rubric,
            submission=reference.name,
            scratch=folder / f"scratch-{next(counter)}",
        )
        digests[_digest(render_report_json(graded.report))] += 1

    inner = repeated(in_process, plan.repeats)
    costs = [
        _grade_cost(reference, rubric, folder / f"cost-{name}", name, plan.repeats)
        for name in BATCH_WALLS
    ]
    progress(f"CPU a grade: this checkout beside {BASELINE}, each in a fresh process")
    costs += (
        baseline_rows(reference, folder, "namespaces", plan.repeats)
        if bubblewrap_missing() is None
        else []
    )
    progress("gradekit grade of the checkout in place")
    in_place = _commands(["grade", str(REPO), "--jobs", "1"], folder, plan.repeats, digests)
    shown = ", ".join(f"{digest[:12]}… ({count} grades)" for digest, count in digests.items())
    return Table(
        "2. One submission graded end to end (reference lab, 4 cases)",
        [
            timed("gradekit grade, clean copy of the lab, whole process", _files(clean), whole),
            timed("grade_submission in process, same copy", _files(clean), inner),
            timed(
                "gradekit grade of this checkout in place, whole process",
                _files(checkout),
                in_place,
            ),
            *costs,
        ],
        [
            f"Median and p90 of {plan.repeats} runs after one warm-up. A grade of the "
            "reference starts the sandboxed children its CPU rows count (their size column): "
            "the primary run; one under each other provider family's label; the run on "
            "another day; the loud-failure probes (one run copied at each case's start "
            "once per provider and tool call, and one probe a case in a run of its own that "
            "checks the copies); the own-Replay probe; the second cassette set; the "
            "cut-point test, twice. The CPU rows are the grader's and every child's, "
            "reaped when the grade returns: behind either wall each child forks from a "
            "warmed host, one per hash seed (behind the process wall since issue 43; "
            "before, each child there was a fresh interpreter).",
            "Size: what each sandboxed run copies. The checkout in place also copies its "
            "untracked caches (.mypy_cache and the like); the clean copy is what git holds.",
            f"Report digests of every grade here: {shown}.",
            PEERS,
        ],
    )


def _grade_cost(reference: Path, rubric: Rubric, folder: Path, wall_name: str, repeats: int) -> Row:
    """The CPU one grade costs behind ``wall_name`` (the grader and every child it started,
    each reaped by the time the grade returns), with the children a grade starts."""
    missing = bubblewrap_missing() if wall_name == "namespaces" else None
    operation = f"grade_submission, CPU a grade (grader and its children), --wall {wall_name}"
    if missing is not None:
        return note_row(operation, value=f"not run: {missing}")
    wall = choose_wall(wall_name)
    children: set[int] = set()
    spent: list[float] = []
    for number in range(repeats + 1):  # the first warms this process's caches
        before = cpu_ns()
        graded = grade_submission(
            reference, rubric, submission=reference.name, scratch=folder / str(number), wall=wall
        )
        if number:
            spent.append(cpu_ns() - before)
            children.add(graded.children)
    shown = "/".join(str(count) for count in sorted(children))
    return timed(operation, f"{shown} children a grade", summarize(spent))


def check_table(plan: GraderPlan, folder: Path) -> Table:
    """Section 3: ``gradekit check``, the whole command and each checkpoint."""
    reference = folder / "reference"
    if not reference.is_dir():
        copy_reference(reference)
    progress("gradekit check")
    whole = _commands(["check", str(reference)], folder, plan.repeats)
    in_place = _commands(["check"], REPO, plan.repeats)
    sdk_lab = folder / "sdk-lab"
    if not sdk_lab.is_dir():
        build_sdk_lab(sdk_lab)
    # 1: the lab claims no stretch goal, so the check ends on a lost point, as it should.
    sdk = _commands(["check", str(sdk_lab)], folder, plan.repeats, exits=(0, 1))
    rubric = load_rubric(reference / "rubric" / "bootcamp.toml")
    seconds: dict[tuple[int, str], list[float]] = {}
    failed: set[str] = set()
    for _ in range(plan.repeats):
        for point in run_checkpoints(reference, rubric).checkpoints:
            seconds.setdefault((point.number, point.title), []).append(point.seconds * 1e9)
            if not point.passed:
                failed.add(f"{point.number}. {point.title}: {point.reason}")
    rows = [
        timed(
            "gradekit check, clean copy of the lab, whole process",
            "3 checkpoints",
            whole,
            CHECK_TARGET,
        ),
        timed(
            "gradekit check in this checkout (what make check runs), whole process",
            "3 checkpoints",
            in_place,
            CHECK_TARGET,
        ),
        timed(
            "gradekit check, an openai SDK agent with its default retries (2), whole process",
            "3 checkpoints",
            sdk,
            SDK_CHECK_TARGET,
        ),
    ]
    rows += [
        timed(
            f"checkpoint {number}. {title} (in process)",
            "clean copy",
            summarize(values),
            CHECKPOINT_TARGET,
        )
        for (number, title), values in sorted(seconds.items())
    ]
    verdicts = (
        "Failed: " + "; ".join(sorted(failed)) if failed else "Every checkpoint passed in every run"
    )
    return Table(
        "3. gradekit check: the three one-minute checkpoints",
        rows,
        [
            f"Whole commands: median and p90 of {plan.repeats} runs after one warm-up; "
            f"checkpoints: as `run_checkpoints` times them itself, {plan.repeats} runs. "
            f"{verdicts}.",
            PEERS,
        ],
    )


def batch_table(plan: GraderPlan, folder: Path) -> Table:
    """Section 4: many generated submissions graded with each ``--jobs``, behind each wall."""
    reference = folder / "reference"
    if not reference.is_dir():
        copy_reference(reference)
    progress(f"generating {plan.batch} submissions")
    made = make_batch(reference, folder / "batch", plan.batch)
    missing = bubblewrap_missing()
    rows: list[Row] = []
    books: dict[str, bytes] = {}
    problems: list[str] = []
    size = f"{fmt_size(plan.batch)} submissions"
    for jobs in plan.jobs:
        for wall in BATCH_WALLS:
            run = f"--jobs {jobs} --wall {wall}"
            if wall == "namespaces" and missing is not None:
                rows.append(note_row(f"gradekit grade {run}", size, f"not run: {missing}"))
                continue
            progress(f"gradekit grade of {plan.batch} submissions, {run} (one run)")
            book, run_rows, problem = _batch_run(plan, folder, jobs, wall, size)
            rows += run_rows
            books[run] = book
            problems += [f"{run} {problem}"] if problem else []
    # What each of them costs: the children a grade starts, and their CPU with the grader's.
    rubric = load_rubric(REPO / "rubric" / "bootcamp.toml")
    rows += [
        _grade_cost(reference, rubric, folder / f"batch-cost-{wall}", wall, plan.repeats)
        for wall in BATCH_WALLS
    ]
    first = next(iter(books))
    differ = [run for run, book in books.items() if book != books[first]]
    return Table(
        f"4. A batch of {fmt_size(plan.batch)} generated submissions, behind each wall",
        rows,
        _batch_notes(plan, made, books[first], list(books), differ, problems),
    )


def _batch_run(
    plan: GraderPlan, folder: Path, jobs: int, wall: str, size: str
) -> tuple[bytes, list[Row], str]:
    """One whole ``gradekit grade`` of the batch: its gradebook, its rows, what went wrong."""
    out = folder / f"batch-out-{wall}-{jobs}"
    cpu = cpu_ns()
    began = time.perf_counter_ns()
    done = run_gradekit(
        ["grade", str(folder / "batch"), "--out", str(out), "--jobs", str(jobs), "--wall", wall],
        folder,
    )
    elapsed = time.perf_counter_ns() - began
    used = cpu_ns() - cpu
    limit = ISOLATED_BATCH_TARGETS.get(jobs) if wall == "namespaces" else BATCH_TARGET
    whole = Target(limit if plan.batch == TARGET_BATCH else None)
    share = Target(None if limit is None else limit / TARGET_BATCH)
    rows = [
        timed(
            f"gradekit grade --jobs {jobs} --wall {wall}, whole process",
            size,
            Stats(elapsed, elapsed, 1),
            whole,
        ),
        timed(
            "  per submission", size, Stats(elapsed / plan.batch, elapsed / plan.batch, 1), share
        ),
        timed(
            "  CPU per submission (user+sys of every process)"
            if wall == "process"
            else "  CPU per submission, a lower bound (see the notes)",
            size,
            Stats(used / plan.batch, used / plan.batch, 1),
        ),
    ]
    problem = f"exited {done.returncode}" if done.returncode != 0 else ""
    return (out / "gradebook.csv").read_bytes(), rows, problem


def _batch_notes(
    plan: GraderPlan,
    made: Counter[str],
    gradebook: bytes,
    runs: list[str],
    differ: list[str],
    problems: list[str],
) -> list[str]:
    records = list(csv.DictReader(io.StringIO(gradebook.decode("utf-8"))))
    errors = [r["submission"] for r in records if r["status"] != "graded"]
    totals = Counter(r["total"] for r in records if r["status"] == "graded")
    ranked = sorted(totals.items(), key=lambda item: Decimal(item[0]), reverse=True)
    spread = ", ".join(f"{total}: {count}" for total, count in ranked)
    kinds = ", ".join(f"{name}: {count}" for name, count in made.items())
    same = ": yes." if not differ else f": NO, these differ from {runs[0]}: {', '.join(differ)}."
    targets = ", ".join(
        f"{fmt_ns(limit)} at --jobs {jobs}"
        for jobs, limit in sorted(ISOLATED_BATCH_TARGETS.items())
    )
    notes = [
        f"Submissions: copies of the reference lab (clean, as git holds it), each with its own "
        f"student name; in turn: {kinds}.",
        f"Totals in the gradebook ({runs[0]}): {spread}; error rows: {len(errors)}"
        + (f" ({', '.join(errors[:5])})" if errors else "")
        + ".",
        "gradebook.csv (digests included) byte-identical across " + ", ".join(runs) + same,
        f"Targets for {TARGET_BATCH} submissions: isolated (namespaces) {targets}; behind the "
        f"process wall {fmt_ns(BATCH_TARGET)}. Per submission: the target divided by "
        f"{TARGET_BATCH}"
        + (
            "."
            if plan.batch == TARGET_BATCH
            else "; the whole-process rows get one only at that size."
        )
        + f" {EARLIER_BATCH}",
        "CPU: user and system time of the command and every process below it (workers, "
        "the sandbox's hosts and the runs they fork), divided by the submissions. Under "
        "namespaces it is a lower bound: the batch kills its hosts at its end, and the kernel "
        "discards the CPU time of what a killed process had not reaped yet (section 5 "
        "measures both walls without that loss).",
        "Each run was timed once: a whole batch is too long to repeat here.",
        PEERS,
    ]
    if problems:
        notes.insert(0, "Problems: " + "; ".join(problems) + ".")
    return notes


def bubblewrap_missing() -> str | None:
    """Why the namespaces wall cannot run here, or None when bubblewrap works."""
    path, why = bubblewrap()
    return None if path is not None else why


def _files(counted: tuple[int, int]) -> str:
    return f"{fmt_size(counted[0])} files, {fmt_bytes(counted[1])}"


def _digest(report_json: bytes) -> str:
    marker = b'"digest":"'
    start = report_json.index(marker) + len(marker)
    return report_json[start : start + 64].decode("ascii")


def run_gradekit(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """``python -m grader ARGS`` run from ``cwd``; run from a submission, ``-m`` would import
    the submission's own copy of the grader, so callers pass a neutral folder (or the
    checkout, whose grader is the one under test)."""
    return subprocess.run(
        [sys.executable, "-m", "grader", *args], cwd=cwd, capture_output=True, check=False
    )


def _commands(
    args: Sequence[str],
    cwd: Path,
    repeats: int,
    digests: Counter[str] | None = None,
    exits: tuple[int, ...] = (0,),
) -> Stats:
    """Time ``gradekit ARGS`` run from ``cwd`` as a whole process, ``repeats`` times after one
    warm-up; a grade writes into a new folder under ``cwd`` and its digests are counted. An
    exit status outside ``exits`` is a ``RuntimeError``."""

    def once() -> None:
        out = Path(tempfile.mkdtemp(prefix="out-", dir=cwd)) if args[0] == "grade" else None
        command = [*args, "--out", str(out)] if out is not None else list(args)
        done = run_gradekit(command, cwd)
        if done.returncode not in exits:
            raise RuntimeError(
                f"gradekit {' '.join(command)} exited {done.returncode}:\n"
                f"{done.stderr.decode('utf-8', 'replace')}"
            )
        if out is not None and digests is not None:
            for report in sorted(out.glob("*/report.json")):
                digests[_digest(report.read_bytes())] += 1

    return repeated(once, repeats)
