"""Rubric files (TOML): cases, weighted criteria, sub-check points and sandbox limits.

``parse_rubric`` is pure (bytes in, ``Rubric`` out); ``load_rubric``, ``load_cases``,
``load_custom_check`` and ``with_stretch_code`` are the edges that read files and import the
instructor's code (custom checks, and the functions of the lab's own stretch goals).
Every ``RubricError`` names the file and line and says what to change.

Points are exact decimals with two places. When a total does not split evenly (25
points over 3 cases) every part gets its share rounded down to the cent and the cents
left over go one each to the first cases, in file order: 8.34, 8.33, 8.33. (Unequal
shares, as in scaled default points, give the cents to the parts rounded down most.)
"""

from __future__ import annotations

import hashlib
import importlib.resources
import re
import sys
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from decimal import ROUND_DOWN, Decimal
from pathlib import Path
from types import MappingProxyType
from typing import cast

from gradekit import UsageError
from grader._errors import RubricError
from grader._expect import Expectation, parse_expectation
from grader._late import LatePolicy, load_late_policy
from grader._model import (
    BOUNDARIES,
    CENT,
    ENTRIES,
    EVIDENCE,
    NO_PLACEHOLDERS,
    OWN_REPLAY,
    WRITE_UP,
    Limits,
)
from grader._specs import SPEC, load_spec
from grader.regression import RegressionSet, load_set, parse_ref
from grader.rubric._packages import IMPORT_NAME, KIT_MODULES, requirement_key
from grader.rubric._stretch import LabGoal, lab_goals

__all__ = [
    "CASE_ID",
    "KIT_RUBRIC",
    "PARAMS",
    "SETS",
    "SUBCHECKS",
    "Case",
    "Criterion",
    "Rubric",
    "RubricError",
    "check_maxima",
    "default_points",
    "distribute",
    "load_cases",
    "load_custom_check",
    "load_rubric",
    "parse_rubric",
    "per_case_points",
    "rubric_of_tables",
    "with_stretch_code",
]

CASE_ID = re.compile(r"[a-z0-9][a-z0-9-]*")
CRITERION_ID = re.compile(r"[a-z0-9][a-z0-9_-]*")
TOTAL_WEIGHT = 100

# check -> (its named sub-checks, whether the rest of the weight is split over the cases).
# A named sub-check of a splitting check has an underscore, so no case id can equal it.
SUBCHECKS: Mapping[str, tuple[tuple[str, ...], bool]] = MappingProxyType(
    {
        "contract_stability": ((), True),
        "loud_failure": ((OWN_REPLAY,), True),
        "tracing": ((), True),
        "written_summary": ((ENTRIES, BOUNDARIES, NO_PLACEHOLDERS), False),
        "stretch_goal": ((EVIDENCE, WRITE_UP), False),
        "expectations": ((), True),  # each case against its [case.expect]
        "regression": ((), False),  # split over the items of a regression set, not the cases
    }
)
# check -> the parameters it takes in [criterion.params]; a custom check takes any.
PARAMS: Mapping[str, tuple[str, ...]] = MappingProxyType({"regression": ("set",)})

# Without a [criterion.points] table: points at a reference weight, scaled to the real one.
# For a splitting check the reference weight's remainder is the part split over the cases.
_DEFAULT_POINTS: Mapping[str, tuple[int, tuple[int, ...]]] = MappingProxyType(
    {
        "loud_failure": (25, (5,)),
        "written_summary": (15, (6, 4, 5)),
        "stretch_goal": (10, (6, 4)),
    }
)

_TOP_KEYS = ("case", "criterion", "limits", "packages", "rubric", "stretch")
_RUBRIC_KEYS = ("id", "title", "version", "changes")
_CASE_KEYS = ("expect", "id", "task")
_CRITERION_KEYS = ("check", "full", "id", "params", "points", "title", "typical_loss", "weight")
_CRITERION_TEXT = ("title", "check", "full", "typical_loss")
_LIMIT_KEYS = tuple(f.name for f in fields(Limits))
# Rubric versions released before [rubric] changes existed, by (id, version): the kit's own
# version 2 gives its reason in the comment above its version, and changing its bytes would
# make every course's ledger that graded with it refuse it. Any other version after the
# first says why it changed.
_BEFORE_CHANGES = frozenset({("provider-swap-lab", 2)})
# Criterion ids become gradebook columns beside these.
_RESERVED_IDS = (
    "digest",
    "final",
    "late",
    "max",
    "name",
    "penalty",
    "reason",
    "review",
    "status",
    "student",
    "submission",
    "total",
)


