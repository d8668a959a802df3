"""Record once, replay forever: a provider that fills a cassette from a live one.

Its recording side (the policy, the lock, the journal and the fold) is
``gradekit._journal.JournaledRecording``, shared with the tool fixtures' and the SDK
transports' recorders.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from gradekit._cassette import CASSETTE, Cassette, Entry, merge_entry
from gradekit._commands import RECORD_CASE, Command
from gradekit._exceptions import UsageError
from gradekit._http.client import HttpClients, http_cassette_path
from gradekit._http.transport import AsyncCassetteTransport, CassetteTransport, async_twin
from gradekit._journal import JournaledRecording, Mode, utc_now
from gradekit._keys import prompt_key
from gradekit._provider import Provider
from gradekit._replay import miss
from gradekit._secrets import refuse_secrets

__all__ = ["Recorder"]


class Recorder(JournaledRecording[Cassette], HttpClients):
    """Wrap a live provider: a recorded prompt is served, a new one is asked and recorded.

    Every new answer is appended to a journal beside the cassette before
    ``complete`` returns it, so a crash loses nothing already answered and the
    next run resumes; ``close`` (or leaving the ``with`` block) folds the
    journal into the cassette. Only one recorder may hold a cassette at once.

    Modes: ``once`` records what is missing; ``rerecord`` asks the live
    provider again for every prompt, keeps the old file as
    ``<case>.previous.json`` for review and drops prompts no longer asked;
    ``none`` is strict replay.

    Its HTTP side (``http_client()``, for the official SDKs) records the same way,
    with the same mode, into ``<case>.http.json`` beside the cassette: the file is
    made only when an SDK client sends a request, and ``close`` folds it too.
    """

    def __init__(
        self,
        live: Provider,
        cassette: str | Path,
        *,
        mode: Mode = "once",
        case: str | None = None,
        clock: Callable[[], str] = utc_now,
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(CASSETTE, cassette, mode=mode, case=case, clock=clock, env=env)
        self.live, self.name = live, live.name
        self._secrets.update({value: "the live provider's API key" for value in _keys_of(live)})
        self._env = env
        self._http: CassetteTransport | None = None
        self._new = not self.path.exists()  # a file this recorder made, and may leave unmade
        # Answers a killed run left in the journal become part of the cassette first.
        loaded = self._open()
        self._entries = dict(loaded.entries) if loaded else {}

    # What an HTTP miss tells to run (None for the HTTP cassette's own: the pytest plugin's).
    http_record_command: Command | None = RECORD_CASE

    def http_transport(self) -> CassetteTransport:
        """The transport of this recorder's SDK clients: ``<case>.http.json``, this mode."""
        if self._http is None:
            self._http = CassetteTransport(
                http_cassette_path(self.path),
                mode=self.mode,
                case=self.case,
                env=self._env,
                clock=self._clock,
                record_command=None
                if self.http_record_command is None
                else self.http_record_command(case=self.case),
            )
            self._http._recording._secrets.update(self._secrets)  # the live adapter's key too
        return self._http

    def async_http_transport(self) -> AsyncCassetteTransport:
        """``http_transport()`` for async clients: the same recording, one count of slots."""
        return async_twin(self.http_transport())

    def close(self, *, prune: bool = True) -> None:
        """Fold the journal (and the HTTP cassette's) into the files; release the locks.

        A cassette this recorder made and never answered from (an agent that only uses
        the SDKs) is not left behind empty.
        """
        try:
            if self._http is not None:
                self._http.close(prune=prune)
        finally:
            closing = self._journal is not None
            super().close(prune=prune)
            if closing and self._new and not self._entries:
                self.path.unlink(missing_ok=True)

    def complete(self, prompt: str) -> str:
        """Answer ``prompt`` from the cassette, or from the live provider and record it."""
        key = prompt_key(prompt)
        recorded = self._entries.get(key)
        if recorded is None and self._records_new:  # the policy's answer, without asking it
            return self._record(key, prompt, None)
        entry = self._served(key, recorded, lambda: self._miss(prompt))
        return self._record(key, prompt, recorded) if entry is None else entry.response

    def _miss(self, prompt: str) -> Exception:
        cassette = Cassette(self.case, self._entries)
        return miss(cassette, prompt, source=str(self.path), exists=self._exists)

    def _record(self, key: str, prompt: str, recorded: Entry | None) -> str:
        """Ask the live provider and journal its answer; ``recorded``: the entry under ``key``.

        Every recorded call runs this, so what only an error needs (the messages) is
        built only then.
        """
        response = self.live.complete(prompt)
        if not isinstance(response, str):
            raise UsageError(
                f"{self.live.name}.complete returned {type(response).__name__}, not str: "
                "a provider must return the answer's text"
            )
        text, provider = prompt.strip(), self.live.name
        for value in self._secrets:  # ``find_secret``, unrolled: it runs on every answer
            if value in text or value in response or value in provider:
                refuse_secrets(
                    (text, response, provider),
                    self._secrets,
                    where=f"the answer for key {key} into {self.path}",
                )
        entry = Entry(text, response, provider, self._clock())
        if recorded is None:
            self._entries[key] = entry
        else:  # a re-recording: the collision check needs the entry it replaces
            merge_entry(self._entries, key, entry, source=str(self.path))
        self._append(key, entry)
        return response


def _keys_of(live: Provider) -> tuple[str, ...]:
    """Credentials the live adapter uses, when it tells (``credentials()``)."""
    credentials = getattr(live, "credentials", None)
    return tuple(credentials()) if callable(credentials) else ()
