"""The kit's modules import one another without a circle, and the grader and the
benchmarks reach the kit only through ``gradekit`` and ``gradekit.internal``.

Every import counts: at the top, inside a function, under ``TYPE_CHECKING``. A circle
hidden behind a lazy import is still a circle: it only moves the failure to run time.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping, Set
from pathlib import Path

import gradekit
import gradekit.internal

REPO = Path(__file__).resolve().parents[2]
KIT = REPO / "gradekit"
# The kit's users inside this repository: they may import gradekit and gradekit.internal.
USERS = ("grader", "bench", "lab")


def module_name(path: Path) -> str:
    """``gradekit/_http/transport.py`` -> ``gradekit._http.transport``; a package is its name."""
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, name: str | None = None) -> Iterator[str]:
    """Every module ``path`` (the module ``name``) imports, spelt absolutely, wherever the
    import stands.

    ``from package import name`` yields ``package.name`` as well as ``package``: ``name``
    may be a module (``from gradekit import _live``).
    """
    name = name or module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)


def kit_graph() -> dict[str, set[str]]:
    """Each kit module -> the kit modules it imports (itself excepted)."""
    files = {module_name(p): p for p in sorted(KIT.rglob("*.py"))}
    return {
        name: {m for m in imported_modules(path) if m in files and m != name}
        for name, path in files.items()
    }


def find_cycle(graph: Mapping[str, Set[str]]) -> list[str] | None:
    """An import circle in ``graph``, as the path that closes it (first node repeated last),
    or None when there is none."""
    state: dict[str, int] = {}  # 1: on the current path; 2: done, no circle through it
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (found := visit(target)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)) is not None:
            return found
    return None


def test_the_cycle_finder_finds_a_circle_and_only_a_circle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_every_kind_of_import_counts(tmp_path: Path) -> None:
    """A lazy import, one under TYPE_CHECKING and a relative one are edges like any other."""
    module = tmp_path / "transport.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import cassette\n"
        "from .. import _store\n"
        "if TYPE_CHECKING:\n"
        "    from gradekit._recorder import Recorder\n"
        "def later() -> None:\n"
        "    import gradekit._replay\n",
        "utf-8",
    )
    found = set(imported_modules(module, "gradekit._http.transport"))
    assert {
        "gradekit._http.cassette",
        "gradekit._store",
        "gradekit._recorder",
        "gradekit._replay",
    } <= found
    assert "gradekit._live" in kit_graph()["gradekit"]  # lazy, in the package's __getattr__


def test_no_kit_module_imports_itself_back_through_others() -> None:
    graph = kit_graph()
    assert len(graph) > 20
    assert find_cycle(graph) is None


def _private_kit_imports(path: Path) -> list[str]:
    """The private kit modules (``gradekit._*``) ``path`` imports."""
    found = []
    for module in imported_modules(path):
        parts = module.split(".")
        private = [part for part in parts[1:] if part.startswith("_") and part[-2:] != "__"]
        if parts[0] == "gradekit" and private:  # ``from gradekit import __all__`` is no module
            found.append(module)
    return found


def test_the_grader_reaches_the_kit_only_through_its_surfaces() -> None:
    """``gradekit`` for what students use too, ``gradekit.internal`` for the rest."""
    files = [p for user in USERS for p in sorted((REPO / user).rglob("*.py"))]
    assert len(files) > 50
    reaching = {f"{p.relative_to(REPO)}: {m}" for p in files for m in _private_kit_imports(p)}
    assert reaching == set()


def test_the_internal_surface_is_exactly_what_its_users_import() -> None:
    used: set[str] = set()
    for user in USERS:
        for path in (REPO / user).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module == "gradekit.internal":
                    used |= {alias.name for alias in node.names}
    assert used == set(gradekit.internal.__all__)  # an unused name is taken out of it
    assert set(gradekit.internal.__all__).isdisjoint(gradekit.__all__)  # public: from gradekit
    for name in gradekit.internal.__all__:
        assert hasattr(gradekit.internal, name), name
