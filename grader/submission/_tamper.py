"""Tamper flags: a static scan of a submission's Python source for code that reaches for the
harness or the process (``tamper_findings``).

What only the child can say stays a claim: an agent that finds the harness's own verdict
function (seal included) by walking frames can report a false verdict and leave before the
true one goes out. The parent cannot see that happen, but it can read the code that would
do it. It reads the submission's Python source (never through a link, with caps) with
``ast``, never running it, and flags each place that reaches one of ``REACHED``: each finding is
``FLAGGED + "path:line: phrase (name)"``, in the grader's fixed words; nothing of the
submission's but its file path and line number. A flag asks a person to look at the whole
submission and moves no points by itself; an honest submission has none.

What is reached: frames (the stack's, a traceback's, a generator's, a coroutine's, an async
generator's: ``gi_frame``, ``cr_frame``, ``ag_frame``) and their variables, every attribute
of an object at once (``inspect.getmembers``, ``getmembers_static``: the frame's among them,
whatever it is asked of), a function's variables (``__globals__``, ``__closure__``,
``cell_contents``: the harness's verdict function keeps its seal in a closure), trace hooks,
the garbage collector's objects, native code, ``os._exit``, descriptor writes, an edit of
``sys.modules``, the harness's and the grader's modules, and code the scan cannot read
(``exec``, ``eval``, ``compile``: the builtins, never a method of that name).

How a thing is reached, wherever it stands in the file:

- by its dotted name (``sys._getframe``, ``frame.f_back``), through any name the file binds
  to it: an import (``import sys as s``, ``from sys import _getframe as g``, a star import)
  or an assignment of a dotted name (``m = sys.modules``, ``run = exec``); a builtin by its
  own name too, and ``builtins`` also as ``__builtins__``;
- by a string constant naming the attribute: ``getattr``/``setattr``/``delattr``,
  ``__getattribute__``, ``inspect.getattr_static``, ``vars(x)["name"]``,
  ``x.__dict__["name"]`` and ``__builtins__["name"]`` (or ``.get("name")``) reach
  ``x.name``; so does ``operator.attrgetter("name")``, and a name in ``BY_NAME`` is enough
  there even when the object is unknown;
- a module, by ``import``, ``__import__("m")``, ``importlib.import_module("m")`` and
  ``sys.modules["m"]`` (or ``.get("m")``).

A name the scan cannot read is flagged where it is used (``_BY_RUN_TIME``): ``getattr`` & co.,
``__getattribute__``, ``operator.attrgetter``, ``__import__``, ``importlib.import_module``
and ``sys.modules[...]`` (``.get``) given a name that is not a string constant (the file's
own ``__name__`` aside), or handed on uncalled (``map(getattr, ...)``, a default argument);
and ``vars(m)[key]`` or ``m.__dict__[key]`` with such a key where ``m`` is a module the scan
watches (``sys``, ``gc``, ``builtins``...: ``vars(self)[key]`` is everyday code). One honest
use is let through: a module's own ``__getattr__(name)`` (PEP 562, as ``lab/__init__.py``
re-exports ``gradekit``) that hands its unchanged ``name`` to ``getattr`` of a module the
file imports and never rebinds, one the scan does not watch: the name was spelled where the
attribute was asked for, and read there. A class's ``__getattr__`` gets no such pass.

Two entries are flagged only in one use: ``sys.modules`` where it is edited (an item set
or deleted, the table rebound, one of its changing methods), and a descriptor write
(``os.write``...) whose descriptor the file did not open. A descriptor the file opened is a
call to an opener (``os.open``, ``os.pipe``, ``os.dup``, ``tempfile.mkstemp``, ``.fileno()``
...) or a name or attribute name the same file binds to one (``fd = os.open(...)``,
``r, w = os.pipe()``, ``self._fd = os.open(...)``); anything else, an int literal among
them, is flagged.

Which files: what a child can run. The packages (or top-level modules) the manifest's
entries name, every ``.py`` file in them, and then every package of the submission that a
scanned file imports, until no new one is imported; without a manifest, every ``.py`` file.
The names the sandbox's copy ignores (``IGNORED_NAMES``) are left out, and so are the kit's
own ``grader/`` and ``gradekit/`` at the top (the starter ships them for ``gradekit check``):
a child always imports the grader's own ``gradekit``, so that copy never runs, and it
reaches the copy of ``grader`` (the harness among it) only by importing ``grader`` or
through a manifest entry naming it, and both are flagged, as is a manifest entry naming any
other module of ``REACHED``. A folder no scanned file imports (the submission's tests, its
benchmarks) is not read: a module imported by a name built at run time is not seen.
A file that does not parse is skipped: the child cannot import it either. A ``.py`` file
the scan cannot read (a link, not a regular file, over ``FILE_CAP``), one nested too deeply
to scan, a compiled extension module, and source beyond the caps are flagged: each could
hide what the scan looks for. What no static scan sees: what a flagged ``exec`` or
run-time name then does, code it never calls by these names (``types.FunctionType`` on a
code object, ``runpy``, a module loaded from a path, pickled code), ``operator.methodcaller``,
a name imported from a module of the submission that re-exports one of ``REACHED``,
obfuscation. The threat model it is part of: docs/sandbox.md.

A file's reading depends on its bytes alone: a batch keeps it (``grader._cache.Derived``),
so a file that many submissions hold byte for byte is parsed once.
"""

