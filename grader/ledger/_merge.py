"""``gradekit ledger merge``: grades folders graded apart (a CI matrix's shards) as one.

Each shard of ``gradekit grade --shard K/N --out DIR`` keeps its own folder: its reports,
its archive, its gradebook and its ledger. The merge writes one new grades folder, the
folder one machine grading the whole cohort would have written; merging the same
folders in any order, any number of times, gives the same bytes.

The ledgers (``plan_merge``), after every chain is verified:

- the **common prefix**, the leading lines every ledger holds byte for byte (the history
  every shard started from), is kept once, as it is: every ``seq`` quoted before the
  shards began still names its event;
- after it each ledger is cut into **groups**: a ``batch`` event with its ``run`` events,
  and any other event alone;
- the batch groups that are **shards of one grading** (one grader, rubric, mode and
  everything else but the counts and lists, ``shard`` ``K/N`` with one ``N`` and each
  ``K`` once) become one batch event exactly as one machine writes it: counts summed,
  ``selection``, ``unchanged`` and ``interrupted`` unioned and sorted; ``kept``,
  ``absent`` and ``dropped`` unioned less the folders graded; no ``shard``; its runs in
  the order of the folders' names, the order a batch grades them. A set missing a shard
  is an error, or with ``partial`` its shards stay apart, each as its shard wrote it;
- the groups are then ordered so that each ledger's own order holds (a regrading stays
  after the grading it redoes) and, among groups free to go next, by (kind, SHA-256 of
  the group's events), never by the order the folders were given; ``seq`` and ``prev``
  are written anew and a ``run`` or ``review`` seq an event quotes is renumbered with them;
- a ``merge`` event ends it, naming each input by its head digest and event count
  (sorted by head), unless the result is one of the inputs byte for byte (nothing was
  merged). The dashboard and ``gradekit history`` read only the kinds they know.

The folder (``merge_folders``) takes each submission folder from the shard whose batch
graded it; a folder no shard graded since the common prefix, an archived report, the
draw key and any other file must be byte-identical wherever it is, else an error names
two differing copies. The gradebook is ``gradebook merge``'s (``merge_gradebooks``) over
each shard's own rows. Everything is written into a new folder beside ``out`` and
renamed into place only when all of it is: an error writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gradekit import UsageError
from grader._errors import LedgerCorrupt
from grader.ledger._folder import ARCHIVE, DRAW_KEY, GRADEBOOK, LEDGER
from grader.ledger._ledger import append_events, batch_status, verify_ledger
from grader.outputs import GradebookRow, gradebook_csv, merge_gradebooks, read_gradebook

__all__ = ["LedgerMerge", "Merged", "merge_folders", "plan_merge"]

# What shards of one grading may differ in: everything else of their batch events is equal.
_SUMMED = "counts"
_UNIONED = ("selection", "unchanged", "interrupted")
_LESS_GRADED = ("kept", "absent", "dropped")  # only when non-empty, less the folders graded
_ALWAYS = ("selection", "unchanged")  # written even when empty, as append_grading does
_SHARD = "shard"
# What a batch says of itself (gradekit grade's status, counts, operator and times): shards
# of one grading differ in these too, and their fused batch says them of the whole.
_NUMBERS = ("requested", "completed", "failed")
_SELF = (*_NUMBERS, "status", "operator", "started", "at")
# The seqs other events quote, by kind: renumbered with the events they name.
_QUOTED = {"review": ("run",), "promote": ("run", "review")}
_ENCODE = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode


@dataclass(frozen=True, slots=True)
class _Input:
    """One ledger: where it is, its complete lines and their events."""

    path: Path
    lines: tuple[bytes, ...]
    events: tuple[Mapping[str, Any], ...]

    @property
    def head(self) -> str:
        return hashlib.sha256(self.lines[-1]).hexdigest() if self.lines else "0" * 64


@dataclass(slots=True)
class _Group:
    """Events written together: a batch and its runs, or one other event."""

    events: list[Mapping[str, Any]]
    origin: list[tuple[int, int]]  # (input, old seq) of each event, for renumbering
    tie: str  # the head of the input it came from: the last tie-break, never input order

    @property
    def kind(self) -> str:
        return str(self.events[0].get("event"))

    def key(self) -> tuple[str, str, str]:
        body = b"".join(_ENCODE(_bare(e)).encode() + b"\n" for e in self.events)
        return self.kind, hashlib.sha256(body).hexdigest(), self.tie


@dataclass(frozen=True, slots=True)
class LedgerMerge:
    """A planned merge of ledgers: the shared prefix's bytes, the events to append after it
    (without ``seq`` and ``prev``), and what each input's events after the prefix graded."""

    prefix: bytes
    events: tuple[dict[str, Any], ...]
    graded: Mapping[Path, frozenset[str]]  # per ledger: folders its batches graded
    quoting: tuple[str, ...]  # "PATH:LINE kind" of events after the prefix that quote seqs
    fused: int  # batch events made of shards
    shared: int  # events in the prefix

    def write(self, path: Path) -> None:
        """Write the merged ledger to ``path`` (a new file)."""
        path.write_bytes(self.prefix)
        if self.events:
            append_events(path, self.events)


