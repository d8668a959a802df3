"""Copies across a cohort: which submissions share their agent code, FAILURES.md or
cassettes, found from fingerprints (``grader.batch._fingerprints``) in an inverted index.

Each submission's parts are read as files only, never run (its manifest names them: the
package its ``agent`` spec names, its failure log, ``cassettes/*.json``), with the grader's
caps and never through a link; a file many submissions hold byte for byte is fingerprinted
once. A fingerprint held by more submissions than ``common_over`` allows (more than half
the cohort, or than ``COMMON_MOST``: the hand-out's starter code, the lab's tasks in every
prompt) is common and counts for nothing, and so is every fingerprint of the hand-out,
when one is given. Candidate pairs come from the index, fingerprint by fingerprint, never
from all pairs: the work grows with the fingerprints and the pairs that share one.

A pair's part scores the share of the smaller side's fingerprints (common ones left out)
the other holds too; a part is flagged at ``THRESHOLD`` percent with at least
``MIN_SHARED`` fingerprints shared, and a pair with a flagged part is kept. The index is
built in shards of the hash range, so that no more than about ``_SHARD_SIZE``
fingerprints are counted at once, whatever the cohort's size (each shard reads every
submission's sorted fingerprints twice, a slice of them each time). Everything is in name
order and every hash is BLAKE2b's or a fixed polynomial's: the same folders give the same
pairs, whatever order they are given in, the hash seed or the clock.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import itertools
from array import array
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gradekit.internal import write_atomic
from grader._text import quote
from grader.batch._fingerprints import CODE_K, TEXT_K, WINDOW, Document, fingerprints, positioned
from grader.batch._parts import Source, part_documents, part_sources
from grader.ledger import COPIES
from grader.outputs import (
    PARTS,
    CopyFindings,
    CopyPair,
    Excerpt,
    GradebookRow,
    PartScore,
    copy_notes,
    read_copies,
    render_copies,
    renoted,
)

__all__ = [
    "COMMON_MOST",
    "MIN_SHARED",
    "THRESHOLD",
    "Comparison",
    "common_over",
    "compare_cohort",
    "find_copies",
]

THRESHOLD = 50  # percent of the smaller side's fingerprints that flags a part
MIN_SHARED = 6  # fingerprints a flagged part shares at least: some 40 tokens or 35 words
COMMON_MOST = 20  # a fingerprint held by more submissions than this is common, always (as
# MOSS's -m): each one held by n submissions makes n * (n - 1) / 2 candidate pairs
_SHARD_SIZE = 1 << 19  # fingerprints counted at once
_UNITS_KEPT = 1 << 14  # documents' fingerprints kept for the next submission
_PRIME = (1 << 61) - 1  # every fingerprint is below it
_EXCERPT_LINES = 8
_LINE = 160  # characters of an excerpt's line


def common_over(cohort: int) -> int:
    """How many submissions may hold a fingerprint before it is common: half the cohort,
    at most ``COMMON_MOST``, and never fewer than two (so that two submissions of three
    sharing one is still a pair)."""
    return max(2, min(cohort // 2, COMMON_MOST))


# -- the index ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Held:
    """One submission as the index holds it: per part, each file's fingerprints, sorted."""

    name: str
    root: Path
    parts: tuple[tuple[array[int], ...], ...]  # in PARTS order


