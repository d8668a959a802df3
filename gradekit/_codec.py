"""What a recording format supplies to the store, and the wording every format shares.

Cassettes and tool fixtures are two codecs over one store (``gradekit._store``).
A codec turns its documents into bytes and back, folds journalled entries
into a document, and names itself. The messages for a file that cannot be
read, a journal line that cannot be read and a miss (with the closest
recorded match) are built here from those names, so the two formats say the
same thing the same way. ``Entry``, one recorded answer, is the unit a journal
holds on its way into any format (``gradekit._cassette`` re-exports it).
"""

from __future__ import annotations

import difflib
import functools
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from gradekit._commands import RECORD, RECORD_CASE, RERECORD_CASE
from gradekit._exceptions import CassetteCorrupt

__all__ = ["Codec", "Document", "Entry", "Fold", "closest", "divergence", "hostile_json"]


def hostile_json(exc: BaseException) -> str:
    """Why Python's JSON decoder gave up on a text no recorder writes, past its syntax:
    nesting past the recursion limit, or an integer past int's digit limit."""
    return "nested too deep" if isinstance(exc, RecursionError) else "a number too long"


class Document(Protocol):
    """What every format's value has: the case it records."""

    @property
    def case(self) -> str:
        """The case's id, as the rubric names it."""
        ...


@dataclass(frozen=True, slots=True)
class Entry:
    """One recorded answer. ``prompt`` is None only for entries read from the flat form."""

    prompt: str | None
    response: str
    provider: str = ""
    recorded_at: str = ""


D = TypeVar("D", bound=Document)
T = TypeVar("T")
_COMPARED = 400  # closeness is judged on the first characters: cheap even at 100 000 entries


@dataclass(frozen=True, slots=True)
class Fold:
    """Journalled entries on their way into a file: the file, its case, the entries
    (oldest first), the recording run's time, and the keys a re-recording keeps (None: all).
    """

    path: Path
    case: str
    pending: Sequence[tuple[str, Entry]]
    now: str = ""
    keep: frozenset[str] | None = None

    def kept(self, entries: dict[str, T]) -> dict[str, T]:
        """``entries`` without the keys a re-recording did not ask again."""
        if self.keep is None:
            return entries
        return {key: value for key, value in entries.items() if key in self.keep}


class Codec(ABC, Generic[D]):
    """One recording format: its bytes, its fold, and the names its messages use.

    A subclass sets ``document`` (the type of its values), ``format`` (the
    version it writes), ``error`` (what a file it cannot read raises),
    ``noun`` and ``things`` (``"cassette"`` and ``"answers"``: what a message
    calls a file and its entries), ``rerecord`` (whether recording a case
    again needs ``--rerecord``), and, for a miss, ``asked`` (what was asked),
    ``fix`` (how to record it) and ``then`` (what to do after).
    """

    document: type[D]
    reason = "the recorded results changed"  # a re-record's --reason, in printed commands
    format: str
    error: type[CassetteCorrupt]
    noun: str
    things: str
    rerecord: bool
    asked: str
    fix: str
    then: str

    @abstractmethod
    def encode(self, document: D) -> bytes:
        """The canonical bytes of ``document``: one value always gives the same bytes."""

    @abstractmethod
    def decode(self, data: bytes, *, source: str, case: str = "") -> D:
        """Parse file bytes; ``source`` names the file in every error, ``case`` the fix."""

    @abstractmethod
    def answers(self, document: D) -> Mapping[str, object]:
        """What each key answered, without when: two recordings with equal answers hold the
        same data, however far apart they were made."""

    @abstractmethod
    def merge(self, base: D | None, fold: Fold) -> D:
        """``base`` (None: the file does not exist) with the entries of ``fold`` on top,
        less the keys it does not keep."""

    def record_command(self, case: str) -> str:
        """The command that records ``case`` again (every case, when ``case`` is empty)."""
        if not case:
            return RECORD()
        if self.rerecord:
            return RERECORD_CASE(case=case, reason=self.reason)
        return RECORD_CASE(case=case)

    def restore_hint(self, source: str, case: str) -> str:
        """The two ways back from a file that cannot be read."""
        command = self.record_command(case)
        return f"Restore it with `git checkout -- {source}`, or delete it and run `{command}`."

    def canonical(self, document: Mapping[str, Any]) -> bytes:
        """UTF-8, keys sorted, two-space indent, one trailing newline: a clean git diff."""
        text = json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
        return (text + "\n").encode("utf-8")

    def text(self, data: bytes, *, source: str, case: str) -> str:
        """``data`` as UTF-8 text; a byte that is not is an error naming its line."""
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data[: exc.start].count(b"\n") + 1
            raise self.error(
                f"{source}:{line}: not UTF-8 text (byte {exc.start}). "
                f"{self.noun.capitalize()}s are UTF-8 JSON. {self.restore_hint(source, case)}"
            ) from exc

    def json_object(
        self,
        text: str,
        *,
        source: str,
        case: str,
        parse_constant: Callable[[str], Any] | None = None,
    ) -> dict[str, Any]:
        """The JSON object ``text`` holds; anything else is an error, never an empty file."""
        try:
            document = json.loads(text, parse_constant=parse_constant)
        except json.JSONDecodeError as exc:
            raise self.error(
                f"{source}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}). "
                f"{self.restore_hint(source, case)}"
            ) from exc
        except (RecursionError, ValueError) as exc:  # what no recorder writes: a hostile file
            raise self.error(
                f"{source}: not valid JSON ({hostile_json(exc)}). {self.restore_hint(source, case)}"
            ) from None
        if not isinstance(document, dict):
            raise self.error(
                f"{source}:1:1: a {self.noun} is a JSON object, found {type(document).__name__}. "
                f"{self.restore_hint(source, case)}"
            )
        return document

    def corrupt(self, source: str, text: str, offset: int, problem: str) -> CassetteCorrupt:
        """The error for ``problem``, located at ``offset`` of ``text`` as ``line:column``."""
        return self.error(f"{source}:{_line_col(text, offset)}: {problem}")

    def format_problem(self, version: object, *, reads: str) -> str:
        """Why ``version`` cannot be read: a newer gradekit wrote it, or it is another format
        (``reads`` completes "gradekit reads <format>")."""
        family = self.format.rpartition("/")[0] + "/"
        hint = (
            "it was written by a newer gradekit: upgrade with `pip install -U gradekit`"
            if isinstance(version, str) and version.startswith(family)
            else f"gradekit reads {self.format!r}{reads}"
        )
        return f"unknown {self.noun} format {version!r}; {hint}."

    def journal_problem(self, journal: Path, line: int, problem: str) -> CassetteCorrupt:
        """The error for a journal line that cannot be folded in."""
        return self.error(
            f"{journal}:{line}: {problem}. The journal holds {self.things} recorded but not yet "
            f"folded into the {self.noun}: fix or delete that line, then run `{RECORD()}` "
            "again."
        )

    @property
    def absent(self) -> str:
        """What a miss shows as the closest match when the file does not exist."""
        return f"(the {self.noun} file does not exist yet)"

    def miss_message(self, source: str, rows: Sequence[tuple[str, str]], *, case: str) -> str:
        """A miss: what ``source`` does not hold, the ``(label, value)`` rows that show it,
        and the command that records it."""
        return "\n".join(
            [
                f"no recording {self.asked} in {source}",
                *(f"  {label + ':':<9}{value}" for label, value in rows),
                f"  fix:     {self.fix}: `{self.record_command(case)}`,",
                f"           then {self.then}",
            ]
        )


