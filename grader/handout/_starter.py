"""``gradekit starter``: the repository an instructor hands to students, made from the
reference lab.

``build_starter(root, out)`` copies the reference lab at ``root`` into ``out`` and

- removes every solution region (``strip_solutions``). A region is a line holding only
  the BEGIN marker, the lines it hides, and a line holding only the END marker; Python and
  every other text file spell them as ``#`` comments, Markdown as HTML comments (README,
  "Handing out the lab"). In Python a region becomes a ``raise NotImplementedError`` with
  the BEGIN line's hint, at the BEGIN line's indentation (at module level: nothing), or the
  lines of its optional STUB block, uncommented. A marker out of place, and a Python file
  that no longer compiles, is a ``UsageError`` naming the file and line (exit 2);
- leaves out the recordings (the manifest's cassettes, second cassettes and fixtures
  folders are shipped empty, with a ``.gitkeep``), the change log (the student's first
  ``gradekit record --rerecord`` writes it, preamble first), the kit's own ``tests/``,
  ``bench/`` and ``.ci/``, and everything built or generated (``.git``, ``.venv*``,
  ``build/``, ``grades/``, ``*.egg-info``, caches, locks, journals, previous copies);
- ships a small test suite of the student's own (``tests/test_lab.py``: the submission
  contract on scripted answers; a test skips while the part it checks is a stub);
- rewrites the manifest: no ``student`` line, no stretch goal claimed, and with
  ``own_replay`` a stub ``Replay`` class in ``lab/replay.py`` that the manifest's
  ``replay`` names, so the grader probes the student's own;

and writes every file with a fixed mode, in sorted order, with no timestamp: the same
reference gives the same bytes.
"""

from __future__ import annotations

import os
import re
import stat
import textwrap
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gradekit import UsageError
from grader.rubric import SETS

__all__ = ["Starter", "build_starter", "strip_solutions"]

_WORD = "SOLUTION"  # spelled apart so that this file holds no marker line of its own
_BEGIN_PY = re.compile(
    rf"(?P<indent>[ \t]*)# BEGIN {_WORD}(?:[ \t]+hint:[ \t]*(?P<hint>.*?))?[ \t]*")
_END_PY = re.compile(rf"[ \t]*# END {_WORD}[ \t]*")
_STUB_PY = re.compile(r"(?P<indent>[ \t]*)# STUB[ \t]*")
_ANY_PY = re.compile(rf"[ \t]*# (?:BEGIN|END) {_WORD}\b.*|[ \t]*# STUB\b.*")
_BEGIN_MD = re.compile(
    rf"[ \t]*<!--[ \t]*BEGIN {_WORD}(?:[ \t]+hint:[ \t]*(?P<hint>.*?))?[ \t]*-->[ \t]*")
_END_MD = re.compile(rf"[ \t]*<!--[ \t]*END {_WORD}[ \t]*-->[ \t]*")
_STUB_MD = re.compile(r"[ \t]*<!--[ \t]*STUB[ \t]*")
_STUB_MD_CLOSE = re.compile(r"[ \t]*-->[ \t]*")
_ANY_MD = re.compile(rf"[ \t]*<!--[ \t]*(?:(?:BEGIN|END) {_WORD}\b|STUB\b).*")

_MARKDOWN = (".md", ".markdown")
_SKIP_DIRS = frozenset({".git", "__pycache__", "build", "dist", "grades", ".mypy_cache",
                        ".pytest_cache", ".ruff_cache", ".hypothesis", ".tox", ".nox"})
_SKIP_TOP = frozenset({"tests", "bench", ".ci", "DATASET_CHANGES.md"})
# The instructor's regression sets hold reviewed failures of students' own runs: never
# anything a hand-out may carry to every student.
_SKIP_PATHS = frozenset({f"rubric/{SETS}"})
_SKIP_SUFFIXES = (".pyc", ".pyo", ".lock", ".journal", ".previous.json")
_DEFAULT_HINT = "write this part"
_LINE = 100  # the kit's ruff line length: a generated stub stays within it
DIR_MODE, FILE_MODE, EXEC_MODE = 0o755, 0o644, 0o755


