"""``gradekit starter``: the repository an instructor hands to students, made from the
reference lab.

``build_starter(root, out)`` builds the hand-out of the reference lab at ``root``:

- it ships what the reference's ``[tool.gradekit.starter]`` table lists (``grader.handout.
  _allow``): the files ``include`` matches, less those held back by default (recordings,
  incidents, examples, the change log, regression sets, journals) that ``ship`` does not
  name. Nothing else leaves the instructor's machine;
- every shipped text file is read for solution regions, which are replaced
  (``grader.handout._markers``; a notebook cell by cell, its outputs cleared:
  ``grader.handout._notebook``). A file that is not UTF-8, a near-miss or unclosed marker,
  and Python that no longer compiles are a ``UsageError`` naming the file and line; a
  binary file that holds a marker is refused too;
- the table's ``readme`` is written as the hand-out's README.md, its criteria line
  replaced by the rubric's criteria (``grader.handout._readme``); the kit's own README
  stays home;
- it adds a small test suite of the student's own, written for this lab (its rubric's
  first task, its tools, its Makefile's targets) and, with ``own_replay``, a stub
  ``Replay`` in the lab's package (``grader.handout._student``); the recordings folders
  ship empty, with a ``.gitkeep``;
- it rewrites the manifest: no ``student``, no stretch goal claimed, no incident test,
  guard or incidents, no starter table; mypy's ``files`` and setuptools' ``packages``
  only what ships; ``replay`` set with ``own_replay``.

The hand-out is built in a folder beside ``out``, checked (``grader.handout._preflight``:
the text of every removed region, and with a ``wall`` the grades of each folder holding a
pyproject.toml), and only then moved to ``out``: a refusal writes nothing there. Every
file is written with a fixed mode, in sorted order, with no timestamp: the same reference
gives the same bytes.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from gradekit import UsageError
from gradekit.internal import commands
from grader.handout._allow import (
    StarterTable,
    held_back,
    is_built,
    lab_package,
    matches,
    shipped_by,
    starter_table,
)
from grader.handout._markers import Removed, compiles, strip, strip_solutions
from grader.handout._notebook import NOTEBOOK, strip_notebook
from grader.handout._preflight import FolderGrade, HandoutGrading, grade_folders, scan_for_regions
from grader.handout._readme import student_readme
from grader.handout._student import replay_stub, student_tests
from grader.regression import parse_ref, public_name
from grader.rubric import KIT_RUBRIC, SETS, Rubric, load_rubric
from grader.sandbox import Wall
from grader.submission import DEFAULT_REPLAY

__all__ = ["OptIn", "Starter", "build_starter", "strip_solutions"]

DIR_MODE, FILE_MODE, EXEC_MODE = 0o755, 0o644, 0o755
# Read as bytes, whatever they decode as: a marker in one of them is refused, never read.
_BINARY = (
    ".db",
    ".sqlite",
    ".sqlite3",
    ".png",
    ".jpg",
    ".jpeg",
    ".gif",
    ".webp",
    ".ico",
    ".pdf",
    ".zip",
    ".gz",
    ".tgz",
    ".bz2",
    ".xz",
    ".tar",
    ".whl",
    ".gguf",
    ".onnx",
    ".npy",
    ".npz",
    ".pkl",
    ".parquet",
    ".woff",
    ".woff2",
    ".ttf",
    ".otf",
)
_MARKER_BYTES = re.compile(r"(?i:begin|end)[ \t_-]*(?i:solution)")
_DROPPED_KEYS = ("student", "incident_test", "guard", "incidents")
_TARGET = re.compile(r"^([A-Za-z0-9_.-]+)[ \t]*:(?!=)", re.MULTILINE)  # a Makefile's rule


@dataclass(frozen=True, slots=True)
class OptIn:
    """A file held back by default that ships because ``ship`` names it."""

    path: str
    why: str  # what it is: "an incident"


@dataclass(frozen=True, slots=True)
class Starter:
    """What ``build_starter`` wrote."""

    out: Path
    files: tuple[str, ...]  # every file written, relative, sorted
    regions: int  # solution regions removed
    stripped: tuple[str, ...]  # the files that held them
    opt_ins: tuple[OptIn, ...] = ()
    readme: str = ""  # the source of the hand-out's README.md, "" when none
    grades: tuple[FolderGrade, ...] = ()  # each folder graded, the hand-out first


@dataclass(slots=True)
class _Build:
    files: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    removed: list[Removed] = field(default_factory=list)
    stubs: list[str] = field(default_factory=list)
    stripped: list[str] = field(default_factory=list)
    origins: dict[str, tuple[int, ...]] = field(default_factory=dict)


def build_starter(
    root: Path,
    out: Path,
    *,
    own_replay: bool = False,
    rubric: Rubric | None = None,
    wall: Wall | None = None,
    say: Callable[[str], None] | None = None,
) -> Starter:
    """Write the students' repository for the reference lab at ``root`` into ``out``.

    ``out`` must not exist or be empty. ``rubric`` (default: the kit's) renders the
    README's criteria, gives the students' tests their task (its first case's) and grades;
    with ``wall``, each folder of the hand-out that holds a pyproject.toml is graded behind
    it, and the hand-out is refused when one grades above the hand-out itself. Nothing is
    written to ``out`` when anything is refused. ``say`` hears of each file held back by
    default that ships because ``ship`` names it.
    """
    root = root.resolve()
    pyproject = root / "pyproject.toml"
    document, manifest = _manifest(root)
    rubric = rubric or load_rubric(KIT_RUBRIC)
    table = starter_table(manifest, str(pyproject))
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"{out} exists and is not an empty folder: choose a new --out")
    made = _made_parents(out.parent)
    building = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".building", dir=out.parent))
    try:
        build, opt_ins = _build(
            root,
            table,
            manifest,
            skip={_relative(out.resolve(), root), _relative(building.resolve(), root)} - {None},
        )
        if say is not None:
            for opt_in in opt_ins:
                say(
                    f"shipping {opt_in.path} ({opt_in.why}) because [tool.gradekit.starter] "
                    "ship lists it"
                )
        if table.readme:
            build.files["README.md"] = (_readme(root, table.readme, rubric), FILE_MODE)
        _generated(build, manifest, own_replay, rubric)
        _check_project(document, build.files)
        for name, (data, _) in sorted(build.files.items()):
            if name.endswith(".py"):
                compiles(name, data.decode("utf-8"), build.origins.get(name))
        _write(building, build.files)
        scan_for_regions(building, build.removed, build.stubs)
        grades = grade_folders(building, HandoutGrading(rubric, wall)) if wall is not None else ()
        with contextlib.suppress(FileNotFoundError):
            out.rmdir()  # empty, as checked: the finished hand-out takes its place
        os.rename(building, out)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    return Starter(
        out,
        tuple(sorted(build.files)),
        len(build.removed),
        tuple(build.stripped),
        tuple(opt_ins),
        table.readme,
        grades,
    )


def _manifest(root: Path) -> tuple[dict[str, object], dict[str, object]]:
    try:
        document = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(
            f"{root}: not a reference lab: its pyproject.toml cannot be read ({exc})"
        ) from None
    table = document.get("tool", {}).get("gradekit")
    if not isinstance(table, dict) or not isinstance(table.get("agent"), str):
        raise UsageError(
            f"{root / 'pyproject.toml'}: no [tool.gradekit] table with an "
            "agent: --from must name the reference lab"
        )
    return document, table


def _recordings(manifest: Mapping[str, object]) -> list[str]:
    return sorted(
        {
            str(manifest.get(key, default))
            for key, default in (
                ("cassettes", "cassettes"),
                ("fixtures", "fixtures"),
                ("second_cassettes", ""),
            )
        }
        - {""}
    )


def _build(
    root: Path, table: StarterTable, manifest: Mapping[str, object], skip: set[str | None]
) -> tuple[_Build, list[OptIn]]:
    """Every shipped file, transformed, and the opt-ins that ``ship`` named."""
    folders = dict.fromkeys(_recordings(manifest), "a recording")
    folders[str(manifest.get("incidents", "incidents"))] = "an incident"
    incident_test = _module_file(str(manifest.get("incident_test", "")))
    build, opt_ins = _Build(), []
    used: set[str] = set()
    held: dict[str, str] = {}  # a pattern that matched a file held back -> what it is
    held_files: dict[str, str] = {}
    for name, path in _walk(root, skip):
        why = held_back(name, folders)
        entry = shipped_by(name, table.ship)
        include = next((p for p in table.include if matches(p, name)), "")
        if (include and not why) or entry:
            used.add(entry or include)
        elif include:
            held.setdefault(include, why)
            held_files.setdefault(include, name)
        if entry and why:
            opt_ins.append(OptIn(name, why))
        elif not entry and (why or not include):
            continue
        if name == table.readme:
            continue  # written as README.md
        if name == "README.md" and table.readme:
            raise UsageError(
                f'[tool.gradekit.starter] readme = "{table.readme}" is written '
                "as the hand-out's README.md, and include lists the kit's own "
                f"README.md ({include!r}) too: take README.md out of include"
            )
        found = _transform(build, name, path)
        if name in incident_test and not found and not entry:
            build.files.pop(name)  # the cut-point test, unmarked: it would claim the goal
    _public_views(root, build)
    for pattern in (p for p in (*table.include, *table.ship) if p not in used):
        what = held.get(pattern)
        raise UsageError(
            f"[tool.gradekit.starter] {pattern!r} matches "
            + (
                f"only files held back by default ({what}, e.g. {held_files[pattern]}): name "
                "those that students get in ship, or remove the pattern"
                if what
                else "no file of the reference: fix the path, or remove it"
            )
        )
    return build, opt_ins


def _public_views(root: Path, build: _Build) -> None:
    """Ship the public view of every regression set version a shipped rubric pins: what its
    students record the set's items from (the sets themselves stay home: they name the
    classmate each item came from). A pinned version without one is refused."""
    for name in sorted(n for n in build.files if n.endswith(".toml")):
        try:
            document = tomllib.loads(build.files[name][0].decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue
        criteria = document.get("criterion") if "rubric" in document else None
        for criterion in criteria if isinstance(criteria, list) else []:
            params = criterion.get("params") if isinstance(criterion, dict) else None
            ref = params.get("set") if isinstance(params, dict) else None
            if (
                not isinstance(criterion, dict)
                or criterion.get("check") != "regression"
                or not isinstance(ref, str)
            ):
                continue
            set_name, version = parse_ref(ref)
            folder = PurePosixPath(name).parent / SETS / set_name
            view = (folder / public_name(version)).as_posix()
            try:
                data = (root / view).read_bytes()
            except FileNotFoundError:
                public = commands.REGRESSION_PUBLIC(name=set_name, sets=str(root / folder.parent))
                raise UsageError(
                    f"{name} pins {ref}, whose public view {view} is not in the "
                    "reference: its students could not record the set's items. "
                    f"Write it (`{public}`), or pin a version that has one"
                ) from None
            build.files[view] = (data, FILE_MODE)


def _module_file(spec: str) -> tuple[str, ...]:
    """The files a ``module:function`` spec's module can be."""
    module = spec.partition(":")[0].replace(".", "/")
    return (f"{module}.py", f"{module}/__init__.py") if module else ()


def _walk(root: Path, skip: set[str | None]) -> Iterator[tuple[str, Path]]:
    """Every file of the reference, as (relative name, path), in sorted order, less what
    is built or cached and links."""
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        rel = here.relative_to(root).as_posix()
        dirs[:] = sorted(
            d
            for d in dirs
            if not (here / d).is_symlink()
            and _join(rel, d) not in skip
            and not is_built(_join(rel, d) + "/x")
        )
        for name in sorted(names):
            relname = _join(rel, name)
            path = here / name
            if not (
                is_built(relname) or relname in skip or path.is_symlink() or not path.is_file()
            ):
                yield relname, path


def _join(rel: str, name: str) -> str:
    return name if rel == "." else f"{rel}/{name}"


def _relative(path: Path, root: Path) -> str | None:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return None


def _transform(build: _Build, name: str, path: Path) -> int:
    """Add ``name`` to the build, its regions replaced; how many there were."""
    data = path.read_bytes()
    mode = EXEC_MODE if path.stat().st_mode & stat.S_IXUSR else FILE_MODE
    if name.endswith(_BINARY) or b"\0" in data:
        _binary(name, data)
        build.files[name] = (data, mode)
        return 0
    text = _utf8(name, data)
    if name.endswith(NOTEBOOK):
        notebook = strip_notebook(text, name)
        data, removed, stubs = notebook.data, notebook.removed, notebook.stubs
    else:
        stripped = strip(text, name)
        removed, stubs = stripped.removed, stripped.stubs
        if removed:
            data = stripped.text.encode("utf-8")
            build.origins[name] = stripped.origins
    if removed:
        build.stripped.append(name)
        build.removed += removed
        # A line the file keeps outside its regions (or a STUB puts in) ships on purpose.
        kept = {line.strip() for line in data.decode("utf-8").splitlines()}
        build.stubs += [
            *stubs,
            *(line.strip() for region in removed for line in region.lines if line.strip() in kept),
        ]
    build.files[name] = (data, mode)
    return len(removed)


def _utf8(name: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise UsageError(
            f"{name}:{line}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}), so its solution markers cannot be read: save it as "
            "UTF-8, or leave it out of [tool.gradekit.starter] include"
        ) from None


def _binary(name: str, data: bytes) -> None:
    """Refuse a binary file that holds a marker: regions are replaced only in text."""
    for encoding in ("latin-1", "utf-16-le", "utf-16-be"):
        found = _MARKER_BYTES.search(data.decode(encoding, "ignore"))
        if found:
            raise UsageError(
                f"{name}: a binary file holding a solution marker "
                f"({found[0]!r}, {encoding}): regions are replaced only in text "
                "files; build the file from stripped sources, or leave it out of "
                "[tool.gradekit.starter] include"
            )


def _readme(root: Path, source: str, rubric: Rubric) -> bytes:
    path = root / source
    if not path.is_file():
        raise UsageError(
            f'[tool.gradekit.starter] readme = "{source}": there is no such file '
            f"in {root}: write the students' README there, or fix the path"
        )
    text = strip(_utf8(source, path.read_bytes()), source).text
    return student_readme(text, rubric, name=source).encode("utf-8")


def _generated(
    build: _Build, manifest: Mapping[str, object], own_replay: bool, rubric: Rubric
) -> None:
    """The files the starter writes itself, and the manifest rewritten."""
    files = build.files
    package = lab_package(manifest)
    written = {
        "tests/__init__.py": b"",
        "tests/test_lab.py": _student_tests(files, rubric).encode("utf-8"),
    }
    if own_replay:
        written[f"{package}/replay.py"] = replay_stub(package).encode("utf-8")
    for name in sorted(written):
        if name in files:
            raise UsageError(
                f"{name}: the starter writes this file itself, and "
                "[tool.gradekit.starter] include ships the reference's too: "
                f"leave {name} out of include"
                + (" (or rename the reference's file)" if own_replay else "")
            )
    for folder in _recordings(manifest):
        files.setdefault(f"{folder}/.gitkeep", (b"", FILE_MODE))
    files.update((name, (data, FILE_MODE)) for name, data in written.items())
    if "pyproject.toml" not in files:
        raise UsageError(
            '[tool.gradekit.starter] include does not list "pyproject.toml": '
            "the hand-out needs its manifest; add it"
        )
    files["pyproject.toml"] = (
        _pyproject(
            files["pyproject.toml"][0].decode("utf-8"),
            files,
            replay=f"{package}.replay:Replay" if own_replay else None,
        ).encode("utf-8"),
        FILE_MODE,
    )


def _student_tests(files: Mapping[str, tuple[bytes, int]], rubric: Rubric) -> str:
    """The students' ``tests/test_lab.py``: run on the rubric's first task, its docstring
    naming the shipped Makefile's ``test`` and ``check`` targets where it has them."""
    makefile = files.get("Makefile", (b"", 0))[0].decode("utf-8", "replace")
    case = rubric.cases[0]
    return student_tests(
        task=case.task,
        case=case.id,
        replay=DEFAULT_REPLAY,
        make={"test", "check"} & set(_TARGET.findall(makefile)),
        kit_inside=any(name.startswith("gradekit/") for name in files),
    )


def _check_project(document: Mapping[str, object], files: Mapping[str, object]) -> None:
    """The project's README must ship, or ``pip install -e .`` fails in the hand-out."""
    project = document.get("project")
    readme = project.get("readme") if isinstance(project, dict) else None
    if isinstance(readme, str) and readme not in files:
        raise UsageError(
            f'pyproject.toml: [project] readme = "{readme}", which the hand-out '
            "would not hold, so it would not install: set [tool.gradekit.starter] "
            f'readme, or add "{readme}" to its include'
        )


def _pyproject(text: str, files: Mapping[str, object], *, replay: str | None) -> str:
    """The manifest without the instructor's keys and tables and without stretch claims;
    mypy's ``files`` and setuptools' ``packages`` only those shipped; ``replay`` set when
    given."""
    out: list[str] = []
    table = ""
    last_key = -1
    listing = False  # inside a multi-line ``packages = [`` of [tool.setuptools]
    for line in text.splitlines(keepends=True):
        header = re.fullmatch(r"\[([^\[\]]+)\]\s*", line)
        if header or line.startswith("[["):
            table = header[1].strip() if header else ""
        if table == "tool.gradekit.starter":
            while header and out and out[-1].lstrip().startswith("#"):
                out.pop()  # the table's own comment, above its header
            continue
        if table == "tool.gradekit":
            if re.match(rf"(?:{'|'.join(_DROPPED_KEYS)})\s*=", line) or (
                replay and re.match(r"replay\s*=", line)
            ):
                continue
            if re.match(r"stretch\s*=", line):
                line = "stretch = []\n"
            if re.match(r"[a-z_]+\s*=", line):
                last_key = len(out)
        elif table == "tool.mypy" and re.match(r"files\s*=\s*\[", line):
            shipped = {name.split("/")[0] for name in files}
            kept = [item for item in re.findall(r'"([^"]+)"', line) if item in shipped]
            line = "files = [" + ", ".join(f'"{item}"' for item in kept) + "]\n"
        elif table == "tool.setuptools" and (listing or re.match(r"packages\s*=\s*\[\s*$", line)):
            listing = line.strip() != "]"
            if not _package_line(line, files, text):
                continue
        out.append(line)
    if replay is not None:
        if last_key < 0:
            raise UsageError("pyproject.toml: no [tool.gradekit] key to put replay after")
        out.insert(last_key + 1, f'replay = "{replay}"\n')
    return "".join(out)


def _package_line(line: str, files: Mapping[str, object], text: str) -> bool:
    """Whether a line of a multi-line ``packages`` list stays: a package with no shipped
    file (its folder, or the folder ``package-dir`` maps it to) is dropped."""
    item = re.fullmatch(r'\s*"([^"]+)",?\s*', line)
    if item is None:
        return True
    mapped = re.search(rf'^"{re.escape(item[1])}"\s*=\s*"([^"]+)"', text, re.MULTILINE)
    folder = mapped[1] if mapped else item[1].replace(".", "/")
    return any(name.startswith(folder + "/") for name in files)


def _made_parents(folder: Path) -> list[Path]:
    """Make ``folder`` and its missing parents; those made, outermost first."""
    missing = [parent for parent in (folder, *folder.parents) if not parent.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    return list(reversed(missing))


def _write(out: Path, files: Mapping[str, tuple[bytes, int]]) -> None:
    os.chmod(out, DIR_MODE)
    for name, (data, mode) in sorted(files.items()):
        path = out / name
        for parent in reversed(path.relative_to(out).parents[:-1]):
            folder = out / parent
            if not folder.is_dir():
                folder.mkdir()
                os.chmod(folder, DIR_MODE)
        path.write_bytes(data)
        os.chmod(path, mode)
