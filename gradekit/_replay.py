"""Strict replay: recorded answers only, and a loud, helpful miss."""

from __future__ import annotations

import json
from pathlib import Path

from gradekit._cassette import CASSETTE, REPLAYED, Cassette
from gradekit._codec import closest, divergence
from gradekit._commands import RECORD_CASE, Command
from gradekit._exceptions import CassetteMiss, UsageError
from gradekit._http.client import HttpClients, http_cassette_path
from gradekit._http.transport import AsyncCassetteTransport, CassetteTransport, async_twin
from gradekit._keys import prompt_key
from gradekit._store import replayed

__all__ = ["Replay", "miss"]

_SHOWN = 80


class Replay(HttpClients):
    """A provider that answers only from a cassette and raises ``CassetteMiss`` otherwise.

    ``cassette`` is a path (answers still in a crashed recorder's journal are
    served too) or a ``Cassette`` value. A missing file is not an error until
    a prompt is asked: then every call misses, saying the file does not exist.
    Its HTTP side (``http_client()``, for the official SDKs) replays
    ``<case>.http.json`` beside the cassette file the same way.
    """

    def __init__(self, cassette: str | Path | Cassette, *, name: str = "replay") -> None:
        self.name = name
        # Keys are not re-hashed (REPLAYED): answers are looked up by the key of the prompt
        # asked, so an edited prompt text cannot change what is served (verify finds it).
        self.source, case, loaded = replayed(cassette, REPLAYED)
        self._exists = loaded is not None
        self._cassette = loaded or Cassette(case=case)
        self._responses = {k: e.response for k, e in self._cassette.entries.items()}
        self._file = None if isinstance(cassette, Cassette) else Path(cassette)
        self._http: CassetteTransport | None = None

    def __len__(self) -> int:
        return len(self._responses)

    def complete(self, prompt: str) -> str:
        """Return the recorded answer to ``prompt`` or raise ``CassetteMiss``."""
        response = self._responses.get(prompt_key(prompt))
        if response is None:
            raise miss(self._cassette, prompt, source=self.source, exists=self._exists)
        return response

    # What an HTTP miss tells to run (None for the HTTP cassette's own: the pytest plugin's).
    http_record_command: Command | None = RECORD_CASE

    def http_transport(self) -> CassetteTransport:
        """The transport of this replay's SDK clients: strict replay of ``<case>.http.json``."""
        if self._http is None:
            if self._file is None:
                raise UsageError(
                    "this Replay was given a Cassette value, not a file, so it has no HTTP "
                    "cassette beside it: give the SDK a client on "
                    "CassetteTransport('cassettes/<case>.http.json') instead"
                )
            case = self._cassette.case or Path(self.source).stem
            command = self.http_record_command
            self._http = CassetteTransport(
                http_cassette_path(self._file),
                case=case,
                record_command=None if command is None else command(case=case),
            )
        return self._http

    def async_http_transport(self) -> AsyncCassetteTransport:
        """``http_transport()`` for async clients: the same cassette, one count of slots."""
        return async_twin(self.http_transport())


def miss(cassette: Cassette, prompt: str, *, source: str, exists: bool = True) -> CassetteMiss:
    """Build the error for a prompt that ``cassette`` (read from ``source``) cannot answer."""
    key = prompt_key(prompt)
    found, differs = _closest(cassette, prompt, exists)
    rows = [("key", key), ("prompt", _show(prompt)), ("closest", found)]
    rows += [("differs", differs)] if differs else []
    message = CASSETTE.miss_message(source, rows, case=cassette.case or Path(source).stem)
    return CassetteMiss(message, cassette=source, key=key, prompt=prompt)


def _closest(cassette: Cassette, prompt: str, exists: bool) -> tuple[str, str]:
    """The closest recorded prompt, and where the asked one first differs from it."""
    if not exists:
        return CASSETTE.absent, ""
    recorded = [(k, e.prompt) for k, e in cassette.entries.items() if e.prompt is not None]
    if not recorded:
        return "(the cassette has no recorded prompts)", ""
    (key, best), similar = closest(prompt.strip(), recorded, lambda item: item[1])
    return f"{_show(best)} (key {key}, {round(100 * similar)}% similar)", divergence(prompt, best)


def _show(text: str) -> str:
    flat = " ".join(text.split())
    return json.dumps(flat if len(flat) <= _SHOWN else flat[:_SHOWN] + "…", ensure_ascii=False)
