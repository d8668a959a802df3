"""The names every copy of a submission leaves out, matched by one expression.

The sandbox's copies, the tamper scan and the root grader's readability check each ask of
every name of a submission whether it is ignored; one compiled expression answers what a
loop of ``fnmatch`` calls did (about 16 000 calls a grading, 110 ms of a worker's CPU).

It tests ``grader._model``'s ``IGNORED_NAMES`` and ``ignored_name`` on purpose: a base
module's, below every room's door.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from grader._model import IGNORED_NAMES, ignored_name
from grader.sandbox import copy_submission

_PIECES = st.sampled_from(
    [
        "",
        ".",
        ".git",
        ".venv",
        "venv",
        "__pycache__",
        "pyc",
        ".pyc",
        "x",
        "grades",
        "egg-info",
        "build",
        "node_modules",
        "\n",
        "*",
        "?",
        "[",
        ".hypothesis",
        "-",
        "é",
    ]
)


@given(st.lists(_PIECES, max_size=4).map("".join) | st.text(max_size=12))
@example(".venv-model")
@example("module.cpython-311.pyc")
@example("gradekit.egg-info")
@example("builds")
@example(".git\n")
def test_a_name_is_ignored_exactly_when_a_pattern_matches_it(name: str) -> None:
    assert ignored_name(name) is any(fnmatch.fnmatch(name, p) for p in IGNORED_NAMES)


def test_the_harness_copy_leaves_out_the_same_names(tmp_path: Path) -> None:
    names = [
        ".git",
        ".venv-x",
        "venv",
        "__pycache__",
        "a.pyc",
        "a.py",
        "grades",
        "builds",
        "node_modules",
        "kit.egg-info",
        ".ruff_cache",
        "notes.md",
    ]
    source = tmp_path / "source"
    source.mkdir()
    for name in names:
        (source / name).write_text(name)
    copy_submission(str(source), str(tmp_path / "copy"), IGNORED_NAMES)
    kept = sorted(path.name for path in (tmp_path / "copy").iterdir())
    assert kept == sorted(name for name in names if not ignored_name(name))
    assert kept == ["a.py", "builds", "notes.md", "venv"]
