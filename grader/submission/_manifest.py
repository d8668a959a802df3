"""The submission manifest: ``[tool.gradekit]`` in a submission's pyproject.toml."""

from __future__ import annotations

import inspect
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradekit import Provider, Toolbox, Tools
from grader._errors import ManifestError
from grader._specs import load_spec
from grader.submission._files import (
    PYPROJECT_CAP,
    MissingSubmissionFile,
    SubmissionFileError,
    read_submission_file,
)

__all__ = [
    "DEFAULT_REPLAY",
    "Agent",
    "Manifest",
    "ManifestError",
    "call_agent",
    "load_agent",
    "load_manifest",
    "load_tools",
]

Agent = Callable[..., object]

# The kit's own Replay, named by where it lives: a lab with a package of its own (not the
# kit's ``lab``) imports it all the same. The kit's ``lab`` re-exports the same class.
DEFAULT_REPLAY = "gradekit:Replay"


@dataclass(frozen=True, slots=True)
class Manifest:
    """Where a submission keeps its agent, cassettes and failure log."""

    root: Path
    agent: str
    cassettes: str = "cassettes"
    failures: str = "FAILURES.md"
    stretch: tuple[str, ...] = ()
    student: str = ""
    replay: str = DEFAULT_REPLAY  # the Replay loud_failure probes: the student's, if named
    second_cassettes: str = ""  # stretch goal two-providers: a second provider's recordings
    tools: str = ""  # "package.module:NAME" of the agent's Tools registry, if it uses tools
    fixtures: str = "fixtures"
    incident_test: str = ""  # stretch goal cut-point: the incident's regression test
    guard: str = ""  # stretch goal cut-point: the live guard that test checks
    incidents: str = "incidents"  # recorded incidents (*.jsonl): graded inputs, promotable
    rubric: str = ""  # the lab's rubric, relative to the manifest: what its commands use

    def fixture(self, case: str) -> Path:
        """The tool fixture file of ``case``."""
        return self.root / self.fixtures / f"{case}.json"

    def cassette(self, case: str) -> Path:
        """The cassette file of ``case``."""
        return self.root / self.cassettes / f"{case}.json"


def load_manifest(root: Path) -> Manifest:
    """Read the manifest of the submission at ``root``.

    pyproject.toml is read as the grader reads every submission file
    (``read_submission_file``): a link, a FIFO or a file over ``PYPROJECT_CAP`` is a
    ``ManifestError``, for the grader and the student's own ``gradekit`` commands alike.
    """
    pyproject = root / "pyproject.toml"
    try:
        text = read_submission_file(root, "pyproject.toml", cap=PYPROJECT_CAP).decode("utf-8")
        document = tomllib.loads(text)
    except MissingSubmissionFile:
        raise ManifestError(
            f"no {pyproject}: a submission needs a pyproject.toml with a [tool.gradekit] "
            'table (agent = "lab.agent:run")'
        ) from None
    except SubmissionFileError as exc:
        raise ManifestError(str(exc)) from None
    except UnicodeDecodeError:
        raise ManifestError(f"{pyproject}: not UTF-8 text; save it as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{pyproject}: not valid TOML ({exc}); fix the file") from exc
    table = document.get("tool", {}).get("gradekit")
    if not isinstance(table, dict) or not isinstance(table.get("agent"), str):
        raise ManifestError(
            f'{pyproject}: add [tool.gradekit] with agent = "package.module:function"'
        )
    _validate(table, pyproject)
    return Manifest(
        root=root,
        agent=table["agent"],
        cassettes=table.get("cassettes", "cassettes"),
        failures=table.get("failures", "FAILURES.md"),
        stretch=tuple(dict.fromkeys(table.get("stretch", []))),  # each goal is scored once
        student=table.get("student", root.resolve().name),
        replay=table.get("replay", DEFAULT_REPLAY),
        second_cassettes=table.get("second_cassettes", ""),
        tools=table.get("tools", ""),
        fixtures=table.get("fixtures", "fixtures"),
        incident_test=table.get("incident_test", ""),
        guard=table.get("guard", ""),
        incidents=table.get("incidents", "incidents"),
        rubric=table.get("rubric", ""),
    )


_TEXT_KEYS = (
    "agent",
    "cassettes",
    "failures",
    "student",
    "replay",
    "second_cassettes",
    "tools",
    "fixtures",
    "incident_test",
    "guard",
    "incidents",
    "rubric",
)
_PATH_KEYS = ("cassettes", "failures", "second_cassettes", "fixtures", "incidents", "rubric")


def _validate(table: dict[str, Any], pyproject: Path) -> None:
    """Types, known keys, and paths that stay inside the submission."""
    unknown = sorted(set(table) - {*_TEXT_KEYS, "stretch", "starter"})
    if unknown:
        raise ManifestError(
            f"{pyproject}: unknown [tool.gradekit] key(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted({*_TEXT_KEYS, 'stretch', 'starter'}))}"
        )
    # The instructor's [tool.gradekit.starter] table: what `gradekit starter` ships. The
    # grader never reads it; `gradekit starter` validates it.
    if not isinstance(table.get("starter", {}), dict):
        raise ManifestError(
            f"{pyproject}: [tool.gradekit] starter must be a table, [tool.gradekit.starter]"
        )
    for key in _TEXT_KEYS:
        if key in table and not isinstance(table[key], str):
            raise ManifestError(f"{pyproject}: [tool.gradekit] {key} must be a string")
    stretch = table.get("stretch", [])
    if not isinstance(stretch, list) or not all(isinstance(s, str) for s in stretch):
        raise ManifestError(f'{pyproject}: stretch must be a list of ids, e.g. ["two-providers"]')
    for key in _PATH_KEYS:
        value = table.get(key, "")
        if value.startswith(("/", "~")) or ".." in Path(value).parts:
            raise ManifestError(
                f"{pyproject}: {key} = {value!r} must be a path inside the "
                "submission, relative to its pyproject.toml"
            )


def load_agent(manifest: Manifest) -> Agent:
    """Import the agent named by the manifest, from the submission's root."""
    agent = load_spec(
        manifest.agent,
        folder=manifest.root,
        where="agent = in [tool.gradekit]",
        error=ManifestError,
    )
    if not callable(agent):
        raise ManifestError(
            f'agent = "{manifest.agent}" must name a function run(provider, task[, tools])'
        )
    return agent


def call_agent(agent: Agent, provider: Provider, task: str, tools: Toolbox | None) -> object:
    """``run(provider, task, tools)`` when the agent takes tools, else ``run(provider, task)``."""
    return (
        agent(provider, task, tools)
        if tools is not None and takes_tools(agent)
        else agent(provider, task)
    )


def takes_tools(agent: Agent) -> bool:
    """Whether ``agent`` has a third positional parameter (the toolbox)."""
    try:
        parameters = list(inspect.signature(agent).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3 or any(p.kind is p.VAR_POSITIONAL for p in parameters)


def load_tools(manifest: Manifest) -> Tools | None:
    """The submission's tool registry (``tools = "package.module:NAME"``), if it declares one."""
    if not manifest.tools:
        return None
    tools = load_spec(
        manifest.tools,
        folder=manifest.root,
        where="tools = in [tool.gradekit]",
        error=ManifestError,
    )
    if not isinstance(tools, Tools):
        raise ManifestError(f'tools = "{manifest.tools}" must name a gradekit.Tools registry')
    return tools