def _bare(event: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k not in ("seq", "prev")}


def _read(path: Path) -> _Input:
    holds, message = verify_ledger(path)
    if not holds:
        raise LedgerCorrupt(
            f"{message}; nothing was merged: merge only ledgers whose chain "
            "holds (restore this one from the shard's artifact)"
        )
    data = path.read_bytes()
    lines = tuple(data[: data.rfind(b"\n") + 1].splitlines())
    return _Input(path, lines, tuple(json.loads(line) for line in lines))


def plan_merge(paths: Sequence[Path], *, partial: bool = False) -> LedgerMerge:
    """Plan the merge of the ledgers at ``paths`` (see the module's docstring); a
    ``LedgerCorrupt`` for a chain that does not hold, a ``UsageError`` for shards that do
    not make a whole grading."""
    if not paths:
        raise UsageError("nothing to merge: pass the grades folder of every shard")
    inputs = [_read(path) for path in paths]
    shared = _prefix(inputs)
    tails = [_groups(number, item, shared) for number, item in enumerate(inputs)]
    graded = {
        item.path: frozenset(_graded(groups)) for item, groups in zip(inputs, tails, strict=True)
    }
    _graded_once(inputs, tails)
    sequences, fused = _fuse(inputs, tails, partial)
    order = _order(inputs, sequences)
    events = _renumber(order, shared)
    prefix = b"".join(line + b"\n" for line in inputs[0].lines[:shared])
    same = _same_as(inputs, shared, events)
    if same is not None:  # nothing was merged: the result is that input, byte for byte
        prefix, events = b"".join(line + b"\n" for line in same.lines), []
    else:
        sources = sorted(
            ({"events": len(item.lines), "head": item.head} for item in inputs),
            key=lambda source: (source["head"], source["events"]),
        )
        events.append({"event": "merge", "sources": sources})
    quoting = tuple(
        f"{inputs[i].path}:{seq + 1} {group.kind}"
        for groups in tails
        for group in groups
        for i, seq in group.origin[:1]
        if group.kind in _QUOTED
    )
    return LedgerMerge(prefix, tuple(events), graded, quoting, fused, shared)


def _prefix(inputs: Sequence[_Input]) -> int:
    """How many leading lines every input holds byte for byte."""
    shortest = min((len(item.lines) for item in inputs), default=0)
    for number in range(shortest):
        if len({item.lines[number] for item in inputs}) > 1:
            return number
    return shortest


def _groups(number: int, item: _Input, shared: int) -> list[_Group]:
    groups: list[_Group] = []
    for seq in range(shared, len(item.events)):
        event = item.events[seq]
        if event.get("event") == "run":
            if not groups or groups[-1].kind != "batch":
                raise UsageError(
                    f"{item.path}:{seq + 1}: a run event that follows no batch event after the "
                    "history the ledgers share: these folders were not graded apart from one "
                    "common folder; merge only the grades folders of one grading's shards"
                )
            groups[-1].events.append(event)
            groups[-1].origin.append((number, seq))
        else:
            groups.append(_Group([event], [(number, seq)], item.head))
    return groups


def _graded(groups: Sequence[_Group]) -> Iterator[str]:
    """The folders the batch events of ``groups`` graded (or were grading when stopped)."""
    for group in groups:
        if group.kind == "batch":
            for name in ("selection", "interrupted"):
                yield from _names(group.events[0], name)


def _names(event: Mapping[str, Any], name: str) -> list[str]:
    value = event.get(name, [])
    return [str(v) for v in value] if isinstance(value, list) else []


