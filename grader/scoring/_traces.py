"""Which trace record belongs to which call: paired by the key it names, never by position.

An agent that leaves one call untraced shifts every later line of its trace, so reading
record N as call N's would cost every call after the gap. Here each call, in the order
the parent served it, takes the first record not yet taken that names its key and was
written after the parent answered it (a record already in the file when its call was
answered was made up, not observed). One missing record costs its call alone; a record
that names no call is left over.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass

from grader._model import Served, TraceRecord

__all__ = ["Pairing", "pair_records"]


@dataclass(frozen=True, slots=True)
class Pairing:
    """For each call, the index of its record (None: no record names it); the indices of
    the records no call took; and the calls whose only records came before their answer."""

    records: tuple[int | None, ...]
    left_over: tuple[int, ...]
    early: tuple[int, ...]  # indices of calls


def pair_records(calls: Sequence[Served], records: Sequence[TraceRecord]) -> Pairing:
    """Pair ``records`` (a case's trace, in file order) with ``calls`` (as served)."""
    by_key: defaultdict[object, deque[int]] = defaultdict(deque)
    for index, record in enumerate(records):
        if isinstance(record.key, str):
            by_key[record.key].append(index)
    paired: list[int | None] = []
    early: list[int] = []
    for number, call in enumerate(calls):
        waiting = by_key.get(call.key, deque())
        skipped = False
        # A record before the answer is no later call's either: their answers come later.
        while waiting and waiting[0] < call.trace_lines:
            waiting.popleft()
            skipped = True
        paired.append(waiting.popleft() if waiting else None)
        if skipped and paired[-1] is None:
            early.append(number)
    taken = {index for index in paired if index is not None}
    return Pairing(
        tuple(paired), tuple(i for i in range(len(records)) if i not in taken), tuple(early)
    )
