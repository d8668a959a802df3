"""Record once, replay forever: a provider that fills a cassette from a live one."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping
from enum import Enum
from pathlib import Path
from types import TracebackType
from typing import Literal, Self, TypeVar, assert_never, get_args

from gradekit._cassette import Cassette, Entry, merge_entry
from gradekit._exceptions import UsageError
from gradekit._keys import prompt_key
from gradekit._provider import Provider
from gradekit._replay import miss
from gradekit._secrets import credential_values, refuse_secrets
from gradekit._store import Journal, RecordingLock, fold_journal, journal_path, load

__all__ = ["Action", "JournaledRecording", "Mode", "Recorder", "decide", "previous_path"]

Mode = Literal["once", "rerecord", "none"]
T = TypeVar("T")


class Action(Enum):
    """What the recorder does with one prompt."""

    SERVE = "serve"  # answer from the cassette
    RECORD = "record"  # ask the live provider, record, answer
    MISS = "miss"  # raise CassetteMiss


def decide(mode: Mode, *, recorded: bool, asked_this_run: bool) -> Action:
    """The whole recording policy, free of I/O."""
    if mode == "once":
        return Action.SERVE if recorded else Action.RECORD
    if mode == "rerecord":
        return Action.SERVE if asked_this_run else Action.RECORD
    if mode == "none":
        return Action.SERVE if recorded else Action.MISS
    assert_never(mode)


def previous_path(cassette: Path) -> Path:
    """Where ``rerecord`` keeps the cassette it replaces, for review."""
    return cassette.with_name(f"{cassette.stem}.previous{cassette.suffix}")


class _UtcSeconds:
    """The UTC time to the second, formatted once per second: it is on every recorded call."""

    def __init__(self) -> None:
        self._second, self._text = -1, ""

    def __call__(self) -> str:
        second = int(time.time())
        if second != self._second:
            self._second = second
            self._text = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))
        return self._text


_utc_now = _UtcSeconds()


class JournaledRecording:
    """The writing side both recorders share: lock, crash journal, fold, previous copy.

    A subclass sets ``path``, ``mode`` and ``_asked``, calls ``_open_journal``
    with its own fold, and implements ``_fold(keep)`` for ``close``.
    """

    path: Path
    mode: Mode
    _asked: set[str]
    _lock: RecordingLock | None = None
    _journal: Journal | None = None

    def _open_journal(self, fold: Callable[[], T]) -> T:
        """Lock the file, fold what a killed run left in the journal, keep the old file
        for review on a ``rerecord``, and open the journal; return what ``fold`` returned."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = RecordingLock(self.path)
        try:
            existed = self.path.exists()
            folded = fold()
            if self.mode == "rerecord" and existed:
                shutil.copyfile(self.path, previous_path(self.path))
            self._journal = Journal(journal_path(self.path))
        except BaseException:
            self._lock.release()
            raise
        return folded

    def _fold(self, keep: frozenset[str] | None) -> None:
        raise NotImplementedError

    def close(self, *, prune: bool = True) -> None:
        """Fold the journal into the file (atomic, fsynced) and release the lock.

        A ``rerecord`` drops keys it did not ask again, unless ``prune`` is
        false: a run that failed half-way must not throw away what it did not reach.
        """
        if self._journal is None or self._lock is None:
            return
        self._journal.close()
        try:
            self._fold(frozenset(self._asked) if self.mode == "rerecord" and prune else None)
        finally:
            self._journal = None
            self._lock.release()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(prune=exc is None)


class Recorder(JournaledRecording):
    """Wrap a live provider: a recorded prompt is served, a new one is asked and recorded.

    Every new answer is appended to a journal beside the cassette before
    ``complete`` returns it, so a crash loses nothing already answered and the
    next run resumes; ``close`` (or leaving the ``with`` block) folds the
    journal into the cassette. Only one recorder may hold a cassette at once.

    Modes: ``once`` records what is missing; ``rerecord`` asks the live
    provider again for every prompt, keeps the old file as
    ``<case>.previous.json`` for review and drops prompts no longer asked;
    ``none`` is strict replay.
    """

    def __init__(
        self,
        live: Provider,
        cassette: str | Path,
        *,
        mode: Mode = "once",
        case: str | None = None,
        clock: Callable[[], str] = _utc_now,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if mode not in get_args(Mode):
            raise UsageError(f"unknown recorder mode {mode!r}; use one of {get_args(Mode)}")
        self.live, self.mode, self.path = live, mode, Path(cassette)
        self.case = case if case is not None else self.path.stem
        self.name = live.name
        self.recorded = self.served = 0
        self._clock = clock
        self._secrets = credential_values(env)
        self._secrets.update({value: "the live provider's API key" for value in _keys_of(live)})
        self._asked: set[str] = set()
        if mode == "none":
            self._entries = dict((load(self.path, case=self.case) or Cassette(self.case)).entries)
        else:
            # Answers a killed run left in the journal become part of the cassette first.
            folded = self._open_journal(lambda: fold_journal(self.path, case=self.case))
            self._entries = dict(folded.entries)

    def complete(self, prompt: str) -> str:
        """Answer ``prompt`` from the cassette, or from the live provider and record it."""
        key = prompt_key(prompt)
        entry = self._entries.get(key)
        action = decide(self.mode, recorded=entry is not None, asked_this_run=key in self._asked)
        if action is Action.SERVE and entry is not None:
            self.served += 1
            self._asked.add(key)
            return entry.response
        if action is Action.MISS or self._journal is None:
            raise miss(Cassette(self.case, self._entries), prompt, source=str(self.path))
        return self._record(key, prompt)

    def _record(self, key: str, prompt: str) -> str:
        assert self._journal is not None
        response = self.live.complete(prompt)
        if not isinstance(response, str):
            raise UsageError(
                f"{self.live.name}.complete returned {type(response).__name__}, not str: "
                "a provider must return the answer's text"
            )
        entry = Entry(prompt.strip(), response, self.live.name, self._clock())
        refuse_secrets(
            (entry.prompt or "", entry.response, entry.provider),
            self._secrets,
            where=f"the answer for key {key} into {self.path}",
        )
        merge_entry(self._entries, key, entry, source=str(self.path))
        self._journal.append(key, entry)
        self._asked.add(key)
        self.recorded += 1
        return response

    def _fold(self, keep: frozenset[str] | None) -> None:
        fold_journal(self.path, case=self.case, keep=keep)


def _keys_of(live: Provider) -> tuple[str, ...]:
    """Credentials the live adapter uses, when it tells (``credentials()``)."""
    credentials = getattr(live, "credentials", None)
    return tuple(credentials()) if callable(credentials) else ()