def _graded_once(inputs: Sequence[_Input], tails: Sequence[Sequence[_Group]]) -> None:
    """A folder graded after the common prefix in two ledgers has two latest grades."""
    seen: dict[str, tuple[int, str]] = {}
    for number, (item, groups) in enumerate(zip(inputs, tails, strict=True)):
        for group in groups:
            if group.kind != "batch":
                continue
            where = f"{item.path}:{group.origin[0][1] + 1}"
            for folder in _names(group.events[0], "selection"):
                if folder in seen and seen[folder][0] != number:
                    raise UsageError(
                        f"{folder} was graded in two of the folders merged, by the batch at "
                        f"{seen[folder][1]} and the one at {where}: a submission has one "
                        "latest grade; grade each submission in one shard only (the same "
                        "--shard K/N for every shard, each K once), or leave one folder out"
                    )
                seen.setdefault(folder, (number, where))


# -- fusing shards -----------------------------------------------------------------------------


def _shard(event: Mapping[str, Any]) -> tuple[int, int] | None:
    text = event.get(_SHARD)
    if event.get("event") != "batch" or not isinstance(text, str):
        return None
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count)):
        return None
    return int(index), int(count)


def _fusion_key(event: Mapping[str, Any], count: int) -> str:
    """What shards of one grading share: all but the counts, the lists and ``shard``."""
    common = {
        k: v
        for k, v in _bare(event).items()
        if k not in (_SUMMED, _SHARD, *_UNIONED, *_LESS_GRADED, *_SELF)
    }
    return _ENCODE({"batch": common, "of": count})


def _fuse(
    inputs: Sequence[_Input], tails: Sequence[Sequence[_Group]], partial: bool
) -> tuple[list[list[_Group]], int]:
    """Each input's groups, with every whole set of shards replaced by one fused group (one
    object, shared by the inputs holding its shards, at the place of its first shard)."""
    sets: dict[str, list[tuple[int, _Group]]] = {}
    for groups in tails:
        for group in groups:
            shard = _shard(group.events[0])
            if shard is not None:
                sets.setdefault(_fusion_key(group.events[0], shard[1]), []).append(
                    (shard[0], group)
                )
    replaced: dict[int, _Group] = {}
    fused = 0
    for members in sets.values():
        whole = _whole(inputs, members, partial)
        if whole:
            made = _fused(sorted(members, key=lambda member: member[0]))
            replaced |= {id(group): made for _, group in members}
            fused += 1
    sequences: list[list[_Group]] = []
    for groups in tails:
        sequence: list[_Group] = []
        held: set[int] = set()
        for group in groups:
            placed = replaced.get(id(group), group)
            if id(placed) not in held:
                held.add(id(placed))
                sequence.append(placed)
        sequences.append(sequence)
    return sequences, fused


def _whole(inputs: Sequence[_Input], members: Sequence[tuple[int, _Group]], partial: bool) -> bool:
    """Whether ``members`` are every shard of their grading, each once."""
    count = _shard(members[0][1].events[0])
    assert count is not None  # every member is a shard
    where: dict[int, str] = {}
    for index, group in members:
        number, seq = group.origin[0]
        at = f"{inputs[number].path}:{seq + 1}"
        if index in where:
            raise UsageError(
                f"shard {index}/{count[1]} was graded twice, by the batch at "
                f"{where[index]} and the one at {at}: merge one grades folder of "
                "each shard (leave the other out)"
            )
        where[index] = at
    missing = [str(k) for k in range(1, count[1] + 1) if k not in where]
    if missing and not partial:
        given = min(where)
        raise UsageError(
            f"shard(s) {', '.join(missing)} of {count[1]} are missing: the batch at "
            f"{where[given]} is shard {given}/{count[1]} of a grading whose other shards (the "
            "same rubric, grader and mode) were not given; pass every shard's grades folder, "
            "grade the missing shard(s) with the same rubric and grader, or pass --partial "
            "to keep these shards apart, each as graded"
        )
    return not missing


