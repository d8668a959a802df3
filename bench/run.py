"""Benchmark gradekit's record/replay path against vcrpy and agent-chronicle; print Markdown.

    python bench/run.py            # full run, a few minutes (vcrpy recording 1 000 HTTP requests)
    python bench/run.py --quick    # smoke-sized, a few seconds
    python bench/run.py --only http  # one section: the HTTP cassette transports
    python bench/run.py --growth   # how the grader's cost grows with the cohort (bench/grader.py)
    python bench/run.py --copies   # the copy detector on 200 and 10 000 submissions

The first line names the machine. Every table has the same columns; a peer
that is not installed gets a row saying so instead of failing the run.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

if not __package__:
    # Run as a script (`python bench/run.py`, as `make bench` does): import `bench` and `lab`
    # from this checkout rather than whatever happens to be installed.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _chronicle, _chronicle05, _cutpoint, _gradekit, _http, _tools, _vcrpy
from bench._data import build_cassette, prompts
from bench._gradekit import Measured
from bench._loadprobe import probe
from bench._plan import FULL, QUICK, Plan
from bench._table import Table, render

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run every section and print its table; return the exit status."""
    args = _parse(argv)
    if args.grader or args.growth or args.copies:  # the grader's benchmark, or one section
        from bench import grader

        return grader.main(
            [
                *(["--quick"] if args.quick else []),
                *(["--growth"] if args.growth else []),
                *(["--copies"] if args.copies else []),
            ]
        )
    plan = QUICK if args.quick else FULL
    print(_machine(), flush=True)
    if not args.only:  # a section run alone says how it measures, under its table
        print(_method(plan), flush=True)
    sections = _SECTIONS[args.only] if args.only else _tables
    with tempfile.TemporaryDirectory(prefix="gradekit-bench-") as tmp:
        Path(tmp).chmod(0o711)  # a root grader's children, uid 65534, pass through it
        for table in sections(plan, Path(tmp)):
            print()
            print(render(table), flush=True)
    return 0


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, smaller sizes")
    parser.add_argument(
        "--grader",
        action="store_true",
        help="run only the grader benchmark (bench/grader.py) instead",
    )
    parser.add_argument(
        "--growth",
        action="store_true",
        help="run only the grader benchmark's section on how cost grows with "
        "the cohort (200, 2 000 and 10 000 submissions) instead",
    )
    parser.add_argument(
        "--copies",
        action="store_true",
        help="run only the grader benchmark's section on the copy detector "
        "(200 and 10 000 submissions) instead",
    )
    parser.add_argument(
        "--only", choices=sorted(_SECTIONS), help="run only this section of the tables"
    )
    return parser.parse_args(argv)


def _machine() -> str:
    python = f"{platform.python_implementation()} {platform.python_version()}"
    machine = f"Machine: {python}, {platform.platform()}, {os.cpu_count()} CPUs"
    if hasattr(os, "getloadavg"):  # a busy machine explains noisy numbers: say so up front
        machine += f", load average {os.getloadavg()[0]:.2f} at start"
    return machine


def _method(plan: Plan) -> str:
    fast, record = plan.fast, plan.record
    return (
        f"Run: {plan.name}. Per-call times are the median and p90 of batch means "
        f"(prompt_key and hits: {fast.samples} batches of {fast.inner} calls; recording: "
        f"{record.samples} batches of {record.inner}), after warm-up batches, timed with "
        "time.perf_counter_ns. Loads marked '1 run' were timed once, in a fresh process."
    )


def _tables(plan: Plan, folder: Path) -> list[Table]:
    _progress("prompt_key")
    key = Table("1. prompt_key, per call", _gradekit.key_rows(plan))
    measured = [_measure_cassette(folder, size, plan) for size in plan.cassette_sizes]
    _progress("Replay hits")
    replay_rows, replay_notes = _gradekit.replay_rows(measured, plan)
    _progress("Recorder")
    recorder_rows = _gradekit.recorder_rows(plan, folder)
    _progress("vcrpy")
    vcr = _vcrpy.measure(plan, folder)
    _progress("agent-chronicle")
    chronicle = _chronicle.measure(plan)
    _progress("agent-chronicle 0.5.0, in its own environment")
    paper = _chronicle05.measure(plan.record, prompts(plan.record.calls, tag="chronicle05"))
    load_rows = _gradekit.load_rows(measured, plan.load_budget_s)
    _progress("Cut-point replay: six incidents")
    incidents = _cutpoint.measure(plan, folder)
    return [
        key,
        Table(_REPLAY, replay_rows + vcr.replay + chronicle.replay, replay_notes),
        Table(_RECORD, recorder_rows + vcr.record + chronicle.record + paper.record, [_DURABILITY]),
        Table(_LOAD, load_rows + vcr.load + chronicle.load),
        Table(
            _PEERS,
            vcr.peers + chronicle.peers + paper.peers,
            vcr.notes + chronicle.notes + paper.notes,
        ),
        Table("6. Tool fixture lookup, per call (ToolReplay.call hit)", _tools.tool_rows(plan)),
        *incidents,
        *_http_tables(plan, folder),
    ]


def _http_tables(plan: Plan, folder: Path) -> list[Table]:
    _progress("HTTP cassettes: openai SDK and bare httpx, gradekit beside vcrpy and the floor")
    return [_http.measure(plan, folder)]


_SECTIONS = {"http": _http_tables}


_REPLAY = "2. Replay hit, per call (1 KB prompt)"
_RECORD = "3. Recording overhead per call, live call excluded"
_DURABILITY = (
    "gradekit's durability per call is one os.write of a JSON line to the journal (it survives "
    "a killed process); the fsync is paid once, at close, in the fold row."
)
_LOAD = "4. Cassette load: time and peak memory"
_PEERS = "5. Peers: setup costs, what was not measured, how they were measured"


def _measure_cassette(folder: Path, size: int, plan: Plan) -> Measured:
    _progress(f"cassette of {size} entries: write, then load in a child process")
    built = build_cassette(folder, size)
    return Measured(built, probe(built.path, budget_s=plan.load_budget_s))


def _progress(what: str) -> None:
    """Progress goes to stderr so that stdout is only the tables."""
    print(f"bench: {what}...", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
