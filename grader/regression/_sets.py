"""Regression sets: reviewed, approved failures, kept as immutable, versioned collections
of items.

A set lives in ``SETS/<name>/``. Version N is ``v<N>.json``, written once and never
rewritten: it holds every item of version N-1, unchanged and in order, then the one it
adds, and names the version it supersedes by the SHA-256 of that file's bytes, so an
edited version breaks the chain at the version after it. An item's world (the tool reads
its task starts from) is content-addressed, ``items/<sha256>.json``: stored once, whichever
versions and items name it. A set is named by ``name@version`` (``parse_ref``); the newest
version has no successor to vouch for it, so its sha256 (``gradekit regression show``, and
the ledger's promote event) is what proves it untouched later.

An item fixes what every student's agent is asked (its task and world) and what the run
must come to (its expectation), never one student's model answers: each student records
the item's task themselves, and is graded on those recordings. So that they can, version N
has a **public view**, ``v<N>.public.json``: its items without where they came from (the
classmate, the report, the reviewer, the reason), each world inline. It is derived from
``v<N>.json`` alone, written beside it, shipped in the hand-out, and read where ``v<N>.json``
is not there (a student's ``record`` and ``check``).

An item's ``source`` also records its **origin**, the case's own source (``run``, ``manual``,
``ai_draft``), and for a model's draft ``by``, the label that filed it; the public view
keeps the origin alone (``origin``: a draft is marked as one for the students, and nothing
names anyone). Both are optional keys of ``gradekit.regression/2`` and
``gradekit.regression-public/1``, not a new format: every version written before they
existed reads as it is and writes back to the same bytes, so its sha256 (which the next
version's ``supersedes`` and the asset ledger's promote event pin) never changes, a chain
never mixes two formats, and promotion carries an old item over without one (its origin is
then not recorded: ``Item.origin`` is None). A new format would have had to do one or the
other: rewrite immutable versions, or chain a ``/3`` version onto ``/2`` ones.

This module is the format: its values, reading, checking and verifying. Writing the next
version is ``grader.regression._publish``'s; what may become an item (a case saved from a
failing run or written by hand, investigated, reviewed as a regression candidate and
approved) is the asset ledger's (``grader.assets._assets``). Every problem with a set's
files is a ``UsageError`` that names the file and says to restore it; a world file that is
missing is no error here but ``Item.missing``, so that the grader degrades that one item
and grades the rest.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, NoReturn

from gradekit import UsageError, tool_key
from gradekit.internal import commands
from grader._expect import Expectation, expectation_document, parse_expectation
from grader._specs import SPEC

__all__ = [
    "FORMAT",
    "NAME",
    "ORIGINS",
    "PAYLOAD_CAP",
    "PUBLIC_FORMAT",
    "ROLES",
    "WORLD_FORMAT",
    "Item",
    "RegressionSet",
    "SetVerdict",
    "decode_item",
    "decode_world",
    "item_document",
    "load_set",
    "parse_ref",
    "payload_name",
    "public_json",
    "public_name",
    "recording_name",
    "set_document",
    "set_json",
    "set_names",
    "valid_name",
    "verify_sets",
    "version_numbers",
    "world_json",
]

FORMAT = "gradekit.regression/2"
PUBLIC_FORMAT = "gradekit.regression-public/1"
WORLD_FORMAT = "gradekit.world/1"
# Formats this gradekit reads no more, and why, with the fix.
_RETIRED = {
    "gradekit.regression/1": "its case items replay the one student's model answers "
    "they were promoted from, so they cannot grade anyone else's agent: promote "
    "those failures again into a new set and pin that one"
}
NAME = re.compile(r"[a-z0-9][a-z0-9-]*")  # set names and item ids: a name is a folder name
PAYLOAD_CAP = 1024 * 1024  # the most an item's world may hold: it comes from a student
_LONGEST_NAME = 64
_REF = re.compile(r"([^@]*)@([1-9][0-9]*)")
_VERSION_FILE = re.compile(r"v([1-9][0-9]*)\.json")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_ITEMS = "items"
_RECORDINGS = "regression"  # a student's recordings of set S's item I: <folder>/regression/S/I
ROLES = ("world",)  # the payloads an item may carry
_SUFFIX = {"world": ".json"}
_SET_KEYS = frozenset({"format", "name", "version", "supersedes", "created_by", "items"})
_PUBLIC_ITEM_KEYS = frozenset({"id", "kind", "added_in", "task", "agent", "world", "expect"})
_ITEM_KEYS = _PUBLIC_ITEM_KEYS | {"source", "reviewed_by", "reason"}
# Where an item came from: the case (its id and version) it publishes, the candidate that
# was approved, and the run the case was saved from (null for a case written or drafted).
_SOURCE_TYPES: Mapping[str, type] = MappingProxyType(
    {"approved_by": str, "candidate": str, "case": str, "run": dict, "version": int}
)
# And, optional (absent from an item promoted before they were recorded): the case's origin,
# and for a model's draft the label that filed it (``by``).
ORIGINS = ("run", "manual", "ai_draft")
_DRAFTED = "ai_draft"
_ORIGIN_KEYS = frozenset({"origin", "by"})
_RUN_TYPES: Mapping[str, type] = MappingProxyType(
    {"path": str, "report": str, "seq": int, "student": str, "submission": str}
)


class _Corrupt(Exception):
    """A file of a set that is not as promotion wrote it: ``path`` and why, with the fix.
    The public functions raise it as a ``UsageError``; ``verify_sets`` reports it."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path, self.why = path, why