@dataclass(frozen=True, slots=True)
class Starter:
    """What ``build_starter`` wrote."""

    out: Path
    files: tuple[str, ...]  # every file written, relative, sorted
    regions: int  # solution regions removed
    stripped: tuple[str, ...]  # the files that held them


# -- solution regions ------------------------------------------------------------------------


@dataclass(slots=True)
class _Region:
    line: int  # the BEGIN line's number
    indent: str
    hint: str
    stub_line: int = 0  # the STUB marker's line, 0 when there is none
    stub_indent: str = ""
    stub: list[tuple[str, int]] | None = None  # (line, its number in the source)
    stub_closed: bool = False  # Markdown: the STUB comment's closing --> was seen


def strip_solutions(text: str, name: str) -> tuple[str, int]:
    """``text`` with its solution regions replaced, and how many there were.

    ``name`` (a relative path) picks the syntax (Markdown for ``.md``, ``#`` comments for
    every other file, stubs that raise for ``.py``) and names the file in errors.
    """
    lines, count = _strip(text, name)
    return "".join(line for line, _ in lines), count


def _strip(text: str, name: str) -> tuple[list[tuple[str, int]], int]:
    """The lines of ``strip_solutions``, each with the source line it comes from."""
    markdown = name.endswith(_MARKDOWN)
    python = name.endswith(".py")
    lines = text.splitlines(keepends=True)
    out: list[tuple[str, int]] = []
    region: _Region | None = None
    count = 0
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        where = f"{name}:{number}"
        if region is not None and region.stub is not None and not region.stub_closed \
                and _stub_line(line, number, region, markdown, where):
            continue
        begin = (_BEGIN_MD if markdown else _BEGIN_PY).fullmatch(line)
        end = (_END_MD if markdown else _END_PY).fullmatch(line)
        stub = (_STUB_MD if markdown else _STUB_PY).fullmatch(line)
        if begin:
            if region is not None:
                raise UsageError(f"{where}: BEGIN {_WORD} inside the region opened at line "
                                   f"{region.line}: regions do not nest; close that one first")
            hint = " ".join((begin["hint"] or "").split())
            region = _Region(number, "" if markdown else begin["indent"], hint)
        elif end:
            if region is None:
                raise UsageError(f"{where}: END {_WORD} without a BEGIN {_WORD} before it")
            if region.stub is not None and markdown and not region.stub_closed:
                raise UsageError(f"{where}: the STUB comment opened at line "
                                   f"{region.stub_line} is not closed: end it with a '-->' line")
            out += _replacement(region, python, markdown, newline=_newline(raw))
            region = None
            count += 1
        elif stub:
            if region is None:
                raise UsageError(f"{where}: STUB outside a solution region: put it between "
                                   f"BEGIN {_WORD} and END {_WORD}")
            if region.stub is not None:
                raise UsageError(f"{where}: a second STUB in the region opened at line "
                                   f"{region.line}")
            region.stub_line, region.stub = number, []
            region.stub_indent = "" if markdown else stub["indent"]
        elif (_ANY_MD if markdown else _ANY_PY).fullmatch(line):
            raise UsageError(f"{where}: a malformed marker {line.strip()!r}: "
                               f"{_syntax(markdown)}")
        elif region is None:
            out.append((raw, number))
    if region is not None:
        raise UsageError(f"{name}:{region.line}: BEGIN {_WORD} is never closed: add an "
                           f"END {_WORD} line after the solution")
    return out, count


def _stub_line(line: str, number: int, region: _Region, markdown: bool, where: str) -> bool:
    """Take ``line`` into the region's STUB block; False when it is not a stub line."""
    assert region.stub is not None
    if markdown:
        if _STUB_MD_CLOSE.fullmatch(line):
            region.stub_closed = True
        else:
            region.stub.append((line, number))
        return True
    if (_END_PY.fullmatch(line)):
        return False
    indent = region.stub_indent
    if line == indent + "#" or line.rstrip() == indent + "#":
        region.stub.append(("", number))
        return True
    if not line.startswith(indent + "# "):
        raise UsageError(f"{where}: a STUB line must be a comment, '# ' at the STUB "
                           f"marker's indentation ({len(indent)} columns) followed by the code "
                           f"the student gets; end the block with END {_WORD}")
    region.stub.append((indent + line[len(indent) + 2:], number))
    return True


