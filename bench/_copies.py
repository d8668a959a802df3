"""The copy detector's cost on a cohort (``grader.batch.find_copies``): 200 and 10 000
synthetic submissions, with a few copies planted among them.

Each submission is made from the reference lab's files: the hand-out's modules as they
are (hard links: every student keeps them), ``lab/agent.py`` with its names renamed and
its functions reordered for that student, plus a function of its own drawn from a small
grammar (honest students share idioms, not whole functions), a FAILURES.md and four
cassettes whose answers are the student's own words (the prompts keep the lab's tasks,
which every student's prompts hold). A planted copy takes another student's agent (renamed
and reordered again), failure log and cassettes. The detector runs once per size in a
fresh process (``python -m bench._copies FOLDER``): its wall clock, CPU and peak memory,
and whether it found exactly the planted pairs.
"""

from __future__ import annotations

import ast
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench._table import Row, Table, fmt_size, note_row

__all__ = ["FULL", "QUICK", "Planted", "copies_table", "synthetic_cohort"]

FULL = (200, 10_000)
QUICK = (50, 500)
_ROOT = Path(__file__).resolve().parents[1]
_HANDOUT = (
    "lab/__init__.py",
    "lab/llm_provider.py",
    "lab/tools.py",
    "lab/refunds/__init__.py",
    "lab/refunds/regression.py",
)
_RENAMED = (
    "llm",
    "notes",
    "plan",
    "answer",
    "verdict",
    "words",
    "found",
    "rows",
    "hits",
    "sql",
    "task",
    "tools",
    "value",
)
_BUDGET_S = 1800.0  # a detector still running after this is stopped; its row says so


