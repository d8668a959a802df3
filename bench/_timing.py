"""Timing helpers: batches of calls, medians and 90th percentiles, nothing clever."""

from __future__ import annotations

import gc
import math
import resource
import statistics
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Costs", "Reps", "Stats", "cpu_ns", "interleaved", "per_call", "repeated", "summarize"]

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


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


@dataclass(frozen=True, slots=True)
class Costs:
    """What one slow call costs: wall clock, and CPU time of this process and its children."""

    wall: Stats
    cpu: Stats


def cpu_ns() -> int:
    """User and system CPU time, in nanoseconds, of this process and of every child process
    it (or a child of it, recursively) has waited for: a child counts once it is reaped."""
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return round((own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime) * 1e9)


def interleaved(calls: Mapping[K, Callable[[], object]], times: int, *,
                warmup: int = 1) -> dict[K, Costs]:
    """Time ``times`` single calls of each slow function, taking turns (a, b, a, b, ...) so
    that a change in the machine's load falls on all of them alike; ``warmup`` turns first."""
    for _ in range(warmup):
        for fn in calls.values():
            fn()
    gc.collect()
    walls: dict[K, list[float]] = {key: [] for key in calls}
    cpus: dict[K, list[float]] = {key: [] for key in calls}
    for _ in range(times):
        for key, fn in calls.items():
            began, cpu = time.perf_counter_ns(), cpu_ns()
            fn()
            walls[key].append(float(time.perf_counter_ns() - began))
            cpus[key].append(float(cpu_ns() - cpu))
    return {key: Costs(summarize(walls[key]), summarize(cpus[key])) for key in calls}