def _replacement(region: _Region, python: bool, markdown: bool, *,
                 newline: str) -> list[tuple[str, int]]:
    if region.stub is not None:
        return [(line.rstrip() + newline, number) for line, number in region.stub]
    if markdown:
        lines = [region.hint] if region.hint else []
    elif python and region.indent:
        lines = _raise(region.indent, region.hint or _DEFAULT_HINT)
    else:
        lines = [f"{region.indent}# {region.hint}"] if region.hint else []
    return [(line + newline, region.line) for line in lines]


def _raise(indent: str, hint: str) -> list[str]:
    """``raise NotImplementedError("hint")`` at ``indent``, wrapped to the line length."""
    one = f'{indent}raise NotImplementedError({_literal(hint)})'
    if len(one) <= _LINE:
        return [one]
    width = _LINE - len(indent) - 8
    parts = textwrap.wrap(hint, width=width, break_long_words=False, break_on_hyphens=False)
    body = [f"{indent}    {_literal(part + ' ' if n < len(parts) - 1 else part)}"
            for n, part in enumerate(parts)]
    return [f"{indent}raise NotImplementedError(", *body, f"{indent})"]


def _literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _newline(raw: str) -> str:
    return "\r\n" if raw.endswith("\r\n") else "\n"


def _syntax(markdown: bool) -> str:
    if markdown:
        return (f"write '<!-- BEGIN {_WORD} -->' (or '<!-- BEGIN {_WORD} hint: TEXT -->'), "
                f"'<!-- STUB' ... '-->' and '<!-- END {_WORD} -->', each on a line of its own")
    return (f"write '# BEGIN {_WORD}' (or '# BEGIN {_WORD} hint: TEXT'), '# STUB' and "
            f"'# END {_WORD}', each on a line of its own")


# -- the starter repository -------------------------------------------------------------------


def build_starter(root: Path, out: Path, *, own_replay: bool = False) -> Starter:
    """Write the students' repository for the reference lab at ``root`` into ``out``.

    ``out`` must not exist or be empty. Nothing is written when a marker is out of place:
    every file is transformed and checked first.
    """
    root = root.resolve()
    manifest = _manifest(root)
    recordings = sorted({str(manifest.get(key, default)) for key, default in (
        ("cassettes", "cassettes"), ("fixtures", "fixtures"), ("second_cassettes", ""))} - {""})
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"{out} exists and is not an empty folder: choose a new --out")
    files: dict[str, tuple[bytes, int]] = {}
    stripped: list[str] = []
    origins: dict[str, list[int]] = {}  # a stripped file's source line of each line
    regions = 0
    skip = {_relative(out.resolve(), root)} - {None}
    for name, path in _walk(root, recordings, skip):
        data = path.read_bytes()
        mode = EXEC_MODE if path.stat().st_mode & stat.S_IXUSR else FILE_MODE
        text = _text(data)
        if text is not None:
            lines, found = _strip(text, name)
            if found:
                stripped.append(name)
                regions += found
                data = "".join(line for line, _ in lines).encode("utf-8")
                origins[name] = [source for _, source in lines]
        files[name] = (data, mode)
    for folder in recordings:
        files[f"{folder}/.gitkeep"] = (b"", FILE_MODE)
    files["tests/__init__.py"] = (b"", FILE_MODE)
    files["tests/test_lab.py"] = (_STUDENT_TESTS.encode("utf-8"), FILE_MODE)
    package = str(manifest["agent"]).split(":")[0].split(".")[0]
    files["pyproject.toml"] = (_pyproject(files["pyproject.toml"][0].decode("utf-8"), files,
                                          replay=f"{package}.replay:Replay" if own_replay
                                          else None).encode("utf-8"), FILE_MODE)
    if own_replay:
        if f"{package}/replay.py" in files:
            raise UsageError(f"{package}/replay.py already exists in {root}: --own-replay "
                               "writes the stub there; rename the reference's file")
        files[f"{package}/replay.py"] = (_REPLAY_STUB.encode("utf-8"), FILE_MODE)
    for name, (data, _) in sorted(files.items()):
        if name.endswith(".py"):
            _compiles(name, data, origins.get(name))
    _write(out, files)
    return Starter(out, tuple(sorted(files)), regions, tuple(stripped))