from __future__ import annotations

import ast
import contextlib
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from grader._cache import Derived, content_key
from grader._errors import SubmissionFileError
from grader._model import ignored_name
from grader._text import FLAGGED, quote
from grader.submission._files import read_submission_file, submission_entries
from grader.submission._manifest import Manifest

__all__ = ["BY_NAME", "FILE_CAP", "REACHED", "tamper_findings"]

_FRAMES = "walks the call stack's frames"
_LOCALS = "reads a frame's variables"
_TRACE = "watches every call's frames"
_GC = "searches the garbage collector's objects"
_NATIVE = "reaches native code"
_EXIT = "ends the process at once"
_WRITE = "writes to a file descriptor it did not open"
_MODULES = "edits the table of imported modules"
_HARNESS = "reaches the harness's own module"
_GRADER = "reaches the grader's own code"
_MEMBERS = "reads every attribute of an object"
_CLOSURE = "reads a function's variables"
_RUN = "runs code the scan cannot read"
_BUILD = "builds code the scan cannot read"
_NAMED = "reaches an attribute named at run time"
_LOADED = "reaches a module named at run time"

# What is reached -> what the finding says. A dotted name is a module's attribute, ".name"
# an attribute of anything, a bare name a module (flagged where it is imported or loaded).
REACHED: dict[str, str] = {
    "sys._getframe": _FRAMES,
    "sys._current_frames": _FRAMES,
    "inspect.currentframe": _FRAMES,
    "inspect.stack": _FRAMES,
    "inspect.trace": _FRAMES,
    "inspect.getouterframes": _FRAMES,
    "inspect.getinnerframes": _FRAMES,
    "traceback.walk_stack": _FRAMES,
    "traceback.walk_tb": _FRAMES,
    ".f_back": _FRAMES,
    ".tb_frame": _FRAMES,
    ".gi_frame": _FRAMES,
    ".cr_frame": _FRAMES,
    ".ag_frame": _FRAMES,
    ".f_locals": _LOCALS,
    ".f_globals": _LOCALS,
    "inspect.getargvalues": _LOCALS,
    "sys.settrace": _TRACE,
    "sys.setprofile": _TRACE,
    "threading.settrace": _TRACE,
    "threading.setprofile": _TRACE,
    "gc.get_objects": _GC,
    "gc.get_referrers": _GC,
    "gc.get_referents": _GC,
    "inspect.getmembers": _MEMBERS,
    "inspect.getmembers_static": _MEMBERS,
    ".__globals__": _CLOSURE,
    ".__closure__": _CLOSURE,
    ".cell_contents": _CLOSURE,
    "builtins.exec": _RUN,
    "builtins.eval": _RUN,
    "builtins.compile": _BUILD,
    "ctypes": _NATIVE,
    "_ctypes": _NATIVE,
    "cffi": _NATIVE,
    "os._exit": _EXIT,
    "posix._exit": _EXIT,
    "os.write": _WRITE,
    "os.writev": _WRITE,
    "os.pwrite": _WRITE,
    "os.pwritev": _WRITE,
    "os.sendfile": _WRITE,
    "os.fdopen": _WRITE,
    "posix.write": _WRITE,
    "sys.modules": _MODULES,
    "sys.modules.pop": _MODULES,
    "sys.modules.popitem": _MODULES,
    "sys.modules.update": _MODULES,
    "sys.modules.setdefault": _MODULES,
    "sys.modules.clear": _MODULES,
    "sys.modules.__setitem__": _MODULES,
    "sys.modules.__delitem__": _MODULES,
    "sys.modules.__ior__": _MODULES,
    "__main__": _HARNESS,
    "grader": _GRADER,
}
_WRITES = frozenset(name for name, phrase in REACHED.items() if phrase == _WRITE)
_EDITED = "sys.modules"  # flagged where written, never where read
_MODULE_NAMES = frozenset(name for name in REACHED if "." not in name)
# Attribute names no honest code spells as a string: naming one to getattr & co. is enough
# even where the object it is asked of is unknown (frame attributes always are).
BY_NAME: dict[str, str] = {
    name.rpartition(".")[2]: name
    for name in (
        "sys._getframe",
        "sys._current_frames",
        "inspect.currentframe",
        "inspect.getouterframes",
        "inspect.getinnerframes",
        "inspect.getargvalues",
        "traceback.walk_stack",
        "traceback.walk_tb",
        "sys.settrace",
        "sys.setprofile",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "os._exit",
        "inspect.getmembers",
        "inspect.getmembers_static",
    )
}
_OPENERS = frozenset(
    {
        "os.open",
        "os.pipe",
        "os.pipe2",
        "os.dup",
        "os.dup2",
        "os.openpty",
        "pty.openpty",
        "os.memfd_create",
        "os.eventfd",
        "tempfile.mkstemp",
        "posix.open",
    }
)
_BUILTINS = frozenset(
    {"getattr", "setattr", "delattr", "vars", "__import__", "exec", "eval", "compile"}
)
_SETTERS = frozenset({"builtins.setattr", "builtins.delattr"})
_GETTERS = frozenset({"builtins.getattr", "inspect.getattr_static", *_SETTERS})
_IMPORTERS = frozenset({"builtins.__import__", "importlib.import_module", "importlib.__import__"})
_LOADERS = frozenset({*_IMPORTERS, "sys.modules.get"})
# What takes the name of an attribute or a module: flagged where that name is not a string
# constant (built at run time, the scan cannot read it), or where it is handed on uncalled.
# -> the phrase, and which argument is the name (None: every one).
_BY_RUN_TIME: dict[str, tuple[str, int | None]] = {
    **{name: (_NAMED, 1) for name in _GETTERS},
    "operator.attrgetter": (_NAMED, None),
    **{name: (_LOADED, 0) for name in _LOADERS},
}
# The modules whose attributes the scan follows: a name built at run time is flagged where it
# is looked up in one of them (``vars(sys)[name]``), and only there, as ``vars(self)[name]``
# is everyday code.
_WATCHED = frozenset(
    name.partition(".")[0] for name in (*REACHED, *_BY_RUN_TIME) if not name.startswith(".")
)
_COMPILED = (".so", ".pyd")  # extension modules: importable, unreadable to this scan
# The kit's own packages, which the starter ships (``gradekit check`` runs from them): a child
# imports the grader's own ``gradekit`` whatever copy the submission holds, so that copy
# never runs; it reaches the copy of ``grader`` (the harness among it) only by importing
# ``grader`` or by a manifest entry in it, and both are flagged. Neither is scanned.
_KIT_PACKAGES = ("grader", "gradekit")
FILE_CAP = 1024 * 1024  # one .py file: parsing takes about 100 bytes of memory a byte
_TOTAL_CAP = 8 * FILE_CAP  # every .py file together
_MOST_FILES = 1000  # .py files scanned
_MOST_NAMES = 5000  # names looked at, files and folders
_MOST_DEPTH = 16  # folders inside folders
_MOST_SHOWN = 20  # findings listed; the rest are counted


