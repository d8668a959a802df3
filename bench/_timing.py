"""Timing helpers: batches of calls, medians and 90th percentiles, nothing clever."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import math
import os
import resource
import statistics
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

__all__ = [
    "Costs",
    "Reps",
    "Stats",
    "adopt_orphans",
    "cpu_ns",
    "interleaved",
    "per_call",
    "repeated",
    "summarize",
]

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
_PR_SET_CHILD_SUBREAPER = 36  # from <linux/prctl.h>
_ORPHANS_WAIT_S = 2.0


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


def adopt_orphans() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux); True if it is now.

    bubblewrap exits as soon as it learns its command's exit status, without waiting
    for the first process of the namespace it built; that process, and with it the
    sandboxed interpreter's CPU time, would be reaped by init and never reach
    ``RUSAGE_CHILDREN``. Adopted, ``cpu_ns`` reaps and counts it.
    """
    with contextlib.suppress(OSError, AttributeError):  # not Linux: no such call
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    return False


def cpu_ns() -> int:
    """User and system CPU time, in nanoseconds, of this process and of every descendant
    reaped so far; adopted orphans are reaped first. Call it only when no child of this
    process is still meant to run: it waits (briefly) for every child to end."""
    _reap_orphans()
    own, reaped = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return round((own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime) * 1e9)


def _reap_orphans() -> None:
    """Reap every child left: orphans adopted by ``adopt_orphans``, ending as their parent
    did. Gives up after a short wait on one that lingers; it is reaped by a later call."""
    deadline = time.monotonic() + _ORPHANS_WAIT_S
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # no child at all: every orphan is reaped
            return
        if pid == 0:
            time.sleep(0.001)


def interleaved(
    calls: Mapping[K, Callable[[], object]], times: int, *, warmup: int = 1
) -> dict[K, Costs]:
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
            cpu = cpu_ns()
            began = time.perf_counter_ns()
            fn()
            walls[key].append(float(time.perf_counter_ns() - began))
            cpus[key].append(float(cpu_ns() - cpu))  # orphans reaped after the clock stopped
    return {key: Costs(summarize(walls[key]), summarize(cpus[key])) for key in calls}
