"""A built wheel, installed in a fresh virtual environment, grades with its own rubric.

The default rubric lives in ``rubric/`` for the course and ships inside the grader as
``grader.kit_rubric``: an installed gradekit, with no checkout beside it, must find it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.submissions import REFERENCE, make_submission

pytestmark = pytest.mark.slow


def test_an_installed_wheel_grades_with_its_default_rubric(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--disable-pip-version-check",
            "-w",
            str(wheels),
            str(REFERENCE),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = wheels.glob("gradekit-*.whl")
    env = tmp_path / "env"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    make_submission(tmp_path / "subs" / "alice")
    # Elsewhere than the checkout, with nothing of it on the path.
    done = subprocess.run(
        [str(env / "bin" / "gradekit"), "grade", "subs", "--out", "out"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "out" / "alice" / "report.json").read_text("utf-8"))
    assert report["total"] == "100.00"
    assert report["rubric"]["id"] == "provider-swap-lab"
    installed = subprocess.run(
        [str(python), "-c", "import grader.rubric._rubric as r; print(r.KIT_RUBRIC)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert installed.startswith(str(env)) and installed.endswith("grader/kit_rubric/bootcamp.toml")
    # The kit is a library: the reference lab is not installed, so a student's own `lab`
    # never meets it (alice's graded above from her own folder).
    found = subprocess.run(
        [str(python), "-c", "import importlib.util as u; print(u.find_spec('lab'))"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert found == "None"
    listed = subprocess.run(
        [str(python), "-m", "pip", "show", "--files", "gradekit"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "\n  lab/" not in listed and "grader/" in listed


@pytest.mark.parametrize(
    ("target", "dev"), [("grade", False), ("check", False), ("record", False), ("test", True)]
)
def test_only_make_test_installs_the_development_extras(
    tmp_path: Path, target: str, dev: bool
) -> None:
    """grade, check and record need the runtime and the SDKs an agent may import, the sdk
    extra (about 110 MB), not mypy, ruff, the dashboard and Playwright. ``make -n`` prints what
    a fresh machine would run."""
    planned = subprocess.run(
        ["make", "-n", target, f"VENV={tmp_path / '.venv'}"],
        cwd=REFERENCE,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    installs = [line for line in planned.splitlines() if " pip install " in line]
    assert installs and installs[0].endswith(" -e '.[sdk]'")
    assert any("'.[dev]'" in line for line in installs) is dev
