"""Gradescope, end to end: the autograder folder, and the run inside Gradescope's container.

``build`` writes what an instructor zips and uploads: ``setup.sh`` (run once when
Gradescope builds the image, on any of its Ubuntu images: Python 3.11+ from the image, apt
or a pinned standalone CPython, bubblewrap, this gradekit and the packages the rubric's
``[packages]`` lets an agent import, each checked to import; then ``probe``'s account of
the wall the grader gets, in ``source/isolation.txt``), ``run_autograder``
(run once per submission), the rubric's folder, a copy of this kit (``kit/``, built by
``_kit_build``), so the autograder grades with exactly the grader and rubric that built
it, offline, and a draw key (``.gradekit-draw-key``), so that regrading a submission draws
the same labels and seeds in every fresh container (keep the zip private, as the rubric).

``run_autograder`` calls ``run``: it grades ``ROOT/submission`` as ``gradekit grade`` does
(``grade_cohort``: a worker, the sandbox, signing when a key is configured, the ledger's
batch event and the reviews it holds) into ``ROOT/grades`` (the draw key and the ledger
stay there, the key 0600, never in ``results/``), prints the isolation line, and leaves
Gradescope's ``ROOT/results/results.json`` with ``report.json`` next to it, so
``gradekit report verify`` can check one against the other. ``ROOT`` is ``/autograder``, or
``$GRADEKIT_AUTOGRADER_ROOT``. A submission that cannot be graded still gets a
results.json: score 0 and an output that says what to do.

``try_autograder`` is the dry run (``gradekit gradescope try``): it lays a submission out
beside a built autograder as Gradescope does (``source/``, ``submission/``, ``results/``)
and runs ``run_autograder`` there with the autograder's own kit, never ``setup.sh``, which
installs packages on the machine.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import gradekit
from gradekit import GradekitError, UsageError
from gradekit.internal import commands
from grader._late import parse_time
from grader.batch import grade_cohort
from grader.ledger import DRAW_KEY, REPORT, RESULTS, draw_key
from grader.outputs import REPORTED, SCHEMA, canonical, inline_markdown
from grader.rubric import KIT_RUBRIC, SDK_EXTRA, load_rubric
from grader.sandbox import choose_wall, wall_named, wall_requests
from grader.submission import Identity

__all__ = [
    "GRADES",
    "IGNORE_ALL",
    "ISOLATION_FILE",
    "ROOT_ENV",
    "STANDALONE",
    "Tried",
    "build",
    "failure_results",
    "find_submission",
    "run",
    "submitted",
    "try_autograder",
    "walls_here",
]

ROOT_ENV = "GRADEKIT_AUTOGRADER_ROOT"
PYTHON_ENV = "GRADEKIT_PYTHON"
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")

# A standalone CPython for images with no Python 3.11+ of their own and no apt package of one
# (Ubuntu 18.04 and 20.04): python-build-standalone's install_only build, stripped of debug
# symbols (its `python/` folder: bin/python3, lib/...), by machine, at the address and sha256
# that uv's crates/uv-python/download-metadata.json pins for it.
STANDALONE_VERSION = "3.12.14+20260814"
STANDALONE: Final[dict[str, tuple[str, str]]] = {
    "x86_64": (
        "https://github.com/astral-sh/python-build-standalone/releases/download/20260814/"
        "cpython-3.12.14%2B20260814-x86_64-unknown-linux-gnu-install_only_stripped.tar.gz",
        "5acfa3e9ba26b51ae161c83aff278da915b590d22373a424b2ba55b8afe91fcc",
    ),
    "aarch64": (
        "https://github.com/astral-sh/python-build-standalone/releases/download/20260814/"
        "cpython-3.12.14%2B20260814-aarch64-unknown-linux-gnu-install_only_stripped.tar.gz",
        "2d8e17dfd732102cfeb18e0e1fa6769b24caa034e159981129590fe409c7157a",
    ),
}
ISOLATION_FILE = "isolation.txt"  # in ROOT/source: what `gradescope walls` said at build time
GRADES = "grades"  # ROOT/grades: run's grades folder (the draw key, the ledger), not results/
OPERATOR = "gradescope"  # who runs the batch, as run's ledger events name it
# The autograder folder's own .gitignore: it holds a secret (the draw key), so git ignores
# all of it wherever it is built, as a venv or pytest's cache ignores itself.
IGNORE_ALL = """\
# Written by `gradekit gradescope build`: this folder holds the autograder's draw key
# (.gradekit-draw-key), a secret. Keep the folder and its zip out of git and private.
*
"""

SETUP = """\
#!/usr/bin/env bash
# Written by `gradekit gradescope build`. Gradescope runs it once, as root, when it builds
# the autograder's image (Ubuntu 18.04, 20.04, 22.04 or 24.04). It installs:
# - Python 3.11 or newer: the image's own (python3.13, python3.12, python3.11, python3),
#   else apt's python3.11 where the image's sources have it, else a standalone CPython
#   {standalone} (python-build-standalone, its sha256 pinned below) in $ROOT/python;
# - bubblewrap (the sandbox's namespaces wall), this gradekit from source/kit, and the
#   packages the rubric's [packages] lets an agent import, into $ROOT/venv;
# then checks that each of those packages imports, and writes which wall the grader gets
# here to $ROOT/source/{isolation}.
# GRADEKIT_AUTOGRADER_ROOT moves it elsewhere (a dry run). GRADEKIT_PYTHON_ARCHIVE=FILE
# takes the standalone CPython from FILE instead of downloading it (an offline build), and
# GRADEKIT_PYTHON_URL / GRADEKIT_PYTHON_SHA256 name another one (a mirror).
set -euo pipefail
ROOT="${{GRADEKIT_AUTOGRADER_ROOT:-/autograder}}"
export DEBIAN_FRONTEND=noninteractive
say() {{ printf 'setup.sh: %s\\n' "$*"; }}
fail() {{ printf 'setup.sh: FAILED: %s\\n' "$*" >&2; exit 1; }}

