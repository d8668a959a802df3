"""The grader's rooms: each package imports only the rooms its docstring names, and no
module imports itself back through others.

Every import counts: at the top, inside a function, under ``TYPE_CHECKING``. A room's
allowed rooms are the last paragraph of its ``__init__`` docstring (``May import: ...``),
so the list a reader sees is the list this test holds the code to.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

GRADER = Path(__file__).resolve().parents[2] / "grader"
BASE = "base"  # the top-level modules every room may import: grader._model, _errors, ...
API = "api"  # grader/__init__.py and __main__.py: above every room
_MAY = re.compile(r"^May import: (?P<rooms>[a-z_, \n]+)\.\s*\Z", re.MULTILINE)


@functools.cache
def rooms() -> dict[str, frozenset[str]]:
    """Each package of the grader -> the rooms its docstring allows it to import."""
    found: dict[str, frozenset[str]] = {}
    for init in sorted(GRADER.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text("utf-8"))) or ""
        match = _MAY.search(doc)
        assert match, f"{init}: its docstring must end with 'May import: room, room.'"
        found[init.parent.name] = frozenset(
            r.strip() for r in match["rooms"].replace("\n", " ").split(",") if r.strip()
        )
    return found


def module_name(path: Path) -> str:
    parts = path.relative_to(GRADER.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every grader module or package ``path`` imports, wherever the import stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "grader")
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and node.module.split(".")[0] == "grader"
        ):
            folder = GRADER.parent / node.module.replace(".", "/")
            # ``from grader.batch import _worker`` imports a module named as an attribute,
            # and the package first: its door, which imports the rest of the room
            modules = {a.name for a in node.names if (folder / f"{a.name}.py").is_file()}
            found.update(f"{node.module}.{name}" for name in modules)
            found.add(node.module)
    return found


@functools.cache
def _graph() -> tuple[tuple[str, frozenset[str]], ...]:
    return tuple((module_name(p), frozenset(imports(p))) for p in sorted(GRADER.rglob("*.py")))


def graph() -> dict[str, set[str]]:
    """grader module -> the grader modules and packages it imports (a copy to edit)."""
    return {module: set(targets) for module, targets in _graph()}


def room_of(module: str, known: Iterable[str]) -> str:
    parts = module.split(".")
    if module in ("grader", "grader.__main__"):
        return API
    return parts[1] if len(parts) > 1 and parts[1] in known else BASE


def wrong_way(
    edges: Mapping[str, Iterable[str]], allowed: Mapping[str, frozenset[str]]
) -> list[str]:
    """Each import that leaves its room for one the room may not import."""
    problems = []
    for source, targets in sorted(edges.items()):
        mine = room_of(source, allowed)
        for target in sorted(targets):
            theirs = room_of(target, allowed)
            if theirs == mine or mine == API:
                continue
            if mine == BASE or theirs == API or theirs not in allowed[mine] | {BASE}:
                problems.append(f"{source} ({mine}) imports {target} ({theirs})")
    return problems


def cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Import cycles among modules (a package counts as its ``__init__``)."""
    found: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in edges:
                continue
            if state.get(nxt) == 1:
                found.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return found


def test_every_room_imports_only_the_rooms_below_it_that_it_names() -> None:
    allowed = rooms()
    assert set(allowed) == {
        "submission",
        "sandbox",
        "recordings",
        "regression",
        "rubric",
        "scoring",
        "outputs",
        "ledger",
        "assets",
        "grading",
        "batch",
        "handout",
        "dashboard",
        "cli",
    }
    assert wrong_way(graph(), allowed) == []


def test_the_map_names_every_room_and_every_base_module() -> None:
    """grader/__init__.py's map, read by a newcomer first, misses no room and no module of
    the base (a module added to the base, or a room, is added to the map too)."""
    doc = ast.get_docstring(ast.parse((GRADER / "__init__.py").read_text("utf-8"))) or ""
    named = set(re.findall(r"[A-Za-z_]+", doc))
    base = {p.stem for p in GRADER.glob("_*.py") if p.stem not in ("__init__", "__main__")}
    assert sorted((set(rooms()) | base) - named) == []