def _fused(members: Sequence[tuple[int, _Group]]) -> _Group:
    """One batch event and its runs, as one machine grading every shard's folders writes
    them: runs in the folders' name order, the batch's order."""
    batches = [group.events[0] for _, group in members]
    event = {
        k: v
        for k, v in _bare(batches[0]).items()
        if k not in (_SUMMED, _SHARD, *_UNIONED, *_LESS_GRADED, *_SELF)
    }
    event.update(_itself(batches))
    counts: dict[str, int] = {}
    for batch in batches:
        summed = batch.get(_SUMMED, {})
        for status, number in summed.items() if isinstance(summed, dict) else ():
            counts[str(status)] = counts.get(str(status), 0) + int(number)
    event[_SUMMED] = counts
    for name in _UNIONED:
        union = sorted({folder for batch in batches for folder in _names(batch, name)})
        if union or name in _ALWAYS:
            event[name] = union
    graded = set(event["selection"]) | set(event.get("interrupted", []))
    for name in _LESS_GRADED:
        rest = sorted({folder for batch in batches for folder in _names(batch, name)} - graded)
        if rest:
            event[name] = rest
    runs = [
        (run, origin)
        for _, group in members
        for run, origin in zip(group.events[1:], group.origin[1:], strict=True)
    ]
    runs.sort(key=lambda pair: str(pair[0].get("submission", "")))
    first = members[0][1]
    return _Group(
        [event, *(run for run, _ in runs)],
        [first.origin[0], *(o for _, o in runs)],
        min(group.tie for _, group in members),
    )


