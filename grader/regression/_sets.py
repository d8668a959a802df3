"""Regression sets: reviewed failing runs, kept as immutable, versioned collections of items.

A set lives in ``SETS/<name>/``. Version N is ``v<N>.json``, written once and never
rewritten: it holds every item of version N-1, unchanged and in order, then the one it
adds, and names the version it supersedes by the SHA-256 of that file's bytes, so an
edited version breaks the chain at the version after it. Payloads (an incident, a
cassette, a tool fixture) are content-addressed, ``items/<sha256>.jsonl`` or ``.json``:
stored once, whichever versions and items name them. A set is named by ``name@version``
(``parse_ref``); the newest version has no successor to vouch for it, so its sha256
(``gradekit regression show``, and the ledger's promote event) is what proves it untouched
later.

This module is the format: its values, reading, checking and verifying. Writing the next
version is ``grader.regression._publish``'s; which runs may become items (reviewed, failing,
unchanged since) is the promotion's policy (``grader.records._promote``). Every problem with a set's
files is a ``UsageError`` that names the file and says to restore it; a payload
file that is missing is no error here but ``Item.missing``, so that the grader degrades
that one item and grades the rest.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, NoReturn

from gradekit import UsageError
from gradekit.internal import commands
from grader._expect import Expectation, expectation_document, parse_expectation
from grader._specs import SPEC

__all__ = [
    "FORMAT",
    "NAME",
    "PAYLOAD_CAP",
    "ROLES",
    "Item",
    "RegressionSet",
    "Verdict",
    "decode_item",
    "item_document",
    "load_set",
    "parse_ref",
    "payload_name",
    "set_document",
    "set_json",
    "set_names",
    "valid_name",
    "verify_sets",
    "version_numbers",
]

FORMAT = "gradekit.regression/1"
NAME = re.compile(r"[a-z0-9][a-z0-9-]*")  # set names and item ids: a name is a folder name
PAYLOAD_CAP = 1024 * 1024  # the most an item's payload may hold: it comes from a student
_LONGEST_NAME = 64
_REF = re.compile(r"([^@]*)@([1-9][0-9]*)")
_VERSION_FILE = re.compile(r"v([1-9][0-9]*)\.json")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_ITEMS = "items"
ROLES = ("incident", "cassette", "fixture")  # the payloads an item may carry
_SUFFIX = {"incident": ".jsonl", "cassette": ".json", "fixture": ".json"}
_SET_KEYS = frozenset({"format", "name", "version", "supersedes", "created_by", "items"})
_ITEM_KEYS = frozenset({"id", "kind", "added_in", "task", "agent", "live", *ROLES, "expect",
                        "source", "reviewed_by", "reason"})
_SOURCE_TYPES: Mapping[str, type] = MappingProxyType({
    "path": str, "report": str, "review": int, "run": int, "student": str, "submission": str})


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
    """One reviewed failure: what to run (task, agent, payloads), what it must come to
    (``expect``), and where it came from (``source``: student, submission, run, report,
    review, path). ``live`` names the action boundaries a replay of an incident runs
    through the new code. A payload's bytes are there, their digest checked, unless the
    file is gone: then ``missing`` says which and how to restore it."""

    id: str
    kind: Literal["incident", "case"]
    task: str
    agent: str
    expect: Expectation
    added_in: int
    source: Mapping[str, Any]
    reviewed_by: str
    reason: str
    live: tuple[str, ...] = ()
    incident: bytes | None = None  # the payload's bytes, digest checked
    cassette: bytes | None = None
    fixture: bytes | None = None
    missing: str = ""  # why a payload this item needs is not in the set; "" when all are
    digests: Mapping[str, str] = field(default_factory=dict)  # payload role -> its sha256

    def payload(self, role: str) -> bytes | None:
        """The bytes of payload ``role`` (incident, cassette, fixture), if there are any."""
        data: bytes | None = getattr(self, role)
        return data


@dataclass(frozen=True, slots=True)
class RegressionSet:
    """One version of a set, as its file holds it; ``sha256`` is over the file's bytes."""

    name: str
    version: int
    sha256: str
    supersedes: Mapping[str, Any] | None
    created_by: str
    items: tuple[Item, ...]

    @property
    def ref(self) -> str:
        """The set as a rubric pins it: ``name@version``."""
        return f"{self.name}@{self.version}"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What ``verify_sets`` found of one file: whether it holds, and why (or what it holds)."""

    path: Path
    ok: bool
    message: str


# -- names -------------------------------------------------------------------------------------


def valid_name(text: str, what: str) -> str:
    """``text`` if it is a valid set name or item id (``what`` says which), else a
    ``UsageError`` with the fix. A set's name becomes a folder: nothing else ever does."""
    if not NAME.fullmatch(text) or len(text) > _LONGEST_NAME:
        raise UsageError(f"{what} {text!r} is not a name: use 1 to {_LONGEST_NAME} lowercase "
                         "letters, digits and '-', starting with a letter or digit "
                         "(e.g. refunds)")
    return text