# One package at a time: one that this image's sources lack takes none of the others with it.
apt-get update || say "apt-get update failed: installing from the lists the image has"
for package in ca-certificates curl python3 python3-venv bubblewrap; do
  apt-get install -y --no-install-recommends "$package" ||
    say "apt-get could not install $package: going on without it"
done

venv_from() {{  # true when $1 is Python 3.11 or newer and made $ROOT/venv
  "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1 || return 1
  rm -rf "$ROOT/venv"
  if "$1" -m venv "$ROOT/venv"; then return 0; fi
  say "$1 could not make a virtual environment (no venv module): trying the next Python"
  rm -rf "$ROOT/venv"
  return 1
}}

PYTHON=""
for candidate in python3.13 python3.12 python3.11 python3; do
  if command -v "$candidate" >/dev/null && venv_from "$candidate"; then
    PYTHON="$candidate"
    say "Python: $candidate, the image's"
    break
  fi
done
if [ -z "$PYTHON" ] && apt-cache show python3.11 >/dev/null 2>&1 &&
   apt-get install -y --no-install-recommends python3.11 python3.11-venv &&
   venv_from python3.11; then
  PYTHON=python3.11
  say "Python: python3.11, from apt (the image has no Python 3.11+ that makes a venv)"
fi
if [ -z "$PYTHON" ]; then
  machine="$(uname -m)"
  case "$machine" in
    x86_64 | amd64) url="{x86_64_url}"
      sha256="{x86_64_sha256}" ;;
    aarch64 | arm64) url="{aarch64_url}"
      sha256="{aarch64_sha256}" ;;
    *) fail "no Python 3.11 or newer in the image or its apt sources, and no standalone \\
CPython is pinned for $machine: build on an x86_64 or arm64 image, or one with Python 3.11+" ;;
  esac
  url="${{GRADEKIT_PYTHON_URL:-$url}}"
  sha256="${{GRADEKIT_PYTHON_SHA256:-$sha256}}"
  archive="${{GRADEKIT_PYTHON_ARCHIVE:-}}"
  if [ -z "$archive" ]; then
    archive="$(mktemp)"
    say "no Python 3.11+ in the image or its apt sources: downloading $url"
    if command -v curl >/dev/null; then
      curl -fsSL --retry 3 -o "$archive" "$url" ||
        fail "could not download $url: check the image's network, or download it elsewhere \\
and build with GRADEKIT_PYTHON_ARCHIVE=/path/to/it"
    elif command -v python3 >/dev/null; then
      python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(*sys.argv[1:])' \\
        "$url" "$archive" ||
        fail "could not download $url: check the image's network, or download it elsewhere \\