def _itself(batches: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What the shards' batches say of themselves, said of the whole grading: the counts
    summed, the status of those sums, the first start and the last end, the operators (one,
    or each once, sorted, joined by ", "). Nothing when the shards say none (an older
    gradekit's)."""
    if not all(key in batch for batch in batches for key in _SELF):
        return {}
    numbers = {key: sum(int(batch[key]) for batch in batches) for key in _NUMBERS}
    interrupted = any(batch.get("interrupted") for batch in batches)
    operators = sorted({str(batch["operator"]) for batch in batches})
    return {
        **numbers,
        "status": batch_status(numbers["requested"], numbers["completed"], interrupted),
        "operator": ", ".join(operators),
        "started": min(str(b["started"]) for b in batches),
        "at": max(str(b["at"]) for b in batches),
    }


# -- ordering and renumbering -------------------------------------------------------------------


def _order(inputs: Sequence[_Input], sequences: Sequence[Sequence[_Group]]) -> list[_Group]:
    """Every group once, each input's order kept; of the groups free to go next, the least
    by (kind, digest, input head)."""
    at = [0] * len(sequences)
    holders: dict[int, list[int]] = {}
    for number, sequence in enumerate(sequences):
        for group in sequence:
            holders.setdefault(id(group), []).append(number)
    keys = {id(group): group.key() for sequence in sequences for group in sequence}
    placed: list[_Group] = []
    total = len(holders)
    while len(placed) < total:
        heads = {id(seq[at[n]]): seq[at[n]] for n, seq in enumerate(sequences) if at[n] < len(seq)}
        free = [
            group
            for group in heads.values()
            if all(
                at[n] < len(sequences[n]) and sequences[n][at[n]] is group
                for n in holders[id(group)]
            )
        ]
        if not free:
            stuck = sorted(
                str(inputs[n].path) for n, seq in enumerate(sequences) if at[n] < len(seq)
            )
            raise UsageError(
                f"the shards' batches come in different orders in {', '.join(stuck)}"
                ": each ledger must hold its shards of two gradings in the same "
                "order; merge the gradings' shards one grading at a time"
            )
        chosen = min(free, key=lambda group: keys[id(group)])
        placed.append(chosen)
        for n in holders[id(chosen)]:
            at[n] += 1
    return placed


def _renumber(order: Sequence[_Group], shared: int) -> list[dict[str, Any]]:
    """The events in ``order``, without ``seq`` and ``prev``, each quoted seq renumbered."""
    new: dict[tuple[int, int], int] = {}
    for group in order:
        for origin in group.origin:
            new[origin] = shared + len(new)
    events = []
    for group in order:
        for event, (number, _) in zip(group.events, group.origin, strict=True):
            bare = _bare(event)
            for name in _QUOTED.get(str(bare.get("event")), ()):
                quoted = bare.get(name)
                if isinstance(quoted, int) and quoted >= shared:
                    if (number, quoted) not in new:
                        raise UsageError(
                            f"a {bare.get('event')} event quotes ledger event "
                            f"{quoted}, which its ledger does not hold as such"
                        )
                    bare[name] = new[(number, quoted)]
            events.append(bare)
    return events


def _same_as(
    inputs: Sequence[_Input], shared: int, events: Sequence[dict[str, Any]]
) -> _Input | None:
    """The input whose events after the prefix are the merged ones, unchanged, if any."""
    for item in inputs:
        if len(item.events) - shared == len(events) and all(
            _bare(old) == new for old, new in zip(item.events[shared:], events, strict=True)
        ):
            return item
    return None


# -- the grades folders ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Merged:
    """What ``merge_folders`` wrote: the plan of its ledger and what the folder holds."""

    out: Path
    ledger: LedgerMerge
    events: int  # in the merged ledger
    head: str  # the SHA-256 of its last line
    folders: int  # submission folders (and any other folder) copied
    archived: int  # archived reports
    rows: int | None  # gradebook rows; None: no input had a gradebook


@dataclass(slots=True)
class _Copies:
    """The files to write, relative to the merged folder, each from one input's file."""

    files: dict[str, Path] = field(default_factory=dict)
    digests: dict[str, tuple[str, Path]] = field(default_factory=dict)

    def add(self, relative: str, source: Path, fix: str) -> None:
        """Take ``source`` for ``relative``; an earlier different copy is an error."""
        digest = hashlib.sha256(source.read_bytes()).hexdigest()
        if relative in self.digests and self.digests[relative][0] != digest:
            raise UsageError(
                f"{self.digests[relative][1]} and {source} differ: {fix}; nothing was merged"
            )
        self.digests.setdefault(relative, (digest, source))
        self.files.setdefault(relative, source)


def merge_folders(inputs: Sequence[Path], out: Path, *, partial: bool = False) -> Merged:
    """Merge the grades folders ``inputs`` into the new folder ``out`` (see the module's
    docstring); a ``UsageError`` (``LedgerCorrupt`` for a broken chain) saying what to do
    when they do not merge, with nothing written."""
    _check_places(inputs, out)
    plan = plan_merge([folder / LEDGER for folder in inputs], partial=partial)
    if plan.quoting:
        raise UsageError(
            f"{plan.quoting[0]} event comes after the history the folders share: results.json, "
            "the gradebook and regression sets quote its ledger event number, which a merge "
            "renumbers; merge the shards' folders before reviewing or promoting, and record "
            "it again in the merged folder (nothing was merged)"
        )
    owner = {
        folder: number
        for number, source in enumerate(inputs)
        for folder in plan.graded[source / LEDGER]
    }
    copies = _Copies()
    folders: set[str] = set()
    for number, source in enumerate(inputs):
        for child in sorted(source.iterdir()):
            _plan_entry(copies, folders, number, source, child, owner)
    for name in sorted(folders):  # one no input graded since the prefix: one in all
        graded_by = owner.get(name)
        if graded_by is None or not (inputs[graded_by] / name).is_dir():
            for source in inputs:
                if (source / name).is_dir():
                    _add_tree(copies, source, name)
    book = _gradebook(inputs, owner)
    _write(out, copies, plan, book)
    lines = (out / LEDGER).read_bytes().splitlines()
    return Merged(
        out,
        plan,
        len(lines),
        hashlib.sha256(lines[-1]).hexdigest() if lines else "0" * 64,
        len(folders),
        sum(1 for name in copies.files if name.startswith(f"{ARCHIVE}/")),
        None if book is None else len(read_gradebook(book)[1]),
    )


def _check_places(inputs: Sequence[Path], out: Path) -> None:
    if not inputs:
        raise UsageError("nothing to merge: pass the grades folder of every shard")
    seen: dict[Path, Path] = {}
    for folder in inputs:
        if not (folder / LEDGER).is_file():
            raise UsageError(
                f"{folder} holds no {LEDGER}: pass grades folders, each the --out "
                "of one shard's grading"
            )
        resolved = folder.resolve()
        if resolved in seen:
            raise UsageError(
                f"{seen[resolved]} and {folder} are one folder: pass each shard's "
                "grades folder once"
            )
        seen[resolved] = folder
    target = out.resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(
            f"--out {out} already exists and is not an empty folder: a merge "
            "writes a new grades folder and never over one; pass a new --out "
            "(to merge into those grades, pass that folder as one more input)"
        )
    for resolved, folder in seen.items():
        if target == resolved or resolved in target.parents or target in resolved.parents:
            raise UsageError(
                f"--out {out} and the input {folder} overlap: pass an --out outside every input"
            )


def _plan_entry(
    copies: _Copies,
    folders: set[str],
    number: int,
    source: Path,
    child: Path,
    owner: Mapping[str, int],
) -> None:
    """Plan one top-level entry of the input ``source``."""
    name = child.name
    if child.is_symlink() or not (child.is_file() or child.is_dir()):
        raise UsageError(
            f"{child} is not a plain file or folder: a grades folder holds only "
            "those; move it out of the folder and merge again"
        )
    if name in (LEDGER, GRADEBOOK):
        return
    if name == ARCHIVE and child.is_dir():
        for path in _files(child):
            copies.add(
                f"{ARCHIVE}/{path.relative_to(child).as_posix()}",
                path,
                "two reports archived under one digest must be one report; restore "
                "the archive from the shard's artifact",
            )
    elif child.is_dir():
        folders.add(name)
        if owner.get(name) == number:  # the folder its grading wrote, whatever others hold
            _add_tree(copies, source, name)
    elif name == DRAW_KEY:
        copies.add(
            name,
            child,
            "the shards drew labels and seeds with different keys, so "
            "the merged folder could keep only one; grade every shard with one "
            "GRADEKIT_SIGNING_KEY (or one GRADEKIT_SIGNING_KEY_FILE), or copy one "
            f"{DRAW_KEY} into every shard's --out before grading",
        )
    else:
        copies.add(
            name,
            child,
            "a file the shards' grading did not write must be the same "
            "in each; keep one copy and merge again",
        )


def _add_tree(copies: _Copies, source: Path, name: str) -> None:
    """Plan the folder ``source/name``: each file must equal any copy planned before."""
    for path in _files(source / name):
        copies.add(
            f"{name}/{path.relative_to(source / name).as_posix()}",
            path,
            f"{name} was graded in none of these folders since the history they share, "
            "so its copies must be one; grade it again in one shard, or keep one copy",
        )


def _files(folder: Path) -> list[Path]:
    found = []
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            raise UsageError(
                f"{path} is not a plain file or folder: a grades folder holds only "
                "those; move it out of the folder and merge again"
            )
        if path.is_file():
            found.append(path)
    return found


def _gradebook(inputs: Sequence[Path], owner: Mapping[str, int]) -> bytes | None:
    """``gradebook merge`` over each input's rows of the folders it graded, and once the
    rows no input graded (which must be equal wherever they are)."""
    parts: list[bytes] = []
    others: dict[str, tuple[GradebookRow, Path]] = {}
    first: tuple[list[str], Path] | None = None
    for number, source in enumerate(inputs):
        path = source / GRADEBOOK
        if not path.is_file():
            continue
        ids, rows = read_gradebook(path.read_bytes())
        if first is None:
            first = (ids, path)
        elif ids != first[0]:
            raise UsageError(
                f"{path} has the criteria {','.join(ids)} but {first[1]} has "
                f"{','.join(first[0])}: merge only shards graded with one rubric"
            )
        parts.append(
            gradebook_csv([row for row in rows if owner.get(row.submission) == number], ids)
        )
        for row in rows:
            if row.submission in owner:
                continue
            if row.submission in others and others[row.submission][0] != row:
                raise UsageError(
                    f"{others[row.submission][1]} and {path} differ on "
                    f"{row.submission}, which none of them graded since the history "
                    "they share: grade it again in one shard; nothing was merged"
                )
            others.setdefault(row.submission, (row, path))
    if first is None:
        return None
    return merge_gradebooks([*parts, gradebook_csv([row for row, _ in others.values()], first[0])])


def _write(out: Path, copies: _Copies, plan: LedgerMerge, book: bytes | None) -> None:
    """Write everything into a new folder beside ``out``, then rename it to ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    building = out.parent / f".{out.name}.merging-{os.getpid()}"
    try:
        building.mkdir()
    except FileExistsError:
        raise UsageError(
            f"{building} is left from a merge that stopped: delete it and merge again"
        ) from None
    try:
        for relative, source in sorted(copies.files.items()):
            target = building / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            mode = 0o600 if relative == DRAW_KEY else 0o644
            descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            with os.fdopen(descriptor, "wb") as file:
                file.write(source.read_bytes())
        plan.write(building / LEDGER)
        if book is not None:
            (building / GRADEBOOK).write_bytes(book)
        holds, message = verify_ledger(building / LEDGER)
        if not holds:  # never: the merge writes every line; a bug must not pass for grades
            raise LedgerCorrupt(
                f"the merged ledger does not verify ({message}): report a "
                "grader bug; nothing was merged"
            )
        if out.is_dir():
            out.rmdir()  # empty: checked before anything was read
        building.rename(out)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