def _manifest(root: Path) -> dict[str, object]:
    try:
        document = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{root}: not a reference lab: its pyproject.toml cannot be read "
                           f"({exc})") from None
    table = document.get("tool", {}).get("gradekit")
    if not isinstance(table, dict) or not isinstance(table.get("agent"), str):
        raise UsageError(f"{root / 'pyproject.toml'}: no [tool.gradekit] table with an "
                           "agent: --from must name the reference lab")
    return table


def _relative(path: Path, root: Path) -> str | None:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return None


def _walk(root: Path, recordings: list[str], skip: set[str | None]) -> Iterator[tuple[str, Path]]:
    """The files to ship, as (relative name, path), in sorted order; links are left out."""
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        rel = here.relative_to(root).as_posix()
        top = rel == "."
        dirs[:] = sorted(d for d in dirs if _keep_dir(d, top, _join(rel, d), recordings, skip)
                         and not (here / d).is_symlink())
        for name in sorted(names):
            path = here / name
            relname = _join(rel, name)
            if (top and name in _SKIP_TOP) or name.endswith(_SKIP_SUFFIXES) \
                    or relname in skip or path.is_symlink() or not path.is_file():
                continue
            yield relname, path


def _join(rel: str, name: str) -> str:
    return name if rel == "." else f"{rel}/{name}"


def _keep_dir(name: str, top: bool, rel: str, recordings: list[str],
              skip: set[str | None]) -> bool:
    if name in _SKIP_DIRS or name.startswith(".venv") or name.endswith(".egg-info"):
        return False
    return not ((top and name in _SKIP_TOP) or rel in recordings or rel in skip
                or rel in _SKIP_PATHS)


def _text(data: bytes) -> str | None:
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _pyproject(text: str, files: dict[str, tuple[bytes, int]], *, replay: str | None) -> str:
    """The manifest without ``student`` and without stretch claims; mypy's ``files`` only
    those shipped; ``replay`` set when given."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    table = ""
    last_key = -1
    for line in lines:
        header = re.fullmatch(r"\[([^\[\]]+)\]\s*", line)
        if header or line.startswith("[["):
            table = header[1].strip() if header else ""
        if table == "tool.gradekit":
            if re.match(r"student\s*=", line) or (replay and re.match(r"replay\s*=", line)):
                continue
            if re.match(r"stretch\s*=", line):
                line = "stretch = []\n"
            if re.match(r"[a-z_]+\s*=", line):
                last_key = len(out)
        elif table == "tool.mypy" and re.match(r"files\s*=\s*\[", line):
            shipped = {name.split("/")[0] for name in files}
            kept = [item for item in re.findall(r'"([^"]+)"', line) if item in shipped]
            line = "files = [" + ", ".join(f'"{item}"' for item in kept) + "]\n"
        out.append(line)
    if replay is not None:
        if last_key < 0:
            raise UsageError("pyproject.toml: no [tool.gradekit] key to put replay after")
        out.insert(last_key + 1, f'replay = "{replay}"\n')
    return "".join(out)


def _compiles(name: str, data: bytes, origins: list[int] | None) -> None:
    try:
        compile(data, name, "exec", dont_inherit=True)
    except SyntaxError as exc:
        line = exc.lineno or 1
        if origins:
            line = origins[min(max(line, 1), len(origins)) - 1]
        raise UsageError(f"{name}:{line}: the starter's code does not compile once "
                           f"the solution regions are replaced ({exc.msg}): check the markers' "
                           "indentation and the STUB lines") from None


def _write(out: Path, files: dict[str, tuple[bytes, int]]) -> None:
    out.mkdir(parents=True, exist_ok=True)
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


# -- what the starter adds ----------------------------------------------------------------------

_REPLAY_STUB = '''\
"""Your own ``Replay``: answer every prompt from a recorded cassette, offline.

The manifest names it (``replay = "lab.replay:Replay"`` in pyproject.toml) and the
grader probes it: a recorded prompt asked with extra leading and trailing whitespace
must get its recorded answer, and a prompt the cassette does not hold must raise
``gradekit.CassetteMiss``, never answer. The cassette's format and its keys
(``gradekit.prompt_key``) are in docs/formats.md; ``tests/test_lab.py`` checks both.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["Replay"]


