"""``copies.json``: the pairs of a cohort's submissions that look copied, for a person to
review, and the words the gradebook's ``reason`` says it in.

A batch compares every submission its paths hold (``grader.batch``'s copy detector) and
writes this file beside the gradebook. It moves no points and is never part of a report
or its digest: a report stays a function of its own submission's inputs.

A pair names both folders (``a`` before ``b``) and, for each part (``code``: the agent's
package; ``failures``: FAILURES.md; ``cassettes``: the recorded prompts and answers), the
share of the smaller side's fingerprints the other holds too (``score``, percent, rounded
down), how many they share (``shared``), each side's fingerprints (``sizes``, those common
to the cohort left out), whether that part is ``flagged`` and, when it is, an ``excerpt``:
where the longest shared run is in each, and its lines in ``a``. Canonical JSON (sorted
keys, compact) and a newline; pairs sorted by ``a`` then ``b``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grader._text import quote
from grader.outputs._report import canonical

__all__ = [
    "PARTS",
    "PART_WORDS",
    "SCHEMA",
    "CopyFindings",
    "CopyPair",
    "Excerpt",
    "PartScore",
    "copy_notes",
    "read_copies",
    "render_copies",
    "renoted",
]

SCHEMA = "gradekit.copies/1"
PARTS = ("code", "failures", "cassettes")
PART_WORDS = {"code": "agent code", "failures": "FAILURES.md", "cassettes": "cassettes"}
FLAGGED_END = ": flagged for review"
_NAMED = 3  # partners a gradebook note names; the rest are counted
_NAME = 80  # characters of a folder name in a note


@dataclass(frozen=True, slots=True)
class Excerpt:
    """Where the longest shared run is in each submission (``path:first-last``) and its
    lines in ``a``."""

    a: str
    b: str
    lines: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PartScore:
    """How much of one part two submissions share."""

    score: int  # percent of the smaller side's fingerprints the other holds, rounded down
    shared: int  # fingerprints both hold
    sizes: tuple[int, int]  # a's and b's fingerprints, those common to the cohort left out
    flagged: bool
    excerpt: Excerpt | None = None


@dataclass(frozen=True, slots=True)
class CopyPair:
    """Two submissions (folder names, ``a`` < ``b``) that look copied, part by part."""

    a: str
    b: str
    parts: Mapping[str, PartScore]  # every one of PARTS

    def other(self, folder: str) -> str:
        """The pair's other submission."""
        return self.b if folder == self.a else self.a

    def said(self) -> str:
        """The flagged parts with their scores: ``agent code (87%), FAILURES.md (100%)``."""
        return ", ".join(
            f"{PART_WORDS[part]} ({self.parts[part].score}%)"
            for part in PARTS
            if self.parts[part].flagged
        )


@dataclass(frozen=True, slots=True)
class CopyFindings:
    """What a comparison of a cohort found: ``compared`` submissions, the settings it ran
    with, and the flagged pairs."""

    compared: int
    settings: Mapping[str, int]
    pairs: tuple[CopyPair, ...]


def copy_notes(copies: CopyFindings | None) -> dict[str, str]:
    """Each flagged submission's note, as the gradebook's ``reason`` ends with it:
    ``similar to bob's agent code (87%): flagged for review``."""
    partners: dict[str, list[CopyPair]] = {}
    for pair in copies.pairs if copies is not None else ():
        partners.setdefault(pair.a, []).append(pair)
        partners.setdefault(pair.b, []).append(pair)
    notes = {}
    for folder, pairs in partners.items():
        ordered = sorted(pairs, key=lambda pair: pair.other(folder))
        clauses = [
            f"similar to {quote(pair.other(folder), _NAME)}'s {pair.said()}"
            for pair in ordered[:_NAMED]
        ]
        if len(ordered) > _NAMED:
            clauses.append(f"and to {len(ordered) - _NAMED} more (copies.json lists them)")
        notes[folder] = "; ".join(clauses) + FLAGGED_END
    return notes


def renoted(reason: str, old: str, new: str) -> str:
    """A gradebook ``reason`` with its copy note ``old`` (the one an earlier comparison
    gave, "" for none) replaced by ``new``: a note is always the reason's last part."""
    if old and (reason == old or reason.endswith(f"; {old}")):
        reason = reason[: len(reason) - len(old)].removesuffix("; ")
    if new and not (reason == new or reason.endswith(f"; {new}")):
        reason = f"{reason}; {new}" if reason else new
    return reason


# -- the file ----------------------------------------------------------------------------------


def render_copies(copies: CopyFindings) -> bytes:
    """The file's bytes: canonical JSON and a newline."""
    return (
        canonical(
            {
                "schema": SCHEMA,
                "compared": copies.compared,
                "settings": dict(copies.settings),
                "pairs": [
                    _pair_document(pair) for pair in sorted(copies.pairs, key=lambda p: (p.a, p.b))
                ],
            }
        )
        + b"\n"
    )


def _pair_document(pair: CopyPair) -> dict[str, Any]:
    parts = {}
    for part in PARTS:
        score = pair.parts[part]
        entry: dict[str, Any] = {
            "score": score.score,
            "shared": score.shared,
            "sizes": list(score.sizes),
            "flagged": score.flagged,
        }
        if score.excerpt is not None:
            entry["excerpt"] = {
                "a": score.excerpt.a,
                "b": score.excerpt.b,
                "lines": list(score.excerpt.lines),
            }
        parts[part] = entry
    return {"a": pair.a, "b": pair.b, "parts": parts}


def read_copies(data: bytes) -> CopyFindings:
    """The file ``render_copies`` wrote; ``ValueError`` saying what is wrong otherwise."""
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise ValueError(f"not a {SCHEMA} document")
    settings, pairs = document.get("settings"), document.get("pairs")
    if (
        not isinstance(settings, dict)
        or not isinstance(pairs, list)
        or not isinstance(document.get("compared"), int)
    ):
        raise ValueError("compared, settings and pairs must be a number, an object and a list")
    return CopyFindings(
        document["compared"],
        {str(k): int(v) for k, v in settings.items()},
        tuple(_pair(entry) for entry in pairs),
    )


def _pair(entry: object) -> CopyPair:
    if (
        not isinstance(entry, dict)
        or not isinstance(entry.get("a"), str)
        or not isinstance(entry.get("b"), str)
        or not isinstance(entry.get("parts"), dict)
    ):
        raise ValueError("a pair needs a, b and parts")
    parts = entry["parts"]
    missing = [part for part in PARTS if not isinstance(parts.get(part), dict)]
    if missing:
        raise ValueError(f"the pair {entry['a']}, {entry['b']} lacks {', '.join(missing)}")
    return CopyPair(entry["a"], entry["b"], {part: _part(parts[part]) for part in PARTS})


def _part(entry: Mapping[str, Any]) -> PartScore:
    try:
        sizes: Sequence[int] = entry["sizes"]
        excerpt = entry.get("excerpt")
        return PartScore(
            int(entry["score"]),
            int(entry["shared"]),
            (int(sizes[0]), int(sizes[1])),
            bool(entry["flagged"]),
            None
            if excerpt is None
            else Excerpt(
                str(excerpt["a"]), str(excerpt["b"]), tuple(str(line) for line in excerpt["lines"])
            ),
        )
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise ValueError(f"a part is not score, shared, sizes and flagged ({exc})") from None
