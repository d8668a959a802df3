"""The built hand-out is checked before it is handed out: the text of every removed region
is searched for, and each folder that holds a pyproject.toml is graded. A refusal writes
nothing to ``--out``."""

from __future__ import annotations

import re
import shutil
from decimal import Decimal
from pathlib import Path

import pytest

from grader.cli import main
from grader.handout import Removed, scan_for_regions
from tests.grader.handout.starters import (
    BEGIN,
    END,
    RUN,
    copy_reference,
    files,
    small_lab,
    with_table,
)

GUARD = "return int(terms['refund_cents']) if model_says_yes else 0  # the fix"
AGENT = (
    RUN + f"    {BEGIN}\n    plan = provider.complete('Plan the answer to: ' + task)\n"
    f"    return provider.complete('Answer, following this plan: ' + plan)\n    {END}\n"
    f"\n\ndef guard(terms, model_says_yes):\n    {BEGIN}\n    {GUARD}\n    {END}\n"
)


def _build(
    root: Path, out: Path, capsys: pytest.CaptureFixture[str], *flags: str
) -> tuple[int, str, str]:
    code = main(["starter", "--from", str(root), "--out", str(out), *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _nothing_written(tmp_path: Path, out: Path) -> None:
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    root = small_lab(
        tmp_path / "ref", AGENT, include=("lab/**", "docs/**", "FAILURES.md", "pyproject.toml")
    )
    (root / "docs").mkdir()
    (root / "docs" / "notes.md").write_text("# Notes\n\nNothing here yet.\n", "utf-8")
    return root


def test_a_clean_lab_passes_the_scan(
    lab: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _build(lab, tmp_path / "out", capsys, "--no-grade")
    assert code == 0, err
    assert "checked: no removed solution text in any file; not graded (--no-grade)" in out
    assert "model_says_yes else 0" not in (tmp_path / "out/lab/agent.py").read_text("utf-8")


def test_a_one_line_region_copied_into_a_note_is_refused_naming_the_line(
    lab: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (lab / "docs" / "notes.md").write_text(f"# Notes\n\nThe guard:\n\n    {GUARD}\n", "utf-8")
    code, _, err = _build(lab, tmp_path / "out", capsys, "--no-grade")
    assert code == 1, err
    assert err.startswith("HandOutRefused: the hand-out holds the text of a removed solution")
    assert (
        "docs/notes.md:5: \"return int(terms['refund_cents']) if model_says_yes else 0  "
        '..." of the region at lab/agent.py:9' in err
    ), err
    assert "Nothing was written." in err
    _nothing_written(tmp_path, tmp_path / "out")


def test_a_region_copied_into_another_file_is_refused_wherever_it_lands(
    lab: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (lab / "lab" / "solved.py").write_text(
        "def run(provider, task):\n    plan = provider.complete('Plan the answer to: ' + task)\n"
        "    return provider.complete('Answer, following this plan: ' + plan)\n",
        "utf-8",
    )
    code, _, err = _build(lab, tmp_path / "out", capsys, "--no-grade")
    assert code == 1
    assert (
        "lab/solved.py:2: \"plan = provider.complete('Plan the answer to: ' + task)\" and "
        "1 more line(s) of the region at lab/agent.py:2" in err
    ), err
    _nothing_written(tmp_path, tmp_path / "out")


def test_a_shared_line_alone_is_not_a_copy(tmp_path: Path) -> None:
    """One distinctive line of a many-line region, or a signature, is shared code, not an
    answer: a tool registration the lab and its test both hold."""
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "tools.py").write_text(
        'tools.read_only("refund_terms", refund_terms)  # registered\n'
        "def refund_terms(student: str, requested_on: str) -> dict[str, object]:\n",
        "utf-8",
    )
    region = Removed(
        "lab/test.py:1",
        (
            "def refund_terms(student: str, requested_on: str) -> dict[str, object]:",
            '    raise AssertionError("refund_terms ran live: it must be served")',
            'tools.read_only("refund_terms", refund_terms)  # registered',
            "assert_no_refund_issued(replay(refunds.run, plan=ACTION_LIVE))",
        ),
    )
    scan_for_regions(tmp_path, [region], [])
    (tmp_path / "lab" / "tools.py").write_text(
        'tools.read_only("refund_terms", refund_terms)  # registered\n'
        "assert_no_refund_issued(replay(refunds.run, plan=ACTION_LIVE))\n",
        "utf-8",
    )
    with pytest.raises(
        Exception,
        match=r"lab/tools\.py:1: .* and 1 more line\(s\) of the "
        r"region at lab/test\.py:1",
    ):
        scan_for_regions(tmp_path, [region], [])


def test_a_region_copied_into_a_notebook_cell_is_found_in_the_cell(
    lab: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    (lab / "docs" / "nb.ipynb").write_text(
        json.dumps(
            {
                "cells": [
                    {"cell_type": "markdown", "metadata": {}, "source": ["# Try it\n"]},
                    {
                        "cell_type": "code",
                        "metadata": {},
                        "execution_count": None,
                        "outputs": [],
                        "source": ["def g(terms, model_says_yes):\n", f"    {GUARD}\n"],
                    },
                ],
                "metadata": {},
                "nbformat": 4,
                "nbformat_minor": 5,
            }
        ),
        "utf-8",
    )
    code, _, err = _build(lab, tmp_path / "out", capsys, "--no-grade")
    assert code == 1
    assert 'docs/nb.ipynb: cell 2, line 2: "return int(' in err, err


# -- grading each folder (slow: the real grader in its sandbox) ----------------------------


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_reference(tmp_path_factory.mktemp("reference") / "kit")


def _total(out: str) -> Decimal:
    found = re.search(r"the raw starter grades (\d+\.\d\d)", out)
    assert found, out
    return Decimal(found[1])


@pytest.mark.slow  # grades the hand-out in the sandbox
def test_the_starter_of_the_unmodified_kit_grades_at_most_five(
    reference: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _build(reference, tmp_path / "out", capsys)
    assert code == 0, err
    assert _total(out) <= Decimal("5.00"), out
    assert "; " not in out.split("the raw starter grades")[1]  # no other folder to grade
    assert not [
        name
        for name in files(tmp_path / "out")
        if name.endswith("pyproject.toml") and name != "pyproject.toml"
    ]


def _shipping_examples(reference: Path, kit: Path) -> Path:
    shutil.copytree(reference, kit, symlinks=True)
    with_table(
        kit,
        include=[
            "lab/**",
            "gradekit/**",
            "grader/**",
            "rubric/*.toml",
            "docs/*.md",
            "Makefile",
            ".gitignore",
            "FAILURES.md",
            "pyproject.toml",
        ],
        ship=["examples"],
        readme="handout/README.md",
    )
    return kit


def test_the_worked_example_is_refused_for_the_solution_text_it_shares(
    reference: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kit = _shipping_examples(reference, tmp_path / "kit")
    code, out, err = _build(kit, tmp_path / "out", capsys, "--no-grade")
    assert code == 1, out + err
    assert "shipping examples/openai-sdk/lab/agent.py (an example, a worked solution)" in out
    assert re.search(
        r"examples/openai-sdk/lab/agent\.py:\d+: .* of the region at "
        r"lab/agent\.py:\d+",
        err,
    ), err
    _nothing_written(tmp_path, tmp_path / "out")


@pytest.mark.slow  # grades the hand-out and the example in the sandbox
def test_a_worked_example_that_ships_is_refused_for_its_grade(
    reference: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kit = _shipping_examples(reference, tmp_path / "kit")
    agent = kit / "examples" / "openai-sdk" / "lab" / "agent.py"
    text = agent.read_text("utf-8")  # the same helper, reworded: no shared line is left
    for old, new in (
        (
            '"""A verdict is a no when its first word is NO, in any case or punctuation."""',
            '"""No, when the first word says so."""',
        ),
        ('.upper() == "NO"', '.lower() == "no"'),
    ):
        assert old in text
        text = text.replace(old, new)
    agent.write_text(text, "utf-8")
    code, out, err = _build(kit, tmp_path / "out", capsys)
    assert code == 1, out + err
    found = re.search(
        r"examples/openai-sdk: grades (\d+\.\d\d) > the raw starter's "
        r"(\d+\.\d\d)",
        err,
    )
    assert found, err
    assert Decimal(found[1]) > Decimal("50.00") and Decimal(found[2]) <= Decimal("5.00")
    assert "Leave those folders out of [tool.gradekit.starter] include" in err
    _nothing_written(tmp_path, tmp_path / "out")