@contextmanager
def _usage_errors() -> Iterator[None]:
    try:
        yield
    except _Corrupt as exc:
        raise UsageError(str(exc)) from None


@dataclass(frozen=True, slots=True)
class Item:
    """One reviewed failure, made to apply to every student: what to ask (``task``, the
    ``world`` of tool reads it starts from, the ``agent`` that is asked: None for each
    submission's own, its manifest's), what the run must come to (``expect``), and where it
    came from (``source``: the case and version it publishes, the candidate and its approver,
    the run the case was saved from or None, and the case's ``origin``, with ``by`` for a
    model's draft). The world's
    bytes are there, their digest checked, unless the file is gone: then ``missing`` says
    so and how to restore it. An item read from a public view has no reviewer or reason,
    and of its source only the origin."""

    id: str
    kind: Literal["incident", "case"]
    task: str
    agent: str | None
    expect: Expectation
    added_in: int
    source: Mapping[str, Any]
    reviewed_by: str
    reason: str
    world: bytes | None = None  # the world's bytes (WORLD_FORMAT), digest checked
    missing: str = ""  # why the world this item needs is not in the set; "" when it is
    digests: Mapping[str, str] = field(default_factory=dict)  # payload role -> its sha256

    @property
    def origin(self) -> str | None:
        """The case's source: ``run``, ``manual`` or ``ai_draft``; None when the item was
        promoted before items recorded it."""
        found = self.source.get("origin")
        return found if isinstance(found, str) else None

    def payload(self, role: str) -> bytes | None:
        """The bytes of payload ``role`` (world), if there are any."""
        data: bytes | None = getattr(self, role)
        return data

    def reads(self) -> dict[str, Any]:
        """The world: tool key -> the recorded result of that read-only call."""
        return decode_world(self.world, f"item {self.id}") if self.world is not None else {}


@dataclass(frozen=True, slots=True)
class RegressionSet:
    """One version of a set, as its file holds it; ``sha256`` is over the file's bytes.
    ``public``: read from the version's public view (the file itself is not there), whose
    ``sha256`` is the one the view names."""

    name: str
    version: int
    sha256: str
    supersedes: Mapping[str, Any] | None
    created_by: str
    items: tuple[Item, ...]
    public: bool = False

    @property
    def ref(self) -> str:
        """The set as a rubric pins it: ``name@version``."""
        return f"{self.name}@{self.version}"


def recording_name(set_name: str, item_id: str) -> str:
    """The name a student's recordings of an item go by, as a case's go by its id: the
    cassette ``<cassettes>/regression/SET/ITEM.json`` (and ``.http.json``) and the fixture
    ``<fixtures>/regression/SET/ITEM.json``. The set's name, never its version: an item a
    later version inherits is recorded once."""
    return f"{_RECORDINGS}/{set_name}/{item_id}"


@dataclass(frozen=True, slots=True)
class SetVerdict:
    """What ``verify_sets`` found of one file: whether it holds, and why (or what it holds)."""

    path: Path
    ok: bool
    message: str


# -- names -------------------------------------------------------------------------------------


def valid_name(text: str, what: str) -> str:
    """``text`` if it is a valid set name or item id (``what`` says which), else a
    ``UsageError`` with the fix. A set's name becomes a folder: nothing else ever does."""
    if not NAME.fullmatch(text) or len(text) > _LONGEST_NAME:
        raise UsageError(
            f"{what} {text!r} is not a name: use 1 to {_LONGEST_NAME} lowercase "
            "letters, digits and '-', starting with a letter or digit "
            "(e.g. refunds)"
        )
    return text


