"""Publishing a regression set's next version: a new item on top of the verified chain,
under the set's lock, its payloads first, its version file written once.

``grader.regression._sets`` is the format (reading, checking, verifying); this is its one writer.
Files are written whole or not at all and never replaced: a temporary file, fsynced,
then linked to its name (a link never replaces a file, as ``O_EXCL`` never does).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

from gradekit import UsageError
from gradekit.internal import commands, fsync_folder
from grader.regression._sets import (
    _ITEMS,
    PAYLOAD_CAP,
    ROLES,
    Item,
    RegressionSet,
    decode_item,
    decode_world,
    item_document,
    load_set,
    payload_name,
    public_json,
    public_name,
    set_document,
    set_json,
    valid_name,
    verify_sets,
    version_numbers,
)

__all__ = ["LOCK", "Added", "add_item", "same_source", "write_public"]

LOCK = ".lock"  # in a set's folder: serialises its promotions (flock)


@dataclass(frozen=True, slots=True)
class Added:
    """The outcome of ``add_item``: the set's newest version and the item in it. ``new`` is
    False when the same source was already an item (nothing was written)."""

    set: RegressionSet
    item: Item
    new: bool


def same_source(old: Item, new: Item) -> bool:
    """Whether two items publish one case: the same case id and version."""
    return (old.source.get("case"), old.source.get("version")) == (
        new.source.get("case"),
        new.source.get("version"),
    )


def _digests_of(item: Item) -> Mapping[str, str]:
    return {
        role: hashlib.sha256(data).hexdigest()
        for role in ROLES
        if (data := item.payload(role)) is not None
    }


def add_item(
    sets: Path,
    name: str,
    item: Item,
    *,
    created_by: str,
    then: Callable[[RegressionSet, Item], object],
    numbered: bool = False,
) -> Added:
    """Publish the next version of set ``name``: its items, then ``item`` (its payloads
    written first). Under the set's lock: concurrent promotions each get a version of one
    chain, and ``then`` (the ledger's record) runs before the next one starts, so the ledger
    lists them in version order. The same source already in the set adds nothing. With
    ``numbered`` (a default id), an id another source holds becomes ``id-2``, ``id-3``..."""
    folder = sets / valid_name(name, "regression set")
    valid_name(item.id, "item")
    with _locked(folder):
        current = _chain_head(sets, name)
        twin = (
            next((old for old in current.items if same_source(old, item)), None)
            if current
            else None
        )
        if current is not None and twin is not None:
            return Added(current, twin, new=False)
        if numbered and current is not None:
            item = replace(item, id=_free_id(item.id, {old.id for old in current.items}))
        added = _next_version(current, name, item, created_by)
        new = added.items[-1]
        _require_item(new)
        for role in ROLES:
            payload = new.payload(role)
            if payload is not None:
                _store(folder / payload_name(role, new.digests[role]), payload)
        data = set_json(set_document(added))
        _create(folder / f"v{added.version}.json", data)
        published = replace(added, sha256=hashlib.sha256(data).hexdigest())
        _create(folder / public_name(added.version), public_json(published))
        then(published, new)
        return Added(published, new, new=True)


def write_public(sets: Path, name: str) -> list[Path]:
    """Write the public view of every version of set ``name`` that has none (a promotion
    cut off between its two files), under the set's lock, once the version itself verifies;
    a view already there is never replaced. The paths written, in version order."""
    folder = sets / valid_name(name, "regression set")
    written = []
    with _locked(folder):
        for number in version_numbers(sets, name):
            path = folder / public_name(number)
            if path.exists():
                continue
            loaded = load_set(sets, name, number)
            if loaded is None or loaded.public or any(item.missing for item in loaded.items):
                continue
            _create(path, public_json(loaded))
            written.append(path)
    return written


def _free_id(wanted: str, taken: set[str]) -> str:
    """``wanted``, or the first of ``wanted-2``, ``wanted-3``, ... that no item has."""
    number = 1
    found = wanted
    while found in taken:
        number += 1
        found = f"{wanted}-{number}"
    return found


def _chain_head(sets: Path, name: str) -> RegressionSet | None:
    """The newest version, once the whole chain verifies: a new version is never built on
    an edited or incomplete one."""
    numbers = version_numbers(sets, name)
    if not numbers:
        return None
    broken = [verdict for verdict in verify_sets(sets, [name]) if not verdict.ok]
    if broken:
        raise UsageError(
            f"{broken[0].path}: {broken[0].message}; nothing is added to a set "
            "that does not verify "
            f"(`{commands.REGRESSION_VERIFY(name=name, sets=str(sets))}`)"
        )
    return load_set(sets, name, numbers[-1])


def _next_version(
    current: RegressionSet | None, name: str, item: Item, created_by: str
) -> RegressionSet:
    if current is not None and item.id in {old.id for old in current.items}:
        old = next(old for old in current.items if old.id == item.id)
        raise UsageError(
            f"item {item.id} is already in {current.ref}, from case {old.source.get('case')} "
            f"version {old.source.get('version')}: give this one another id with --item"
        )
    version = current.version + 1 if current else 1
    supersedes = {"version": current.version, "sha256": current.sha256} if current else None
    new = replace(
        item, added_in=version, digests=MappingProxyType(dict(_digests_of(item))), missing=""
    )
    inherited = current.items if current else ()
    return RegressionSet(name, version, "", supersedes, created_by, (*inherited, new))


def _require_item(item: Item) -> None:
    """The new item must read back as itself: a promotion never writes what ``load_set``
    would refuse."""
    for role in ROLES:
        data = item.payload(role)
        if data is not None and len(data) > PAYLOAD_CAP:
            raise UsageError(
                f"the {role} of item {item.id} is larger than {PAYLOAD_CAP} "
                "bytes, the most a regression item holds: make it smaller"
            )
    try:
        again = decode_item(item_document(item), item.added_in)
    except UsageError as bad:
        raise UsageError(f"item {item.id} cannot be promoted: {bad}") from None
    if item.world is not None:
        decode_world(item.world, f"the world of item {item.id}")
    if again != replace(item, world=None):
        raise UsageError(f"item {item.id} would not read back as promoted (a bug: report it)")


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _store(path: Path, data: bytes) -> None:
    """Write a payload under its digest once; one already there must hold the same bytes."""
    if path.exists():
        if path.read_bytes() != data:
            raise UsageError(
                f"{path}: it does not hold the bytes its name is the digest of: "
                f"it was edited; restore it with `git checkout -- {path}`"
            )
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    _create(path, data)


def _create(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all, and only if it does not exist: a temporary file,
    fsynced, then linked to its name (a link never replaces a file, as O_EXCL never does)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # ours: under the lock
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.link(temporary, path)
    except FileExistsError:
        folder = path.parent.parent if path.parent.name == _ITEMS else path.parent
        verify = commands.REGRESSION_VERIFY(name=folder.name, sets=str(folder.parent))
        raise UsageError(
            f"{path} exists already: a regression set's files are written once "
            f"and never rewritten; run `{verify}`"
        ) from None
    finally:
        with suppress(FileNotFoundError):
            temporary.unlink()
    fsync_folder(path.parent)  # the new name itself survives a crash
