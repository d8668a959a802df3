"""A rubric as JSON and back: how the batch hands the rubric it validated to its workers.

``rubric_document`` writes the tables the rubric file holds (``[rubric]``, ``[[case]]``,
``[[criterion]]``, ``[limits]``, ``[packages]``, ``[[stretch]]``), each value as the file
would give it, and beside them what the file's bytes and folder gave: its SHA-256, the
folder its regression sets were read from, and each pinned set's digest. ``rubric_from_document``
runs the rubric file's own checks on those tables (``rubric_of_tables``, the checks
``parse_rubric`` runs), so a document the TOML loader would refuse is refused here, with
the same words; then it reads each pinned set again and refuses one whose digest changed
(a set version never changes). Nothing is pickled, and a custom check is imported by the
worker from the folder the batch names, not here; the functions of the lab's own stretch
goals are imported here, from the folder the batch's ``load_rubric`` read the rubric from
(the one its ``sets_folder`` is in), as ``load_rubric`` imported them.

A point value travels as a JSON number with at most two decimals, which ``json`` reads
back as the same decimal (``float``'s shortest repr): the decoder reads every fraction as
``Decimal``, as ``tomllib`` does for the file.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gradekit import UsageError
from grader._errors import RubricError
from grader._expect import expectation_document
from grader.regression import RegressionSet, load_set, parse_ref
from grader.rubric._rubric import (
    SUBCHECKS,
    Case,
    Criterion,
    Rubric,
    default_points,
    rubric_of_tables,
    with_stretch_code,
)
from grader.rubric._stretch import goal_tables

__all__ = ["FORMAT", "rubric_document", "rubric_from_document"]

FORMAT = "gradekit.rubric/1"
_KEYS = ("format", "sets", "sets_folder", "sha256", "tables")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SOURCE = "the rubric the batch sent"


def rubric_document(rubric: Rubric) -> dict[str, Any]:
    """``rubric`` as one JSON-ready document (``json.dumps`` writes it as it is)."""
    meta: dict[str, Any] = {"id": rubric.id, "version": rubric.version, "title": rubric.title}
    if rubric.changes:
        meta["changes"] = rubric.changes
    tables: dict[str, Any] = {
        "rubric": meta,
        "case": [_case(case) for case in rubric.cases],
        "criterion": [_criterion(criterion) for criterion in rubric.criteria],
        "limits": dataclasses.asdict(rubric.limits),
        "packages": dict(rubric.packages),
    }
    if rubric.stretch:
        tables["stretch"] = goal_tables(rubric.stretch)
    return {
        "format": FORMAT,
        "tables": tables,
        "sha256": rubric.sha256,
        "sets_folder": rubric.sets_folder,
        # The sets by reference and digest: the worker reads the same immutable versions.
        "sets": {
            ref: None if pinned is None else pinned.sha256 for ref, pinned in rubric.sets.items()
        },
    }


def _case(case: Case) -> dict[str, Any]:
    table: dict[str, Any] = {"id": case.id, "task": case.task}
    if case.expect is not None:
        table["expect"] = expectation_document(case.expect)
    return table


def _criterion(criterion: Criterion) -> dict[str, Any]:
    """A ``[[criterion]]`` table; its points table only where the file needs one (a
    built-in check's named sub-checks at other than their default points)."""
    table: dict[str, Any] = {
        "id": criterion.id,
        "title": criterion.title,
        "weight": criterion.weight,
        "check": criterion.check,
        "full": criterion.full,
        "typical_loss": criterion.typical_loss,
    }
    if criterion.check in SUBCHECKS and dict(criterion.points) != default_points(
        criterion.check, criterion.weight
    ):
        table["points"] = {name: float(points) for name, points in criterion.points.items()}
    if criterion.params:
        table["params"] = dict(criterion.params)
    return table


def rubric_from_document(document: object, *, source: str = _SOURCE) -> Rubric:
    """The rubric ``rubric_document`` wrote, checked as ``load_rubric`` checks a file: a
    ``RubricError`` naming ``source`` for anything a rubric file could not hold, or a
    pinned regression set whose bytes changed since."""
    if (
        not isinstance(document, Mapping)
        or sorted(document) != sorted(_KEYS)
        or document["format"] != FORMAT
    ):
        raise RubricError(
            f"{source} is not a {FORMAT} document: send a rubric with "
            "rubric_document, never by hand"
        )
    sha256, folder, sets = document["sha256"], document["sets_folder"], document["sets"]
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        raise RubricError(
            f"{source}: sha256 is {sha256!r}, not 64 hex digits: send the "
            "rubric load_rubric read, whose sha256 is its file's"
        )
    if (
        not isinstance(folder, str)
        or not isinstance(sets, Mapping)
        or not all(
            isinstance(ref, str) and (digest is None or isinstance(digest, str))
            for ref, digest in sets.items()
        )
    ):
        raise RubricError(
            f"{source}: sets_folder is not a folder or sets is not a table of "
            "name@version = digest or null: send the rubric load_rubric read"
        )
    tables = _decimals(document["tables"])
    if not isinstance(tables, Mapping):
        raise RubricError(f"{source}: tables is not a table of the rubric file's tables")
    rubric = rubric_of_tables(tables, source=source, sha256=sha256)
    if rubric.stretch and folder:  # a rubric only parsed has no folder, and no code either
        rubric = with_stretch_code(
            rubric, Path(folder).parent, lambda index, key: f"{source}: [[stretch]] {key}"
        )
    return dataclasses.replace(
        rubric, sets=MappingProxyType(_sets(sets, Path(folder), source)), sets_folder=folder
    )


def _decimals(value: object) -> object:
    """``value`` with every JSON fraction as the ``Decimal`` its text spells, as ``tomllib``
    reads a rubric file's numbers (``float``'s repr is the text ``json`` wrote)."""
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, Mapping):
        return {key: _decimals(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_decimals(item) for item in value]
    return value


def _sets(
    digests: Mapping[str, str | None], folder: Path, source: str
) -> dict[str, RegressionSet | None]:
    """The regression sets the batch found, read again from the same folder: each must
    still have the digest the batch saw (a version never changes)."""
    sets: dict[str, RegressionSet | None] = {}
    for ref, digest in digests.items():
        try:
            name, version = parse_ref(ref)
            pinned = None if digest is None else load_set(folder, name, version)
        except UsageError as exc:
            raise RubricError(f"{source}: regression set {ref}: {exc}") from None
        if digest is not None and (pinned is None or pinned.sha256 != digest):
            raise RubricError(
                f"{source}: regression set {ref} changed while the batch ran: a "
                "set version never changes; restore it, then grade again"
            )
        sets[ref] = pinned
    return sets