def parse_ref(text: str) -> tuple[str, int]:
    """``"refunds@2"`` as ``("refunds", 2)``; a ``UsageError`` with the fix otherwise."""
    match = _REF.fullmatch(text)
    if match is None:
        raise UsageError(
            f"{text!r} is not a regression set reference: write NAME@VERSION, "
            f"e.g. refunds@2 (`{commands.REGRESSION_SHOW(name='NAME')}` lists the "
            "versions)"
        )
    return valid_name(match[1], "regression set"), int(match[2])


# -- reading -----------------------------------------------------------------------------------


def set_names(sets: Path) -> list[str]:
    """The sets in the folder ``sets``, sorted: every folder whose name is a set name."""
    try:
        names = os.listdir(sets)
    except FileNotFoundError:
        return []
    return sorted(name for name in names if NAME.fullmatch(name) and (sets / name).is_dir())


def version_numbers(sets: Path, name: str) -> list[int]:
    """The versions of set ``name`` that have a file, in order (none: no such set)."""
    try:
        names = os.listdir(sets / valid_name(name, "regression set"))
    except FileNotFoundError:
        return []
    return sorted(int(m[1]) for m in map(_VERSION_FILE.fullmatch, names) if m)


def load_set(sets: Path, name: str, version: int) -> RegressionSet | None:
    """Version ``version`` of set ``name`` in ``sets``, payloads read and checked; else its
    public view (``RegressionSet.public``: a hand-out holds only that); None when it has
    neither. A ``UsageError`` when the file is not as promotion wrote it (not JSON, not
    canonical, a payload whose bytes do not match its digest) or was edited after the next
    version was published (that one's ``supersedes`` names other bytes)."""
    with _usage_errors():
        loaded = _load(sets, name, version, {})
        if loaded is not None:
            _vouched(sets, name, loaded)
            _published(sets, loaded)
            return loaded
        return _load_public(sets, name, version)


_ASSETS = "ledger.jsonl"  # beside the sets: its promote events vouch for what they published


def _published(sets: Path, loaded: RegressionSet) -> None:
    """The promote event that published this version, if the asset ledger has one, must
    name these bytes: the newest version has no successor to vouch for it."""
    try:
        lines = (sets / _ASSETS).read_bytes().splitlines()
    except FileNotFoundError:
        return
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a torn or broken line: the asset ledger's own verification says so
        if (
            isinstance(event, dict)
            and event.get("event") == "promote"
            and event.get("set") == loaded.name
            and event.get("version") == loaded.version
            and event.get("sha256") != loaded.sha256
        ):
            path = _version_path(sets, loaded.name, loaded.version)
            raise _Corrupt(
                path,
                f"regression set {loaded.ref} changed since asset ledger "
                f"event {event.get('seq')} published it (sha256 "
                f"{str(event.get('sha256'))[:12]}... then, {loaded.sha256[:12]}... "
                f"now): a set version never changes; {_restore(path)}",
            )


def _version_path(sets: Path, name: str, version: int) -> Path:
    if version < 1:
        raise UsageError(f"version {version} of {name}: versions count from 1")
    return sets / valid_name(name, "regression set") / f"v{version}.json"


def _load(
    sets: Path, name: str, version: int, cache: dict[Path, bytes | None]
) -> RegressionSet | None:
    path = _version_path(sets, name, version)
    data = _read(path, cap=None)
    if data is None:
        return None
    loaded = _decode(path, data, name, version)
    items = tuple(_with_payloads(item, path.parent, cache) for item in loaded.items)
    return replace(loaded, items=items)


def _vouched(sets: Path, name: str, loaded: RegressionSet) -> None:
    """The next version, if there is one, must supersede exactly these bytes."""
    successor = _version_path(sets, name, loaded.version + 1)
    data = _read(successor, cap=None)
    if data is None:
        return
    claimed = _json(successor, data).get("supersedes")
    held = claimed.get("sha256") if isinstance(claimed, dict) else claimed
    if held != loaded.sha256:
        path = _version_path(sets, name, loaded.version)
        raise _Corrupt(
            path,
            f"its bytes hash to {loaded.sha256[:12]}..., but "
            f"{successor.name} supersedes {str(held)[:12]}...: it was edited after "
            f"{successor.name} was published; {_restore(path)}",
        )


