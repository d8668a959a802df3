"""agent-chronicle 0.5.0, the Chronicle paper's version, measured in its own environment.

0.5.0 has the import name of 1.x (``chronicle``) and another API, so both cannot be
installed in one environment: ``make bench`` builds ``.venv-chronicle05`` for it, and
``bench/_chronicle05_child.py`` runs there, times its recording path on the prompts it
is given and prints JSON, which ``overhead`` reads. Unlike 1.x, 0.5.0 has a local store:
its JSONL store writes every crossing to a file before the call returns, the durability
gradekit's journal gives.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench._table import PeerRows, Row, fmt_size, note_row, timed
from bench._targets import RECORD_TARGET
from bench._timing import Reps, Stats

__all__ = ["VENV", "Overhead", "measure", "overhead"]

_ROOT = Path(__file__).resolve().parents[1]
VENV = _ROOT / ".venv-chronicle05"
_CHILD = Path(__file__).with_name("_chronicle05_child.py")
_TIMEOUT_S = 600.0


@dataclass(frozen=True, slots=True)
class Overhead:
    """Per-crossing recording overhead of 0.5.0's ``wrap_llm``, per store."""

    name: str  # "agent-chronicle 0.5.0", the version the child imported
    jsonl: Stats  # JSONL store: every crossing in the file before the call returns
    memory: Stats  # no store: envelopes kept on the session only

    def rows(self, size: str, *, same: str = "") -> list[Row]:
        """Its two rows; ``same`` says what they share with the rows beside them."""
        return [
            timed(
                f"{self.name} wrap_llm crossing, RECORD overhead, JSONL store: each crossing "
                f"written to a file before the call returns{same}",
                size,
                self.jsonl,
                RECORD_TARGET,
            ),
            timed(
                f"{self.name} wrap_llm crossing, RECORD overhead, no store: kept in memory "
                f"only{same}",
                size,
                self.memory,
                RECORD_TARGET,
            ),
        ]


def overhead(reps: Reps, texts: list[str], *, venv: Path = VENV) -> Overhead | str:
    """0.5.0's overhead on ``texts`` (``reps.calls`` of them), or why it was not measured."""
    python = venv / "bin" / "python"
    if not python.exists():
        return f"not installed: {venv.name} is missing (make bench builds it)"
    request = {
        "samples": reps.samples,
        "inner": reps.inner,
        "warmup": reps.warmup,
        "texts": texts[: reps.calls],
    }
    done = subprocess.run(
        [str(python), str(_CHILD)],
        input=json.dumps(request),
        text=True,
        capture_output=True,
        timeout=_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{_CHILD.name} failed in {venv.name} (exit {done.returncode}):\n{done.stderr[-2000:]}"
        )
    answer = json.loads(done.stdout)
    if "missing" in answer:
        return f"not installed in {venv.name} ({answer['missing']}; make bench installs it)"
    stores = answer["stores"]
    return Overhead(
        f"agent-chronicle {answer['version']}", _stats(stores["jsonl"]), _stats(stores["memory"])
    )


def _stats(raw: dict[str, float]) -> Stats:
    return Stats(float(raw["median_ns"]), float(raw["p90_ns"]), int(raw["samples"]))


def measure(reps: Reps, texts: list[str]) -> PeerRows:
    """0.5.0's rows for the recording table (section 3), and its note for the peers table."""
    measured = overhead(reps, texts)
    if isinstance(measured, str):
        row = note_row(f"agent-chronicle 0.5.0: {measured}")
        return PeerRows(record=[row], peers=[row])
    return PeerRows(
        record=measured.rows(fmt_size(len(texts))), notes=[_NOTE.format(name=measured.name)]
    )


_NOTE = (
    "{name} (the Chronicle paper's version): the import name of 1.x with another API, so it "
    "runs in its own environment (.venv-chronicle05) and is timed there, in a child process, "
    "with the same batches and 1 KB prompts; a real `chronicle.record` span around "
    "`wrap_llm`, with its JSONL store (every crossing appended to the file before the call "
    "returns) and with no store (the session's list only)."
)
