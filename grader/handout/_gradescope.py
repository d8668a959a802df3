"""Gradescope, end to end: the autograder folder, and the run inside Gradescope's container.

``build`` writes what an instructor zips and uploads: ``setup.sh`` (run once when
Gradescope builds the image: Python 3.11+, bubblewrap, this gradekit and the packages the
rubric's ``[packages]`` lets an agent import), ``run_autograder``
(run once per submission), the rubric's folder, a copy of this kit (``kit/``), so the
autograder grades with exactly the grader and rubric that built it, offline, and a draw key
(``.gradekit-draw-key``), so that regrading a submission draws the same labels and seeds
in every fresh container (keep the zip private, as the rubric).

``run_autograder`` calls ``run``: it grades ``ROOT/submission`` like ``gradekit grade``
(a worker, the sandbox, signing when a key is configured) and leaves Gradescope's
``ROOT/results/results.json`` with ``report.json`` next to it, so ``gradekit report
verify`` can check one against the other. ``ROOT`` is ``/autograder``, or
``$GRADEKIT_AUTOGRADER_ROOT`` (tests use a folder of their own). A submission that
cannot be graded still gets a results.json: score 0 and an output that says what to do.
"""

from __future__ import annotations

import importlib.metadata
import shlex
import shutil
from collections.abc import Iterable
from pathlib import Path

import gradekit
from gradekit import GradekitError, UsageError
from grader.batch import grade_batch
from grader.outputs import REPORTED, SCHEMA, canonical, inline_markdown
from grader.records import DRAW_KEY, REPORT, RESULTS, draw_key
from grader.rubric import KIT_RUBRIC, load_rubric
from grader.sandbox import choose_isolation

__all__ = ["ROOT_ENV", "build", "failure_results", "find_submission", "run"]

ROOT_ENV = "GRADEKIT_AUTOGRADER_ROOT"
PYTHON_ENV = "GRADEKIT_PYTHON"
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")

SETUP = """\
#!/usr/bin/env bash
# Written by `gradekit gradescope build`. Gradescope runs it once, when it builds the
# autograder's image: Python 3.11 or newer, bubblewrap (the sandbox's namespaces wall),
# this gradekit, installed from source/kit into $ROOT/venv, and the packages the rubric's
# [packages] lets an agent import.
set -euo pipefail
ROOT="${{GRADEKIT_AUTOGRADER_ROOT:-/autograder}}"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends python3 python3-venv python3-pip bubblewrap
PYTHON=""
for candidate in python3.13 python3.12 python3.11 python3; do
  if command -v "$candidate" >/dev/null &&
     "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    PYTHON="$candidate"
    break
  fi
done
if [ -z "$PYTHON" ]; then  # Ubuntu 22.04 ships 3.10
  apt-get install -y --no-install-recommends python3.11 python3.11-venv
  PYTHON=python3.11
fi
"$PYTHON" -m venv "$ROOT/venv"
"$ROOT/venv/bin/pip" install --no-cache-dir "$ROOT/source/kit"
{packages}
"$ROOT/venv/bin/gradekit" --version
"""

RUN = """\
#!/usr/bin/env bash
# Written by `gradekit gradescope build`. Gradescope runs it once per submission: it
# grades $ROOT/submission and writes $ROOT/results/results.json (with report.json).
# GRADEKIT_AUTOGRADER_ROOT and GRADEKIT_PYTHON move it elsewhere, for a dry run.
set -uo pipefail
ROOT="${{GRADEKIT_AUTOGRADER_ROOT:-/autograder}}"
PYTHON="${{GRADEKIT_PYTHON:-$ROOT/venv/bin/python}}"
cd "$ROOT"
"$PYTHON" -P -m grader gradescope run --root "$ROOT" --rubric "$ROOT/source/rubric/"{rubric}
code=$?
# A results.json (a grade, or score 0 saying why not) is what Gradescope shows: a zero exit
# keeps it from being reported as a broken autograder.
if [ -f "$ROOT/results/results.json" ]; then exit 0; fi
exit "$code"
"""

KIT_PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "gradekit"
version = "{version}"
requires-python = ">=3.11"
dependencies = [{dependencies}]

[project.scripts]
gradekit = "grader.cli:main"

[tool.setuptools]
packages = [{packages}]

