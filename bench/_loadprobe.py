"""Load one cassette in a fresh process: how long ``Replay(path)`` takes, and its peak memory.

A separate process so that a load running far past its budget can be
stopped, and so that the benchmark's own objects do not count. Time and
memory are two runs: ``tracemalloc`` slows allocation, so it would inflate
the time. Run as ``python -m bench._loadprobe time|memory PATH``; it prints
one JSON object.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LoadResult", "probe"]

_ROOT = Path(__file__).resolve().parents[1]
_MEMORY_SLOWDOWN = 4  # tracemalloc's cost on an allocation-heavy load, with room to spare


@dataclass(frozen=True, slots=True)
class LoadResult:
    """One ``Replay(path)`` construction in a fresh process."""

    ns: float
    peak_bytes: int | None  # Python heap at its highest during the load; None if stopped
    entries: int


def probe(path: Path, *, budget_s: float) -> LoadResult | None:
    """Time the load of ``path``, then trace its memory; ``None`` if the load was stopped."""
    timed = _child("time", path, budget_s)
    if timed is None:
        return None
    traced = _child("memory", path, budget_s * _MEMORY_SLOWDOWN)
    peak = None if traced is None else int(traced["value"])
    return LoadResult(float(timed["value"]), peak, int(timed["entries"]))


def _child(mode: str, path: Path, budget_s: float) -> dict[str, float] | None:
    command = [sys.executable, "-m", "bench._loadprobe", mode, str(path)]
    try:
        done = subprocess.run(
            command, cwd=_ROOT, capture_output=True, text=True, timeout=budget_s, check=False
        )
    except subprocess.TimeoutExpired:  # the child is killed: a load that slow is the result
        return None
    if done.returncode != 0:
        raise RuntimeError(f"loading {path} failed in the child process:\n{done.stderr}")
    result: dict[str, float] = json.loads(done.stdout)
    return result


def _main(mode: str, path: Path) -> None:
    from gradekit import Replay  # imported before measuring: not part of a load

    if mode == "memory":
        tracemalloc.start()
        replay = Replay(path)
        value = float(tracemalloc.get_traced_memory()[1])
    else:
        began = time.perf_counter_ns()
        replay = Replay(path)
        value = float(time.perf_counter_ns() - began)
    print(json.dumps({"value": value, "entries": len(replay)}))


if __name__ == "__main__":
    _main(sys.argv[1], Path(sys.argv[2]))