def tamper_findings(
    root: Path, manifest: Manifest | None = None, derived: Derived | None = None
) -> list[str]:
    """The tamper flags of the submission at ``root`` (and of ``manifest``'s entries, the
    modules the harness imports by name): FLAGGED findings sorted by path, line and phrase,
    each once, at most ``_MOST_SHOWN`` and one that counts the rest. ``derived``: where a
    batch keeps each file's reading (None: every file is parsed)."""
    found: set[tuple[str, int, str]] = set()
    entries = (
        (manifest.agent, manifest.tools, manifest.replay, manifest.guard, manifest.incident_test)
        if manifest
        else ()
    )
    for entry in entries:
        module = entry.partition(":")[0].partition(".")[0]
        if module in _MODULE_NAMES:
            found.add(("pyproject.toml", 0, f"{REACHED[module]} ({module})"))
    sources, overflow = _sources(root)
    by_top: dict[str, list[str]] = {}
    for relative in sources:
        by_top.setdefault(_top(relative), []).append(relative)
    # What a child can run: the packages the manifest names and, from them, every package of
    # the submission they import (a fixed point); without a manifest, everything.
    reached = sorted(
        {e.partition(":")[0].partition(".")[0] for e in entries if e} if manifest else by_top
    )
    scanned: set[str] = set()
    budget = _TOTAL_CAP
    while reached:
        top = reached.pop(0)
        if top in scanned or top not in by_top:
            continue
        scanned.add(top)
        imported: set[str] = set()
        for relative in by_top[top]:
            if relative.endswith(_COMPILED):
                found.add((relative, 0, "a compiled extension module, which the scan cannot read"))
                continue
            try:
                data = read_submission_file(root, relative, cap=min(FILE_CAP, budget))
            except SubmissionFileError:
                found.add(
                    (
                        relative,
                        0,
                        "not scanned: a link, not a regular file, or over the "
                        f"scan's caps ({FILE_CAP >> 20} MiB a file, "
                        f"{_TOTAL_CAP >> 20} MiB in all)",
                    )
                )
                continue
            budget -= len(data)
            reaches, imports = _kept_scan(data, derived)
            found.update((relative, line, phrase) for line, phrase in reaches)
            imported |= imports
        reached = sorted({*reached, *(imported - scanned)})
    if overflow:
        found.add(
            (
                "",
                0,
                f"the submission holds more than the scan reads ({_MOST_NAMES} "
                f"names, {_MOST_FILES} Python files, {_MOST_DEPTH} folders deep): "
                "the rest was not scanned",
            )
        )
    shown = [
        FLAGGED
        + (f"{quote(path)}:{line}: " if line else f"{quote(path)}: " if path else "")
        + phrase
        for path, line, phrase in sorted(found)
    ]
    if len(shown) > _MOST_SHOWN:
        more = len(shown) - _MOST_SHOWN
        shown = [
            *shown[:_MOST_SHOWN],
            f"{FLAGGED}and {more} more place(s) in the source that "
            "reach for the harness or the process",
        ]
    return shown