and build with GRADEKIT_PYTHON_ARCHIVE=/path/to/it"
    else
      fail "neither curl nor python3 is here to download $url: install curl in the image, \\
or build with GRADEKIT_PYTHON_ARCHIVE=/path/to/it"
    fi
  fi
  actual="$(sha256sum "$archive" | cut -d ' ' -f 1)"
  if [ "$actual" != "$sha256" ]; then
    fail "$archive is not the pinned standalone CPython (sha256 $actual, expected $sha256): \\
download $url again, or set GRADEKIT_PYTHON_SHA256 to the sha256 of the archive you trust"
  fi
  rm -rf "$ROOT/python"
  mkdir -p "$ROOT/python"
  tar -xzf "$archive" -C "$ROOT/python" --strip-components=1  # its top folder: python/
  if [ -z "${{GRADEKIT_PYTHON_ARCHIVE:-}}" ]; then rm -f "$archive"; fi
  venv_from "$ROOT/python/bin/python3" ||
    fail "the standalone CPython in $ROOT/python is not Python 3.11+ or cannot make a \\
virtual environment: remove GRADEKIT_PYTHON_ARCHIVE / GRADEKIT_PYTHON_URL to use the pinned one"
  PYTHON="$ROOT/python/bin/python3"
  say "Python: the standalone CPython, in $ROOT/python"
fi
"$ROOT/venv/bin/python" --version
"$ROOT/venv/bin/pip" install --no-cache-dir "$ROOT/source/kit"
{packages}
"$ROOT/venv/bin/gradekit" --version
{imports}
"$ROOT/venv/bin/gradekit" gradescope walls >"$ROOT/source/{isolation}"
say "the grader's wall here (in $ROOT/source/{isolation}; run_autograder says it again \\
for each submission, as Gradescope's grading container may differ from this build's):"
cat "$ROOT/source/{isolation}"
"""

RUN = """\
#!/usr/bin/env bash
# Written by `gradekit gradescope build`. Gradescope runs it once per submission: it
# grades $ROOT/submission and writes $ROOT/results/results.json (with report.json).
# GRADEKIT_AUTOGRADER_ROOT and GRADEKIT_PYTHON move it elsewhere, for a dry run.
set -uo pipefail
ROOT="${{GRADEKIT_AUTOGRADER_ROOT:-/autograder}}"
PYTHON="${{GRADEKIT_PYTHON:-$ROOT/venv/bin/python}}"
cd "$ROOT" || exit
# The commands feedback prints are the lab's: its Makefile's targets, or gradekit's own.
export GRADEKIT_COMMANDS="${{GRADEKIT_COMMANDS:-{commands}}}"
"$PYTHON" -P -m grader gradescope run --root "$ROOT" --rubric "$ROOT/source/rubric/"{rubric}
code=$?
# A results.json (a grade, or score 0 saying why not) is what Gradescope shows: a zero exit
# keeps it from being reported as a broken autograder.
if [ -f "$ROOT/results/results.json" ]; then exit 0; fi
exit "$code"
"""

KIT_PYPROJECT = """\
# Written by `gradekit gradescope build`: this copy of the kit, built by its own backend
# (grader/handout/_kit_build.py, the standard library only), so installing it downloads
# nothing but its requirements.
[build-system]
requires = []
build-backend = "_kit_build"
backend-path = ["grader/handout"]

[project]
name = "gradekit"
version = "{version}"
requires-python = ">=3.11"
dependencies = [{dependencies}]

[project.optional-dependencies]
{extras}

[project.scripts]
gradekit = "grader.cli:main"

