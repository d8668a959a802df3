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
    return Manifest(
        root=root,
        agent=table["agent"],
        cassettes=str(table.get("cassettes", "cassettes")),
        failures=str(table.get("failures", "FAILURES.md")),
        stretch=tuple(str(s) for s in table.get("stretch", [])),
        student=str(table.get("student", root.resolve().name)),
        replay=str(table.get("replay", "lab:Replay")),
        second_cassettes=str(table.get("second_cassettes", "")),
    )


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