def _kept_scan(data: bytes, derived: Derived | None) -> tuple[list[tuple[int, str]], set[str]]:
    """``_scan`` of ``data``, as ``derived`` keeps it: read from there when a grading of this
    batch scanned the same bytes, else scanned and kept."""
    if derived is None:
        return _scan(data)
    key = content_key(_SCAN_VERSION, data)
    kept = derived.read("scan", key)
    if kept is not None:
        with contextlib.suppress(ValueError, TypeError, KeyError):  # not one: scanned again
            document = json.loads(kept)
            return (
                [(int(line), str(phrase)) for line, phrase in document["reaches"]],
                {str(name) for name in document["imports"]},
            )
    reaches, imports = _scan(data)
    derived.write(
        "scan",
        key,
        json.dumps({"reaches": reaches, "imports": sorted(imports)}, ensure_ascii=True).encode(
            "ascii"
        ),
    )
    return reaches, imports


_SCAN_VERSION = b"gradekit.scan/2"  # in each kept reading's key: what it was made with


def _scan(data: bytes) -> tuple[list[tuple[int, str]], set[str]]:
    """(line, phrase) of each reach in one file's source, and the top-level names it
    imports; neither when it does not parse."""
    try:
        tree = ast.parse(data)  # bytes: a coding declaration is honoured, as on import
    except (SyntaxError, ValueError):
        return [], set()  # the child cannot import it either
    except RecursionError:
        return [(0, "nested too deeply to scan")], set()
    try:
        scan = _Scan(tree)
    except RecursionError:
        return [(0, "nested too deeply to scan")], set()
    return scan.found, scan.imports