def closest(target: str, candidates: Sequence[T], text: Callable[[T], str]) -> tuple[T, float]:
    """The candidate whose ``text`` is most like ``target``, and how alike (0 to 1).

    Only the first characters are compared; a cheap upper bound shortlists
    five candidates and the exact ratio picks among them, so a miss stays fast
    at any size. ``candidates`` must not be empty.
    """
    texts = tuple(text(c)[:_COMPARED] for c in candidates)
    find = _kept_closest if len(texts) <= _KEPT_CANDIDATES else _closest
    index, alike = find(target[:_COMPARED], texts)
    return candidates[index], alike


_KEPT_CANDIDATES = 64  # a closest() of at most this many is kept (bounded, as its cache is)


def _closest(target: str, texts: tuple[str, ...]) -> tuple[int, float]:
    """``closest`` on the compared heads: the index of the closest, and how alike."""
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(target)

    def rough(index: int) -> float:
        matcher.set_seq1(texts[index])
        return matcher.quick_ratio()

    # The exact ratio never exceeds the rough one: a candidate whose rough ratio is no more
    # than the best exact ratio so far cannot win (a tie keeps the earlier, as max() would),
    # so the shortlist is walked in rough order and cut there.
    best, alike = 0, -1.0
    for index in sorted(range(len(texts)), key=rough, reverse=True)[:5]:
        matcher.set_seq1(texts[index])
        if alike >= 0 and matcher.quick_ratio() <= alike:
            break
        ratio = matcher.ratio()
        if ratio > alike:
            best, alike = index, ratio
    return best, alike


# Kept for the process: the grader meets the same miss in many runs of a grading, and a
# cohort's agents ask the hand-out's prompts.
_kept_closest = functools.lru_cache(maxsize=1024)(_closest)


def divergence(asked: str, recorded: str, *, before: int = 20, after: int = 40) -> str:
    """Where ``asked`` first differs from ``recorded`` (both stripped, as keys are), with a
    short stretch of each from just before that point: what an 80-character head of two
    long prompts hides."""
    a, r = asked.strip(), recorded.strip()
    at = next(
        (i for i, (x, y) in enumerate(zip(a, r, strict=False)) if x != y), min(len(a), len(r))
    )
    start = max(0, at - before)

    def stretch(text: str) -> str:
        shown = ("…" if start else "") + text[start : at + after]
        return json.dumps(shown + ("…" if len(text) > at + after else ""), ensure_ascii=False)

    return f"at character {at + 1}: asked {stretch(a)}, recorded {stretch(r)}"


def _line_col(text: str, offset: int) -> str:
    """``line:column`` (both from 1) of ``offset`` in ``text``."""
    line = text.count("\n", 0, offset) + 1
    return f"{line}:{offset - text.rfind(chr(10), 0, offset)}"
