"""The bench's SDK lab (bench/_sdk_lab.py): an agent on the official openai SDK with its
default retries, recorded against a real loopback server. Its check must pass the loud
failure checkpoint on every probe, retries and all, so the bench times an honest agent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench._sdk_lab import build_sdk_lab
from tests.submissions import gradekit_in_process

pytest.importorskip("openai")
pytestmark = pytest.mark.slow  # records over loopback, then checks in the sandbox


def test_the_sdk_lab_records_each_case_and_its_misses_escape_every_probe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lab = build_sdk_lab(tmp_path / "sdk-lab")
    recorded = sorted(path.name for path in (lab / "cassettes").iterdir())
    assert recorded and all(name.endswith(".http.json") for name in recorded)
    for path in (lab / "cassettes").iterdir():
        assert len(json.loads(path.read_bytes())["interactions"]) == 1, path.name
    capsys.readouterr()
    assert gradekit_in_process("check", str(lab)) == 1  # no stretch goal claimed
    said = capsys.readouterr().out
    assert "PASS  2. A miss is loud" in said and f"in all {len(recorded)} probes" in said, said
    assert "PASS  3. Two providers, one score" in said
