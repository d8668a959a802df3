"""What a grading does when the agent cannot import a package the grader lacks.

The rubric lists the packages a lab may import (``[packages]``: an import name and the pip
requirement that installs it). A submission whose agent cannot import a package is not
graded at all, never scored as if it had failed every case: its row says which package,
why and how to install it. Whose fault that is decides the row's status:

- a package the rubric lists, or a module of Python's standard library: the grader's
  environment lacks it. Status ``error``: install it for the grader and grade again; the
  submission needs no change.
- a package the rubric does not list: the submission imports what the lab does not allow.
  Status ``ungradable``: the import must go (or be committed, when it is a module of the
  submission's own that was never shipped), or the instructor allows the package.

A module of the submission's own (its top-level name is a folder or ``.py`` file of the
submission, or the package the manifest's agent lives in) stays what it was: an import
error of the submission's, graded. So does an import the grader's environment could in
fact make (the child's word that a module was missing is a claim): only a package that is
really absent from the folders the sandbox imports from is a missing package.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Literal

from gradekit import GradekitError
from gradekit.internal import commands
from grader._exits import EXIT_FAILED
from grader._model import RunResult
from grader.rubric import KIT_MODULES, SDK_EXTRA, install_command
from grader.sandbox import package_folders
from grader.submission import Manifest

__all__ = ["MissingPackage", "Status", "missing_package"]

Status = Literal["error", "ungradable"]


class MissingPackage(GradekitError):
    """The agent could not import a package that is not the submission's own: no grade.

    ``status`` is the gradebook row's (``error``: the grader's environment must be fixed
    and the submission graded again; ``ungradable``: the submission cannot be graded as it
    stands), judged against the rubric's ``[packages]``. Drawn in ``grader._errors``'s tree.
    """

    exit_code = EXIT_FAILED

    def __init__(
        self, module: str, *, where: str = "", packages: Mapping[str, str], standard: bool = False
    ) -> None:
        self.module = module
        self.package = module.partition(".")[0]
        self.where = where  # "when the agent is imported", "in run(), case ID", or ""
        self.packages = dict(packages)
        self.standard = standard  # a module of Python's standard library
        super().__init__(self._reason())

    @property
    def listed(self) -> bool:
        """The rubric allows the package."""
        return self.package in self.packages

    @property
    def status(self) -> Status:
        """``ungradable`` for a package the rubric does not allow, else ``error``."""
        return "error" if self.standard or self.listed else "ungradable"

    def _reason(self) -> str:
        imports = f"the agent imports {self.module}{f' ({self.where})' if self.where else ''}"
        again = "then grade it again"
        if self.standard:
            return (
                f"{imports}, a module of Python's standard library that the grader's Python "
                "was built without, so the submission was not graded (it is not at fault): "
                f"grade with a Python {sys.version_info[0]}.{sys.version_info[1]} that has "
                f"{self.package} (the full python3 package of the system, or a build with "
                f"the libraries it needs), {again}"
            )
        if self.listed:
            requirement = self.packages[self.package]
            command = install_command(requirement)
            checkout = (
                "; in a checkout of the kit `make grade` does it" if SDK_EXTRA in command else ""
            )
            return (
                f"{imports}, which the rubric's [packages] allows ({requirement}) but the "
                "grader's environment does not have, so the submission was not graded (it "
                f"is not at fault): install it for the grader, `{command}`{checkout} (on "
                "Gradescope: build the autograder again with "
                f"`{commands.GRADESCOPE_BUILD(out='autograder')}`, "
                f"whose setup.sh installs the rubric's [packages]), {again}"
            )
        allowed = ", ".join(sorted(self.packages)) or "none"
        return (
            f"{imports}, a package the rubric does not allow (its [packages] lists: "
            f"{allowed}), so the submission cannot be graded as it stands: remove the "
            f"import from the agent (if {self.package} is a module of the submission's "
            f"own, commit it) and submit again; or, if the lab allows {self.package}, the "
            f'instructor adds {self.package} = "<its pip requirement>" to the rubric\'s '
            f"[packages], installs it for the grader and grades it again"
        )


def missing_package(
    root: Path,
    module: str,
    packages: Mapping[str, str],
    *,
    where: str = "",
    own: Collection[str] = (),
) -> MissingPackage | None:
    """The error for an agent that could not import ``module``, judged against the rubric's
    ``packages``; or None when that is
    no missing package: a module of the submission's own (a folder or ``.py`` file at its
    ``root``, or a top-level name in ``own``: the packages its manifest names), the kit's,
    or one the grader's environment has after all (then its import error is graded)."""
    top = module.partition(".")[0]
    if top in KIT_MODULES or top in own or (root / top).is_dir() or (root / f"{top}.py").is_file():
        return None
    if top in sys.stdlib_module_names:
        standard = importlib.util.find_spec(top) is None
        return (
            MissingPackage(module, where=where, packages=packages, standard=True)
            if standard
            else None
        )
    if importlib.machinery.PathFinder.find_spec(top, list(package_folders())) is not None:
        return None
    return MissingPackage(module, where=where, packages=packages)


def _require_packages(
    root: Path, manifest: Manifest, packages: Mapping[str, str], primary: RunResult
) -> None:
    """Raise ``MissingPackage`` when the agent could not import a package the grader lacks,
    at import or in run() during a case (a lazy import), judged against the rubric's
    ``packages``: that is no grade at all, never a zero for the cases it lost."""
    specs = (manifest.agent, manifest.tools, manifest.replay)
    own = {spec.partition(":")[0].partition(".")[0] for spec in specs if spec}
    modules = [
        ("when the agent is imported", primary.missing_module),
        *(
            (f"in run(), case {case}", outcome.missing_module)
            for case, outcome in sorted(primary.outcomes.items())
        ),
    ]
    for where, module in modules:
        missing = missing_package(root, module, packages, where=where, own=own) if module else None
        if missing is not None:
            raise missing
