"""Tamper flags on real gradings: an agent that walks the stack to the harness's own verdict
function, reports a false verdict with it and leaves before the true one goes out is
flagged at its lines, with no point moved by the flag; the reference lab is not flagged.

It takes ``FLAGGED`` from ``grader._text`` on purpose: the words a tamper finding starts
with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader import Report, grade_submission, load_rubric
from grader._text import FLAGGED
from grader.dashboard import finding_kind
from grader.outputs import render_markdown, render_report_json
from grader.rubric import KIT_RUBRIC
from grader.sandbox import Wall
from grader.submission import load_manifest, tamper_findings
from tests.submissions import make_submission

pytestmark = pytest.mark.slow  # each test grades a real submission in the sandbox

DRAW_KEY = b"tamper-graded-test-draw-key-0001"

FORGER = '''\
"""Answers as the reference agent does, but never lets a provider miss out: it answers
something polite instead. First it tells the grader the miss escaped, through the
harness's own verdict function (the seal is inside it), found by walking up the stack,
and leaves before the harness can send the true verdict."""

from __future__ import annotations

import os
import sys

from lab.agent import run as _answer

POLITE = "Sorry, I could not find that just now; please ask again later."


def run(provider, task, tools=None):
    try:
        return _answer(provider, task, tools)
    except Exception:
        _forge()
        return POLITE


def _forge():
    frame = sys._getframe().f_back
    while frame is not None:
        found, case = frame.f_locals.get("verdict"), frame.f_locals.get("case")
        if callable(found) and isinstance(case, dict) and "id" in case:
            found({"op": "result", "case": case["id"], "status": "raised",
                   "returned_type": None, "answer": None, "exception": "CassetteMiss",
                   "miss_escaped": True, "module": None})
            os._exit(0)
        frame = frame.f_back
'''

FRAMES = "walks the call stack's frames"


def forger(tmp_path: Path) -> Path:
    """The reference lab with ``lab/forger.py`` as its agent."""
    root = make_submission(tmp_path / "forger")
    (root / "lab" / "forger.py").write_text(FORGER, encoding="utf-8")
    manifest = root / "pyproject.toml"
    text = manifest.read_text("utf-8")
    assert text.count('agent = "lab.agent:run"') == 1
    manifest.write_text(
        text.replace('agent = "lab.agent:run"', 'agent = "lab.forger:run"'), encoding="utf-8"
    )
    return root


def line_of(code: str) -> int:
    (line,) = [n for n, text in enumerate(FORGER.splitlines(), 1) if code in text]
    return line


def grade(root: Path, tmp_path: Path, wall: Wall, name: str) -> Report:
    return grade_submission(
        root,
        load_rubric(KIT_RUBRIC),
        submission=name,
        scratch=tmp_path / f"scratch-{name}",
        wall=wall,
        draw_key=DRAW_KEY,
    ).report


def test_the_frame_walking_forger_is_flagged_at_its_lines(tmp_path: Path, isolation: Wall) -> None:
    root = forger(tmp_path)
    report = grade(root, tmp_path, isolation, "forger")
    walk, exit_ = line_of("sys._getframe().f_back"), line_of("os._exit(0)")
    expected = [
        f"{FLAGGED}lab/forger.py:{walk}: {FRAMES} (.f_back)",
        f"{FLAGGED}lab/forger.py:{walk}: {FRAMES} (sys._getframe)",
        f"{FLAGGED}lab/forger.py:{line_of('frame.f_locals.get')}: reads a frame's variables "
        "(.f_locals)",
        f"{FLAGGED}lab/forger.py:{exit_}: ends the process at once (os._exit)",
        f"{FLAGGED}lab/forger.py:{line_of('frame = frame.f_back')}: {FRAMES} (.f_back)",
    ]
    assert tamper_findings(root, load_manifest(root)) == expected
    tampering = [f for f in report.findings if "lab/forger.py:" in f]
    assert tampering == expected  # once a grading, in the scan's order
    # In report.json, and flagged for a person as every FLAGGED finding is.
    assert set(expected) <= set(json.loads(render_report_json(report))["findings"])
    assert "**Flagged for review:**" in render_markdown(report)
    assert {finding_kind(f) for f in expected} == {"flagged for review"}


def test_the_flag_moves_no_points(
    tmp_path: Path, isolation: Wall, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = forger(tmp_path)
    flagged = grade(root, tmp_path, isolation, "flagged")
    monkeypatch.setattr("grader.grading._grade.tamper_findings", lambda root, manifest, derived: [])
    unscanned = grade(root, tmp_path, isolation, "unscanned")
    assert flagged.criteria == unscanned.criteria
    assert [f for f in flagged.findings if "lab/forger.py:" not in f] == list(unscanned.findings)


def test_the_reference_lab_has_no_tamper_flag(tmp_path: Path, isolation: Wall) -> None:
    root = make_submission(tmp_path / "reference")
    report = grade(root, tmp_path, isolation, "reference")
    assert tamper_findings(root, load_manifest(root)) == []
    assert report.findings == ()
    assert report.total == report.max


GENERATOR_FORGER = '''\
"""The same forgery spelled so that no frame is named: a generator's own frame, and every
attribute of a frame taken at once by ``inspect.getmembers``, lead up the stack to the
harness's verdict function."""

from __future__ import annotations

import inspect
import os

from lab.agent import run as _answer

POLITE = "Sorry, I could not find that just now; please ask again later."


def run(provider, task, tools=None):
    try:
        return _answer(provider, task, tools)
    except Exception:
        _forge()
        return POLITE


def _forge():
    def climb():
        frame = walker.gi_frame  # its own frame, running: its caller's is above it
        while frame is not None:
            members = dict(inspect.getmembers(frame))
            seen = members["f_locals"]
            found, case = seen.get("verdict"), seen.get("case")
            if callable(found) and isinstance(case, dict) and "id" in case:
                found({"op": "result", "case": case["id"], "status": "raised",
                       "returned_type": None, "answer": None, "exception": "CassetteMiss",
                       "miss_escaped": True, "module": None})
                os._exit(0)
            frame = members["f_back"]
        yield

    walker = climb()
    next(walker)
'''


def test_the_forger_that_names_no_frame_is_flagged_at_its_lines(
    tmp_path: Path, isolation: Wall
) -> None:
    """Round two's forgery, spelled another way by round three's red-team: 80 -> 100 with
    no flag, on both host uids. Its grade still moves (what only the child can say stays a
    claim); the scan names every line that reaches for the harness."""
    root = forger(tmp_path)
    (root / "lab" / "forger.py").write_text(GENERATOR_FORGER, encoding="utf-8")
    report = grade(root, tmp_path, isolation, "generator-forger")

    def at(code: str) -> int:
        (line,) = [n for n, text in enumerate(GENERATOR_FORGER.splitlines(), 1) if code in text]
        return line

    expected = [
        f"{FLAGGED}lab/forger.py:{at('walker.gi_frame')}: {FRAMES} (.gi_frame)",
        f"{FLAGGED}lab/forger.py:{at('inspect.getmembers(frame)')}: reads every attribute of "
        "an object (inspect.getmembers)",
        f"{FLAGGED}lab/forger.py:{at('os._exit(0)')}: ends the process at once (os._exit)",
    ]
    assert tamper_findings(root, load_manifest(root)) == expected
    assert [f for f in report.findings if "lab/forger.py:" in f] == expected
    assert {finding_kind(f) for f in expected} == {"flagged for review"}
    assert report.total == report.max  # the forgery worked: a person reads it, flagged