def parse_ref(text: str) -> tuple[str, int]:
    """``"refunds@2"`` as ``("refunds", 2)``; a ``UsageError`` with the fix otherwise."""
    match = _REF.fullmatch(text)
    if match is None:
        raise UsageError(f"{text!r} is not a regression set reference: write NAME@VERSION, "
                         f"e.g. refunds@2 (`{commands.REGRESSION_SHOW(name='NAME')}` lists the "
                         "versions)")
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
    """Version ``version`` of set ``name`` in ``sets``, payloads read and checked; None when
    it has no file. A ``UsageError`` when the file is not as promotion wrote it (not JSON,
    not canonical, a payload whose bytes do not match its digest) or was edited after the
    next version was published (that one's ``supersedes`` names other bytes)."""
    with _usage_errors():
        loaded = _load(sets, name, version, {})
        if loaded is not None:
            _vouched(sets, name, loaded)
    return loaded


def _version_path(sets: Path, name: str, version: int) -> Path:
    if version < 1:
        raise UsageError(f"version {version} of {name}: versions count from 1")
    return sets / valid_name(name, "regression set") / f"v{version}.json"


def _load(sets: Path, name: str, version: int,
          cache: dict[Path, bytes | None]) -> RegressionSet | None:
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
        raise _Corrupt(path, f"its bytes hash to {loaded.sha256[:12]}..., but "
                         f"{successor.name} supersedes {str(held)[:12]}...: it was edited after "
                         f"{successor.name} was published; {_restore(path)}")


