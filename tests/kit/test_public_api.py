"""The public API lives in one place, is documented, and the layout keeps each part home.

It reads ``gradekit._exceptions`` on purpose: the module the public errors are defined and
documented in."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import gradekit
import grader
import lab
from gradekit import _exceptions

REPO = Path(__file__).resolve().parents[2]


def isort_style(name: str) -> tuple[int, str]:
    """CONSTANTS, then Classes, then functions: the order ruff's RUF022 keeps."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_all_is_sorted_and_every_name_exists() -> None:
    for package in (gradekit, grader):
        assert list(package.__all__) == sorted(package.__all__, key=isort_style)
        for name in package.__all__:
            assert hasattr(package, name), f"{package.__name__}.{name}"


def test_every_public_name_has_a_docstring() -> None:
    for name in gradekit.__all__:
        value = getattr(gradekit, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"gradekit.{name} has no docstring"


def test_public_names_report_gradekit_as_their_home() -> None:
    """As httpx does: a traceback or a repr says ``gradekit.CassetteMiss``, not the private
    module it happens to be written in."""
    homes = {
        getattr(gradekit, name).__module__
        for name in gradekit.__all__
        if inspect.isclass(getattr(gradekit, name)) or inspect.isfunction(getattr(gradekit, name))
    }
    assert homes == {"gradekit"}
    assert repr(gradekit.Replay) == "<class 'gradekit.Replay'>"


def test_the_lab_re_exports_what_students_import() -> None:
    """``from lab import Replay`` and ``replay = "lab:Replay"`` keep working."""
    assert lab.__all__ == gradekit.__all__
    for name in gradekit.__all__:
        assert getattr(lab, name) is getattr(gradekit, name), name


def test_every_exception_is_in_one_tree_drawn_in_the_module_docstring() -> None:
    errors = [
        getattr(gradekit, n)
        for n in gradekit.__all__
        if inspect.isclass(getattr(gradekit, n)) and issubclass(getattr(gradekit, n), BaseException)
    ]
    assert {e.__name__ for e in errors} == set(_exceptions.__all__)
    for error in errors:
        assert issubclass(error, gradekit.GradekitError)
        assert error.__name__ in (_exceptions.__doc__ or "")


def _imported_packages(path: Path) -> set[str]:
    """The top-level package of every import in one module, however it is spelt."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.partition(".")[0])
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.add(str(node.args[0].value).partition(".")[0])
    return found


def test_the_kit_and_the_grader_never_import_the_students_lab() -> None:
    """``lab`` is the student's: a grader that imported it would grade with whatever the
    student (or a submission on the path) put there."""
    modules = sorted((REPO / "grader").rglob("*.py")) + sorted((REPO / "gradekit").rglob("*.py"))
    assert len(modules) > 30
    importing = [p.relative_to(REPO).as_posix() for p in modules if "lab" in _imported_packages(p)]
    assert importing == []


def test_the_kit_never_imports_the_grader() -> None:
    """gradekit is the library students run on; the grader builds on it, never the reverse."""
    modules = sorted((REPO / "gradekit").rglob("*.py"))
    assert [p.name for p in modules if "grader" in _imported_packages(p)] == []


def test_the_lab_holds_only_the_students_files() -> None:
    """A newcomer finds their room from the folder names alone."""
    assert sorted(p.name for p in (REPO / "lab").glob("*.py")) == [
        "__init__.py",
        "agent.py",
        "llm_provider.py",
        "tools.py",
    ]