def _top(relative: str) -> str:
    """The top-level name a file of the submission is imported under."""
    first = relative.partition("/")[0]
    return first.removesuffix(".py") if first == relative else first


def _sources(root: Path) -> tuple[list[str], bool]:
    """The submission's ``.py`` and extension module files a child could import (sorted, at
    most ``_MOST_FILES``), and whether there was more than the caps let the scan see."""
    try:  # the submission folder itself is the grader's choice, opened as given
        top = submission_entries(root, "", most=_MOST_NAMES + 1)
    except OSError:
        return [], False
    found: list[str] = []
    left = _MOST_NAMES  # names looked at, in every folder together
    overflow = False
    todo: list[tuple[str, list[tuple[str, bool]], int]] = [("", top, 0)]
    while todo:
        folder, names, depth = todo.pop()
        overflow |= len(names) > left
        names, left = names[:left], max(left - len(names), 0)
        for name, is_folder in names:
            if ignored_name(name) or (not folder and name in _KIT_PACKAGES):
                continue
            relative = f"{folder}/{name}" if folder else name
            inner: list[tuple[str, bool]] | None = None
            if is_folder:
                with contextlib.suppress(SubmissionFileError):  # cannot be opened, or gone
                    inner = submission_entries(root, relative, most=left + 1)
            if inner is None:  # a file, a link, or a folder it cannot list
                if name.endswith((".py", *_COMPILED)):
                    found.append(relative)
                continue
            if depth < _MOST_DEPTH:
                todo.append((relative, inner, depth + 1))
            else:
                overflow |= bool(inner)
    overflow |= len(found) > _MOST_FILES
    return sorted(found)[:_MOST_FILES], overflow


