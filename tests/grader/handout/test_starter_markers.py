"""Every shipped file is read for solution markers: a near miss, a file that is not UTF-8
and a binary file holding a marker are refused by name and line; a notebook is read cell
by cell, its outputs cleared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.cli import main
from grader.handout import strip_solutions
from tests.grader.handout.starters import BEGIN, END, MD_BEGIN, MD_END, RUN, files, small_lab

INCLUDE = ("lab/**", "notebooks/**", "docs/**", "FAILURES.md", "pyproject.toml")


def _build(root: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["starter", "--no-grade", "--from", str(root), "--out", str(out)])
    return code, capsys.readouterr().err


def _lab(tmp_path: Path) -> Path:
    root = small_lab(tmp_path / "ref", include=INCLUDE)
    for folder in ("docs", "notebooks"):  # each pattern of INCLUDE matches a file
        (root / folder).mkdir(exist_ok=True)
        (root / folder / "README.md").write_text(f"# {folder}\n", "utf-8")
    return root


NEAR = [
    ("#BEGIN SOLUTION", "lab/x.py"),
    ("#  BEGIN SOLUTION", "lab/x.py"),
    ("# begin solution", "lab/x.py"),
    ("# BEGIN-SOLUTION", "lab/x.py"),
    ("# BEGIN_SOLUTION", "lab/x.py"),
    ("#END SOLUTION", "lab/x.py"),
    ("## BEGIN SOLUTION", "lab/x.py"),
    ("#STUB", "lab/x.py"),
    ("-- BEGIN SOLUTION", "lab/q.sql"),
    ("// BEGIN SOLUTION", "lab/x.js"),
    ("<!--BEGIN SOLUTION-->".lower(), "docs/notes.md"),
    ("<!-- BEGIN SOLUTION", "docs/notes.md"),
    ("<!-- END-SOLUTION -->", "docs/notes.md"),
]


@pytest.mark.parametrize(("marker", "name"), NEAR, ids=[m for m, _ in NEAR])
def test_a_near_miss_marker_is_refused_with_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], marker: str, name: str
) -> None:
    root = _lab(tmp_path)
    path = root / name
    path.write_text(f"x = 1\n{marker}\nSECRET = 2\n", "utf-8")
    code, err = _build(root, tmp_path / "out", capsys)
    assert code == 2
    assert f"UsageError: {name}:2: a malformed marker" in err, err
    assert not (tmp_path / "out").exists()


def test_prose_that_mentions_markers_is_not_one() -> None:
    text = (
        "Mark it with `# BEGIN SOLUTION` and `<!-- END SOLUTION -->`.\n"
        "```python\n# BEGIN SOLUTION\n```\n# Stubs, and how to begin solutions\n"
    )
    assert strip_solutions(text, "docs/guide.md") == (text, 0)


def test_a_file_that_is_not_utf8_is_refused_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _lab(tmp_path)
    (root / "lab" / "legacy.py").write_bytes(
        b"# -*- coding: latin-1 -*-\n\ndef f():\n    return 'caf\xe9'\n"
    )
    code, err = _build(root, tmp_path / "out", capsys)
    assert code == 2
    assert "UsageError: lab/legacy.py:4: not UTF-8 (byte 0xe9 at offset 51)" in err, err
    assert "save it as UTF-8" in err
    assert not (tmp_path / "out").exists()


def test_a_binary_file_ships_as_it_is_unless_it_holds_a_marker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _lab(tmp_path)
    blob = bytes(range(256)) * 4 + b"\xe9\x00"
    (root / "lab" / "course.db").write_bytes(blob)
    code, err = _build(root, tmp_path / "out", capsys)
    assert code == 0, err
    assert files(tmp_path / "out")["lab/course.db"] == blob

    for marked in (blob + b"-- BEGIN SOLUTION\x00", blob + "END SOLUTION".encode("utf-16-le")):
        (root / "lab" / "course.db").write_bytes(marked)
        code, err = _build(root, tmp_path / "out2", capsys)
        assert code == 2
        assert "UsageError: lab/course.db: a binary file holding a solution marker" in err, err
        assert not (tmp_path / "out2").exists()


def _notebook(cells: list[dict[str, object]]) -> str:
    return json.dumps(
        {
            "cells": cells,
            "metadata": {"execution": {"t": 1}, "kernelspec": {"name": "python3"}},
            "nbformat": 4,
            "nbformat_minor": 5,
        },
        indent=2,
    )


def _code(source: list[str] | str, **extra: object) -> dict[str, object]:
    return {
        "cell_type": "code",
        "metadata": {"execution": {"iopub": "2026"}},
        "execution_count": 7,
        "outputs": [{"output_type": "stream", "name": "stdout", "text": ["SECRET-OUTPUT\n"]}],
        "source": source,
        **extra,
    }


def test_a_notebook_is_stripped_cell_by_cell_with_its_outputs_cleared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _lab(tmp_path)
    (root / "notebooks" / "explore.ipynb").write_text(
        _notebook(
            [
                _code(
                    [
                        "%matplotlib inline\n",
                        "def answer():\n",
                        f"    {BEGIN} hint: compute it\n",
                        "    return 'SECRET-CODE'\n",
                        f"    {END}\n",
                    ]
                ),
                {
                    "cell_type": "markdown",
                    "metadata": {},
                    "source": ["## Notes\n", f"{MD_BEGIN}\n", "SECRET-PROSE\n", f"{MD_END}\n"],
                },
                _code("print(1)\n"),
            ]
        ),
        "utf-8",
    )
    code, err = _build(root, tmp_path / "out", capsys)
    assert code == 0, err
    data = files(tmp_path / "out")["notebooks/explore.ipynb"]
    assert b"SECRET" not in data
    notebook = json.loads(data)
    first, prose, last = notebook["cells"]
    assert first["source"] == [
        "%matplotlib inline\n",
        "def answer():\n",
        '    raise NotImplementedError("compute it")\n',
    ]
    assert prose["source"] == ["## Notes\n"]
    assert last["source"] == "print(1)\n"  # a string source stays a string
    for cell in (first, last):
        assert cell["outputs"] == [] and cell["execution_count"] is None
        assert "execution" not in cell["metadata"]
    assert "execution" not in notebook["metadata"] and notebook["metadata"]["kernelspec"]
    assert data == (
        json.dumps(notebook, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    ).encode("utf-8")


def test_an_unclosed_region_in_a_notebook_names_the_cell_and_the_file_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _lab(tmp_path)
    (root / "notebooks" / "nb.ipynb").write_text(
        _notebook(
            [
                _code(["x = 1\n"]),
                _code(["def f():\n", "    y = 2\n", f"    {BEGIN}\n", "    return 'SECRET'\n"]),
            ]
        ),
        "utf-8",
    )
    code, err = _build(root, tmp_path / "out", capsys)
    assert code == 2
    lines = (root / "notebooks" / "nb.ipynb").read_text("utf-8").splitlines()
    line = next(n for n, text in enumerate(lines, 1) if "BEGIN" in text)
    assert (
        f"UsageError: notebooks/nb.ipynb:{line}: cell 2, line 3: BEGIN SOLUTION is never "
        "closed" in err
    ), err
    assert not (tmp_path / "out").exists()


def test_a_notebook_cell_that_no_longer_compiles_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _lab(tmp_path)
    (root / "notebooks" / "nb.ipynb").write_text(
        _notebook([_code(["if True:\n", f"{BEGIN}\n", "    x = 1\n", f"{END}\n"])]), "utf-8"
    )
    code, err = _build(root, tmp_path / "out", capsys)
    assert code == 2
    assert ": cell 1, line 1: the starter's code does not compile" in err, err


def test_the_three_unstripped_files_of_the_issue_are_stripped_or_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A notebook with the marker in a cell, a latin-1 .py, and ``#BEGIN SOLUTION``."""
    root = _lab(tmp_path)
    (root / "lab" / "agent.py").write_text(
        RUN + "    #BEGIN SOLUTION\n    return provider.complete(task)  # SECRET-A\n"
        "    #END SOLUTION\n",
        "utf-8",
    )
    code, err = _build(root, tmp_path / "out", capsys)
    assert code == 2 and "lab/agent.py:2: a malformed marker '#BEGIN SOLUTION'" in err, err

    (root / "lab" / "agent.py").write_text(RUN + "    return provider.complete(task)\n")
    (root / "lab" / "legacy.py").write_bytes(
        f"# caf\xe9\ndef helper():\n    {BEGIN}\n    return 'SECRET-B'\n    {END}\n".encode(
            "latin-1"
        )
    )
    code, err = _build(root, tmp_path / "out", capsys)
    assert code == 2 and "lab/legacy.py:1: not UTF-8" in err, err

    (root / "lab" / "legacy.py").unlink()
    (root / "notebooks" / "explore.ipynb").write_text(
        _notebook(
            [
                _code(
                    ["def answer():\n", f"    {BEGIN}\n", "    return 'SECRET-C'\n", f"    {END}\n"]
                )
            ]
        )
    )
    code, err = _build(root, tmp_path / "out", capsys)
    assert code == 0, err
    assert not [name for name, data in files(tmp_path / "out").items() if b"SECRET" in data]


def test_two_builds_of_a_lab_with_a_notebook_give_the_same_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _lab(tmp_path)
    (root / "notebooks" / "nb.ipynb").write_text(
        _notebook(
            [
                _code(["x = {'b': 1, 'a': 2}\n"]),
                {"cell_type": "markdown", "metadata": {"z": 1, "a": 2}, "source": "é ü\n"},
            ]
        )
    )
    assert _build(root, tmp_path / "one", capsys)[0] == 0
    assert _build(root, tmp_path / "two", capsys)[0] == 0
    assert files(tmp_path / "one") == files(tmp_path / "two")
    assert "é ü" in files(tmp_path / "one")["notebooks/nb.ipynb"].decode("utf-8")
