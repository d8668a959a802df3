"""The submission manifest: ``[tool.gradekit]`` in a submission's pyproject.toml."""

from __future__ import annotations

import importlib
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from lab import GradekitError, Provider, UsageError

__all__ = ["Agent", "Manifest", "ManifestError", "load_agent", "load_manifest", "load_provider"]

Agent = Callable[[Provider, str], str]


class ManifestError(GradekitError):
    """A missing or broken ``[tool.gradekit]`` table."""


@dataclass(frozen=True, slots=True)
class Manifest:
    """Where a submission keeps its agent, cassettes and failure log."""

    root: Path
    agent: str
    cassettes: str = "cassettes"
    failures: str = "FAILURES.md"
    stretch: tuple[str, ...] = ()
    student: str = ""
    replay: str = "lab:Replay"  # the submission's own Replay, probed by loud_failure
    second_cassettes: str = ""  # stretch goal two-providers: a second provider's recordings

    def cassette(self, case: str) -> Path:
        """The cassette file of ``case``."""
        return self.root / self.cassettes / f"{case}.json"


def load_manifest(root: Path) -> Manifest:
    """Read the manifest of the submission at ``root``."""
    pyproject = root / "pyproject.toml"
    try:
        document = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(
            f"no {pyproject}: a submission needs a pyproject.toml with a [tool.gradekit] "
            'table (agent = "lab.agent:run")'
        ) from None
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
        stretch=tuple(table.get("stretch", [])),
        student=table.get("student", root.resolve().name),
        replay=table.get("replay", "lab:Replay"),
        second_cassettes=table.get("second_cassettes", ""),
    )


_TEXT_KEYS = ("agent", "cassettes", "failures", "student", "replay", "second_cassettes")
_PATH_KEYS = ("cassettes", "failures", "second_cassettes")


def _validate(table: dict[str, Any], pyproject: Path) -> None:
    """Types, known keys, and paths that stay inside the submission."""
    unknown = sorted(set(table) - {*_TEXT_KEYS, "stretch"})
    if unknown:
        raise ManifestError(f"{pyproject}: unknown [tool.gradekit] key(s) {', '.join(unknown)}; "
                            f"known: {', '.join(sorted({*_TEXT_KEYS, 'stretch'}))}")
    for key in _TEXT_KEYS:
        if key in table and not isinstance(table[key], str):
            raise ManifestError(f"{pyproject}: [tool.gradekit] {key} must be a string")
    stretch = table.get("stretch", [])
    if not isinstance(stretch, list) or not all(isinstance(s, str) for s in stretch):
        raise ManifestError(f'{pyproject}: stretch must be a list of ids, e.g. ["two-providers"]')
    for key in _PATH_KEYS:
        value = table.get(key, "")
        if value.startswith(("/", "~")) or ".." in Path(value).parts:
            raise ManifestError(f"{pyproject}: {key} = {value!r} must be a path inside the "
                                "submission, relative to its pyproject.toml")


def load_agent(manifest: Manifest) -> Agent:
    """Import the agent named by the manifest, from the submission's root."""
    return cast(Agent, _import(manifest.root, manifest.agent, "agent = in [tool.gradekit]"))


def load_provider(manifest: Manifest, spec: str) -> Provider:
    """Build a provider from ``package.module:function`` (called with no arguments)."""
    factory = _import(manifest.root, spec, "--provider")
    provider = factory()
    if not isinstance(provider, Provider):
        raise UsageError(f"--provider {spec} returned {type(provider).__name__}, which has no "
                         "`name` and `complete(prompt)`: return a Provider")
    return provider


def _import(root: Path, spec: str, where: str) -> Callable[..., Any]:
    module_name, _, function = spec.partition(":")
    if not module_name or not function:
        raise ManifestError(f'{where}: "{spec}" must look like "package.module:function"')
    folder = str(root.resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    value = getattr(importlib.import_module(module_name), function, None)
    if not callable(value):
        raise ManifestError(f"{where}: {module_name} has no function {function!r}")
    return cast(Callable[..., Any], value)
