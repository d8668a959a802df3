"""The Makefile a lab and its hand-out share: what rebuilds the environment.

Editing the manifest's ``[tool.gradekit]`` (claiming a stretch goal, as the hand-out says to)
must not reinstall anything; editing what pip installs must."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.submissions import as_installed, copy_from_reference

KIT = (
    "lab",
    "gradekit",
    "grader",
    "cassettes",
    "cassettes-llm",
    "fixtures",
    "incidents",
    "rubric",
    "FAILURES.md",
    "DATASET_CHANGES.md",
    "pyproject.toml",
    "Makefile",
)


def _make(lab: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRADEKIT_", "MAKE", "MFLAGS"))}
    return subprocess.run(
        ["make", *args], cwd=lab, env=env, text=True, capture_output=True, timeout=600, check=False
    )


def test_a_stretch_goal_claimed_rebuilds_nothing_and_a_new_requirement_does(tmp_path: Path) -> None:
    lab = as_installed(copy_from_reference(tmp_path / "lab", KIT))
    manifest = lab / "pyproject.toml"
    text = manifest.read_text("utf-8")
    claimed = 'stretch = ["rerecord-review", "tool-fixtures", "two-providers", "cut-point"]'
    assert claimed in text
    (lab / ".venv" / ".requires").unlink()
    made = _make(lab, ".venv/.requires")  # what a first make writes: what pip is asked for
    assert made.returncode == 0, made.stderr
    assert "rerecord-review" not in (lab / ".venv" / ".requires").read_text("utf-8")
    for stamp in (".installed", ".installed-dev"):
        (lab / ".venv" / stamp).touch()  # installed after it, as make leaves them
    installed = (lab / ".venv" / ".installed").stat().st_mtime_ns

    manifest.write_text(text.replace(claimed, 'stretch = ["two-providers"]'), "utf-8")
    graded = _make(lab, "grade")
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert "pip install" not in graded.stdout
    assert (lab / ".venv" / ".installed").stat().st_mtime_ns == installed

    manifest.write_text(
        manifest.read_text("utf-8").replace("dependencies = [", 'dependencies = ["rich>=13", ', 1),
        "utf-8",
    )
    planned = _make(lab, "-n", "grade")  # what make would run, nothing run
    assert "pip install" in planned.stdout, planned.stdout
