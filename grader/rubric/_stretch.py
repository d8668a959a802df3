"""A lab's own stretch goals: a rubric's ``[[stretch]]`` tables, validated (pure).

Each table names a goal a manifest may claim (``stretch = [...]`` in ``[tool.gradekit]``)
beside the kit's own four: its id, the words its FAILURES.md write-up is found by, and the
instructor's functions, as ``package.module:function`` specs, that judge its evidence and
say what the evidence rests on. The functions are imported where the rubric's custom
checks are, from the rubric's folder (``grader.rubric._rubric.with_stretch_code``); scoring
calls them (``grader.scoring``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from grader._errors import RubricError
from grader._specs import SPEC

__all__ = ["GOAL_ID", "KIT_GOALS", "STRETCH_KEYS", "LabGoal", "goal_tables", "lab_goals"]

# The kit's own stretch goals, as grader.scoring.STRETCH_GOALS scores them (a test holds the
# two equal): a lab's goal takes another id, so a claim always means one goal.
KIT_GOALS = ("rerecord-review", "tool-fixtures", "cut-point", "two-providers")
GOAL_ID = re.compile(r"[a-z0-9][a-z0-9-]*")
STRETCH_KEYS = ("basis", "evidence", "id", "names")

Where = Callable[[int, str], str]  # (table index, key) -> "file:line", for messages


@dataclass(frozen=True, slots=True)
class LabGoal:
    """A stretch goal of the lab's own: one ``[[stretch]]`` table of its rubric."""

    id: str
    names: tuple[str, ...]  # the id, then the table's names: a FAILURES.md entry naming one
    evidence: str  # "package.module:function": (Evidence) -> None when it holds, else why not
    basis: str = ""  # "package.module:function": (Evidence) -> what it rests on; "" if none


def lab_goals(raw: object, where: Where) -> tuple[LabGoal, ...]:
    """The ``[[stretch]]`` tables of a rubric (``None``: it has none), in file order."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RubricError(
            f"{where(0, '')}: stretch must be tables, one [[stretch]] a goal "
            'with id = "...", names = [...] and evidence = "module:function"'
        )
    goals = tuple(_goal(table, index, where) for index, table in enumerate(raw))
    first: dict[str, int] = {}
    for index, goal in enumerate(goals):
        if goal.id in first:
            raise RubricError(
                f"{where(index, 'id')}: stretch goal id {goal.id!r} appears twice "
                f"(first at {where(first[goal.id], 'id')}); give each its own id"
            )
        first[goal.id] = index
    return goals


def _goal(raw: object, index: int, where: Where) -> LabGoal:
    if not isinstance(raw, dict):
        raise RubricError(f"{where(index, '')}: [[stretch]] number {index + 1} is not a table")
    unknown = sorted(set(raw) - set(STRETCH_KEYS))
    if unknown:
        raise RubricError(
            f"{where(index, unknown[0])}: unknown key in [[stretch]] "
            f"{', '.join(unknown)}; the valid ones are {', '.join(STRETCH_KEYS)}"
        )
    goal_id = raw.get("id")
    if not isinstance(goal_id, str) or not GOAL_ID.fullmatch(goal_id):
        raise RubricError(
            f"{where(index, 'id')}: [[stretch]] number {index + 1} needs an id "
            f"matching [a-z0-9][a-z0-9-]* (what a manifest claims), not "
            f"{goal_id!r}"
        )
    if goal_id in KIT_GOALS:
        raise RubricError(
            f"{where(index, 'id')}: stretch goal id {goal_id!r} is one of the kit's own goals "
            f"({', '.join(KIT_GOALS)}): give the lab's goal an id of its own; a lab's goal "
            "never replaces the kit's"
        )
    return LabGoal(
        id=goal_id,
        names=_names(goal_id, raw.get("names"), where(index, "names")),
        evidence=_spec(raw, "evidence", where(index, "evidence"), required=True),
        basis=_spec(raw, "basis", where(index, "basis"), required=False),
    )


def _names(goal_id: str, raw: object, where: str) -> tuple[str, ...]:
    if raw is None:
        return (goal_id,)
    if not isinstance(raw, list) or not all(isinstance(n, str) and n.strip() for n in raw):
        raise RubricError(
            f"{where}: names must be a list of words a FAILURES.md entry names "
            f'the goal by, e.g. names = ["{goal_id}", "{goal_id.replace("-", " ")}"]'
        )
    return tuple(dict.fromkeys([goal_id, *(cast(str, name).strip() for name in raw)]))


def _spec(raw: dict[str, object], key: str, where: str, *, required: bool) -> str:
    value = raw.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not SPEC.fullmatch(value):
        raise RubricError(
            f'{where}: {key} must name your function as "package.module:function" '
            f"(a module beside the rubric), not {value!r}"
        )
    return value


def goal_tables(goals: Sequence[LabGoal]) -> list[dict[str, object]]:
    """The ``[[stretch]]`` tables that ``lab_goals`` reads back as ``goals``."""
    tables: list[dict[str, object]] = []
    for goal in goals:
        table: dict[str, object] = {
            "id": goal.id,
            "names": list(goal.names),
            "evidence": goal.evidence,
        }
        if goal.basis:
            table["basis"] = goal.basis
        tables.append(table)
    return tables