class _Reader:
    """Reads submissions' parts, fingerprinting each distinct file once."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, bytes], array[int]] = {}
        self._units: dict[bytes, array[int]] = {}  # by a document's tokens

    def held(self, name: str, root: Path) -> _Held:
        sources = part_sources(root)
        return _Held(
            name,
            root,
            tuple(
                tuple(self._fingerprints(part, source) for source in sources[part])
                for part in PARTS
            ),
        )

    def _fingerprints(self, part: str, source: Source) -> array[int]:
        key = (part, hashlib.blake2b(source[1], digest_size=16).digest())
        found = self._seen.get(key)
        if found is None:
            hashes: set[int] = set()
            for document in part_documents(part, source):
                hashes.update(self._unit(document))
            found = self._seen[key] = array("q", sorted(hashes))
        return found

    def _unit(self, document: Document) -> array[int]:
        """A document's fingerprints, made once for the same tokens (a prompt that holds
        only the lab's task, a function left as the hand-out wrote it) while the last
        ``_UNITS_KEPT`` are kept."""
        key = hashlib.blake2b(
            "\x1f".join(document.tokens).encode("utf-8", "surrogatepass"),
            digest_size=16,
            person=b"%d" % document.k,
        ).digest()
        found = self._units.get(key)
        if found is None:
            if len(self._units) >= _UNITS_KEPT:
                self._units.clear()
            found = self._units[key] = array("q", fingerprints(document))
        return found


@dataclass(frozen=True, slots=True)
class _Part:
    """One part's index over the cohort: each submission's fingerprints that are not
    common, the fingerprints two of them share (by pair) and those that are common."""

    own: list[int]
    shared: Counter[int]  # by pair: ``a * cohort + b``, a < b
    common: set[int]


def _index(arrays: Sequence[tuple[array[int], ...]], excluded: set[int], over: int) -> _Part:
    """The part's index, one shard of the hash range at a time: each shard's fingerprints
    are counted, then read again for their holders, so that a shard's counts are all it
    keeps (never a set per submission)."""
    total = sum(len(values) for held in arrays for values in held)
    shards = 1 + total // _SHARD_SIZE
    cohort = len(arrays)
    own = [0] * cohort
    shared: Counter[int] = Counter()
    common: set[int] = set()
    for shard in range(shards):
        low, high = shard * _PRIME // shards, (shard + 1) * _PRIME // shards
        counts: Counter[int] = Counter()
        for values in arrays:
            counts.update(_slice(values, low, high) - excluded)
        many = {value for value, count in counts.items() if count > over}
        holders: dict[int, list[int]] = {
            value: [] for value, count in counts.items() if 2 <= count <= over
        }
        del counts
        for number, values in enumerate(arrays):
            hashes = _slice(values, low, high) - excluded
            own[number] += len(hashes) - len(hashes & many)
            for value in hashes & holders.keys():
                holders[value].append(number)
        for numbers in holders.values():
            shared.update([a * cohort + b for a, b in itertools.combinations(numbers, 2)])
        common |= many
    return _Part(own, shared, common)


def _slice(held: tuple[array[int], ...], low: int, high: int) -> set[int]:
    found: set[int] = set()
    for values in held:
        found.update(values[bisect.bisect_left(values, low) : bisect.bisect_left(values, high)])
    return found


def _score(index: _Part, a: int, b: int) -> PartScore:
    shared = index.shared.get(a * len(index.own) + b, 0)
    sizes = (index.own[a], index.own[b])
    smaller = min(sizes)
    score = shared * 100 // smaller if smaller else 0
    return PartScore(score, shared, sizes, shared >= MIN_SHARED and score >= THRESHOLD)


def find_copies(
    submissions: Sequence[tuple[str, Path]], *, handout: Path | None = None
) -> CopyFindings:
    """The flagged pairs among ``submissions`` (each its folder's name and path), each
    part's excerpt included; ``handout``: the starter the students were given, whose every
    fingerprint is common."""
    reader = _Reader()
    held = [reader.held(name, root) for name, root in sorted(submissions, key=lambda s: s[0])]
    given = reader.held("", handout) if handout is not None else None
    over = common_over(len(held))
    indexes = [
        _index([h.parts[number] for h in held], _hand_out(given, number), over)
        for number in range(len(PARTS))
    ]
    candidates = sorted(set().union(*(index.shared.keys() for index in indexes)))
    pairs = []
    excerpts = _Excerpts(indexes, given)
    for a, b in (divmod(key, len(held)) for key in candidates):
        scores = [_score(index, a, b) for index in indexes]
        if any(score.flagged for score in scores):
            parts = {
                part: dataclasses.replace(score, excerpt=excerpts.of(held[a], held[b], number))
                if score.flagged
                else score
                for number, (part, score) in enumerate(zip(PARTS, scores, strict=True))
            }
            pairs.append(CopyPair(held[a].name, held[b].name, parts))
    settings = {
        "code_k": CODE_K,
        "text_k": TEXT_K,
        "window": WINDOW,
        "threshold": THRESHOLD,
        "min_shared": MIN_SHARED,
        "common_over": over,
    }
    return CopyFindings(len(held), settings, tuple(pairs))


def _hand_out(given: _Held | None, part: int) -> set[int]:
    return _slice(given.parts[part], 0, _PRIME) if given is not None else set()


# -- excerpts ----------------------------------------------------------------------------------


class _Excerpts:
    """Where two submissions' longest shared run of a part is, read again for the pairs
    flagged (their documents kept for the next pair: pairs come in name order)."""

    def __init__(self, indexes: Sequence[_Part], given: _Held | None) -> None:
        self._excluded = [
            index.common | _hand_out(given, number) for number, index in enumerate(indexes)
        ]
        self._kept: dict[tuple[Path, int], list[Document]] = {}

    def of(self, a: _Held, b: _Held, part: int) -> Excerpt | None:
        ours, theirs = self._documents(a.root, part), self._documents(b.root, part)
        mine = [positioned(document) for document in ours]
        other = [positioned(document) for document in theirs]
        both = {h for chosen in mine for h, _ in chosen} & {
            h for chosen in other for h, _ in chosen
        }
        both -= self._excluded[part]
        run = _longest(ours, mine, both)
        if run is None:
            return None
        number, start, end = run
        document = ours[number]
        hashes = {h for h, at in mine[number] if h in both and start <= at <= end}
        return Excerpt(
            _where(document, start, end),
            _found(theirs, other, hashes),
            _lines(document, start, end),
        )

    def _documents(self, root: Path, part: int) -> list[Document]:
        key = (root, part)
        if key not in self._kept:
            if len(self._kept) >= 64:
                self._kept.clear()
            self._kept[key] = [
                d
                for source in part_sources(root)[PARTS[part]]
                for d in part_documents(PARTS[part], source)
            ]
        return self._kept[key]


def _longest(
    documents: Sequence[Document], chosen: Sequence[Sequence[tuple[int, int]]], both: set[int]
) -> tuple[int, int, int] | None:
    """The document and the token span of the longest run of tokens that shared k-grams
    cover: (document, first token, last token); the first such run on a tie."""
    best: tuple[int, int, int] | None = None
    for number, (document, hashes) in enumerate(zip(documents, chosen, strict=True)):
        covered = [False] * len(document.tokens)
        for value, at in hashes:
            if value in both:
                covered[at : at + document.k] = [True] * document.k
        for start, end in _runs(covered):
            if best is None or end - start > best[2] - best[1]:
                best = (number, start, end)
    return best


def _runs(covered: Sequence[bool]) -> list[tuple[int, int]]:
    runs, start = [], None
    for at, on in enumerate([*covered, False]):
        if on and start is None:
            start = at
        elif not on and start is not None:
            runs.append((start, at - 1))
            start = None
    return runs


def _where(document: Document, start: int, end: int) -> str:
    first, last = document.lines[start], document.lines[min(end, len(document.lines) - 1)]
    return f"{document.label}:{first}" if first == last else f"{document.label}:{first}-{last}"


def _found(
    documents: Sequence[Document], chosen: Sequence[Sequence[tuple[int, int]]], hashes: set[int]
) -> str:
    """Where the other submission holds most of the run's fingerprints."""
    best: tuple[int, list[int]] | None = None
    for number, found in enumerate(chosen):
        at = [place for value, place in found if value in hashes]
        if at and (best is None or len(at) > len(best[1])):
            best = (number, at)
    if best is None:
        return ""
    document = documents[best[0]]
    return _where(document, min(best[1]), max(best[1]) + document.k - 1)


def _lines(document: Document, start: int, end: int) -> tuple[str, ...]:
    """The first lines the run's tokens stand on (a unit's lines need not be adjacent)."""
    text = document.text.splitlines()
    numbers = sorted(set(document.lines[start : end + 1]))[:_EXCERPT_LINES]
    return tuple(
        quote(text[number - 1].rstrip(), _LINE) for number in numbers if number <= len(text)
    )


# -- a batch's comparison ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Comparison:
    """A batch's comparison of its cohort: the copies found (with the earlier pairs of
    folders it did not hold), and each gradebook note before and after it."""

    copies: CopyFindings
    before: Mapping[str, str]  # folder -> the note the grades folder's copies.json gave
    after: Mapping[str, str]  # folder -> the note this comparison gives
    rewrite: bool  # whether copies.json is to be written: pairs, or one to replace

    def noted(self, row: GradebookRow) -> GradebookRow:
        """The row with its copy note as this comparison has it."""
        reason = renoted(
            row.reason, self.before.get(row.submission, ""), self.after.get(row.submission, "")
        )
        return row if reason == row.reason else dataclasses.replace(row, reason=reason)

    def write(self, out: Path) -> None:
        """Write ``out/copies.json`` (when there is anything to say or to replace)."""
        if self.rewrite:
            out.mkdir(parents=True, exist_ok=True)
            write_atomic(out / COPIES, render_copies(self.copies))


def compare_cohort(
    submissions: Sequence[tuple[str, Path]], out: Path, *, handout: Path | None = None
) -> Comparison:
    """Compare every submission a batch's paths hold (their folder names and paths),
    keeping the pairs ``out``'s copies.json holds of folders they do not hold (an
    unreadable one is replaced)."""
    try:
        earlier: CopyFindings | None = read_copies((out / COPIES).read_bytes())
    except (OSError, ValueError):
        earlier = None
    found = find_copies(submissions, handout=handout)
    held = {name for name, _ in submissions}
    kept = [
        pair
        for pair in (earlier.pairs if earlier is not None else ())
        if pair.a not in held and pair.b not in held
    ]
    copies = dataclasses.replace(
        found, pairs=tuple(sorted((*found.pairs, *kept), key=lambda pair: (pair.a, pair.b)))
    )
    return Comparison(
        copies,
        copy_notes(earlier),
        copy_notes(copies),
        bool(copies.pairs) or (out / COPIES).exists(),
    )