[tool.kit-build]
packages = [{packages}]
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
    version, dependencies, extras = _distribution()
    (kit / "pyproject.toml").write_text(
        KIT_PYPROJECT.format(
            version=version,
            dependencies=_toml_list(dependencies),
            extras="\n".join(
                f"{extra} = [{_toml_list(requirements)}]"
                for extra, requirements in sorted(extras.items())
            ),
            packages=_toml_list(_packages(kit)),
        ),
        encoding="utf-8",
    )
    (x86_64_url, x86_64_sha256), (aarch64_url, aarch64_sha256) = (
        STANDALONE["x86_64"],
        STANDALONE["aarch64"],
    )
    setup = SETUP.format(
        packages=_install_packages(packages.values()),
        imports=_check_imports(packages),
        isolation=ISOLATION_FILE,
        standalone=STANDALONE_VERSION,
        x86_64_url=x86_64_url,
        x86_64_sha256=x86_64_sha256,
        aarch64_url=aarch64_url,
        aarch64_sha256=aarch64_sha256,
    )
    scripts = [
        (out / "setup.sh", setup),
        (
            out / "run_autograder",
            RUN.format(rubric=shlex.quote(rubric.name), commands=commands.lab_form(Path("."))),
        ),
    ]
    for path, text in scripts:
        path.write_text(text, encoding="utf-8")
        path.chmod(0o755)
    (out / ".gitignore").write_text(IGNORE_ALL, encoding="utf-8")
    return [path for path, _ in scripts] + [out / "rubric", kit, out / DRAW_KEY]


def _packages(kit: Path) -> list[str]:
    """Every package of the copied kit, by dotted name, its default rubric's data included."""
    found = ((p.parent.relative_to(kit).parts) for p in kit.rglob("__init__.py"))
    return sorted({".".join(parts) for parts in found} | {"grader.kit_rubric"})


def _toml_list(strings: Iterable[str]) -> str:
    """The inside of a TOML array of ``strings`` (requirements, dotted names: no quote or
    backslash to escape)."""
    return ", ".join(f'"{text}"' for text in strings)


def _install_packages(requirements: Iterable[str]) -> str:
    """setup.sh's line that installs the rubric's [packages] (a comment when it has none)."""
    quoted = " ".join(shlex.quote(requirement) for requirement in requirements)
    if not quoted:
        return "# the rubric's [packages] lists none: an agent imports gradekit and Python only"
    return f'# the rubric\'s [packages]\n"$ROOT/venv/bin/pip" install --no-cache-dir {quoted}'


def _check_imports(packages: Mapping[str, str]) -> str:
    """setup.sh's lines that import each package the rubric's [packages] lets labs import,
    in the grader's environment, failing with its name and the fix (or that say there is
    nothing to check)."""
    if not packages:
        return (
            "say \"the rubric's [packages] lists none: no import to check (labs import "
            'gradekit and the standard library only)"'
        )
    lines = []
    for module, requirement in packages.items():  # a key is an identifier: nothing to quote
        fix = (
            f"{module} ({requirement} in the rubric's [packages]) was installed but does "
            "not import in the grader's venv (the output above says why): make the key the "
            "name labs import and the value the pip requirement that provides it, then "
            "build the autograder again"
        )
        quoted = f'"{fix}"' if not set(fix) & set('"$`\\') else shlex.quote(fix)
        lines.append(f"\"$ROOT/venv/bin/python\" -I -c 'import {module}' ||\n  fail {quoted}")
    names = ", ".join(packages)
    return "\n".join([*lines, f'say "the rubric\'s [packages] import here: {names}"'])


def _distribution() -> tuple[str, list[str], dict[str, list[str]]]:
    """This gradekit's version, runtime requirements and ``sdk`` extra (what advice to
    install ``gradekit[sdk]`` installs), from its installed metadata."""
    try:
        requires = importlib.metadata.requires("gradekit") or []
        version = importlib.metadata.version("gradekit")
    except importlib.metadata.PackageNotFoundError as exc:
        raise UsageError(
            "gradekit is not installed, so its requirements are unknown: run "
            "`pip install -e .` in the kit, then build again"
        ) from exc
    runtime, extras = [], {SDK_EXTRA: list[str]()}
    for line in requires:
        requirement, _, marker = (part.strip() for part in line.partition(";"))
        if not marker:
            runtime.append(requirement)
        elif re.fullmatch(rf"""extra\s*==\s*["']{SDK_EXTRA}["']""", marker):
            extras[SDK_EXTRA].append(requirement)
    return version, runtime, extras


def find_submission(folder: Path) -> Path:
    """The submission in Gradescope's folder: itself, or its one sub-folder with a
    pyproject.toml (a zip of the folder rather than of its contents)."""
    if (folder / "pyproject.toml").is_file():
        return folder
    inside = (
        [child for child in sorted(folder.iterdir()) if (child / "pyproject.toml").is_file()]
        if folder.is_dir()
        else []
    )
    if len(inside) == 1:
        return inside[0]
    raise UsageError(
        "no pyproject.toml at the top of the submission: upload your lab's folder "
        "with pyproject.toml, lab/, cassettes/ and FAILURES.md at its top (or "
        "submit the GitHub repository), then submit again"
    )