def _nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree``, in ``ast.walk``'s order (breadth first, fields in order), by a
    loop over a list rather than ``ast.walk``'s generators: the scan's largest cost."""
    found, at = [tree], 0
    while at < len(found):
        node = found[at]
        at += 1
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                found.append(value)
            elif isinstance(value, list):
                found.extend(item for item in value if isinstance(item, ast.AST))
    return found


class _Scan:
    """One file's reaches, in ``found``: the names it binds first, then every node visited
    once, from a flat list rather than by recursion (an expression too deep to resolve
    raises ``RecursionError``, which ``_scan`` flags)."""

    def __init__(self, tree: ast.Module) -> None:
        self.found: list[tuple[int, str]] = []
        self.names: dict[str, str] = {}  # a name the file binds -> the dotted name it stands for
        self.opened: set[str] = set()  # names and attribute names bound to its own descriptors
        self.imports: set[str] = set()  # the top-level names of its absolute imports
        self._resolved: dict[int, str | None] = {}  # id(node) -> resolve(node): once a node
        self._called: set[int] = set()  # id(node): a call's function, or a plain alias's value
        self._rebound: set[str] = set()  # names assigned, deleted, defined or taken as arguments
        nodes = _nodes(tree)
        for node in nodes:  # imports first: they bind wherever they stand
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self._bind_import(node)
            elif isinstance(node, ast.Call):
                self._called.add(id(node.func))
            elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                self._rebound.add(node.id)
            elif isinstance(node, ast.arg):
                self._rebound.add(node.arg)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self._rebound.add(node.name)
        for node in nodes:
            if (
                isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr))
                and node.value is not None
            ):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                self._bind_value(targets, node.value)
                if all(isinstance(t, ast.Name) for t in targets):  # ga = getattr: followed
                    self._called.add(id(node.value))
        self._resolved.clear()  # every name is bound now
        self._forwarded = _forwarded(tree.body)
        visits: dict[type[ast.AST], Callable[[Any], None]] = {
            ast.Import: self._visit_import,
            ast.ImportFrom: self._visit_import_from,
            ast.Name: self._visit_name,
            ast.Attribute: self._visit_attribute,
            ast.Subscript: self._visit_subscript,
            ast.Call: self._visit_call,
        }
        for node in nodes:
            visit = visits.get(type(node))
            if visit is not None:
                visit(node)

    # -- what names stand for --------------------------------------------------------------

    def _bind_import(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            self.imports.update(alias.name.partition(".")[0] for alias in node.names)
            for alias in node.names:
                top = alias.name.partition(".")[0]
                self.names[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            self.imports.add(node.module.partition(".")[0])
            for alias in node.names:
                if alias.name == "*":
                    self.names.update(
                        (name[len(node.module) + 1 :], name)
                        for name in REACHED
                        if name.rpartition(".")[0] == node.module
                    )
                else:
                    self.names[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def _bind_value(self, targets: Iterable[ast.expr], value: ast.expr) -> None:
        if self._opens(value):
            self.opened.update(name for target in targets for name in _bound(target))
        elif (dotted := self.resolve(value)) is not None:
            self.names.update((t.id, dotted) for t in targets if isinstance(t, ast.Name))

    def resolve(self, node: ast.expr | None) -> str | None:
        """The dotted name ``node`` stands for (a module, or an attribute of one), if any."""
        if node is None:
            return None
        if id(node) not in self._resolved:  # a long chain is resolved once, not once a link
            self._resolved[id(node)] = self._resolve(node)
        return self._resolved[id(node)]

    def _resolve(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return self.names.get(node.id) or (
                f"builtins.{node.id}"
                if node.id in _BUILTINS
                else "builtins"
                if node.id == "__builtins__"
                else None
            )
        reached = self._reach(node)
        if reached is not None:
            base = self.resolve(reached[0])
            return f"{base}.{reached[1]}" if base else None
        return self._module(node)

    def _reach(self, node: ast.expr | None) -> tuple[ast.expr, str] | None:
        """(object, attribute name) when ``node`` is an attribute access by any spelling:
        ``x.name``, ``getattr(x, "name")`` and its kin, ``vars(x)["name"]``, ``x.__dict__[...]``."""
        if isinstance(node, ast.Attribute):
            return node.value, node.attr
        if isinstance(node, ast.Call) and node.args:
            func, args = node.func, node.args
            if self.resolve(func) in _GETTERS and len(args) >= 2:
                return _named(args[0], args[1])
            if isinstance(func, ast.Attribute) and func.attr == "__getattribute__":
                return _named(args[0], args[1]) if len(args) >= 2 else _named(func.value, args[0])
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "get"
                and self.resolve(func.value) == "builtins"
            ):  # __builtins__.get("exec")
                return _named(func.value, args[0])
        if isinstance(node, ast.Subscript):
            keyed = self._keyed(node)
            if keyed is not None:
                return _named(keyed[0], node.slice)
        return None

    def _keyed(self, node: ast.Subscript) -> tuple[ast.expr, str] | None:
        """(object, how) when ``node`` looks an attribute up by key: ``vars(x)[key]``,
        ``x.__dict__[key]``, ``__builtins__[key]`` (a dict outside ``__main__``)."""
        inner = node.value
        if (
            isinstance(inner, ast.Call)
            and len(inner.args) == 1
            and self.resolve(inner.func) == "builtins.vars"
        ):
            return inner.args[0], "builtins.vars"
        if isinstance(inner, ast.Attribute) and inner.attr == "__dict__":
            return inner.value, ".__dict__"
        if self.resolve(inner) == "builtins":
            return inner, "builtins"
        return None

    def _module(self, node: ast.expr | None) -> str | None:
        """The module ``__import__("m")``, ``importlib.import_module("m")`` or
        ``sys.modules["m"]`` (``.get("m")``) loads."""
        if isinstance(node, ast.Call) and node.args and self.resolve(node.func) in _LOADERS:
            return _text(node.args[0])
        if isinstance(node, ast.Subscript) and self.resolve(node.value) == "sys.modules":
            return _text(node.slice)
        return None

    def _opens(self, node: ast.expr) -> bool:
        """Whether ``node`` is a call that returns a descriptor of the file's own."""
        return isinstance(node, ast.Call) and (
            self.resolve(node.func) in _OPENERS
            or (isinstance(node.func, ast.Attribute) and node.func.attr == "fileno")
        )

    def _opened(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Subscript):
            return self._opened(node.value)
        if isinstance(node, ast.Name):
            return node.id in self.opened
        if isinstance(node, ast.Attribute):
            return node.attr in self.opened
        return self._opens(node)

    # -- what is flagged -------------------------------------------------------------------

    def _flag(self, node: ast.AST, name: str, phrase: str | None = None) -> None:
        self.found.append((getattr(node, "lineno", 0), f"{phrase or REACHED[name]} ({name})"))

    def _handed_on(self, node: ast.Name | ast.Attribute) -> None:
        """Flags ``getattr`` & co. used but not called (``map(getattr, ...)``,
        ``partial(getattr, x)``): the name they will be given is not in the source."""
        if id(node) not in self._called and isinstance(node.ctx, ast.Load):
            dotted = self.resolve(node)
            if dotted in _BY_RUN_TIME:
                self._flag(node, dotted, _BY_RUN_TIME[dotted][0])

    def _named_at_run_time(self, node: ast.Call, func: str | None) -> None:
        """Flags a call of ``getattr`` & co. whose name is not a string constant."""
        args = node.args
        if func in _BY_RUN_TIME:
            phrase, at = _BY_RUN_TIME[func]
            names = args if at is None else args[at : at + 1]
            spelled = (
                bool(names)
                and all(_spelled(name) for name in names)
                and not any(isinstance(arg, ast.Starred) for arg in args)
            )
            if not spelled and not (id(node) in self._forwarded and self._forwards(node)):
                self._flag(node, func, phrase)
        elif (
            isinstance(node.func, ast.Attribute)
            and args
            and (
                node.func.attr == "__getattribute__"
                or (node.func.attr == "get" and self.resolve(node.func.value) == "builtins")
            )
        ):
            name = args[1] if node.func.attr == "__getattribute__" and len(args) >= 2 else args[0]
            if not _spelled(name):
                self._flag(
                    node, "builtins" if node.func.attr == "get" else ".__getattribute__", _NAMED
                )

    def _forwards(self, node: ast.Call) -> bool:
        """Whether ``node``, in a module's own ``__getattr__`` (``_forwarded``), hands the
        name it was asked for to ``getattr`` of a module this file imports, one the scan does
        not watch (``lab``'s own ``__init__`` does): that name is spelled, and read, where the
        attribute is asked for."""
        base = node.args[0]
        if not isinstance(base, ast.Name) or base.id in self._rebound:
            return False
        dotted = self.names.get(base.id)  # bound by an import, then: nothing else binds it
        return (
            self.resolve(node.func) == "builtins.getattr"
            and dotted is not None
            and dotted.partition(".")[0] not in _WATCHED
        )

    def _reached(
        self, node: ast.AST, base: ast.expr | None, attribute: str, *, written: bool, spelled: bool
    ) -> None:
        """``base.attribute`` is reached at ``node``; ``spelled``: by a string constant."""
        module = self.resolve(base) if base is not None else None
        dotted = f"{module}.{attribute}" if module else ""
        if dotted in REACHED and dotted not in _WRITES and dotted != _EDITED:
            self._flag(node, dotted)
        elif f".{attribute}" in REACHED:
            self._flag(node, f".{attribute}")
        elif spelled and not module and attribute in BY_NAME:
            self._flag(node, BY_NAME[attribute])
        if written and dotted == _EDITED:
            self._flag(node, _EDITED)

    def _loaded(self, node: ast.AST, module: str | None) -> None:
        if module and module.partition(".")[0] in _MODULE_NAMES:
            self._flag(node, module.partition(".")[0])

    def _visit_import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._loaded(node, alias.name)

    def _visit_import_from(self, node: ast.ImportFrom) -> None:
        if not node.level:
            self._loaded(node, node.module)

    def _visit_name(self, node: ast.Name) -> None:
        dotted = self.resolve(node)  # a name the file binds, or a builtin (exec)
        if (
            isinstance(node.ctx, ast.Load)
            and dotted in REACHED
            and "." in dotted
            and dotted not in _WRITES
            and dotted != _EDITED
        ):
            self._flag(node, dotted)
        self._handed_on(node)

    def _visit_attribute(self, node: ast.Attribute) -> None:
        self._reached(
            node,
            node.value,
            node.attr,
            spelled=False,
            written=isinstance(node.ctx, (ast.Store, ast.Del)),
        )
        self._handed_on(node)

    def _visit_subscript(self, node: ast.Subscript) -> None:
        written = isinstance(node.ctx, (ast.Store, ast.Del))
        reached = self._reach(node)
        if reached is not None:  # vars(x)["name"], x.__dict__["name"]
            self._reached(node, *reached, written=written, spelled=True)
        elif written and self.resolve(node.value) == _EDITED:
            self._flag(node, _EDITED)
        elif not _spelled(node.slice):  # a key built at run time
            keyed = self._keyed(node)
            base = self.resolve(keyed[0]) if keyed is not None else None
            if keyed is not None and base and base.partition(".")[0] in _WATCHED:
                self._flag(node, keyed[1], _NAMED)  # vars(sys)[name]
            elif self.resolve(node.value) == "sys.modules":
                self._flag(node, "sys.modules", _LOADED)  # sys.modules[name]
        self._loaded(node, self._module(node))

    def _visit_call(self, node: ast.Call) -> None:
        func = self.resolve(node.func)
        reached = self._reach(node)
        if reached is not None:
            self._reached(node, *reached, written=func in _SETTERS, spelled=True)
        if func == "operator.attrgetter":
            for attribute in (part for arg in node.args for part in (_text(arg) or "").split(".")):
                self._reached(node, None, attribute, written=False, spelled=True)
        self._named_at_run_time(node, func)
        self._loaded(node, self._module(node))
        if func in _WRITES and not (node.args and self._opened(node.args[0])):
            self._flag(node, func)