[tool.setuptools.package-data]
gradekit = ["py.typed"]
grader = ["py.typed"]
"grader.kit_rubric" = ["*.toml"]
"""


def build(out: Path, rubric: Path) -> list[Path]:
    """Write the autograder folder into ``out`` (new or empty); return what was written."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"{out} exists and is not an empty folder: pass --out a new folder")
    packages = load_rubric(rubric).packages  # a bad rubric fails here, not in Gradescope
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(rubric.parent, out / "rubric", ignore=_IGNORE)
    kit = out / "kit"
    for source in (Path(gradekit.__file__ or "").parent, Path(__file__).resolve().parents[1]):
        shutil.copytree(source, kit / source.name, ignore=_IGNORE)
    (kit / "grader" / "kit_rubric").mkdir()  # the kit's default rubric: package data
    for toml in KIT_RUBRIC.parent.glob("*.toml"):
        shutil.copyfile(toml, kit / "grader" / "kit_rubric" / toml.name)
    draw_key(out, None)  # every regrade of a submission on Gradescope draws alike (run)
    version, dependencies = _distribution()
    (kit / "pyproject.toml").write_text(KIT_PYPROJECT.format(
        version=version, dependencies=", ".join(f'"{d}"' for d in dependencies),
        packages=", ".join(f'"{p}"' for p in _packages(kit))),
        encoding="utf-8")
    scripts = [(out / "setup.sh", SETUP.format(packages=_install_packages(packages.values()))),
               (out / "run_autograder", RUN.format(rubric=shlex.quote(rubric.name)))]
    for path, text in scripts:
        path.write_text(text, encoding="utf-8")
        path.chmod(0o755)
    return [path for path, _ in scripts] + [out / "rubric", kit, out / DRAW_KEY]


def _packages(kit: Path) -> list[str]:
    """Every package of the copied kit, by dotted name, its default rubric's data included."""
    found = ((p.parent.relative_to(kit).parts) for p in kit.rglob("__init__.py"))
    return sorted({".".join(parts) for parts in found} | {"grader.kit_rubric"})


def _install_packages(requirements: Iterable[str]) -> str:
    """setup.sh's line that installs the rubric's [packages] (a comment when it has none)."""
    quoted = " ".join(shlex.quote(requirement) for requirement in requirements)
    if not quoted:
        return "# the rubric's [packages] lists none: an agent imports gradekit and Python only"
    return f'# the rubric\'s [packages]\n"$ROOT/venv/bin/pip" install --no-cache-dir {quoted}'


def _distribution() -> tuple[str, list[str]]:
    """This gradekit's version and runtime requirements, from its installed metadata."""
    try:
        requires = importlib.metadata.requires("gradekit") or []
        version = importlib.metadata.version("gradekit")
    except importlib.metadata.PackageNotFoundError as exc:
        raise UsageError("gradekit is not installed, so its requirements are unknown: run "
                         "`pip install -e .` in the kit, then build again") from exc
    return version, [r for r in requires if "extra ==" not in r]


def find_submission(folder: Path) -> Path:
    """The submission in Gradescope's folder: itself, or its one sub-folder with a
    pyproject.toml (a zip of the folder rather than of its contents)."""
    if (folder / "pyproject.toml").is_file():
        return folder
    inside = [child for child in sorted(folder.iterdir()) if (child / "pyproject.toml").is_file()] \
        if folder.is_dir() else []
    if len(inside) == 1:
        return inside[0]
    raise UsageError("no pyproject.toml at the top of the submission: upload your lab's folder "
                     "with pyproject.toml, lab/, cassettes/ and FAILURES.md at its top (or "
                     "submit the GitHub repository), then submit again")


def failure_results(message: str) -> bytes:
    """A results.json for a submission that got no grade: score 0 and what to do."""
    return canonical({
        "score": 0.0,
        "output": f"**Not graded.** {inline_markdown(message)}",
        "output_format": "md",
        "test_output_format": "md",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [],
        "extra_data": {"schema": SCHEMA, "error": message},
    }) + b"\n"


def run(root: Path, rubric: Path, isolation: str = "auto") -> bool:
    """Grade ``root/submission`` into ``root/results``; True when it was graded.

    Whatever happens, ``root/results/results.json`` is written: Gradescope shows a
    missing one as a broken autograder, with nothing the student can act on.
    """
    results = root / "results"
    results.mkdir(parents=True, exist_ok=True)
    target = results / RESULTS
    try:
        submission = find_submission(root / "submission")
    except UsageError as exc:
        target.write_bytes(failure_results(str(exc)))
        return False
    bundled = root / "source" / DRAW_KEY  # the build's: each container starts anew
    if bundled.is_file() and not (results / "gradekit" / DRAW_KEY).exists():
        (results / "gradekit").mkdir(exist_ok=True)
        shutil.copyfile(bundled, results / "gradekit" / DRAW_KEY)
    try:
        rows = grade_batch([submission], load_rubric(rubric), out=results / "gradekit", jobs=1,
                           wall=choose_isolation(isolation))
    except GradekitError as exc:  # the autograder's own configuration: the instructor's
        target.write_bytes(failure_results(
            f"the autograder is misconfigured ({type(exc).__name__}: {exc}); this is not "
            "your submission's fault: tell your instructor"))
        raise
    row = rows[0]
    if row.status not in REPORTED:
        target.write_bytes(failure_results(row.reason))
        return False
    graded = results / "gradekit" / row.submission
    for name in (REPORT, RESULTS):  # signed in the batch already, when a key is configured
        shutil.copyfile(graded / name, results / name)
    return True
