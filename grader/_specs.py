"""One loader for ``package.module:attr`` specs: agents, tool registries, provider factories
and the instructor's custom checks all come in through ``load_spec``.

The rule, everywhere: the spec's folder (a submission's root, a rubric's folder) is first
on ``sys.path`` while it is imported, and ``sys.path`` is as it was afterwards. A package
the folder holds wins over one of the same name imported earlier from elsewhere: a
``gradekit run --root submissions/carol`` runs carol's ``lab``, not whichever ``lab`` this
process (or the environment's editable install) met first. The kit's own packages are the
exception: ``gradekit`` and ``grader`` are always this grader's, whatever copy the folder
ships, since the grader trusts only its own code.
"""

from __future__ import annotations

import contextlib
import importlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from gradekit import GradekitError

__all__ = ["SPEC", "imports_from", "load_spec"]

SPEC = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")
_KIT = frozenset({"gradekit", "grader"})


@contextlib.contextmanager
def imports_from(folder: Path) -> Iterator[None]:
    """``folder`` first on ``sys.path`` for the block (a command that imports and then runs a
    submission's code keeps it there while the code runs); removed again afterwards."""
    entry = str(folder.resolve())
    added = entry not in sys.path
    if added:
        sys.path.insert(0, entry)
    try:
        yield
    finally:
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove(entry)


def load_spec(spec: str, *, folder: Path, where: str, error: type[GradekitError]) -> object:
    """The object ``spec`` (``package.module:attr``) names, imported from ``folder``.

    ``where`` says where the spec was written (``agent = in [tool.gradekit]``, ``--provider``);
    every failure is an ``error`` naming it and the fix.
    """
    if not SPEC.fullmatch(spec):
        raise error(f'{where}: "{spec}" must look like "package.module:function"')
    module_name, _, attr = spec.partition(":")
    with imports_from(folder):
        _forget_shadowed(module_name.partition(".")[0], folder.resolve())
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # the imported code may fail in any way
            raise error(
                f"{where}: importing {module_name} failed ({type(exc).__name__}: {exc}); put "
                f"{module_name.replace('.', '/')}.py in {folder} and make it import cleanly"
            ) from exc
    value = getattr(module, attr, None)
    if value is None:
        raise error(f"{where}: {module_name} defines no {attr!r}; define it or fix the name")
    return value


def _forget_shadowed(top: str, folder: Path) -> None:
    """Drop ``top`` (and its submodules) from ``sys.modules`` when ``folder`` holds a package
    or module of that name but the loaded one came from elsewhere."""
    if top in _KIT or top not in sys.modules:
        return
    if not ((folder / top).is_dir() or (folder / f"{top}.py").is_file()):
        return
    if any(_inside(Path(place), folder) for place in _places(sys.modules[top])):
        return
    for name in [n for n in sys.modules if n == top or n.startswith(f"{top}.")]:
        del sys.modules[name]


def _places(module: object) -> list[str]:
    origin = getattr(module, "__file__", None)
    return [origin] if origin else list(getattr(module, "__path__", []))


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder)