def failure_results(message: str) -> bytes:
    """A results.json for a submission that got no grade: score 0 and what to do."""
    return (
        canonical(
            {
                "score": 0.0,
                "output": f"**Not graded.** {inline_markdown(message)}",
                "output_format": "md",
                "test_output_format": "md",
                "visibility": "visible",
                "stdout_visibility": "hidden",
                "tests": [],
                "extra_data": {"schema": SCHEMA, "error": message},
            }
        )
        + b"\n"
    )


def run(
    root: Path, rubric: Path, isolation: str = "auto", *, allow_host_root: bool = False
) -> bool:
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
    grades = root / GRADES  # never results/: the draw key is a secret
    _keep_draw_key(root / "source" / DRAW_KEY, grades)
    try:
        wall = choose_wall(isolation, allow_host_root=allow_host_root)
        print(f"isolation: {wall.held()}", flush=True)  # Gradescope shows it to instructors
        who = submitted(submission, root / METADATA)
        # As `gradekit grade` grades: the ledger's batch event and runs, and the reviews
        # it holds, in the grades folder; results.json is the worker's, as it was.
        cohort = grade_cohort([who], rubric, out=grades, jobs=1, wall=wall, operator=OPERATOR)
    except GradekitError as exc:  # the autograder's own configuration: the instructor's
        target.write_bytes(
            failure_results(
                f"the autograder is misconfigured ({type(exc).__name__}: {exc}); this is not "
                "your submission's fault: tell your instructor"
            )
        )
        raise
    row = cohort.rows[0]
    if row.status not in REPORTED:
        target.write_bytes(failure_results(row.reason))
        return False
    graded = grades / row.submission
    for name in (REPORT, RESULTS):  # signed in the batch already, when a key is configured
        shutil.copyfile(graded / name, results / name)
    return True


METADATA = "submission_metadata.json"  # Gradescope's, beside submission/


def submitted(submission: Path, metadata: Path) -> Identity:
    """Who handed ``submission`` in and when, as Gradescope's ``submission_metadata.json``
    says: its ``created_at`` is the submission time a late policy reads, the users' names
    are the display name, and a user's own due date later than the assignment's (an
    extension granted in Gradescope) is their extension. Without the file, or with one this
    cannot read, the folder alone: no time, so no penalty, and the late cell says so."""
    folder = submission.resolve().name
    plain = Identity(submission, folder, folder, "")
    try:
        document = json.loads(metadata.read_bytes())
        at = parse_time(document["created_at"], f"{metadata.name}: created_at")
    except (OSError, ValueError, KeyError, TypeError, UsageError) as exc:
        if metadata.exists():
            print(
                f"warning: {metadata} could not be read ({exc}): no submission time, so no "
                "late penalty",
                file=sys.stderr,
                flush=True,
            )
        return plain
    users = [u for u in document.get("users") or () if isinstance(u, dict)]
    names = ", ".join(str(u.get("name")) for u in users if u.get("name"))
    return Identity(
        submission, folder, folder, names, at, _extension(document, users), "gradescope"
    )


def _extension(document: Mapping[str, object], users: list[dict[str, object]]) -> int:
    """Seconds by which the latest user's own due date passes the assignment's; 0 when
    the metadata gives neither."""
    assignment = document.get("assignment")
    try:
        due = parse_time(
            assignment.get("due_date") if isinstance(assignment, dict) else None,
            "assignment.due_date",
        )
    except UsageError:
        return 0
    extended = [0]
    for user in users:
        own = user.get("assignment")
        with contextlib.suppress(UsageError):
            when = parse_time(own.get("due_date") if isinstance(own, dict) else None, "due_date")
            extended.append(int((when - due).total_seconds()))
    return max(extended)


