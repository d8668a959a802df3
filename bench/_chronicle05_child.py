"""Run inside ``.venv-chronicle05``: time agent-chronicle 0.5.0's recording path, print JSON.

agent-chronicle 0.5.0 (the Chronicle paper's version) has the import name ``chronicle``,
as 1.x does, with another API, so it lives in its own environment and is measured in
this process, which ``bench/_chronicle05.py`` starts. It reads ``{"samples", "inner",
"warmup", "texts"}`` on stdin and prints one JSON object: the version, and per store
the per-crossing overhead (``median_ns``, ``p90_ns``, ``samples``) of a real
``chronicle.record`` span around ``wrap_llm``, the bare function's cost taken off (or
``{"missing": why}`` when the package cannot be imported).
Timing is ``bench._timing.per_call``, the same batches gradekit's rows use.

Stores: ``jsonl``, its local JSONL store (``record(store=path)``: every crossing
appended to the file before ``wrap_llm`` returns, as gradekit's journal does), and
``memory``, no store (envelopes kept on the session only).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench._timing: stdlib only

from bench._timing import Reps, Stats, per_call  # after the path is set

_BOUNDARY = "llm.complete"


def _dispatch(prompt: str) -> str:
    """The 'live' model, as cheap as the FakeProvider lambda gradekit's recorders wrap."""
    return "answer"


def main() -> int:
    """Measure both stores on the prompts given; print the JSON object."""
    request = json.load(sys.stdin)
    reps = Reps(request["samples"], request["inner"], request["warmup"])
    texts: list[str] = request["texts"]
    try:
        chronicle = importlib.import_module("chronicle")
    except ImportError as exc:  # an environment made by hand, without the package
        print(json.dumps({"missing": str(exc)}))
        return 0
    call = chronicle.wrap_llm(_BOUNDARY, _dispatch)
    stores = {
        "jsonl": _jsonl(chronicle, call, texts, reps),
        "memory": _memory(chronicle, call, texts, reps),
    }
    print(
        json.dumps(
            {
                "version": importlib.metadata.version("agent-chronicle"),
                "stores": {name: _json(stats) for name, stats in stores.items()},
            }
        )
    )
    return 0


def _jsonl(chronicle: Any, call: Callable[[str], str], texts: list[str], reps: Reps) -> Stats:
    """Every crossing written to a JSONL file before the call returns."""
    with tempfile.TemporaryDirectory(prefix="gradekit-bench-chronicle05-") as tmp:
        path = Path(tmp) / "trace.jsonl"
        stats = _overhead(lambda: chronicle.record("gradekit-bench", store=path), call, texts, reps)
        lines = len(path.read_bytes().splitlines())
    if lines != len(texts):
        raise RuntimeError(f"chronicle 0.5.0 stored {lines} of {len(texts)} crossings")
    return stats


def _memory(chronicle: Any, call: Callable[[str], str], texts: list[str], reps: Reps) -> Stats:
    """Every crossing kept on the session's list only."""
    stats = _overhead(lambda: chronicle.record("gradekit-bench"), call, texts, reps)
    kept = len(chronicle.get_session().envelopes)
    if kept != len(texts):
        raise RuntimeError(f"chronicle 0.5.0 kept {kept} of {len(texts)} crossings")
    return stats


def _overhead(
    span: Callable[[], Any], call: Callable[[str], str], texts: list[str], reps: Reps
) -> Stats:
    bare = per_call(_dispatch, texts, reps)
    with span():
        gross = per_call(call, texts, reps)
    return gross.minus(bare.median_ns)


def _json(stats: Stats) -> dict[str, float]:
    return {"median_ns": stats.median_ns, "p90_ns": stats.p90_ns, "samples": stats.samples}


if __name__ == "__main__":
    sys.exit(main())