def test_the_rooms_form_layers_with_no_way_back_up() -> None:
    allowed = rooms()
    room_edges = {room: set(names) - {BASE} for room, names in allowed.items()}
    assert cycles(room_edges) == []
    assert all(
        BASE in names and API not in names and set(names) <= {BASE, *allowed}
        for names in allowed.values()
    )


def test_no_module_imports_itself_back() -> None:
    edges = graph()
    # within a room a module imports its siblings by their own names; through the room's
    # door (its __init__, which imports them all) it would close a circle
    inward = [
        f"{s} imports its own room {t}"
        for s, targets in edges.items()
        for t in targets
        if "." in s and s.startswith(t + ".") and t != "grader"
    ]
    assert inward == []
    assert cycles(edges) == []


@pytest.mark.parametrize(
    ("source", "target"),
    [
        ("grader.scoring._checks", "grader.outputs"),  # scoring quoting through a report
        ("grader.outputs._gradebook", "grader.batch"),  # an output asking the batch for a row
        ("grader.outputs._report", "grader.ledger"),  # an output reading the ledger
        ("grader.ledger._ledger", "grader.assets"),  # the grades ledger reading the asset store
        ("grader.assets._assets", "grader.grading"),  # the asset store running a grading
        ("grader.regression._sets", "grader.rubric"),  # the set format asking the rubric
        ("grader.rubric._rubric", "grader.grading"),  # the rubric judging a missing package
        ("grader._model", "grader.scoring"),  # a base module importing a room
        ("grader.sandbox._sandbox", "grader"),  # a room importing the whole grader
    ],
)
def test_a_wrong_way_import_put_back_is_caught(source: str, target: str) -> None:
    edges = graph()
    assert source in edges and wrong_way(edges, rooms()) == []
    edges[source] = {*edges[source], target}
    assert wrong_way(edges, rooms()) == [
        f"{source} ({room_of(source, rooms())}) imports {target} ({room_of(target, rooms())})"
    ]


def test_a_circle_put_back_is_caught() -> None:
    edges = graph()
    edges["grader.scoring._traces"] = {*edges["grader.scoring._traces"], "grader.scoring._checks"}
    assert any(c[0] == c[-1] and "grader.scoring._traces" in c for c in cycles(edges))


def test_the_kit_never_imports_the_grader() -> None:
    kit = GRADER.parent / "gradekit"
    reaching = [
        str(p.relative_to(kit.parent))
        for p in sorted(kit.rglob("*.py"))
        if any(name.split(".")[0] == "grader" for name in imports(p))
    ]
    assert reaching == []


def test_a_module_imported_from_its_package_imports_the_package_too(tmp_path: Path) -> None:
    """``from grader.batch import _worker`` runs grader/batch/__init__.py first: inside the
    batch room that closes a circle through the door, which the inward check then sees."""
    module = tmp_path / "m.py"
    module.write_text("from grader.batch import _worker\n", "utf-8")
    assert imports(module) == {"grader.batch", "grader.batch._worker"}
    edges = graph()
    edges["grader.batch._zygote"] = {*edges["grader.batch._zygote"], *imports(module)}
    assert "grader.batch" in edges["grader.batch._zygote"]


def test_every_room_ships_in_the_distribution() -> None:
    """An installed (not editable) grader has every room: pyproject.toml lists each."""
    import tomllib

    listed = tomllib.loads((GRADER.parent / "pyproject.toml").read_text("utf-8"))["tool"][
        "setuptools"
    ]["packages"]
    assert sorted(f"grader.{room}" for room in rooms()) == sorted(
        name for name in listed if name.startswith("grader.") and name != "grader.kit_rubric"
    )