def _keep_draw_key(bundled: Path, grades: Path) -> None:
    """The build's draw key, copied into ``grades`` readable by its owner only: each
    Gradescope container starts anew, and every regrade of a submission draws alike."""
    grades.mkdir(parents=True, exist_ok=True)
    if not bundled.is_file() or (grades / DRAW_KEY).exists():
        return
    descriptor = os.open(grades / DRAW_KEY, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(bundled.read_bytes())


def walls_here() -> list[str]:
    """Which wall ``--wall auto`` takes here and why each other wall was passed over,
    as lines: ``gradekit gradescope walls``, which setup.sh writes to
    ``ROOT/source/isolation.txt``.

    The isolation line is the one a report would carry for a submission whose files the
    children can read (``Wall.stated`` for an empty one), so it names the hold and the host
    user too.
    """
    wall = choose_wall("auto")
    with tempfile.TemporaryDirectory(prefix="gradekit-probe-") as folder:
        os.chmod(folder, 0o711)  # as the grader makes its scratch folders
        submission, scratch = Path(folder) / "submission", Path(folder) / "scratch"
        submission.mkdir(mode=0o755)
        scratch.mkdir(mode=0o711)
        stated = wall.stated(submission, scratch)
    lines = [f"wall: {wall.name}", f"isolation: {stated}"]
    for name in wall_requests()[1:]:  # "auto", then the walls, the preferred first
        other = wall_named(name)
        if other == wall:
            continue
        why = other.missing() if other.preference > wall.preference else ""
        lines.append(
            f"passed over: {name}: " + (why or f"{wall.name} is preferred, and it works here")
        )
    return lines


# -- the dry run --------------------------------------------------------------------------

# What never goes into a dry run's submission from a folder that is not a git work tree:
# what a student's zip would leave out too (environments, caches, git's own folder).
_NOT_SUBMITTED = shutil.ignore_patterns(
    ".git", ".venv*", "__pycache__", "*.pyc", ".mypy_cache", ".pytest_cache", ".ruff_cache"
)
# What Gradescope's container has of the machine's environment: nothing but these (no key,
# no GRADEKIT_* setting of the instructor's reaches the dry run's grader).
_KEPT_ENV = ("PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TERM")


@dataclass(frozen=True, slots=True)
class Tried:
    """What a dry run gave: its folder, whether the submission was graded, and Gradescope's
    results.json as read back (the score, the tests, the output the student sees)."""

    root: Path
    uploaded: str  # how submission/ was made: what a student's upload would hold
    graded: bool
    results: dict[str, object]


@contextlib.contextmanager
def try_autograder(
    submission: Path,
    autograder: Path,
    root: Path | None,
    laid_out: Callable[[Path, str], object] = lambda root, uploaded: None,
    metadata: Path | None = None,
) -> Iterator[Tried]:
    """Grade ``submission`` with the built ``autograder`` as Gradescope would: in ``root``
    (a new or empty folder; else a temporary one, removed once the caller is done),
    ``source/`` is the autograder's contents, ``submission/`` what the student uploaded
    (a zip's contents, a git work tree's files that ``git add -A`` would commit, else the
    folder without environments and caches) and ``results/`` is empty; then
    ``source/run_autograder`` runs with this Python and the autograder's own kit
    (``source/kit``), with none of this shell's environment but ``PATH``, ``HOME``,
    ``TMPDIR`` and the locale. ``setup.sh`` never runs: it installs packages on the machine.
    ``metadata``, a ``submission_metadata.json`` as Gradescope writes it (who submitted,
    when, and their own due date), is laid beside ``submission/``, where the late policy
    and the roster's names read it; without it the dry run has no submission time.
    ``laid_out(root, uploaded)`` is called before ``run_autograder`` starts.

    A context manager: a temporary folder lasts until its block ends. ``UsageError`` for
    an autograder folder that is not one, a submission that is neither a folder nor a zip,
    or a ``root`` that is not new or empty.
    """
    if not (autograder / "run_autograder").is_file() or not (autograder / "kit").is_dir():
        raise UsageError(
            f"{autograder} is not an autograder folder (no run_autograder and "
            "kit/): build one with "
            f"`{commands.GRADESCOPE_BUILD(out=str(autograder))}`, or pass "
            "--autograder the folder you built"
        )
    if not os.path.lexists(submission):
        raise UsageError(
            f"{submission} does not exist: pass the student's lab folder (or the zip they upload)"
        )
    if not submission.is_dir() and not zipfile.is_zipfile(submission):
        raise UsageError(
            f"{submission} is neither a folder nor a zip: pass the student's "
            "lab folder (or the zip they upload)"
        )
    given = _metadata(metadata) if metadata is not None else None
    with contextlib.ExitStack() as stack:
        if root is None:
            root = Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="gradekit-gradescope-"))
            )
            os.chmod(root, 0o711)  # a root grader's runs pass through it, as /autograder
        elif root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise UsageError(
                f"{root} exists and is not an empty folder: pass --root a new "
                "folder, or leave it out for a temporary one"
            )
        root = root.absolute()  # run_autograder runs in it: a relative root would move
        shutil.copytree(
            autograder, root / "source", dirs_exist_ok=True, symlinks=True, ignore=_IGNORE
        )
        uploaded = _upload(submission, root / "submission", skip=autograder)
        (root / "results").mkdir()
        if given is not None:
            (root / METADATA).write_bytes(given)
        laid_out(root, uploaded)
        keep = {name: os.environ[name] for name in _KEPT_ENV if name in os.environ}
        subprocess.run(
            ["bash", str(root / "source" / "run_autograder")],
            cwd=root,
            check=False,
            env={
                **keep,
                ROOT_ENV: str(root),
                PYTHON_ENV: sys.executable,
                "PYTHONPATH": str(root / "source" / "kit"),
            },
        )
        target = root / "results" / RESULTS
        results = (
            json.loads(target.read_bytes())
            if target.is_file()
            else {
                "score": 0.0,
                "tests": [],
                "output": "run_autograder wrote no results.json: its output above says why",
            }
        )
        extra = results.get("extra_data")
        graded = target.is_file() and not (isinstance(extra, dict) and "error" in extra)
        yield Tried(root, uploaded, graded, results)


