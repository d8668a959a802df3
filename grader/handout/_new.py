"""``gradekit new``: a lab of the instructor's own, in a folder of its own, ready to record.

What it writes is a small lab that works end to end before a line is changed: a manifest
that names the lab's rubric and package, a rubric with one case and the five criteria, a
read-only tool over a data file, a reference agent whose solution is a marked region, a
failure log, and the students' README. Every file is a template filled with the package
name; nothing is copied from the kit's own lab, whose cases and package it must not meet.
Walked through in docs/own-lab.md.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from pathlib import Path

from gradekit import UsageError
from gradekit.internal import commands

__all__ = ["NewLab", "new_lab"]

_PACKAGE = re.compile(r"[a-z][a-z0-9_]*")
_WORD = "SOLUTION"
_CASE = "first-case"

_PYPROJECT = """\
[project]
name = "{project}"
version = "0.1.0"
requires-python = ">=3.11"

# What the grader reads: the agent, its tools, the lab's own rubric, the Replay it probes.
[tool.gradekit]
agent = "{package}.agent:run"
tools = "{package}.tools:TOOLS"
rubric = "rubric/lab.toml"
replay = "gradekit:Replay"

# What the hand-out gives students; recordings stay home.
[tool.gradekit.starter]
include = ["{package}/**", "rubric/*.toml", "FAILURES.md", "pyproject.toml", ".gitignore"]
readme = "handout/README.md"
"""

_RUBRIC = '''\
# The rubric of {project}: its cases and what each criterion is worth (weights sum to 100).
# A later version says what changed and why in `changes`.

[rubric]
id = "{project}"
version = 1
title = "{title}"

[[case]]
id = "{case}"
task = """Using the course notes, say in two sentences when a late submission is \\
accepted and what it costs."""

[[criterion]]
id = "contract_stability"
title = "Contract stability"
weight = 30
check = "contract_stability"
full = "The same answers under every provider name"
typical_loss = "Passes only on the model it happened to use"

[[criterion]]
id = "loud_failure"
title = "Loud failure"
weight = 25
check = "loud_failure"
full = "A missing recording stops the run"
typical_loss = "Returns an empty string and looks like success"
[criterion.points]
own_replay = 5

[[criterion]]
id = "tracing"
title = "Tracing"
weight = 20
check = "tracing"
full = "Every call traced with key, provider and latency"
typical_loss = "Only the final answer is logged"

[[criterion]]
id = "written_summary"
title = "Written summary"
weight = 15
check = "written_summary"
full = "An honest write-up of what failed and why"
typical_loss = "Only says that it works"
[criterion.points]
entries = 6
boundaries = 4
no_placeholders = 5

[[criterion]]
id = "stretch_goal"
title = "Stretch goal"
weight = 10
check = "stretch_goal"
full = "One stretch goal finished, with the failure it found written up"
typical_loss = "Three started, none finished"
[criterion.points]
evidence = 6
write_up = 4
'''

_INIT = '''\
"""{title}: the agent (``agent.py``) and its read-only tools (``tools.py``)."""
'''

_AGENT = '''\
"""The agent: look the task's words up in the course notes, then ask the model once.

The contract: every provider call through ``Traced(provider)``, every tool call through
``TracedTools(tools)``; a ``CassetteMiss`` or ``MissingFixtureError`` escapes ``run()``;
nothing depends on ``provider.name``; the answer is a ``str``.
"""

from __future__ import annotations

from gradekit import Provider, Toolbox, Traced, TracedTools

__all__ = ["run"]

PROMPT = "Course notes:\\n{{notes}}\\n\\nTask: {{task}}\\nAnswer in at most two sentences."


def run(provider: Provider, task: str, tools: Toolbox | None = None) -> str:
    """Answer ``task`` from the course notes the tools find."""
    # {begin} hint: find the notes with the search_notes tool, then ask the model once
    llm = Traced(provider)
    words = sorted({{word.strip(".,;:?").lower() for word in task.split() if len(word) > 6}})
    notes: list[str] = []
    if tools is not None:
        for word in words[:2]:
            notes += TracedTools(tools).call("search_notes", word=word, limit=2)
    return llm.complete(PROMPT.format(notes="\\n".join(notes) or "(none)", task=task)).strip()
    # {stub}
    # raise NotImplementedError(
    #     "{package}/agent.py: write run(): look the task up with the search_notes tool "
    #     "through TracedTools(tools), then ask Traced(provider) once; a CassetteMiss "
    #     "must escape"
    # )
    # {end}
'''

_TOOLS = '''\
"""The lab's read-only tool: ``search_notes(word, limit)``, the lines of the course notes
(``data/notes.txt``, next to this file) that hold a word. The same arguments give the same
answer on every run and machine, and nothing is ever written."""

from __future__ import annotations

from pathlib import Path

from gradekit import Tools

__all__ = ["TOOLS", "search_notes"]

NOTES = Path(__file__).parent / "data" / "notes.txt"


def search_notes(word: str, limit: int = 3) -> list[str]:
    """At most ``limit`` lines of the notes holding ``word``, in the file's order."""
    if not isinstance(word, str) or not word.strip():
        raise ValueError("search_notes needs a word: pass word='deadline'")
    if not isinstance(limit, int) or not 1 <= limit <= 10:
        raise ValueError("search_notes takes a limit from 1 to 10")
    lines = NOTES.read_text("utf-8").splitlines()
    return [line for line in lines if word.lower() in line.lower()][:limit]