@dataclass(frozen=True, slots=True)
class Case:
    """One task the agent is run on; ``id`` names its cassette file.

    Its input snapshot is the task (and the submission's recordings of it, by that id);
    its expectation snapshot, ``[case.expect]``, what a run of it must come to (None when
    the rubric gives none: a check that needs one is then degraded).
    """

    id: str
    task: str
    expect: Expectation | None = None


@dataclass(frozen=True, slots=True)
class Criterion:
    """One weighted criterion; ``points`` holds every named sub-check's maximum."""

    id: str
    title: str
    weight: int
    check: str  # a key of SUBCHECKS, or "package.module:function"
    full: str
    typical_loss: str
    points: Mapping[str, Decimal]  # defaults applied; empty for checks without named ones
    params: Mapping[str, str] = field(default_factory=dict)  # [criterion.params]

    @property
    def custom(self) -> bool:
        """The check is the instructor's own function, not a built-in."""
        return self.check not in SUBCHECKS


@dataclass(frozen=True, slots=True)
class Rubric:
    """A whole rubric file, validated; ``sha256`` is over the file's bytes.

    ``sets`` holds every regression set its criteria pin, by ``name@version``, as
    ``load_rubric`` found it in ``sets_folder`` beside the file (None: that version is not
    there).
    """

    id: str
    version: int
    title: str
    cases: tuple[Case, ...]
    criteria: tuple[Criterion, ...]
    limits: Limits
    sha256: str
    sets: Mapping[str, RegressionSet | None] = field(default_factory=dict)
    sets_folder: str = ""  # where load_rubric read them: regression/ in the rubric's folder
    # [packages]: what a lab may import beyond the standard library and gradekit, by import
    # name, with the pip requirement that installs it for the grader (file order)
    packages: Mapping[str, str] = field(default_factory=dict)
    # [rubric] changes: why this version differs from the one before it, as the ledger
    # keeps it and `gradekit history` shows it beside what changed ("" when it gives none)
    changes: str = ""
    # [[stretch]]: the lab's own stretch goals, beside the kit's (file order)
    stretch: tuple[LabGoal, ...] = ()
    # each function the [[stretch]] tables name, by its spec, as with_stretch_code imported
    # it from the rubric's folder (empty for a rubric only parsed); code, not content: the
    # rubric's identity is its file's bytes
    stretch_code: Mapping[str, Callable[..., object]] = field(
        default_factory=dict, compare=False, repr=False
    )
    # late.toml beside the rubric file (``grader._late``), as load_rubric found it: the
    # instructor's like the rubric, never part of its bytes, so a due date moved changes
    # no report's digest (None: no late policy)
    late: LatePolicy | None = None


def _kit_rubric() -> Path:
    """The default rubric: ``rubric/`` beside this package in a checkout (editable or not),
    else the copy an installed gradekit ships as ``grader.kit_rubric`` (package data)."""
    beside = Path(__file__).resolve().parents[2] / "rubric" / "bootcamp.toml"
    if beside.is_file():
        return beside
    return Path(str(importlib.resources.files("grader.kit_rubric").joinpath("bootcamp.toml")))


KIT_RUBRIC = _kit_rubric()


SETS = "regression"  # beside the rubric file: the regression sets its criteria pin


def load_rubric(path: Path) -> Rubric:
    """Read and validate the rubric at ``path``; custom checks and the lab's own stretch
    goals' functions are imported to fail early, and the regression sets it pins are read
    from ``SETS`` beside it."""
    data = _read(path)
    rubric = parse_rubric(data, source=str(path))
    at = _Locator(data.decode("utf-8"), str(path))
    for index, criterion in enumerate(rubric.criteria):
        if criterion.custom:
            try:
                load_custom_check(criterion.check, rubric_dir=path.parent)
            except RubricError as exc:
                raise RubricError(f"{at.where('criterion', index, 'check')}: {exc}") from exc
    rubric = with_stretch_code(
        rubric, path.parent, lambda index, key: at.where("stretch", index, key)
    )
    # The rubric's folder resolved, not regression/ (a link, maybe): the batch's workers
    # import the [[stretch]] functions from the parent of sets_folder.
    folder = path.parent.resolve() / SETS
    return replace(
        rubric,
        sets=MappingProxyType(_pinned_sets(rubric, folder, at)),
        sets_folder=str(folder),
        late=load_late_policy(path.parent),
    )