def _metadata(path: Path) -> bytes:
    """The bytes of a ``submission_metadata.json`` to lay out, once it reads as one: a JSON
    object with a ``created_at`` time."""
    try:
        data = path.read_bytes()
        document = json.loads(data)
        parse_time(document["created_at"], f"{path}: created_at")
    except OSError as exc:
        raise UsageError(
            f"--metadata {path} cannot be read ({exc.strerror}): pass a "
            f"{METADATA} as Gradescope writes it"
        ) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(
            f"--metadata {path} is not a {METADATA} ({exc}): it needs a JSON "
            'object with "created_at", as Gradescope writes it (for example '
            '{"created_at": "2026-12-02T09:00:00-08:00", "users": [{"name": '
            '"Ana Lee"}]})'
        ) from None
    return data


def _upload(submission: Path, into: Path, *, skip: Path) -> str:
    """``submission`` as Gradescope unpacks it into ``into``: a zip's contents; a git work
    tree's tracked and unignored files (a GitHub submission); else the folder without git's
    folder, environments and caches. ``skip`` (the autograder, when built inside the lab)
    is never part of it. Says which of those it was."""
    into.mkdir(parents=True)
    if submission.is_file():
        with zipfile.ZipFile(submission) as archive:
            archive.extractall(into)  # names are made relative: nothing lands outside
        return "the zip's contents"
    try:  # the autograder's place in the lab, when it was built inside it
        inside: Path | None = skip.resolve().relative_to(submission.resolve())
    except ValueError:
        inside = None
    listed = _git_files(submission)
    if listed is None:

        def ignore(folder: str, names: list[str]) -> set[str]:
            at = Path(folder).resolve().relative_to(submission.resolve())
            return set(_NOT_SUBMITTED(folder, names)) | {
                name for name in names if at / name == inside
            }

        shutil.copytree(submission, into, symlinks=True, dirs_exist_ok=True, ignore=ignore)
        return "the folder without .git, environments and caches"
    for relative in map(Path, listed):
        source = submission / relative
        if inside is not None and (relative == inside or inside in relative.parents):
            continue
        if not os.path.lexists(source) or (source.is_dir() and not source.is_symlink()):
            continue  # deleted but still in git's index, or a submodule: GitHub has neither
        (into / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, into / relative, follow_symlinks=False)
    return "the files `git add -A` would commit (as a GitHub submission holds them)"


def _git_files(folder: Path) -> list[str] | None:
    """The files ``git add -A`` would commit under ``folder``, relative to it; None when
    ``folder`` is not in a git work tree (or git is not installed)."""
    try:
        done = subprocess.run(
            [
                "git",
                "-C",
                str(folder),
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ],
            capture_output=True,
            check=False,
        )
    except FileNotFoundError:
        return None
    if done.returncode != 0:
        return None
    return sorted(
        {name for name in done.stdout.decode("utf-8", "surrogateescape").split("\0") if name}
    )
