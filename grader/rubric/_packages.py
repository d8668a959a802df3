"""The packages a lab may import: the rubric's ``[packages]``, an import name and the pip
requirement that installs it, and how the grader installs one it lacks.

What a grading does when the agent cannot import one is ``grader.grading._packages``'s.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
import shlex

__all__ = [
    "IMPORT_NAME",
    "KIT_MODULES",
    "SDK_EXTRA",
    "install_command",
    "requirement_key",
    "sdk_requirements",
]

IMPORT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a top-level module: a [packages] key
KIT_MODULES = frozenset({"gradekit", "grader"})  # the grader's own: never a package to list
SDK_EXTRA = "sdk"  # gradekit[sdk]: the official SDKs the default rubric allows

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_SPECIFIER = r"(?:===|==|!=|~=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+"
# A pip requirement as a [packages] value may write it: a project, its extras, its versions.
# No URL, no environment marker, no pip option: setup.sh hands it to pip as it is.
_REQUIREMENT = re.compile(
    rf"\s*(?P<name>{_NAME})\s*(?:\[\s*(?P<extras>{_NAME}(?:\s*,\s*{_NAME})*)\s*\])?"
    rf"\s*(?P<specifiers>{_SPECIFIER}(?:\s*,\s*{_SPECIFIER})*)?\s*"
)


def requirement_key(requirement: str) -> tuple[str, frozenset[str], frozenset[str]] | None:
    """A pip requirement as something to compare: its normalised project name, extras and
    version specifiers (in any order, without spaces); None when it is not one."""
    found = _REQUIREMENT.fullmatch(requirement)
    if found is None:
        return None
    name = re.sub(r"[-_.]+", "-", found["name"]).lower()
    extras = frozenset(e.strip().lower() for e in (found["extras"] or "").split(",") if e.strip())
    specifiers = frozenset(
        re.sub(r"\s+", "", s) for s in (found["specifiers"] or "").split(",") if s.strip()
    )
    return name, extras, specifiers


@functools.cache
def sdk_requirements() -> frozenset[tuple[str, frozenset[str], frozenset[str]]]:
    """The requirements of this gradekit's ``sdk`` extra, from its installed metadata (none
    where it is not installed with its metadata, as when it runs from a source tree)."""
    try:
        requires = importlib.metadata.requires("gradekit") or []
    except importlib.metadata.PackageNotFoundError:
        return frozenset()
    extra = re.compile(rf"""extra\s*==\s*["']{SDK_EXTRA}["']""")
    keys = (
        requirement_key(text)
        for text, _, marker in (line.partition(";") for line in requires)
        if extra.search(marker)
    )
    return frozenset(key for key in keys if key is not None)


def install_command(requirement: str) -> str:
    """How the grader installs a package the rubric lists: the kit's ``sdk`` extra when the
    requirement is exactly one of it, else the rubric's requirement itself."""
    key = requirement_key(requirement)
    if key is not None and key in sdk_requirements():
        return f"pip install 'gradekit[{SDK_EXTRA}]'"
    return f"pip install {shlex.quote(requirement.strip())}"