def _read(path: Path, *, cap: int | None) -> bytes | None:
    try:
        with path.open("rb") as handle:
            data = handle.read() if cap is None else handle.read(cap + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _Corrupt(path, f"cannot be read ({exc.strerror}): restore it with "
                         f"`git checkout -- {path}`") from None
    if cap is not None and len(data) > cap:
        raise _Corrupt(path, f"is larger than {cap} bytes, more than any payload promotion "
                         f"writes: restore it with `git checkout -- {path}`")
    return data


def _restore(path: Path) -> str:
    return f"restore it with `git checkout -- {path}` (a version is never edited: promote " \
        "into a new one)"


def _json(path: Path, data: bytes) -> dict[str, Any]:
    try:
        document = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _Corrupt(path, f"not UTF-8 JSON ({exc}); {_restore(path)}") from None
    if not isinstance(document, dict):
        raise _Corrupt(path, f"not a {FORMAT} document (the JSON is no object); "
                         f"{_restore(path)}")
    return document


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def _decode(path: Path, data: bytes, name: str, version: int) -> RegressionSet:
    """The version file's document, every field checked, payloads not yet read."""
    document = _json(path, data)
    if set_json(document) != data:
        raise _Corrupt(path, "the bytes are not canonical (reformatted, or a key given "
                         f"twice); {_restore(path)}")
    if document.get("format") != FORMAT:
        raise _Corrupt(path, f"format {document.get('format')!r} is not {FORMAT!r}: read it "
                         "with the gradekit that wrote it, or restore it")
    _keys(path, document, _SET_KEYS, "a set")
    if document["name"] != name or document["version"] != version:
        raise _Corrupt(path, f"it says it is {document['name']!r} version "
                         f"{document['version']!r}, not {name} version {version}: "
                         f"{_restore(path)}")
    loaded = RegressionSet(name, version, hashlib.sha256(data).hexdigest(),
                           _supersedes(path, document["supersedes"], version),
                           _text(path, document["created_by"], "created_by"),
                           _items(path, document["items"], version))
    if set_json(set_document(loaded)) != data:  # a field this gradekit would not write
        raise _Corrupt(path, f"it holds values promotion never writes; {_restore(path)}")
    return loaded


def _keys(path: Path, document: Mapping[str, Any], keys: frozenset[str], what: str) -> None:
    if set(document) != keys:
        odd = sorted(set(document) ^ keys)
        raise _Corrupt(path, f"{what} has the keys {sorted(keys)}; {', '.join(odd)} differ: "
                         f"{_restore(path)}")


def _text(path: Path, value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Corrupt(path, f"{where} is {value!r}, not a text: {_restore(path)}")
    return value


def _supersedes(path: Path, raw: object, version: int) -> Mapping[str, Any] | None:
    if version == 1 and raw is None:
        return None
    if (isinstance(raw, dict) and set(raw) == {"sha256", "version"}
            and raw["version"] == version - 1 and isinstance(raw["sha256"], str)
            and _SHA256.fullmatch(raw["sha256"])):
        return MappingProxyType(dict(raw))
    wanted = "null" if version == 1 else f'{{"version": {version - 1}, "sha256": "<sha256 ' \
        f'of v{version - 1}.json>"}}'
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
    """Item ``number`` of a version, its payloads named by digest but not yet read."""
    if not isinstance(raw, dict) or set(raw) != _ITEM_KEYS:
        raise _Bad(f"item {number} is no object with the keys {sorted(_ITEM_KEYS)}")
    item_id = raw["id"]
    if not isinstance(item_id, str) or not NAME.fullmatch(item_id):
        raise _Bad(f"item {number} has the id {item_id!r}, which is not a name")
    kind, added_in, agent, live = raw["kind"], raw["added_in"], raw["agent"], raw["live"]
    problem = _item_problem(kind, added_in, version, agent, live)
    if problem:
        raise _Bad(f"item {item_id}: {problem}")
    try:
        expect = parse_expectation(raw["expect"], f"item {item_id}")
    except UsageError as exc:
        raise _Bad(str(exc)) from None
    if not expect.outcome:
        raise _Bad(f"item {item_id} has no expected outcome, so it could never be judged")
    texts = {key: raw[key] for key in ("task", "reviewed_by", "reason")}
    empty = [key for key, value in texts.items() if not isinstance(value, str)
             or not value.strip()]
    if empty:
        raise _Bad(f"item {item_id}'s {empty[0]} is {texts[empty[0]]!r}, not a text")
    return Item(item_id, kind, texts["task"], agent, expect, added_in,
                _source(raw["source"], item_id), texts["reviewed_by"], texts["reason"],
                tuple(live), digests=_digests(raw, item_id, kind))


def _item_problem(kind: object, added_in: object, version: int, agent: object,
                  live: object) -> str:
    if kind not in ("incident", "case"):
        return f"kind {kind!r} is neither incident nor case"
    if not isinstance(added_in, int) or isinstance(added_in, bool) \
            or not 1 <= added_in <= version:
        return f"added_in {added_in!r} is no version from 1 to {version}"
    if not isinstance(agent, str) or not SPEC.fullmatch(agent):
        return f"agent {agent!r} is not package.module:function"
    if not isinstance(live, list) or not all(isinstance(b, str) and b for b in live):
        return f"live {live!r} is no list of boundaries"
    if kind == "case" and live:
        return "a case item runs nothing live, yet live names boundaries"
    return ""


def _source(raw: object, item_id: str) -> Mapping[str, Any]:
    if not isinstance(raw, dict) or set(raw) != set(_SOURCE_TYPES) or not all(
            type(raw[key]) is wanted for key, wanted in _SOURCE_TYPES.items()):
        raise _Bad(f"item {item_id}'s source is not {{{', '.join(_SOURCE_TYPES)}}}")
    return MappingProxyType(dict(raw))


def _digests(raw: Mapping[str, Any], item_id: str, kind: str) -> Mapping[str, str]:
    """Each payload reference's digest, by role; the file name must be the digest's own."""
    needed = {"incident"} if kind == "incident" else {"cassette"}
    allowed = needed | ({"fixture"} if kind == "case" else set())
    digests: dict[str, str] = {}
    for role in ROLES:
        ref = raw[role]
        if ref is None:
            continue
        sha = ref.get("sha256") if isinstance(ref, dict) else None
        if (role not in allowed or not isinstance(sha, str) or not _SHA256.fullmatch(sha)
                or ref != {"file": payload_name(role, sha), "sha256": sha}):
            raise _Bad(f"item {item_id}'s {role} is {ref!r}, not "
                       f'{{"file": "items/<sha256>{_SUFFIX[role]}", "sha256": ...}} of a '
                       f"{kind} item")
        digests[role] = sha
    if not needed <= set(digests):
        raise _Bad(f"item {item_id} is a {kind} item without its {', '.join(sorted(needed))}")
    return MappingProxyType(digests)


def promote_command(name: str) -> str:
    """How an instructor adds a reviewed failing case of a graded student to set ``name``."""
    return commands.REGRESSION_PROMOTE(name=name, student="STUDENT", root="SUBMISSION",
                                       case="CASE", by="NAME", reason="TEXT", out="grades")


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
            missing.append(f"{folder.name}/{payload_name(role, sha)} is missing from the "
                           f"set (the {role} of item {item.id}): restore it from git "
                           "(`git checkout`), or promote the item again")
            continue
        actual = hashlib.sha256(data).hexdigest()
        if actual != sha:
            raise _Corrupt(path, f"its bytes hash to {actual[:12]}..., not the {sha[:12]}... "
                             f"of its name and of item {item.id}: it was edited; restore it "
                             f"with `git checkout -- {path}`")
        found[role] = data
    return replace(item, missing="; ".join(missing), incident=found.get("incident"),
                   cassette=found.get("cassette"), fixture=found.get("fixture"))


# -- writing -----------------------------------------------------------------------------------


def set_document(regression: RegressionSet) -> dict[str, Any]:
    """The JSON document of a version, as its file holds it (every key present)."""
    supersedes = dict(regression.supersedes) if regression.supersedes is not None else None
    return {"format": FORMAT, "name": regression.name, "version": regression.version,
            "supersedes": supersedes, "created_by": regression.created_by,
            "items": [item_document(item) for item in regression.items]}


def item_document(item: Item) -> dict[str, Any]:
    refs = {role: ({"file": payload_name(role, item.digests[role]),
                    "sha256": item.digests[role]} if role in item.digests else None)
            for role in ROLES}
    return {"id": item.id, "kind": item.kind, "added_in": item.added_in, "task": item.task,
            "agent": item.agent, "live": list(item.live), **refs,
            "expect": expectation_document(item.expect), "source": dict(item.source),
            "reviewed_by": item.reviewed_by, "reason": item.reason}


def set_json(document: Mapping[str, Any]) -> bytes:
    """Sorted keys, two-space indent, one trailing newline, UTF-8: a clean git diff."""
    text = json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


# -- verifying ---------------------------------------------------------------------------------


def verify_sets(sets: Path, names: Sequence[str] = ()) -> list[Verdict]:
    """Every version of every set named (all sets in ``sets`` when none is): its bytes
    canonical, its payloads' digests, ``supersedes`` the previous file's sha256, the
    previous version's items carried over unchanged, and ``added_in`` right. One verdict
    per version file (or per problem); a ``UsageError`` when there is no set at all."""
    chosen = list(names) or set_names(sets)
    if not chosen:
        raise UsageError(f"no regression set in {sets}: pass --sets DIR (default: regression/ "
                         f"beside the rubric), or promote one with `{promote_command('NAME')}`")
    return [verdict for name in chosen for verdict in _verify_set(sets, name)]


def _verify_set(sets: Path, name: str) -> list[Verdict]:
    numbers = version_numbers(sets, name)
    if not numbers:
        return [Verdict(sets / name, False, "no such regression set (no v1.json): check the "
                        "name and --sets, or promote into it first")]
    verdicts: list[Verdict] = []
    cache: dict[Path, bytes | None] = {}
    previous: RegressionSet | None = None
    previous_sha = ""
    for version in range(1, numbers[-1] + 1):
        path = _version_path(sets, name, version)
        data = _read(path, cap=None)
        if data is None:
            verdicts.append(Verdict(path, False, "missing: a version is never removed; "
                                    f"restore it with `git checkout -- {path}`"))
            previous, previous_sha = None, ""
            continue
        found, previous = _verify_version(sets, name, version, (previous, previous_sha), cache)
        blamed = {verdict.path for verdict in found}  # an earlier version found edited
        verdicts = [v for v in verdicts if v.ok is False or v.path not in blamed] + found
        previous_sha = hashlib.sha256(data).hexdigest()
    return verdicts


def _verify_version(sets: Path, name: str, version: int,
                    before: tuple[RegressionSet | None, str],
                    cache: dict[Path, bytes | None]) -> tuple[list[Verdict], RegressionSet | None]:
    """The verdicts of one version file, and the version as loaded (None if it is not)."""
    path = _version_path(sets, name, version)
    try:
        loaded = _load(sets, name, version, cache)
    except _Corrupt as exc:
        return [Verdict(exc.path, False, exc.why)], None
    if loaded is None:
        return [], None
    previous, previous_sha = before
    problems = _link_problems(sets, loaded, previous, previous_sha)
    problems += [Verdict(path, False, item.missing) for item in loaded.items if item.missing]
    if problems:
        return problems, loaded
    inherited = len(previous.items) if previous else 0
    return [Verdict(path, True, f"{_count(len(loaded.items))} ({inherited} inherited), sha256 "
                    f"{loaded.sha256}")], loaded


def _link_problems(sets: Path, loaded: RegressionSet, previous: RegressionSet | None,
                   previous_sha: str) -> list[Verdict]:
    """Where version N does not follow version N-1: the digest it supersedes, the items it
    must carry over unchanged, the version its new items say they were added in."""
    path = _version_path(sets, loaded.name, loaded.version)
    if loaded.version > 1 and previous_sha and loaded.supersedes is not None \
            and loaded.supersedes["sha256"] != previous_sha:
        before = _version_path(sets, loaded.name, loaded.version - 1)
        return [Verdict(before, False, f"its bytes hash to {previous_sha[:12]}..., but "
                        f"{path.name} supersedes {loaded.supersedes['sha256'][:12]}...: it was "
                        f"edited after {path.name} was published; restore it with "
                        f"`git checkout -- {before}`")]
    kept = previous.items if previous else ()
    carried = [item_document(item) for item in loaded.items[:len(kept)]]
    if previous is not None and (carried != [item_document(item) for item in kept]
                                 or len(loaded.items) <= len(kept)):
        return [Verdict(path, False, f"it does not hold the {_count(len(kept))} of "
                        f"v{previous.version} unchanged and in order, then new ones: "
                        f"{_restore(path)}")]
    late = [item.id for item in loaded.items[len(kept):] if item.added_in != loaded.version]
    if late:
        return [Verdict(path, False, f"item {late[0]} is new in v{loaded.version} but says "
                        f"added_in {loaded.items[len(kept)].added_in}: {_restore(path)}")]
    return []


def _count(number: int) -> str:
    return f"{number} item{'s' * (number != 1)}"