TOOLS = Tools()
TOOLS.read_only("search_notes", search_notes)
'''

_NOTES = """\
Late submissions are accepted up to 48 hours after the deadline.
A late submission loses 10 percent of its grade for each started day.
Extensions are granted by the instructor before the deadline, never after it.
Submissions are graded offline from the recordings committed with them.
"""

_HINT = (
    'One section per failure you met while building and recording your agent: a "##" '
    'heading that names it, then "- Symptom:", "- Cause:" and "- Fix:" (or '
    '"- Status: open") bullets, each saying what really happened. A stretch goal\'s '
    "write-up is a section that names the goal."
)
_FAILURES = (
    """\
# Failures

<!-- {begin} hint: """
    + _HINT
    + """ -->
The reference's failure log: write what went wrong while you built and recorded it,
one "##" section per failure with Symptom, Cause and Fix bullets, and a "## Boundaries"
section saying what a replayed recording cannot tell. A student's copy is graded.
<!-- {end} -->
"""
)

_README = """\
# Lab: {title}

You build an agent that answers this lab's cases through a `Provider`. You record its
model answers once into `cassettes/` (its tool results into `fixtures/`) and commit
them; from then on it runs offline, the same way every time.

## What to build

- **`run(provider, task, tools=None)` in `{package}/agent.py`**, returning a `str`:
  every provider call through `Traced(provider)`, every tool call through
  `TracedTools(tools)`; a `CassetteMiss` escapes; nothing depends on `provider.name`.
- **`FAILURES.md`**: one `##` section per failure, with Symptom, Cause and Fix bullets.

## The loop

With `gradekit` installed in the environment you work in (`pip install gradekit`):

```sh
{record:<22} # once, live: writes cassettes/ and fixtures/
{check:<22} # the three checkpoints, offline
{grade:<22} # the grade, offline
```

## What is graded

<!-- gradekit:criteria -->
"""

_GITIGNORE = """\
__pycache__/
.venv/
grades/
"""


@dataclass(frozen=True, slots=True)
class NewLab:
    """What ``new_lab`` wrote: the lab's folder, its package, its first case, its files."""

    root: Path
    package: str
    case: str
    files: tuple[str, ...]


def new_lab(root: Path, *, package: str | None = None, title: str | None = None) -> NewLab:
    """Write a new lab into ``root`` (missing or empty): its package is ``package`` (default:
    the folder's name, with ``-`` as ``_``). Nothing is written when it is refused."""
    name = root.resolve().name
    package = package or name.replace("-", "_").lower()
    if (
        not _PACKAGE.fullmatch(package)
        or keyword.iskeyword(package)
        or package in ("gradekit", "grader", "lab", "tests")
    ):
        raise UsageError(
            f"{package!r} cannot be the lab's package: it must be a lower-case Python name "
            "that is not gradekit, grader, lab or tests; pass --package NAME"
        )
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise UsageError(f"{root} exists and is not an empty folder: name a new folder")
    # The markers, spelled apart here, so that the kit's own hand-out (which ships this
    # file) holds no solution region of its own.
    fill = {
        "begin": "BEGIN " + _WORD,
        "end": "END " + _WORD,
        "stub": "ST" + "UB",
        "project": name,
        "package": package,
        "case": _CASE,
        "title": title or name.replace("-", " ").replace("_", " ").capitalize(),
        **{step: commands.shown(step, form="gradekit") for step in ("record", "check", "grade")},
    }
    files = {
        "pyproject.toml": _PYPROJECT,
        "rubric/lab.toml": _RUBRIC,
        f"{package}/__init__.py": _INIT,
        f"{package}/agent.py": _AGENT,
        f"{package}/tools.py": _TOOLS,
        f"{package}/data/notes.txt": _NOTES,
        "FAILURES.md": _FAILURES,
        "handout/README.md": _README,
        ".gitignore": _GITIGNORE,
    }
    for relative, template in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(**fill), "utf-8")
    return NewLab(root, package, _CASE, tuple(files))