def _pinned_sets(rubric: Rubric, folder: Path, at: _Locator) -> dict[str, RegressionSet | None]:
    """``name@version`` -> the set, for every regression criterion's ``params.set``. A
    malformed reference or a set that was edited is an error at its line; a version that
    is not there is None (the check is then degraded, and says so)."""
    sets: dict[str, RegressionSet | None] = {}
    for index, criterion in enumerate(rubric.criteria):
        ref = criterion.params.get("set", "") if criterion.check == "regression" else ""
        if not ref or ref in sets:
            continue
        try:
            name, version = parse_ref(ref)
            sets[ref] = load_set(folder, name, version)
        except UsageError as exc:
            line = at.line("criterion.params", index, "set")
            raise RubricError(f"{at.at(line)}: set = {ref!r}: {exc}") from None
    return sets


def load_cases(path: Path) -> list[Case]:
    """Read the ``[[case]]`` tables of the rubric at ``path``, in file order.

    Only the cases are validated: a student's copy of a rubric is enough to record.
    """
    text, document = _document(_read(path), str(path))
    return list(_cases(document.get("case"), _Locator(text, str(path))))


def parse_rubric(data: bytes, *, source: str) -> Rubric:
    """Validate a rubric file's bytes; ``source`` names it in error messages."""
    text, document = _document(data, source)
    return _validated(document, _Locator(text, source), hashlib.sha256(data).hexdigest())


def rubric_of_tables(tables: Mapping[str, object], *, source: str, sha256: str) -> Rubric:
    """A rubric from its tables as ``tomllib`` reads a rubric file (a number with a fraction
    as ``Decimal``), validated by the very checks ``parse_rubric`` runs on a file; ``source``
    names it in error messages (which then give no line: there is no file to point into),
    ``sha256`` is the digest of the file it was read from."""
    return _validated(tables, _Locator("", source), sha256)


def _validated(document: Mapping[str, object], at: _Locator, sha256: str) -> Rubric:
    """Every table of a rubric checked, in file order; the first problem is a RubricError."""
    _no_unknown(document, _TOP_KEYS, "top-level table", lambda key: at.where(key))
    rubric_id, version, title = _meta(document.get("rubric"), at)
    changes = _changes(document.get("rubric"), at, rubric_id, version)
    cases = _cases(document.get("case"), at)
    criteria = _criteria(document.get("criterion"), at, len(cases))
    stretch = lab_goals(document.get("stretch"), lambda index, key: at.where("stretch", index, key))
    return Rubric(
        id=rubric_id,
        version=version,
        title=title,
        cases=cases,
        criteria=criteria,
        limits=_limits(document.get("limits", {}), at),
        sha256=sha256,
        packages=MappingProxyType(_packages(document.get("packages", {}), at)),
        changes=changes,
        stretch=stretch,
    )


def load_custom_check(spec: str, *, rubric_dir: Path, key: str = "check") -> Callable[..., object]:
    """Import ``package.module:function`` from the rubric's folder (``load_spec``); ``key``
    is the rubric key that names it, for messages."""
    function = load_spec(spec, folder=rubric_dir, where=f'{key} = "{spec}"', error=RubricError)
    if not callable(function):
        raise RubricError(
            f'{key} = "{spec}": {spec.partition(":")[0]} has no function {spec.partition(":")[2]!r}'
        )
    return function


def with_stretch_code(rubric: Rubric, folder: Path, where: Callable[[int, str], str]) -> Rubric:
    """``rubric`` with each function its ``[[stretch]]`` tables name imported from
    ``folder``, the rubric's own, as its custom checks are (``load_custom_check``);
    ``where(index, key)`` places a table's key in an error, which says the fix."""
    code: dict[str, Callable[..., object]] = {}
    for index, goal in enumerate(rubric.stretch):
        for key, spec in (("evidence", goal.evidence), ("basis", goal.basis)):
            if not spec or spec in code:
                continue
            try:
                code[spec] = load_custom_check(spec, rubric_dir=folder, key=key)
            except RubricError as exc:
                raise RubricError(f"{where(index, key)}: stretch goal {goal.id}: {exc}") from exc
    return replace(rubric, stretch_code=MappingProxyType(code))


