"""Timing helpers: batches of calls, medians and 90th percentiles, nothing clever."""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Reps", "Stats", "per_call", "repeated", "summarize"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Stats:
    """Per-call nanoseconds: the median and 90th percentile of the timed samples."""

    median_ns: float
    p90_ns: float
    samples: int

    def minus(self, floor_ns: float) -> Stats:
        """These stats with a constant per-call cost (a fake, a bare function) taken off."""
        return Stats(self.median_ns - floor_ns, self.p90_ns - floor_ns, self.samples)


@dataclass(frozen=True, slots=True)
class Reps:
    """How many batches to time, how many calls in each, how many batches to discard first."""

    samples: int
    inner: int
    warmup: int = 3

    @property
    def calls(self) -> int:
        """Calls made in all, warm-up included: how many inputs ``per_call`` needs."""
        return (self.samples + self.warmup) * self.inner


def per_call(fn: Callable[[T], object], inputs: Sequence[T], reps: Reps) -> Stats:
    """Time ``fn`` over ``inputs`` in batches of ``reps.inner`` calls; one sample per batch.

    Batches rather than single calls because a call of about a microsecond is
    close to the clock's own cost. ``inputs`` holds ``reps.calls`` items, all
    distinct when every call must be a new one (recording).
    """
    if len(inputs) < reps.calls:
        raise ValueError(f"per_call needs {reps.calls} inputs, got {len(inputs)}")
    gc.collect()  # start each measurement from the same heap, not the last one's garbage
    means: list[float] = []
    for start in range(0, reps.calls, reps.inner):
        batch = inputs[start : start + reps.inner]
        began = time.perf_counter_ns()
        for item in batch:
            fn(item)
        means.append((time.perf_counter_ns() - began) / reps.inner)
    return summarize(means[reps.warmup :])


def repeated(fn: Callable[[], object], times: int, *, warmup: int = 1) -> Stats:
    """Time ``times`` single calls of a slow ``fn`` (a file load) after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    gc.collect()
    durations: list[float] = []
    for _ in range(times):
        began = time.perf_counter_ns()
        fn()
        durations.append(float(time.perf_counter_ns() - began))
    return summarize(durations)


def summarize(values: Sequence[float]) -> Stats:
    """Median and nearest-rank 90th percentile of ``values``."""
    ordered = sorted(values)
    rank = max(0, math.ceil(0.9 * len(ordered)) - 1)
    return Stats(statistics.median(ordered), ordered[rank], len(ordered))