class Replay:
    """A provider that serves the answers recorded in the cassette at ``path``."""

    def __init__(self, path: str | Path, *, name: str = "replay") -> None:
        self.name = name
        self.path = Path(path)

    def complete(self, prompt: str) -> str:
        """The answer recorded for ``prompt``; ``CassetteMiss`` when there is none."""
        raise NotImplementedError(
            "lab/replay.py: read the cassette, look the prompt up by prompt_key(prompt) "
            "(outer whitespace is not part of a prompt) and raise CassetteMiss on a miss"
        )
'''

_STUDENT_TESTS = '''\
"""Your lab's own tests: the submission contract, offline, on scripted answers.

``make test`` runs them after ruff and mypy. A test that reaches a part of the lab that
still raises ``NotImplementedError`` skips and says which; write that part and it runs.
``make check`` runs the grader's three checkpoints on your recordings.
"""

from __future__ import annotations

import importlib
import json
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from gradekit import CassetteMiss, FakeProvider, Recorder, Replay, prompt_key

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["gradekit"]
TASK = "A student asks whether a bootcamp seat can be refunded after the first week."


def _load(spec: str) -> object:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def _run(provider: object) -> object:
    agent = _load(MANIFEST["agent"])
    assert callable(agent)
    try:
        return agent(provider, TASK)
    except NotImplementedError as exc:
        pytest.skip(f"the agent is not written yet: {exc}")


def _scripted(name: str = "fake") -> FakeProvider:
    return FakeProvider(lambda prompt: f"YES. Answer {prompt_key(prompt)}.", name=name)


def _cassette(folder: Path) -> Path:
    """A cassette holding one recorded prompt."""
    path = folder / "one.json"
    with Recorder(FakeProvider(["the recorded answer"]), path) as recorder:
        recorder.complete("What is a cassette?")
    return path


def test_the_agent_answers_with_a_string_from_the_provider() -> None:
    provider = _scripted()
    answer = _run(provider)
    assert isinstance(answer, str) and answer.strip()
    assert provider.calls, "the agent never asked the provider"


def test_the_answer_does_not_depend_on_the_provider_name() -> None:
    assert _run(_scripted("provider-a")) == _run(_scripted("provider-b"))


def test_a_miss_escapes_the_agent(tmp_path: Path) -> None:
    raised = _raised(Replay(_cassette(tmp_path)))
    assert raised is not None, "the agent answered after a miss: let CassetteMiss escape"
    chain: list[BaseException] = []
    error: BaseException | None = raised
    while error is not None and error not in chain:  # a wrapped miss is fine: in the chain
        chain.append(error)
        error = error.__cause__ or error.__context__
    assert any(isinstance(e, CassetteMiss) for e in chain), f"the miss was lost: {raised!r}"


def _raised(provider: object) -> Exception | None:
    try:
        _run(provider)
    except Exception as exc:
        return exc
    return None


def test_every_provider_call_is_traced_after_it_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv("GRADEKIT_TRACE", str(trace))
    provider = _scripted("provider-a")
    _run(provider)
    records = [json.loads(line) for line in trace.read_text("utf-8").splitlines()]
    calls = [r for r in records if "tool" not in r]
    assert [r["key"] for r in calls] == [prompt_key(p) for p in provider.calls]
    assert all(r["provider"] == "provider-a" and r["ok"] is True for r in calls)


def _replay() -> Callable[[Path], object]:
    replay = _load(MANIFEST.get("replay", "lab:Replay"))
    assert callable(replay)
    return replay


def _complete(provider: object, prompt: str) -> object:
    complete = getattr(provider, "complete", None)
    assert callable(complete), "a Replay needs a complete(prompt) method"
    try:
        return complete(prompt)
    except NotImplementedError as exc:
        pytest.skip(f"your Replay is not written yet: {exc}")


def test_the_replay_ignores_outer_whitespace(tmp_path: Path) -> None:
    provider = _replay()(_cassette(tmp_path))
    assert _complete(provider, "  \\n What is a cassette?\\t ") == "the recorded answer"


def test_the_replay_raises_on_a_miss(tmp_path: Path) -> None:
    provider = _replay()(_cassette(tmp_path))
    with pytest.raises(CassetteMiss):
        _complete(provider, "A prompt nobody recorded")
'''