def distribute(total: Decimal, shares: Sequence[int]) -> list[Decimal]:
    """Split ``total`` in proportion to ``shares``, exact to the cent.

    Each part is rounded down to the cent; the cents left over go one each to the parts
    that lost most to rounding, the earlier part first on a tie (so equal shares give the
    extra cents to the first parts).
    """
    whole = sum(shares)
    exact = [total * share / whole for share in shares]
    parts = [value.quantize(CENT, rounding=ROUND_DOWN) for value in exact]
    left = int((total - sum(parts, Decimal(0))) / CENT)
    by_loss = sorted(range(len(parts)), key=lambda i: parts[i] - exact[i])  # stable sort
    for index in by_loss[:left]:
        parts[index] += CENT
    return parts


def per_case_points(rubric: Rubric, criterion: Criterion) -> dict[str, Decimal]:
    """Each case's points under ``criterion``: the weight less the named sub-checks.

    Empty for checks that do not split over cases (``written_summary``, ``stretch_goal``);
    a custom check gets its whole weight split over the cases.
    """
    if not SUBCHECKS.get(criterion.check, ((), True))[1]:
        return {}
    rest = Decimal(criterion.weight) - sum(criterion.points.values(), Decimal(0))
    parts = distribute(rest, [1] * len(rubric.cases))
    return {case.id: part for case, part in zip(rubric.cases, parts, strict=True)}


def check_maxima(rubric: Rubric, criterion: Criterion) -> dict[str, Decimal]:
    """Every sub-check's maximum under ``criterion``: the cases first, then named ones."""
    return per_case_points(rubric, criterion) | dict(criterion.points)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise RubricError(f"no rubric at {path}: pass --rubric PATH") from None
    except OSError as exc:
        raise RubricError(f"cannot read the rubric at {path} ({exc.strerror})") from exc