@dataclass(frozen=True, slots=True)
class _Measured:
    """One run of the detector in a fresh process."""

    wall_s: float
    cpu_s: float
    rss_mb: float
    pairs: frozenset[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class Planted:
    """A synthetic cohort: its folder, its size and the copies planted in it."""

    folder: Path
    count: int
    pairs: frozenset[tuple[str, str]]


def copies_table(sizes: tuple[int, ...], folder: Path) -> Table:
    """The detector at each cohort size: one run each, in a fresh process."""
    rows: list[Row] = []
    notes: list[str] = []
    for size in sizes:
        planted = synthetic_cohort(folder / f"copies-{size}", size)
        measured = _measure(planted.folder)
        if measured is None:
            rows.append(note_row("find_copies: stopped", fmt_size(size), f"over {_BUDGET_S:.0f} s"))
            continue
        found = measured.pairs
        rows += [
            Row(
                "find_copies: read, fingerprint, index, pair (wall)",
                fmt_size(size),
                f"{measured.wall_s:.2f} s",
                "1 run",
            ),
            Row("  CPU (user + system)", fmt_size(size), f"{measured.cpu_s:.2f} s", "1 run"),
            Row(
                "  per submission (wall)",
                fmt_size(size),
                f"{measured.wall_s / size * 1e3:.2f} ms",
                "1 run",
            ),
            Row(
                "  peak memory (max RSS of the process)",
                fmt_size(size),
                f"{measured.rss_mb:.0f} MiB",
                "1 run",
            ),
            Row(
                "  pairs flagged: planted found / others",
                fmt_size(size),
                f"{len(found & planted.pairs)} of {len(planted.pairs)} / "
                f"{len(found - planted.pairs)}",
                "—",
                target="all / 0",
                verdict="meets" if found == planted.pairs else "misses",
            ),
        ]
    notes.append(
        "Synthetic cohorts from the reference lab: the hand-out's modules as they "
        "are, the agent renamed and reordered for each student with a function of "
        "its own, a failure log and four cassettes in the student's own words; a "
        "planted copy takes another student's agent (renamed and reordered again), "
        "failure log and cassettes."
    )
    return Table("Copy detection across a cohort (grader.batch.find_copies)", rows, notes)


def _measure(folder: Path) -> _Measured | None:
    command = [sys.executable, "-m", "bench._copies", str(folder)]
    try:
        done = subprocess.run(
            command, cwd=_ROOT, capture_output=True, text=True, timeout=_BUDGET_S, check=False
        )
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        raise RuntimeError(f"find_copies failed in the child process:\n{done.stderr}")
    result = json.loads(done.stdout)
    return _Measured(
        float(result["wall_s"]),
        float(result["cpu_s"]),
        float(result["rss_mb"]),
        frozenset((str(a), str(b)) for a, b in result["pairs"]),
    )


def _main(folder: Path) -> None:
    from grader.batch import find_copies  # imported before timing: not part of the run

    subs = [(path.name, path) for path in sorted(folder.iterdir()) if path.is_dir()]
    began, cpu = time.perf_counter(), time.process_time()
    copies = find_copies(subs)
    wall, used = time.perf_counter() - began, time.process_time() - cpu  # user + system
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(
        json.dumps(
            {
                "wall_s": wall,
                "cpu_s": used,
                "rss_mb": rss,
                "pairs": [[pair.a, pair.b] for pair in copies.pairs],
            }
        )
    )


# -- the cohort --------------------------------------------------------------------------------


def synthetic_cohort(folder: Path, count: int, seed: int = 2003) -> Planted:
    """``count`` submissions ``s00000``, ... in ``folder`` (made once, kept if there), one
    planted copy per 1 000 submissions and at least three."""
    copies = max(3, count // 1000)
    pairs = frozenset(
        (f"s{number:05d}", f"s{count - 1 - number:05d}") for number in range(0, copies * 7, 7)
    )
    if (folder / "done").is_file():
        return Planted(folder, count, pairs)
    folder.mkdir(parents=True, exist_ok=True)
    agent = (_ROOT / "lab" / "agent.py").read_text("utf-8")
    cassettes = {
        path.name: json.loads(path.read_text("utf-8"))
        for path in sorted((_ROOT / "cassettes").glob("*.json"))
    }
    words = _vocabulary()
    copied = {b: a for a, b in pairs}
    made: dict[str, tuple[str, str, dict[str, bytes]]] = {}
    for number in range(count):
        name = f"s{number:05d}"
        own = random.Random(f"{seed}/{name}")
        if name in copied:
            code, failures, recorded = made[copied[name]]
            code = _disguised(code, own, number)
        else:
            code = _disguised(agent, own, number) + _own_function(own)
            failures = _failures(own, words)
            recorded = {
                case: _recorded(document, own, words) for case, document in cassettes.items()
            }
        made[name] = (code, failures, recorded)
        _write(folder / name, code, failures, recorded)
    (folder / "done").write_text("", "utf-8")
    return Planted(folder, count, pairs)


def _write(root: Path, code: str, failures: str, recorded: dict[str, bytes]) -> None:
    (root / "lab" / "refunds").mkdir(parents=True)
    (root / "cassettes").mkdir()
    for relative in _HANDOUT:  # every student keeps the hand-out's modules as they are
        try:
            os.link(_ROOT / relative, root / relative)
        except OSError:  # another file system: a copy reads the same
            shutil.copyfile(_ROOT / relative, root / relative)
    (root / "pyproject.toml").write_text('[tool.gradekit]\nagent = "lab.agent:run"\n', "utf-8")
    (root / "lab" / "agent.py").write_text(code, "utf-8")
    (root / "FAILURES.md").write_text(failures, "utf-8")
    for name, data in recorded.items():
        (root / "cassettes" / name).write_bytes(data)


def _disguised(source: str, draw: random.Random, number: int) -> str:
    """``source`` with the names of ``_RENAMED`` changed and its functions reordered."""
    for name in _RENAMED:
        source = re.sub(
            rf"\b{name}(_\d+_\d+)?\b", f"{name}_{draw.randrange(10**6)}_{number}", source
        )
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    blocks = [
        (node.lineno - 1 - len(node.decorator_list), node.end_lineno or node.lineno)
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
    ]
    head = "".join(lines[: blocks[0][0]]) if blocks else source
    functions = ["".join(lines[start:end]) + "\n\n" for start, end in blocks]
    draw.shuffle(functions)
    return head + "\n" + "".join(functions)


_STATEMENTS = (
    "    total = total + {f}(value)\n",
    "    if value > total:\n        total = {f}([total, value])\n",
    "    for item in {f}(values):\n        total += item\n",
    "    values = [{f}(item) for item in values if item]\n",
    "    while total > 100:\n        total = total // 2\n",
    "    value = {f}(values) if values else value\n",
    "    try:\n        total = total / {f}(values)\n"
    "    except ZeroDivisionError:\n        total = 0\n",
    "    result.append({f}(total))\n",
)
_CALLS = (
    "len",
    "sum",
    "min",
    "max",
    "abs",
    "sorted",
    "round",
    "str",
    "int",
    "float",
    "list",
    "set",
    "tuple",
    "reversed",
    "any",
    "all",
    "bool",
    "hash",
    "repr",
    "ord",
)


def _own_function(draw: random.Random) -> str:
    """A function of the student's own: statements and calls drawn from a small grammar."""
    body = "".join(
        draw.choice(_STATEMENTS).format(f=draw.choice(_CALLS)) for _ in range(draw.randint(8, 14))
    )
    return (
        f"\n\ndef _helper(values, value=0):\n    total, result = 0, []\n{body}"
        "    return total, result\n"
    )


def _vocabulary() -> list[str]:
    texts = [
        path.read_text("utf-8") for path in sorted((_ROOT / "lab" / "data" / "docs").glob("*.md"))
    ]
    texts.append((_ROOT / "FAILURES.md").read_text("utf-8"))
    return sorted(set(re.findall(r"[a-z]{3,}", " ".join(texts).lower())))


def _sentence(draw: random.Random, words: list[str], count: int) -> str:
    return " ".join(draw.choices(words, k=count)).capitalize() + "."


def _failures(draw: random.Random, words: list[str]) -> str:
    sections = []
    for _ in range(draw.randint(2, 4)):
        sections.append(
            f"## {_sentence(draw, words, 6)}\n"
            f"- Symptom: {_sentence(draw, words, 20)}\n"
            f"- Cause: {_sentence(draw, words, 25)}\n"
            f"- Fix: {_sentence(draw, words, 18)}\n"
        )
    return (
        "# Failures\n\n"
        + "\n".join(sections)
        + (f"\n## Boundaries\n- What this lab cannot measure: {_sentence(draw, words, 15)}\n")
    )


def _recorded(document: dict[str, object], draw: random.Random, words: list[str]) -> bytes:
    """The cassette with every answer in the student's own words (the prompts as recorded:
    the lab's tasks, which every student's prompts hold)."""
    entries = document.get("entries")
    assert isinstance(entries, dict)
    answered = {
        key: {
            **entry,
            "response": " ".join(
                _sentence(draw, words, draw.randint(8, 16)) for _ in range(draw.randint(5, 9))
            ),
        }
        for key, entry in entries.items()
    }
    return (
        json.dumps(
            {**document, "entries": answered}, indent=2, sort_keys=True, ensure_ascii=False
        ).encode("utf-8")
        + b"\n"
    )


if __name__ == "__main__":
    _main(Path(sys.argv[1]))
