"""The recording journal and its policy, shared by every recorder of the kit.

``JournaledRecording`` is the recording side that ``gradekit._recorder.Recorder``,
the tool fixtures' ``gradekit._toolbox.ToolRecorder`` and the SDK transports'
``gradekit._http.transport`` share: one policy (``decide``), one lock, journal and fold
over the store, whichever codec the file is written with. ``utc_now`` is the clock they
stamp each recorded answer with.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping
from enum import Enum
from pathlib import Path
from types import TracebackType
from typing import Generic, Literal, Self, TypeVar, assert_never, get_args

from gradekit._codec import Codec, Document, Entry
from gradekit._exceptions import UsageError
from gradekit._secrets import credential_values
from gradekit._store import Journal, RecordingLock, fold, journal_path, read, write_atomic

__all__ = ["Action", "JournaledRecording", "Mode", "decide", "previous_path", "utc_now"]

Mode = Literal["once", "rerecord", "none"]
D = TypeVar("D", bound=Document)
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


def _utc_seconds() -> Callable[[], str]:
    """The UTC time to the second, formatted once per second: it is on every recorded call.

    A closure rather than an object with ``__call__``: calling it costs a quarter less.
    """
    second, text = -1, ""

    def now() -> str:
        nonlocal second, text
        current = int(time.time())
        if current != second:
            second, text = current, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(current))
        return text

    return now


utc_now = _utc_seconds()


class JournaledRecording(Generic[D]):
    """What both recorders share: the mode, the lock, the crash journal, the fold, the
    previous copy kept on a ``rerecord``, the credentials refused and the counts.

    A subclass calls ``_open`` once its own arguments are checked, asks
    ``_served`` whether to serve an answer or record it, and journals each new
    answer with ``_append``; ``close`` folds the journal into the file.
    """

    def __init__(
        self,
        codec: Codec[D],
        path: str | Path,
        *,
        mode: Mode,
        case: str | None,
        clock: Callable[[], str],
        env: Mapping[str, str] | None,
    ) -> None:
        if mode not in get_args(Mode):
            raise UsageError(f"unknown recorder mode {mode!r}; use one of {get_args(Mode)}")
        self.codec, self.mode, self.path = codec, mode, Path(path)
        self.case = case if case is not None else self.path.stem
        self.recorded = self.served = 0
        self._clock = clock
        self._secrets = credential_values(env)
        self._asked: set[str] = set()
        self._started = ""
        self._exists = True
        self._lock: RecordingLock | None = None
        self._journal: Journal | None = None
        self._previous: D | None = None  # what a ``rerecord`` found, kept beside the file
        # What ``decide`` says of a key never recorded while the journal is open, asked
        # once: a recorder's hot path may record such a key without asking ``_served``.
        self._records_new = False

    def _open(self, *, now: str = "") -> D | None:
        """What is recorded so far (None: no file yet, in ``none`` mode).

        ``none`` only reads. The other modes lock the file, fold what a killed
        run left in the journal, keep the old file for review on a
        ``rerecord`` and open the journal; ``now`` is this run's time.
        """
        if self.mode == "none":
            loaded = read(self.path, self.codec, case=self.case)
            self._exists = loaded is not None
            return loaded
        self._started = now
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = RecordingLock(self.path)
        try:
            existed = self.path.exists()
            folded = fold(self.path, self.codec, case=self.case, now=now)
            self._previous = folded if self.mode == "rerecord" and existed else None
            if self._previous is not None:
                shutil.copyfile(self.path, previous_path(self.path))
            self._journal = Journal(journal_path(self.path))
            new = decide(self.mode, recorded=False, asked_this_run=False)
            self._records_new = new is Action.RECORD
        except BaseException:
            self._lock.release()
            raise
        return folded

    def _served(self, key: str, recorded: T | None, miss: Callable[[], Exception]) -> T | None:
        """``recorded`` when the mode serves it, None when the caller is to record the
        answer; ``miss()`` is raised when the mode does neither."""
        action = decide(self.mode, recorded=recorded is not None, asked_this_run=key in self._asked)
        if action is Action.SERVE and recorded is not None:
            self.served += 1
            self._asked.add(key)
            return recorded
        if action is Action.MISS or self._journal is None:
            raise miss()
        return None

    def _append(self, key: str, entry: Entry) -> None:
        """Journal a new answer before it is returned: it survives the process being killed."""
        assert self._journal is not None
        self._journal.append(key, entry)
        self._asked.add(key)
        self.recorded += 1

    def close(self, *, prune: bool = True) -> None:
        """Fold the journal into the file (atomic, fsynced) and release the lock.

        A ``rerecord`` drops keys it did not ask again, unless ``prune`` is
        false: a run that failed half-way must not throw away what it did not reach.
        A ``rerecord`` whose every answer equals the previous one's leaves the file as
        it was, recording times included.
        """
        if self._journal is None or self._lock is None:
            return
        self._journal.close()
        keep = frozenset(self._asked) if self.mode == "rerecord" and prune else None
        try:
            folded = fold(self.path, self.codec, case=self.case, now=self._started, keep=keep)
            previous = self._previous
            if previous is not None and self.codec.answers(folded) == self.codec.answers(previous):
                # Asked again, answered the same: the file keeps its bytes, so the digest
                # a change log holds for it still matches and git shows no change.
                write_atomic(self.path, previous_path(self.path).read_bytes())
        finally:
            self._journal, self._records_new = None, False
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
