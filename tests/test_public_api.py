"""The public API lives in one place and is documented."""

from __future__ import annotations

import inspect

import grader
import lab
from lab import _exceptions


def isort_style(name: str) -> tuple[int, str]:
    """CONSTANTS, then Classes, then functions: the order ruff's RUF022 keeps."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_all_is_sorted_and_every_name_exists() -> None:
    for package in (lab, grader):
        assert list(package.__all__) == sorted(package.__all__, key=isort_style)
        for name in package.__all__:
            assert hasattr(package, name), f"{package.__name__}.{name}"


def test_every_public_name_has_a_docstring() -> None:
    for name in lab.__all__:
        value = getattr(lab, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"lab.{name} has no docstring"


def test_every_exception_is_in_one_tree_drawn_in_the_module_docstring() -> None:
    errors = [getattr(lab, n) for n in lab.__all__
              if inspect.isclass(getattr(lab, n)) and issubclass(getattr(lab, n), BaseException)]
    assert {e.__name__ for e in errors} == set(_exceptions.__all__)
    for error in errors:
        assert issubclass(error, lab.GradekitError)
        assert error.__name__ in (_exceptions.__doc__ or "")