def _text(node: ast.expr) -> str | None:
    """The value of a string constant, else None."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _spelled(name: ast.expr) -> bool:
    """Whether an attribute's or a module's name is in the source: a string constant, or the
    file's own ``__name__``."""
    return _text(name) is not None or (isinstance(name, ast.Name) and name.id == "__name__")


def _forwarded(body: list[ast.stmt]) -> set[int]:
    """id(call) of each ``getattr(module, name)`` in a module's own ``__getattr__(name)``
    (PEP 562: at the top, or under an ``if``, ``try`` or ``with`` there) that hands on the name
    it was asked for, never rebound there; ``_Scan._forwards`` looks at the module."""
    found: set[int] = set()
    todo = list(body)
    while todo:
        statement = todo.pop()
        if isinstance(statement, (ast.If, ast.With, ast.AsyncWith)):
            todo.extend(statement.body)
            todo.extend(getattr(statement, "orelse", []))
        elif isinstance(statement, (ast.Try, ast.TryStar)):
            todo.extend([*statement.body, *statement.orelse, *statement.finalbody])
            todo.extend(line for handler in statement.handlers for line in handler.body)
        elif isinstance(statement, ast.FunctionDef) and statement.name == "__getattr__":
            params = [*statement.args.posonlyargs, *statement.args.args]
            nodes = _nodes(statement)
            if not params or any(  # rebound, or another scope's name of the same spelling
                (
                    isinstance(node, ast.Name)
                    and node.id == params[0].arg
                    and not isinstance(node.ctx, ast.Load)
                )
                or (
                    isinstance(node, ast.arg)
                    and node.arg == params[0].arg
                    and node is not params[0]
                )
                for node in nodes
            ):
                continue
            found.update(
                id(node)
                for node in nodes
                if isinstance(node, ast.Call)
                and len(node.args) in (2, 3)
                and not node.keywords
                and not any(isinstance(a, ast.Starred) for a in node.args)
                and isinstance(node.args[1], ast.Name)
                and node.args[1].id == params[0].arg
            )
    return found


def _named(base: ast.expr, name: ast.expr) -> tuple[ast.expr, str] | None:
    text = _text(name)
    return None if text is None else (base, text)


def _bound(target: ast.expr) -> Iterator[str]:
    """The names and attribute names an assignment to ``target`` binds."""
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Attribute):
        yield target.attr
    elif isinstance(target, ast.Starred):
        yield from _bound(target.value)
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _bound(element)
