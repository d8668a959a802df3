"""Rubric files (TOML): the cases a lab runs on."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from lab import GradekitError

__all__ = ["CASE_ID", "Case", "RubricError", "load_cases"]

CASE_ID = re.compile(r"[a-z0-9][a-z0-9-]*")


class RubricError(GradekitError):
    """A rubric file that cannot be used; the message points at the problem."""


@dataclass(frozen=True, slots=True)
class Case:
    """One task the agent is run on; ``id`` names its cassette file."""

    id: str
    task: str


def load_cases(path: Path) -> list[Case]:
    """Read the ``[[case]]`` tables of the rubric at ``path``, in file order."""
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RubricError(f"no rubric at {path}: pass --rubric PATH") from None
    except tomllib.TOMLDecodeError as exc:
        raise RubricError(f"{path}: not valid TOML ({exc}); fix the file") from exc
    raw_cases = document.get("case", [])
    if not isinstance(raw_cases, list) or not raw_cases:
        raise RubricError(f"{path}: no [[case]] tables; add at least one with an id and a task")
    cases = [_case(raw, path, number) for number, raw in enumerate(raw_cases, 1)]
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            raise RubricError(f"{path}: case id {case.id!r} appears twice; case ids are unique")
        seen.add(case.id)
    return cases


def _case(raw: object, path: Path, number: int) -> Case:
    where = f"{path}: [[case]] number {number}"
    if not isinstance(raw, dict):
        raise RubricError(f"{where} is not a table")
    case_id, task = raw.get("id"), raw.get("task")
    if not isinstance(case_id, str) or not CASE_ID.fullmatch(case_id):
        raise RubricError(
            f"{where}: id {case_id!r} must match [a-z0-9][a-z0-9-]* (it names a cassette file)"
        )
    if not isinstance(task, str) or not task.strip():
        raise RubricError(f"{where} ({case_id}): needs a non-empty task string")
    return Case(id=case_id, task=task)
