"""Every command a message tells someone to run, written so it runs where it is printed.

In a lab with the kit's Makefile (a ``record:`` target), a bare ``gradekit ...`` is on no
PATH outside the lab's virtual environment, so a message never prints one there: a
subcommand with a make target (record, grade, check, dashboard: the Makefile passes
``ARGS`` on, and installs ``.venv`` first) is printed as ``make record ARGS='--case
refund-policy'``, any other as ``.venv/bin/gradekit ...``. A lab without one (an
instructor's own, where the kit is installed into the environment the lab is worked in)
gets ``gradekit ...`` for every command. Both are run from the lab's root.

Which lab: the one ``use_lab`` named (the command line names the lab its command works
on, and its workers inherit the choice through ``GRADEKIT_COMMANDS``), else the folder the
process runs in (a student's own tests, which meet the kit's messages through ``Replay``).

Each command a message prints is a ``Command`` in ``COMMANDS``, its argument vector a
template of ``{field}`` values, so a test can run every one of them exactly as printed.
A value is quoted for the shell (``shlex``); one that cannot sit inside ``ARGS='...'``
safely (a quote, ``$``, a backslash) gets the ``.venv/bin/gradekit`` form instead, which
is always exact. Upper-case values (``ID``, ``NAME``) are the reader's to fill in, where the
message cannot know them.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import string
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "APPROVE",
    "CASE_REVISE",
    "CHECK",
    "COMMANDS",
    "GRADEBOOK_MERGE",
    "GRADESCOPE_BUILD",
    "GRADESCOPE_TRY",
    "GRADE_INTO",
    "GRADE_LAB",
    "GRADE_REPLACE",
    "HISTORY",
    "INCIDENT_RECORD",
    "INCIDENT_SHOW",
    "LEDGER_VERIFY",
    "MAKE_TARGETS",
    "RECORD",
    "RECORD_CASE",
    "RECORD_SECOND",
    "REGRESSION_PROMOTE",
    "REGRESSION_PUBLIC",
    "REGRESSION_SHOW",
    "REGRESSION_VERIFY",
    "REPORT_VERIFY",
    "RERECORD",
    "RERECORD_CASE",
    "REVIEW",
    "REVIEWS_EXPORT",
    "REVIEWS_IMPORT",
    "VENV_GRADEKIT",
    "Command",
    "configured",
    "current_form",
    "from_here",
    "lab_form",
    "shown",
    "use_lab",
]

VENV_GRADEKIT = ".venv/bin/gradekit"
MAKE_TARGETS = frozenset({"record", "grade", "check", "dashboard"})  # the Makefile's, with ARGS

_BARE = re.compile(r"[\w@%+=:,./-]+", re.ASCII)  # shlex's safe set: no quoting needed
# What a value inside ARGS='...' may hold: make reads $ and # on its command line, the shell
# reads " \ ` $ ! inside the recipe's double quotes, and ' would end the outer quotes.
_IN_ARGS = re.compile(r"""[^'"\\`$!#\n\r]*""")


FORM = "GRADEKIT_COMMANDS"  # "make" or "gradekit": how the lab in hand runs the kit
_RECORD_TARGET = re.compile(r"^record:", re.MULTILINE)


def lab_form(root: Path) -> str:
    """How commands are printed for the lab at ``root``: ``make`` where its Makefile has the
    kit's targets, else ``gradekit``."""
    try:
        makefile = (root / "Makefile").read_text("utf-8", errors="replace")
    except OSError:
        return "gradekit"
    return "make" if _RECORD_TARGET.search(makefile) else "gradekit"


def use_lab(root: Path) -> None:
    """Print every command for the lab at ``root`` from now on, in this process and the
    processes it starts, unless ``GRADEKIT_COMMANDS`` already says how (the Gradescope
    autograder's, which grades in a folder without the lab's Makefile, says it)."""
    if os.environ.get(FORM) not in ("make", "gradekit"):
        os.environ[FORM] = lab_form(root)


def current_form() -> str:
    """How commands are printed here: as ``GRADEKIT_COMMANDS`` says, else for the folder this
    process runs in. A process that starts others elsewhere passes it on in their
    environment (the batch's workers start in a folder of their own)."""
    form = os.environ.get(FORM, "")
    return form if form in ("make", "gradekit") else lab_form(Path.cwd())


def shown(*argv: str, form: str | None = None) -> str:
    """The command line that runs ``gradekit argv...`` from the lab's root, as printed;
    ``form`` (``lab_form``'s) for a lab other than the one in hand."""
    if not argv:
        raise ValueError("a command needs its subcommand")
    if (form or current_form()) == "gradekit":
        return shlex.join(["gradekit", *argv])
    if argv[0] in MAKE_TARGETS and all(_IN_ARGS.fullmatch(arg) for arg in argv[1:]):
        args = " ".join(arg if _BARE.fullmatch(arg) else f'"{arg}"' for arg in argv[1:])
        return f"make {argv[0]}" + (f" ARGS='{args}'" if args else "")
    return shlex.join([VENV_GRADEKIT, *argv])


def from_here(line: str, *, cwd: Path | None = None, gradekit: Path | None = None) -> str:
    """``line`` (a printed command) as it runs in the folder this process runs in (``cwd``).

    A ``.venv/bin/gradekit`` that is not there, or a bare ``gradekit`` that is on no PATH
    (or is another one), becomes the path of the gradekit running now (``gradekit``: the
    one beside this Python), relative where it is under ``cwd``. For what the command line
    prints to a person in a terminal, never for a report: where a report was made must not
    change its bytes.
    """
    cwd = cwd or Path.cwd()
    gradekit = gradekit or Path(sys.executable).with_name("gradekit")
    for prefix in (VENV_GRADEKIT + " ", "gradekit "):
        if not line.startswith(prefix) or not gradekit.is_file():
            continue
        name = prefix.rstrip()
        found = (cwd / name) if "/" in name else shutil.which(name)
        if (
            found is not None
            and Path(found).is_file()
            and Path(found).resolve() == gradekit.resolve()
        ):
            return line
        try:
            path = str(gradekit.absolute().relative_to(cwd.absolute()))
        except ValueError:
            path = str(gradekit.absolute())
        path = path if "/" in path else f"./{path}"
        return shlex.quote(path) + " " + line.removeprefix(prefix)
    return line


def configured(line: str, settings: Mapping[str, str] | None) -> str:
    """``line`` run with ``settings`` (``GRADEKIT_PROVIDER`` and the like) in its
    environment: ``NAME=value ... line``, each value quoted for the shell."""
    if not settings:
        return line
    return " ".join([*(f"{name}={shlex.quote(value)}" for name, value in settings.items()), line])


@dataclass(frozen=True, slots=True)
class Command:
    """One command a message prints: ``argv`` after ``gradekit``, with ``{field}``s."""

    name: str
    argv: tuple[str, ...]

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields to fill in, in order of first use."""
        found: list[str] = []
        for arg in self.argv:
            for _, field, _, _ in string.Formatter().parse(arg):
                if field is not None and field not in found:
                    found.append(field)
        return tuple(found)

    def __call__(self, *, form: str | None = None, **values: str) -> str:
        """The command as printed, with ``values`` for its fields (each one needed);
        ``form`` as ``shown``'s."""
        missing = set(self.fields) - set(values)
        extra = set(values) - set(self.fields)
        if missing or extra:
            raise TypeError(
                f"command {self.name} takes the fields {', '.join(self.fields)}; "
                f"missing {sorted(missing)}, unknown {sorted(extra)}"
            )
        return shown(*(arg.format(**values) for arg in self.argv), form=form)


COMMANDS: dict[str, Command] = {}


def _command(name: str, *argv: str) -> Command:
    command = Command(name, argv)
    COMMANDS[name] = command
    return command


# -- the student's loop (make targets) -----------------------------------------------------

RECORD = _command("record", "record")
RECORD_CASE = _command("record-case", "record", "--case", "{case}")
RERECORD = _command("rerecord", "record", "--rerecord", "--reason", "{reason}")
RERECORD_CASE = _command(
    "rerecord-case", "record", "--case", "{case}", "--rerecord", "--reason", "{reason}"
)
RECORD_SECOND = _command(
    "record-second", "record", "--provider", "{provider}", "--cassettes", "{folder}"
)
GRADE_LAB = _command("grade-lab", "grade")
CHECK = _command("check", "check")
GRADE_INTO = _command("grade-into", "grade", "{submissions}", "--out", "{out}")

# -- the instructor's commands (no make target) ----------------------------------------------

INCIDENT_RECORD = _command(
    "incident-record",
    "incident",
    "record",
    "--agent",
    "{agent}",
    "--tools",
    "{tools}",
    "--case",
    "{case}",
    "--out",
    "{out}",
)
INCIDENT_SHOW = _command("incident-show", "incident", "show", "{path}")
LEDGER_VERIFY = _command("ledger-verify", "ledger", "verify", "{grades}")
REVIEW = _command(
    "review",
    "review",
    "{student}",
    "--criterion",
    "{criterion}",
    "--by",
    "{by}",
    "--reason",
    "{reason}",
    "--out",
    "{out}",
)
HISTORY = _command("history", "history", "{student}", "--out", "{out}")
REPORT_VERIFY = _command("report-verify", "report", "verify", "{path}")
GRADEBOOK_MERGE = _command(
    "gradebook-merge", "gradebook", "merge", "{first}", "{second}", "--out", "{out}"
)
GRADESCOPE_BUILD = _command("gradescope-build", "gradescope", "build", "--out", "{out}")
GRADESCOPE_TRY = _command(
    "gradescope-try", "gradescope", "try", "{submission}", "--autograder", "{autograder}"
)
REGRESSION_SHOW = _command("regression-show", "regression", "show", "{name}")
REGRESSION_VERIFY = _command(
    "regression-verify", "regression", "verify", "{name}", "--sets", "{sets}"
)
CASE_REVISE = _command(
    "case-revise", "case", "revise", "{case}", "--by", "{by}", "--reason", "{reason}"
)
APPROVE = _command("approve", "approve", "{candidate}", "--by", "{by}", "--reason", "{reason}")
REGRESSION_PUBLIC = _command(
    "regression-public", "regression", "public", "{name}", "--sets", "{sets}"
)
REGRESSION_PROMOTE = _command(
    "regression-promote",
    "regression",
    "promote",
    "{name}",
    "--candidate",
    "{candidate}",
    "--by",
    "{by}",
)
GRADE_REPLACE = _command("grade-replace", "grade", "{submissions}", "--out", "{out}", "--replace")
REVIEWS_EXPORT = _command(
    "reviews-export",
    "reviews",
    "export",
    "--out",
    "{out}",
    "--criterion",
    "{criterion}",
    "--pending",
    "--sheet",
    "{sheet}",
)
REVIEWS_IMPORT = _command(
    "reviews-import", "reviews", "import", "{sheet}", "--by", "{by}", "--out", "{out}"
)
