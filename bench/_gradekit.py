"""gradekit's own measurements: prompt_key, Replay hits, Recorder overhead, cassette loads."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

from bench._data import PROMPT_BYTES, BuiltCassette, answer, prompt, prompts
from bench._loadprobe import LoadResult
from bench._plan import Plan
from bench._table import NO_TARGET, Row, fmt_bytes, fmt_ns, fmt_size, note_row, timed
from bench._targets import LOAD_TARGET, RECORD_TARGET, REPLAY_TARGET
from bench._timing import Stats, per_call
from gradekit import FakeProvider, Recorder, Replay, prompt_key

__all__ = [
    "Measured",
    "key_rows",
    "load_rows",
    "recorder_rows",
    "replay_rows",
]

# One credential-shaped variable, fixed: the Recorder's secret scan is paid as in real use, and
# the result does not depend on what this machine's environment happens to hold.
_ENV = {"GRADEKIT_API_KEY": "bench-placeholder-not-a-key"}


@dataclass(frozen=True, slots=True)
class Measured:
    """A cassette file and how its load went (``None``: stopped at the budget)."""

    built: BuiltCassette
    load: LoadResult | None


def key_rows(plan: Plan) -> list[Row]:
    """Section 1: ``prompt_key`` on a 1 KB prompt, and the SHA-256 it is built on."""
    text = prompt(0)
    same = [text] * plan.fast.calls
    size = f"{PROMPT_BYTES // 1024} KB prompt"
    key = per_call(prompt_key, same, plan.fast)
    floor = per_call(_sha256_hex, same, plan.fast)
    return [
        timed("gradekit prompt_key", size, key),
        timed("reference: hashlib.sha256(prompt.encode()).hexdigest() alone", size, floor),
    ]


def _sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def replay_rows(measured: list[Measured], plan: Plan) -> tuple[list[Row], list[str]]:
    """Section 2: one hit per call on each cassette; the notes say how cost grows with size."""
    rows: list[Row] = []
    medians: list[float] = []
    for item in measured:
        stats, how = _replay_hits(item, plan)
        medians.append(stats.median_ns)
        operation = f"gradekit Replay.complete, hit ({how})"
        rows.append(timed(operation, fmt_size(item.built.size), stats, REPLAY_TARGET))
    growth = medians[-1] / medians[0]
    sizes = f"{fmt_size(measured[0].built.size)} to {fmt_size(measured[-1].built.size)} entries"
    return rows, [f"gradekit Replay median from {sizes}: x{growth:.2f} (a dict lookup)."]


def _replay_hits(item: Measured, plan: Plan) -> tuple[Stats, str]:
    if item.load is not None:
        replay, how = Replay(item.built.path), "Replay(path)"
    else:
        # The file did not load within budget (see the load table); the lookup is the same dict
        # once built, so the per-call cost is still measured, on the same entries in memory.
        replay, how = Replay(item.built.cassette), "in-memory Cassette: file load was stopped"
    index = item.built.hit_index
    if replay.complete(prompt(index)) != answer(index):
        raise RuntimeError(f"{item.built.path}: Replay served the wrong answer")
    return per_call(replay.complete, [prompt(index)] * plan.fast.calls, plan.fast), how


def load_rows(measured: list[Measured], budget_s: float) -> list[Row]:
    """Section 4: ``Replay(path)`` time and peak Python heap, each load in a fresh process."""
    rows: list[Row] = []
    for item in measured:
        size = fmt_size(item.built.size)
        mib = fmt_bytes(item.built.path.stat().st_size)
        if item.load is None:
            stopped = f"> {budget_s:g} s (stopped)"
            operation = f"gradekit Replay(path) load, {mib} file"
            rows.append(Row(operation, size, stopped, "—", LOAD_TARGET.label, "misses"))
            rows.append(note_row(_PEAK, size, "not reached"))
            continue
        stats = Stats(item.load.ns, item.load.ns, 1)
        rows.append(timed(f"gradekit Replay(path) load, {mib} file", size, stats, LOAD_TARGET))
        peak = "stopped" if item.load.peak_bytes is None else fmt_bytes(item.load.peak_bytes)
        rows.append(note_row(_PEAK, size, peak))
    return rows


_PEAK = "gradekit Replay(path) peak memory during the load (tracemalloc)"


def recorder_rows(plan: Plan, folder: Path) -> list[Row]:
    """Section 3: a Recorder recording new prompts, minus the fake's own cost; then hits."""
    new = prompts(plan.record.calls, tag="new")
    size = fmt_size(len(new))
    fake = per_call(FakeProvider(lambda p: "answer").complete, new, plan.record)
    recorder = Recorder(FakeProvider(lambda p: "answer"), folder / "recorded.json", env=_ENV)
    try:
        gross = per_call(recorder.complete, new, plan.record)
        asked = [new[i % len(new)] for i in range(plan.fast.calls)]
        hit = per_call(recorder.complete, asked, plan.fast)
    finally:
        began = time.perf_counter_ns()
        recorder.close()
        fold_ns = time.perf_counter_ns() - began
    if recorder.recorded != len(new):
        raise RuntimeError(f"the Recorder recorded {recorder.recorded} of {len(new)} prompts")
    overhead = gross.minus(fake.median_ns)
    return [
        timed("FakeProvider.complete alone (subtracted below)", size, fake),
        timed("gradekit Recorder.complete, new prompt, incl. fake", size, gross),
        timed("gradekit Recorder overhead per recorded call", size, overhead, RECORD_TARGET),
        timed("gradekit Recorder.complete, hit", size, hit, NO_TARGET),
        _fold_row(fold_ns, len(new)),
    ]


def _fold_row(fold_ns: int, entries: int) -> Row:
    per_entry = fmt_ns(fold_ns / entries)
    operation = f"gradekit Recorder.close: fold journal, write + fsync ({per_entry} per entry)"
    return timed(operation, fmt_size(entries), Stats(fold_ns, fold_ns, 1))