def _read(path: Path, *, cap: int | None) -> bytes | None:
    try:
        with path.open("rb") as handle:
            data = handle.read() if cap is None else handle.read(cap + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _Corrupt(
            path, f"cannot be read ({exc.strerror}): restore it with `git checkout -- {path}`"
        ) from None
    if cap is not None and len(data) > cap:
        raise _Corrupt(
            path,
            f"is larger than {cap} bytes, more than any payload promotion "
            f"writes: restore it with `git checkout -- {path}`",
        )
    return data


def _restore(path: Path) -> str:
    return (
        f"restore it with `git checkout -- {path}` (a version is never edited: promote "
        "into a new one)"
    )


def _json(path: Path, data: bytes) -> dict[str, Any]:
    try:
        document = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _Corrupt(path, f"not UTF-8 JSON ({exc}); {_restore(path)}") from None
    if not isinstance(document, dict):
        raise _Corrupt(path, f"not a {FORMAT} document (the JSON is no object); {_restore(path)}")
    return document


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def _decode(path: Path, data: bytes, name: str, version: int) -> RegressionSet:
    """The version file's document, every field checked, payloads not yet read."""
    document = _json(path, data)
    if set_json(document) != data:
        raise _Corrupt(
            path,
            f"the bytes are not canonical (reformatted, or a key given twice); {_restore(path)}",
        )
    _format(path, document, FORMAT)
    _keys(path, document, _SET_KEYS, "a set")
    if document["name"] != name or document["version"] != version:
        raise _Corrupt(
            path,
            f"it says it is {document['name']!r} version "
            f"{document['version']!r}, not {name} version {version}: "
            f"{_restore(path)}",
        )
    loaded = RegressionSet(
        name,
        version,
        hashlib.sha256(data).hexdigest(),
        _supersedes(path, document["supersedes"], version),
        _text(path, document["created_by"], "created_by"),
        _items(path, document["items"], version),
    )
    if set_json(set_document(loaded)) != data:  # a field this gradekit would not write
        raise _Corrupt(path, f"it holds values promotion never writes; {_restore(path)}")
    return loaded


def _format(path: Path, document: Mapping[str, Any], wanted: str) -> None:
    found = document.get("format")
    if found in _RETIRED:
        raise _Corrupt(
            path, f"it is a {found} set, which this gradekit no longer grades: {_RETIRED[found]}"
        )
    if found != wanted:
        raise _Corrupt(
            path,
            f"format {found!r} is not {wanted!r}: read it with the gradekit "
            "that wrote it, or restore it",
        )


def _keys(path: Path, document: Mapping[str, Any], keys: frozenset[str], what: str) -> None:
    if set(document) != keys:
        odd = sorted(set(document) ^ keys)
        raise _Corrupt(
            path, f"{what} has the keys {sorted(keys)}; {', '.join(odd)} differ: {_restore(path)}"
        )


def _text(path: Path, value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Corrupt(path, f"{where} is {value!r}, not a text: {_restore(path)}")
    return value


def _supersedes(path: Path, raw: object, version: int) -> Mapping[str, Any] | None:
    if version == 1 and raw is None:
        return None
    if (
        isinstance(raw, dict)
        and set(raw) == {"sha256", "version"}
        and raw["version"] == version - 1
        and isinstance(raw["sha256"], str)
        and _SHA256.fullmatch(raw["sha256"])
    ):
        return MappingProxyType(dict(raw))
    wanted = (
        "null"
        if version == 1
        else f'{{"version": {version - 1}, "sha256": "<sha256 of v{version - 1}.json>"}}'
    )
    raise _Corrupt(path, f"supersedes is {raw!r}, where {wanted} belongs: {_restore(path)}")


def _items(path: Path, raw: object, version: int) -> tuple[Item, ...]:
    if not isinstance(raw, list) or not raw:
        raise _Corrupt(path, f"items is no list of items: {_restore(path)}")
    items = []
    for number, entry in enumerate(raw, 1):
        try:
            items.append(_item(entry, number, version))
        except _Bad as bad:
            raise _Corrupt(path, f"{bad}: {_restore(path)}") from None
    ids = [item.id for item in items]
    twice = sorted({item_id for item_id in ids if ids.count(item_id) > 1})
    if twice:
        raise _Corrupt(path, f"item {twice[0]} appears twice: {_restore(path)}")
    return tuple(items)


def decode_item(document: Mapping[str, Any], version: int) -> Item:
    """An item from its JSON document in version ``version`` (payloads not read); a
    ``UsageError`` saying what is wrong when load_set would refuse it."""
    try:
        return _item(document, 1, version)
    except _Bad as bad:
        raise UsageError(str(bad)) from None


class _Bad(Exception):
    """What is wrong with one item's JSON; the caller says where and what to do."""


def _item(raw: object, number: int, version: int) -> Item:
    """Item ``number`` of a version, its world named by digest but not yet read."""
    if not isinstance(raw, dict) or set(raw) != _ITEM_KEYS:
        raise _Bad(f"item {number} is no object with the keys {sorted(_ITEM_KEYS)}")
    common = _common(raw, number, version)
    texts = {key: raw[key] for key in ("reviewed_by", "reason")}
    empty = [key for key, value in texts.items() if not isinstance(value, str) or not value.strip()]
    if empty:
        raise _Bad(f"item {common.id}'s {empty[0]} is {texts[empty[0]]!r}, not a text")
    return replace(
        common,
        source=_source(raw["source"], common.id),
        reviewed_by=texts["reviewed_by"],
        reason=texts["reason"],
        digests=_digests(raw, common.id),
    )


def _common(raw: Mapping[str, Any], number: int, version: int) -> Item:
    """What an item and its public view share: id, kind, version added, task, agent and
    expectation (no world, no source)."""
    item_id = raw["id"]
    if not isinstance(item_id, str) or not NAME.fullmatch(item_id) or len(item_id) > _LONGEST_NAME:
        raise _Bad(f"item {number} has the id {item_id!r}, which is not a name")
    kind, added_in, agent = raw["kind"], raw["added_in"], raw["agent"]
    problem = _item_problem(kind, added_in, version, agent)
    if problem:
        raise _Bad(f"item {item_id}: {problem}")
    try:
        expect = parse_expectation(raw["expect"], f"item {item_id}")
    except UsageError as exc:
        raise _Bad(str(exc)) from None
    if not expect.outcome:
        raise _Bad(f"item {item_id} has no expected outcome, so it could never be judged")
    task = raw["task"]
    if not isinstance(task, str) or not task.strip():
        raise _Bad(f"item {item_id}'s task is {task!r}, not a text")
    return Item(item_id, kind, task, agent, expect, added_in, MappingProxyType({}), "", "")


def _item_problem(kind: object, added_in: object, version: int, agent: object) -> str:
    if kind not in ("incident", "case"):
        return f"kind {kind!r} is neither incident nor case"
    if not isinstance(added_in, int) or isinstance(added_in, bool) or not 1 <= added_in <= version:
        return f"added_in {added_in!r} is no version from 1 to {version}"
    if agent is not None and (not isinstance(agent, str) or not SPEC.fullmatch(agent)):
        return (
            f"agent {agent!r} is neither null (each submission's own) nor package.module:function"
        )
    return ""


def _source(raw: object, item_id: str) -> Mapping[str, Any]:
    run = raw.get("run") if isinstance(raw, dict) else None
    if (
        not isinstance(raw, dict)
        or set(raw) - _ORIGIN_KEYS != set(_SOURCE_TYPES)
        or not all(
            type(raw[key]) is wanted or (key == "run" and raw[key] is None)
            for key, wanted in _SOURCE_TYPES.items()
        )
        or (
            run is not None
            and (
                set(run) != set(_RUN_TYPES)
                or not all(type(run[key]) is wanted for key, wanted in _RUN_TYPES.items())
            )
        )
    ):
        raise _Bad(
            f"item {item_id}'s source is not {{{', '.join(_SOURCE_TYPES)}}} (and "
            f"optionally origin, and by for an ai_draft) with run null or "
            f"{{{', '.join(_RUN_TYPES)}}}"
        )
    problem = _origin_problem(raw)
    if problem:
        raise _Bad(f"item {item_id}'s {problem}")
    return MappingProxyType(dict(raw))


def _origin_problem(source: Mapping[str, Any]) -> str:
    """What is wrong with a source's origin and ``by`` ("" when nothing is; none at all is
    an item promoted before they were recorded)."""
    if "origin" not in source:
        return "source holds by only for an ai_draft" if "by" in source else ""
    origin = source["origin"]
    if origin not in ORIGINS:
        return f"origin {origin!r} is not one of {', '.join(ORIGINS)}"
    if (origin == "run") != (source["run"] is not None):
        return f"origin {origin}, but its run is " + (
            "null" if source["run"] is None else "the run a case was saved from"
        )
    if origin != _DRAFTED:
        return "source holds by only for an ai_draft" if "by" in source else ""
    by = source.get("by")
    if not isinstance(by, str) or not by.strip() or "\n" in by:
        return f"an ai_draft's source names the label that filed it (by), not {by!r}"
    return ""


def _digests(raw: Mapping[str, Any], item_id: str) -> Mapping[str, str]:
    """The world reference's digest (none: the item starts from no tool reads); the file
    name must be the digest's own."""
    ref = raw["world"]
    if ref is None:
        return MappingProxyType({})
    sha = ref.get("sha256") if isinstance(ref, dict) else None
    if (
        not isinstance(sha, str)
        or not _SHA256.fullmatch(sha)
        or ref != {"file": payload_name("world", sha), "sha256": sha}
    ):
        raise _Bad(
            f"item {item_id}'s world is {ref!r}, not null or "
            f'{{"file": "items/<sha256>.json", "sha256": ...}}'
        )
    return MappingProxyType({"world": sha})


def promote_command(name: str) -> str:
    """How an instructor publishes an approved candidate into set ``name``."""
    return commands.REGRESSION_PROMOTE(name=name, candidate="CANDIDATE", by="NAME")


def payload_name(role: str, sha256: str) -> str:
    return f"{_ITEMS}/{sha256}{_SUFFIX[role]}"


def _with_payloads(item: Item, folder: Path, cache: dict[Path, bytes | None]) -> Item:
    """``item`` with its payloads' bytes, each checked against its digest; a file that is
    gone is named in ``missing`` instead."""
    found: dict[str, bytes] = {}
    missing = []
    for role, sha in item.digests.items():
        path = folder / payload_name(role, sha)
        if path not in cache:
            cache[path] = _read(path, cap=PAYLOAD_CAP)
        data = cache[path]
        if data is None:
            # Relative to the sets folder: a report quotes it, and a report's digest
            # never depends on where the grading machine keeps its files.
            missing.append(
                f"{folder.name}/{payload_name(role, sha)} is missing from the "
                f"set (the {role} of item {item.id}): restore it from git "
                "(`git checkout`), or promote the item again"
            )
            continue
        actual = hashlib.sha256(data).hexdigest()
        if actual != sha:
            raise _Corrupt(
                path,
                f"its bytes hash to {actual[:12]}..., not the {sha[:12]}... "
                f"of its name and of item {item.id}: it was edited; restore it "
                f"with `git checkout -- {path}`",
            )
        found[role] = data
    world = found.get("world")
    if world is not None:
        try:
            decode_world(world, str(folder / payload_name("world", item.digests["world"])))
        except UsageError as exc:
            raise _Corrupt(
                folder / payload_name("world", item.digests["world"]),
                f"{exc}; restore it with `git checkout`",
            ) from None
    return replace(item, missing="; ".join(missing), world=world)


# -- writing -----------------------------------------------------------------------------------


def set_document(regression: RegressionSet) -> dict[str, Any]:
    """The JSON document of a version, as its file holds it (every key present)."""
    supersedes = dict(regression.supersedes) if regression.supersedes is not None else None
    return {
        "format": FORMAT,
        "name": regression.name,
        "version": regression.version,
        "supersedes": supersedes,
        "created_by": regression.created_by,
        "items": [item_document(item) for item in regression.items],
    }


def item_document(item: Item) -> dict[str, Any]:
    world = (
        {"file": payload_name("world", item.digests["world"]), "sha256": item.digests["world"]}
        if "world" in item.digests
        else None
    )
    return {
        **_public_item(item),
        "world": world,
        "source": dict(item.source),
        "reviewed_by": item.reviewed_by,
        "reason": item.reason,
    }


def _public_item(item: Item) -> dict[str, Any]:
    """What a classmate may see of an item (its world still to be added)."""
    return {
        "id": item.id,
        "kind": item.kind,
        "added_in": item.added_in,
        "task": item.task,
        "agent": item.agent,
        "expect": expectation_document(item.expect),
    }


# -- the world: the tool reads an item starts from ---------------------------------------------


def world_json(reads: Iterable[tuple[str, Mapping[str, Any], Any]]) -> bytes:
    """The world of ``reads`` (tool, arguments, result), in the file's canonical bytes: one
    read per tool key (the first of a key wins), sorted by it."""
    found: dict[str, dict[str, Any]] = {}
    for tool, args, response in reads:
        found.setdefault(
            tool_key(tool, args), {"tool": tool, "args": dict(args), "response": response}
        )
    return set_json({"format": WORLD_FORMAT, "reads": [found[key] for key in sorted(found)]})


def decode_world(data: bytes, source: str) -> dict[str, Any]:
    """A world's reads, tool key -> result; a ``UsageError`` naming ``source`` when the
    bytes are not a world as ``world_json`` writes one."""
    try:
        document = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise UsageError(f"{source}: the world is not UTF-8 JSON ({exc})") from None
    reads = document.get("reads") if isinstance(document, dict) else None
    if (
        not isinstance(document, dict)
        or set(document) != {"format", "reads"}
        or document["format"] != WORLD_FORMAT
        or not isinstance(reads, list)
    ):
        raise UsageError(
            f"{source}: the world is not a {WORLD_FORMAT} document "
            '({"format": ..., "reads": [...]})'
        )
    world: dict[str, Any] = {}
    for read in reads:
        if (
            not isinstance(read, dict)
            or set(read) != {"tool", "args", "response"}
            or not isinstance(read["args"], dict)
        ):
            raise UsageError(f"{source}: a read of the world is not {{tool, args, response}}")
        try:
            key = tool_key(read["tool"], read["args"])
        except UsageError as exc:
            raise UsageError(f"{source}: {exc}") from None
        world[key] = read["response"]
    if world_json((r["tool"], r["args"], r["response"]) for r in reads) != data:
        raise UsageError(
            f"{source}: the world's bytes are not canonical (reformatted, "
            "unsorted, or a read given twice)"
        )
    return world


# -- the public view: what every student records -----------------------------------------------


def public_name(version: int) -> str:
    """The file name of version ``version``'s public view, beside ``v<N>.json``."""
    return f"v{version}.public.json"


def public_json(regression: RegressionSet) -> bytes:
    """Version ``regression``'s public view: each item's task, agent, expectation, world
    (inline) and origin (none for an item promoted before it was recorded), and nothing of
    who it came from; it names the version's sha256."""
    items = [
        {
            **_public_item(item),
            "world": None if item.world is None else json.loads(item.world),
            **({} if item.origin is None else {"origin": item.origin}),
        }
        for item in regression.items
    ]
    return set_json(
        {
            "format": PUBLIC_FORMAT,
            "name": regression.name,
            "version": regression.version,
            "sha256": regression.sha256,
            "items": items,
        }
    )


def _load_public(sets: Path, name: str, version: int) -> RegressionSet | None:
    path = _version_path(sets, name, version).with_name(public_name(version))
    data = _read(path, cap=None)
    if data is None:
        return None
    document = _json(path, data)
    _format(path, document, PUBLIC_FORMAT)
    _keys(
        path, document, frozenset({"format", "name", "version", "sha256", "items"}), "a public view"
    )
    sha = document["sha256"]
    if (
        document["name"] != name
        or document["version"] != version
        or not isinstance(sha, str)
        or not _SHA256.fullmatch(sha)
    ):
        raise _Corrupt(
            path,
            f"it does not say it is {name} version {version} with the "
            f"sha256 of v{version}.json: {_restore(path)}",
        )
    raw = document["items"]
    if not isinstance(raw, list) or not raw:
        raise _Corrupt(path, f"items is no list of items: {_restore(path)}")
    items = []
    for number, entry in enumerate(raw, 1):
        try:
            items.append(_public(entry, number, version, path))
        except _Bad as bad:
            raise _Corrupt(path, f"{bad}: {_restore(path)}") from None
    loaded = RegressionSet(name, version, sha, None, "", tuple(items), public=True)
    if public_json(loaded) != data:
        raise _Corrupt(path, f"the bytes are not canonical: {_restore(path)}")
    return loaded


def _public(raw: object, number: int, version: int, path: Path) -> Item:
    if not isinstance(raw, dict) or set(raw) - {"origin"} != _PUBLIC_ITEM_KEYS:
        raise _Bad(
            f"item {number} is no object with the keys {sorted(_PUBLIC_ITEM_KEYS)} "
            "(and optionally origin)"
        )
    common = _common(raw, number, version)
    if "origin" in raw:
        if raw["origin"] not in ORIGINS:
            raise _Bad(
                f"item {common.id}'s origin {raw['origin']!r} is not one of {', '.join(ORIGINS)}"
            )
        common = replace(common, source=MappingProxyType({"origin": raw["origin"]}))
    if raw["world"] is None:
        return common
    reads = raw["world"].get("reads") if isinstance(raw["world"], dict) else None
    if not isinstance(reads, list) or not all(isinstance(r, dict) for r in reads):
        raise _Bad(f"item {common.id}'s world is no {WORLD_FORMAT} document")
    try:
        data = world_json((r.get("tool"), r.get("args", {}), r.get("response")) for r in reads)
        decode_world(data, f"{path}: item {common.id}")
    except (UsageError, AttributeError, TypeError) as exc:
        raise _Bad(f"item {common.id}'s world: {exc}") from None
    return replace(
        common, world=data, digests=MappingProxyType({"world": hashlib.sha256(data).hexdigest()})
    )


def set_json(document: Mapping[str, Any]) -> bytes:
    """Sorted keys, two-space indent, one trailing newline, UTF-8: a clean git diff."""
    text = json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


# -- verifying ---------------------------------------------------------------------------------


def verify_sets(sets: Path, names: Sequence[str] = ()) -> list[SetVerdict]:
    """Every version of every set named (all sets in ``sets`` when none is): its bytes
    canonical, its payloads' digests, ``supersedes`` the previous file's sha256, the
    previous version's items carried over unchanged, and ``added_in`` right. One verdict
    per version file (or per problem); a ``UsageError`` when there is no set at all."""
    chosen = list(names) or set_names(sets)
    if not chosen:
        raise UsageError(
            f"no regression set in {sets}: pass --sets DIR (default: regression/ "
            f"beside the rubric), or promote one with `{promote_command('NAME')}`"
        )
    return [verdict for name in chosen for verdict in _verify_set(sets, name)]


def _verify_set(sets: Path, name: str) -> list[SetVerdict]:
    numbers = version_numbers(sets, name)
    if not numbers:
        return [
            SetVerdict(
                sets / name,
                False,
                "no such regression set (no v1.json): check the "
                "name and --sets, or promote into it first",
            )
        ]
    verdicts: list[SetVerdict] = []
    cache: dict[Path, bytes | None] = {}
    previous: RegressionSet | None = None
    previous_sha = ""
    for version in range(1, numbers[-1] + 1):
        path = _version_path(sets, name, version)
        data = _read(path, cap=None)
        if data is None:
            verdicts.append(
                SetVerdict(
                    path,
                    False,
                    "missing: a version is never removed; "
                    f"restore it with `git checkout -- {path}`",
                )
            )
            previous, previous_sha = None, ""
            continue
        found, previous = _verify_version(sets, name, version, (previous, previous_sha), cache)
        blamed = {verdict.path for verdict in found}  # an earlier version found edited
        verdicts = [v for v in verdicts if v.ok is False or v.path not in blamed] + found
        previous_sha = hashlib.sha256(data).hexdigest()
    return verdicts


def _verify_version(
    sets: Path,
    name: str,
    version: int,
    before: tuple[RegressionSet | None, str],
    cache: dict[Path, bytes | None],
) -> tuple[list[SetVerdict], RegressionSet | None]:
    """The verdicts of one version file, and the version as loaded (None if it is not)."""
    path = _version_path(sets, name, version)
    try:
        loaded = _load(sets, name, version, cache)
    except _Corrupt as exc:
        return [SetVerdict(exc.path, False, exc.why)], None
    if loaded is None:
        return [], None
    previous, previous_sha = before
    problems = _link_problems(sets, loaded, previous, previous_sha)
    problems += [SetVerdict(path, False, item.missing) for item in loaded.items if item.missing]
    if problems:
        return problems, loaded
    public = path.with_name(public_name(version))
    held = _read(public, cap=None)
    if held != public_json(loaded):
        fix = (
            f"write it again: `{commands.REGRESSION_PUBLIC(name=name, sets=str(sets))}`"
            if held is None
            else f"restore it with `git checkout -- {public}`"
        )
        why = "is missing" if held is None else f"does not hold the public view of {path.name}"
        return [
            SetVerdict(public, False, f"{why} (what every student records the items from): {fix}")
        ], loaded
    inherited = len(previous.items) if previous else 0
    return [
        SetVerdict(
            path,
            True,
            f"{_count(len(loaded.items))} ({inherited} inherited), sha256 {loaded.sha256}",
        )
    ], loaded


def _link_problems(
    sets: Path, loaded: RegressionSet, previous: RegressionSet | None, previous_sha: str
) -> list[SetVerdict]:
    """Where version N does not follow version N-1: the digest it supersedes, the items it
    must carry over unchanged, the version its new items say they were added in."""
    path = _version_path(sets, loaded.name, loaded.version)
    if (
        loaded.version > 1
        and previous_sha
        and loaded.supersedes is not None
        and loaded.supersedes["sha256"] != previous_sha
    ):
        before = _version_path(sets, loaded.name, loaded.version - 1)
        return [
            SetVerdict(
                before,
                False,
                f"its bytes hash to {previous_sha[:12]}..., but "
                f"{path.name} supersedes {loaded.supersedes['sha256'][:12]}...: it was "
                f"edited after {path.name} was published; restore it with "
                f"`git checkout -- {before}`",
            )
        ]
    kept = previous.items if previous else ()
    carried = [item_document(item) for item in loaded.items[: len(kept)]]
    if previous is not None and (
        carried != [item_document(item) for item in kept] or len(loaded.items) <= len(kept)
    ):
        return [
            SetVerdict(
                path,
                False,
                f"it does not hold the {_count(len(kept))} of "
                f"v{previous.version} unchanged and in order, then new ones: "
                f"{_restore(path)}",
            )
        ]
    late = [item.id for item in loaded.items[len(kept) :] if item.added_in != loaded.version]
    if late:
        return [
            SetVerdict(
                path,
                False,
                f"item {late[0]} is new in v{loaded.version} but says "
                f"added_in {loaded.items[len(kept)].added_in}: {_restore(path)}",
            )
        ]
    return []


def _count(number: int) -> str:
    return f"{number} item{'s' * (number != 1)}"
