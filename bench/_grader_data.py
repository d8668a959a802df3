"""Submissions for the grader benchmark: the reference lab, its variants, a call-loop agent."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench._data import prompt
from gradekit import Cassette, Entry, prompt_key
from gradekit.internal import encode_cassette, write_atomic

__all__ = [
    "LOOP_AGENT",
    "REPO",
    "VARIANTS",
    "LoopLab",
    "Variant",
    "build_loop_lab",
    "copy_reference",
    "make_batch",
    "tree_size",
]

REPO = Path(__file__).resolve().parents[1]
# A student's copy of the kit as git would hand it over: no caches, builds, venvs or grades.
_CLEAN = shutil.ignore_patterns(
    ".git",
    ".venv*",
    "__pycache__",
    "*.pyc",
    "*.egg-info",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    "build",
    "grades",
)
_STUDENT_LINE = 'student = "gradekit-reference"'
_STRETCH_LINE = 'stretch = ["rerecord-review", "tool-fixtures", "two-providers", "cut-point"]'
_RECORDED_AT = "2024-01-01T00:00:00Z"  # fixed, so the files are byte-identical run to run


def copy_reference(target: Path) -> Path:
    """A clean copy of this checkout (the reference lab) at ``target``."""
    shutil.copytree(REPO, target, ignore=_CLEAN)
    manifest = (target / "pyproject.toml").read_text("utf-8")
    for line in (_STUDENT_LINE, _STRETCH_LINE):
        if line not in manifest:
            raise RuntimeError(f"{target}/pyproject.toml no longer holds {line!r}: update bench")
    return target


def tree_size(root: Path, *, skip: tuple[str, ...] = (".git", "__pycache__")) -> tuple[int, int]:
    """Files and bytes under ``root``, leaving out folders named in ``skip`` and ``.venv*``."""
    files = size = 0
    for path in root.rglob("*"):
        parts = path.relative_to(root).parts
        if any(p in skip or p.startswith(".venv") for p in parts):
            continue
        if path.is_file() and not path.is_symlink():
            files, size = files + 1, size + path.stat().st_size
    return files, size


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text("utf-8")
    if old not in text:
        raise RuntimeError(f"{path} no longer holds {old!r}: update bench/_grader_data.py")
    path.write_text(text.replace(old, new), encoding="utf-8")


def _append(path: Path, code: str) -> None:
    with path.open("a", encoding="utf-8") as file:
        file.write(code)


def _as_is(root: Path, number: int) -> None:
    """Only the student's name differs."""


def _no_failures(root: Path, number: int) -> None:
    (root / "FAILURES.md").unlink()


def _one_cassette_missing(root: Path, number: int) -> None:
    cassettes = sorted((root / "cassettes").glob("*.json"))
    cassettes[number % len(cassettes)].unlink()


def _no_stretch(root: Path, number: int) -> None:
    _edit(root / "pyproject.toml", _STRETCH_LINE, "stretch = []")


def _swallows_misses(root: Path, number: int) -> None:
    _append(root / "lab" / "agent.py", _SWALLOW)


def _untraced(root: Path, number: int) -> None:
    _append(root / "lab" / "agent.py", _UNTRACED)


_SWALLOW = """

_traced_run = run


def run(provider, task, tools=None):  # the classic mistake: a miss becomes an empty answer
    try:
        return _traced_run(provider, task, tools)
    except Exception:
        return ""
"""
_UNTRACED = """

def Traced(provider, sink=None):  # tracing "switched off for speed"
    return provider
"""


@dataclass(frozen=True, slots=True)
class Variant:
    """One kind of small change to the reference lab."""

    name: str
    apply: Callable[[Path, int], None]


VARIANTS = (
    Variant("as shipped", _as_is),
    Variant("FAILURES.md removed", _no_failures),
    Variant("one cassette removed", _one_cassette_missing),
    Variant("stretch goal not claimed", _no_stretch),
    Variant("agent swallows misses", _swallows_misses),
    Variant("agent not traced", _untraced),
)


def make_batch(reference: Path, folder: Path, count: int) -> Counter[str]:
    """``count`` submissions ``s000``, ``s001``, ... in ``folder``, each with its own student
    name and, in turn, one variant; returns how many of each variant."""
    made: Counter[str] = Counter()
    for number in range(count):
        root = folder / f"s{number:03d}"
        shutil.copytree(reference, root)
        _edit(root / "pyproject.toml", _STUDENT_LINE, f'student = "student-{number:03d}"')
        variant = VARIANTS[number % len(VARIANTS)]
        variant.apply(root, number // len(VARIANTS))
        made[variant.name] += 1
    return made


LOOP_AGENT = '''"""Benchmark agent: N provider calls in a loop; returns the loop's nanoseconds."""

import json
import pathlib
import time

PROMPTS = json.loads((pathlib.Path(__file__).parent / "prompts.json").read_text("utf-8"))


def run(provider, task):
    calls = int(task)
    began = time.perf_counter_ns()
    for number in range(calls):
        provider.complete(PROMPTS[number % len(PROMPTS)])
    return str(time.perf_counter_ns() - began)
'''


@dataclass(frozen=True, slots=True)
class LoopLab:
    """A one-module submission whose agent only makes calls, and the cassette it needs."""

    root: Path
    cassette: Path
    answers: dict[str, Entry]  # key -> recorded entry, as the grader's parent serves them


def build_loop_lab(folder: Path, distinct: int) -> LoopLab:
    """``benchagent.py``, ``prompts.json`` (``distinct`` 1 KB prompts) and a cassette of
    1 KB answers to them."""
    folder.mkdir(parents=True)
    prompts = [prompt(number, tag="loop") for number in range(distinct)]
    (folder / "benchagent.py").write_text(LOOP_AGENT, encoding="utf-8")
    (folder / "prompts.json").write_text(json.dumps(prompts), encoding="utf-8")
    entries = {
        prompt_key(text): Entry(text, prompt(number, tag="answer"), "bench", _RECORDED_AT)
        for number, text in enumerate(prompts)
    }
    cassette = folder / "loop-cassette.json"
    write_atomic(cassette, encode_cassette(Cassette(case="loop", entries=entries)))
    return LoopLab(folder, cassette, dict(entries))