def _document(data: bytes, source: str) -> tuple[str, dict[str, object]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RubricError(f"{source}: byte {exc.start} is not UTF-8; save it as UTF-8") from exc
    try:
        return text, tomllib.loads(text, parse_float=Decimal)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        where = f"{source}:{found[1]}:{found[2]}" if found else source
        problem = re.sub(r"\s*\(at line .*\)$", "", str(exc))
        raise RubricError(f"{where}: not valid TOML ({problem}); fix the syntax there") from exc


class _Locator:
    """Lines of tables and keys in the rubric's text, for error messages only."""

    _HEADER = re.compile(r"\s*(\[\[?)\s*([A-Za-z0-9_.\-]+)\s*\]\]?")
    _KEY = re.compile(r"\s*([A-Za-z0-9_-]+)\s*[.=]")

    def __init__(self, text: str, source: str) -> None:
        self.source = source
        self._tables: dict[tuple[str, int], int] = {}
        self._keys: dict[tuple[str, int, str], int] = {}
        counts: dict[str, int] = {}
        table, in_string = ("", 0), False
        for number, line in enumerate(text.splitlines(), 1):
            header = None if in_string else self._HEADER.match(line)
            key = None if in_string or header else self._KEY.match(line)
            if header:
                name = header[2]
                if header[1] == "[[":
                    counts[name] = counts.get(name, 0) + 1
                table = (name, max(counts.get(name.split(".")[0], 1) - 1, 0))
                self._tables.setdefault(table, number)
            elif key:
                self._keys.setdefault((*table, key[1]), number)
            if (line.count('"""') + line.count("'''")) % 2:
                in_string = not in_string

    def line(self, table: str = "", index: int = 0, key: str = "") -> int | None:
        """The line of ``key`` in the ``index``-th ``table``, else of the table."""
        return self._keys.get((table, index, key)) or self._tables.get((table, index))

    def where(self, table: str = "", index: int = 0, key: str = "") -> str:
        """``source:line`` of ``key`` in the ``index``-th ``table``, or of the table."""
        return self.at(self.line(table, index, key))

    def at(self, line: int | None) -> str:
        """``source:line``, or ``source`` when the line is unknown."""
        return f"{self.source}:{line}" if line else self.source


def _no_unknown(
    table: Mapping[str, object], valid: Sequence[str], what: str, locate: Callable[[str], str]
) -> None:
    unknown = sorted(set(table) - set(valid))
    if unknown:
        raise RubricError(
            f"{locate(unknown[0])}: unknown {what} {', '.join(unknown)}; "
            f"the valid ones are {', '.join(valid)}"
        )


def _meta(raw: object, at: _Locator) -> tuple[str, int, str]:
    if not isinstance(raw, dict):
        raise RubricError(f"{at.where()}: no [rubric] table; add one with id, version and title")
    _no_unknown(raw, _RUBRIC_KEYS, "key in [rubric]", lambda key: at.where("rubric", 0, key))
    rubric_id, version, title = raw.get("id"), raw.get("version"), raw.get("title")
    for key, value in (("id", rubric_id), ("title", title)):
        if not isinstance(value, str) or not value.strip():
            raise RubricError(f'{at.where("rubric", 0, key)}: [rubric] needs {key} = "..."')
    if type(version) is not int or version < 1:
        raise RubricError(
            f"{at.where('rubric', 0, 'version')}: [rubric] needs version = a whole number >= 1"
        )
    return cast(str, rubric_id), version, cast(str, title)


def _changes(raw: object, at: _Locator, rubric_id: str, version: int) -> str:
    """[rubric] changes, a one-paragraph reason: text when given, and given by every
    version after the first (but those released before the key existed)."""
    value = raw.get("changes", "") if isinstance(raw, dict) else ""
    if not isinstance(value, str):
        raise RubricError(
            f"{at.where('rubric', 0, 'changes')}: [rubric] changes must be "
            'text: why this version differs from the last, changes = "..."'
        )
    if version > 1 and not value.strip() and (rubric_id, version) not in _BEFORE_CHANGES:
        given = isinstance(raw, dict) and "changes" in raw
        where = at.where("rubric", 0, "changes" if given else "version")
        raise RubricError(
            f'{where}: version {version} gives no reason for its change: add changes = "..." '
            f"under [rubric], saying what changed since version {version - 1} and why (the "
            "ledger keeps it, and a grade's history shows it beside what changed; a version "
            "a ledger already graded with takes a new number too)"
        )
    return value.strip()


def _cases(raw: object, at: _Locator) -> tuple[Case, ...]:
    if not isinstance(raw, list) or not raw:
        raise RubricError(
            f"{at.source}: no [[case]] tables; add at least one with an id and a task"
        )
    cases = tuple(_case(table, index, at) for index, table in enumerate(raw))
    _unique([case.id for case in cases], "case", at)
    return cases


def _unique(ids: Sequence[str], table: str, at: _Locator) -> None:
    first: dict[str, int] = {}
    for index, item in enumerate(ids):
        if item in first:
            raise RubricError(
                f"{at.where(table, index, 'id')}: {table} id {item!r} appears twice (first at "
                f"{at.where(table, first[item], 'id')}); {table} ids are unique"
            )
        first[item] = index


def _case(raw: object, index: int, at: _Locator) -> Case:
    where = at.where("case", index)
    if not isinstance(raw, dict):
        raise RubricError(f"{where}: [[case]] number {index + 1} is not a table")
    _no_unknown(raw, _CASE_KEYS, "key in [[case]]", lambda key: at.where("case", index, key))
    case_id, task = raw.get("id"), raw.get("task")
    if not isinstance(case_id, str) or not CASE_ID.fullmatch(case_id):
        raise RubricError(
            f"{at.where('case', index, 'id')}: case id {case_id!r} must match "
            "[a-z0-9][a-z0-9-]* (it names a cassette file)"
        )
    if not isinstance(task, str) or not task.strip():
        raise RubricError(f'{where}: case {case_id!r} needs a non-empty task = "..."')
    expect = None
    if "expect" in raw:
        place = at.at(at.line("case.expect", index) or at.line("case", index, "expect"))
        try:
            expect = parse_expectation(raw["expect"], f"{place}: [case.expect] of {case_id!r}")
        except UsageError as exc:
            raise RubricError(str(exc)) from None
    return Case(id=case_id, task=task, expect=expect)


def _criteria(raw: object, at: _Locator, case_count: int) -> tuple[Criterion, ...]:
    if not isinstance(raw, list) or not raw:
        raise RubricError(f"{at.source}: no [[criterion]] tables; add criteria weighing 100")
    criteria = tuple(_criterion(table, index, at, case_count) for index, table in enumerate(raw))
    _unique([criterion.id for criterion in criteria], "criterion", at)
    total = sum(c.weight for c in criteria)
    if total != TOTAL_WEIGHT:
        listed = ", ".join(f"{c.id} {c.weight}" for c in criteria)
        raise RubricError(
            f"{at.where('criterion', 0, 'weight')}: weights must sum to {TOTAL_WEIGHT}, "
            f"they sum to {total} ({listed}); change the weights"
        )
    return criteria


def _criterion(raw: object, index: int, at: _Locator, case_count: int) -> Criterion:
    where = at.where("criterion", index)
    if not isinstance(raw, dict):
        raise RubricError(f"{where}: [[criterion]] number {index + 1} is not a table")
    _no_unknown(
        raw, _CRITERION_KEYS, "key in [[criterion]]", lambda key: at.where("criterion", index, key)
    )
    criterion_id = raw.get("id")
    if not isinstance(criterion_id, str) or not CRITERION_ID.fullmatch(criterion_id):
        raise RubricError(
            f"{at.where('criterion', index, 'id')}: [[criterion]] number {index + 1} needs an "
            f"id matching [a-z0-9][a-z0-9_-]*, not {criterion_id!r}"
        )
    if criterion_id in _RESERVED_IDS:
        raise RubricError(
            f"{at.where('criterion', index, 'id')}: criterion id {criterion_id!r} is a gradebook "
            f"column; choose another (reserved: {', '.join(_RESERVED_IDS)})"
        )
    texts = {key: raw.get(key) for key in _CRITERION_TEXT}
    for key, value in texts.items():
        if not isinstance(value, str) or not value.strip():
            raise RubricError(f'{where}: criterion {criterion_id!r} needs {key} = "..."')
    weight = raw.get("weight")
    if type(weight) is not int or weight < 1:
        raise RubricError(
            f"{at.where('criterion', index, 'weight')}: criterion {criterion_id!r} needs "
            f"weight = a positive whole number, not {_shown(weight)}"
        )
    check = cast(str, texts["check"])
    _check_name(check, at.where("criterion", index, "check"))
    points = _points(raw.get("points"), check, weight, case_count, at, index)
    params = _params(raw.get("params"), check, at, index)
    return Criterion(
        id=criterion_id,
        title=cast(str, texts["title"]),
        weight=weight,
        check=check,
        full=cast(str, texts["full"]),
        typical_loss=cast(str, texts["typical_loss"]),
        points=MappingProxyType(points),
        params=MappingProxyType(params),
    )


def _params(raw: object, check: str, at: _Locator, index: int) -> dict[str, str]:
    """``[criterion.params]``: text values; a built-in check takes only its own names. A
    parameter left out is no error here: the check is then degraded, and says so."""
    if raw is None:
        return {}
    where = at.at(at.line("criterion.params", index) or at.line("criterion", index, "params"))
    if not isinstance(raw, dict):
        raise RubricError(f"{where}: params must be a table: [criterion.params]")
    if check in SUBCHECKS:
        valid = PARAMS.get(check) or (f"(none: {check} takes no parameters; remove the table)",)
        _no_unknown(
            raw,
            valid,
            f"parameter of {check}",
            lambda key: at.at(at.line("criterion.params", index, key)),
        )
    for key, value in raw.items():
        if not isinstance(value, str) or not value.strip():
            raise RubricError(
                f"{at.at(at.line('criterion.params', index, key))}: "
                f'params.{key} must be a non-empty string, e.g. {key} = "..."'
            )
    return dict(sorted(raw.items()))


def _check_name(check: str, where: str) -> None:
    if check in SUBCHECKS or SPEC.fullmatch(check):
        return
    raise RubricError(
        f"{where}: unknown check {check!r}; use a built-in one ({', '.join(sorted(SUBCHECKS))}) "
        'or your own as "package.module:function"'
    )


def _points(
    raw: object, check: str, weight: int, case_count: int, at: _Locator, index: int
) -> dict[str, Decimal]:
    def place(key: str = "") -> str:  # a [criterion.points] table, or dotted points.x keys
        line = at.line("criterion.points", index, key) or at.line("criterion", index, "points")
        return at.at(line)

    where = place()
    if check not in SUBCHECKS:
        if raw is not None:
            raise RubricError(f"{where}: a custom check has no points table; remove it")
        return {}
    names, splits = SUBCHECKS[check]
    if raw is None:
        return default_points(check, weight)
    if not isinstance(raw, dict):
        raise RubricError(f"{where}: points must be a table of sub-check = points")
    valid = names or ("(none: this check has no named sub-checks; remove the table)",)
    _no_unknown(raw, valid, f"sub-check of {check}", place)
    points = {name: _decimal(raw.get(name, 0), f"{place(name)}: points.{name}") for name in names}
    total = sum(points.values(), Decimal(0))
    if splits and total > weight - CENT * case_count:
        raise RubricError(
            f"{where}: the named points sum to {total} but must stay below the weight {weight} "
            f"by at least {CENT * case_count} so each of the {case_count} cases scores"
        )
    if not splits and total != weight:
        raise RubricError(
            f"{where}: the points of {', '.join(names)} must sum to the weight {weight}, "
            f"they sum to {total}"
        )
    return points


def default_points(check: str, weight: int) -> dict[str, Decimal]:
    """The named sub-checks' points of ``check`` at ``weight`` when the rubric gives no
    ``[criterion.points]`` table (empty for a check without named sub-checks)."""
    names, splits = SUBCHECKS[check]
    if not names:
        return {}
    reference, shares = _DEFAULT_POINTS[check]
    rest = (reference - sum(shares),) if splits else ()
    parts = distribute(Decimal(weight), [*shares, *rest])
    return dict(zip(names, parts[: len(names)], strict=True))


def _decimal(value: object, where: str) -> Decimal:
    if type(value) is int:
        value = Decimal(value)
    if not isinstance(value, Decimal) or not value.is_finite() or not 0 <= value <= TOTAL_WEIGHT:
        raise RubricError(f"{where} must be a number from 0 to {TOTAL_WEIGHT}, not {_shown(value)}")
    if value != value.quantize(CENT):
        raise RubricError(f"{where} = {value} has more than two decimal places; round it")
    return value.quantize(CENT)


def _limits(raw: object, at: _Locator) -> Limits:
    where = at.where("limits")
    if not isinstance(raw, dict):
        raise RubricError(f"{where}: limits must be a table: [limits]")
    _no_unknown(raw, _LIMIT_KEYS, "limit", lambda key: at.where("limits", 0, key))
    values: dict[str, float | int] = {}
    for key, value in raw.items():
        place = at.where("limits", 0, key)
        if key == "timeout_s" and isinstance(value, Decimal) and value.is_finite() and value > 0:
            values[key] = float(value)
        elif type(value) is int and value > 0:
            values[key] = value
        else:
            kind = "a positive number" if key == "timeout_s" else "a positive whole number"
            raise RubricError(f"{place}: limits.{key} must be {kind}, not {_shown(value)}")
    return Limits(**values)  # type: ignore[arg-type]


def _packages(raw: object, at: _Locator) -> dict[str, str]:
    """``[packages]``: import name = pip requirement, for each package a lab may import."""
    example = 'openai = "openai>=3.50,<4"'
    if not isinstance(raw, dict):
        raise RubricError(
            f"{at.where('packages')}: packages must be a table of import name = "
            f"pip requirement: [packages], then {example}"
        )
    for name, requirement in raw.items():
        place = at.where("packages", 0, name)
        if not IMPORT_NAME.fullmatch(name):
            raise RubricError(
                f"{place}: [packages] key {name!r} is not a top-level module name (what the "
                f"agent writes after `import`, e.g. yaml for PyYAML): write {example}"
            )
        if name in sys.stdlib_module_names or name in KIT_MODULES:
            what = (
                "part of Python's standard library"
                if name in sys.stdlib_module_names
                else "gradekit's own"
            )
            raise RubricError(
                f"{place}: {name} is {what}, which every agent may import: remove "
                "it from [packages]"
            )
        if not isinstance(requirement, str) or requirement_key(requirement) is None:
            raise RubricError(
                f"{place}: packages.{name} must be the pip requirement that installs it, a "
                f"project name with optional extras and versions (no URL, marker or option), "
                f"not {_shown(requirement)}: write {example}"
            )
    return {name: requirement.strip() for name, requirement in raw.items()}


def _shown(value: object) -> str:
    """A TOML value as the instructor wrote it, near enough."""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value) if isinstance(value, Decimal | int) else repr(value)
