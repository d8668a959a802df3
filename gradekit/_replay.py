"""Strict replay: recorded answers only, and a loud, helpful miss."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

from gradekit._cassette import Cassette
from gradekit._exceptions import CassetteMiss
from gradekit._keys import prompt_key
from gradekit._store import load

__all__ = ["Replay", "miss"]

_SHOWN = 80
_COMPARED = 400  # similarity is judged on prompt starts: cheap even at 100 000 entries


class Replay:
    """A provider that answers only from a cassette and raises ``CassetteMiss`` otherwise.

    ``cassette`` is a path (answers still in a crashed recorder's journal are
    served too) or a ``Cassette`` value. A missing file is not an error until
    a prompt is asked: then every call misses, saying the file does not exist.
    """

    def __init__(self, cassette: str | Path | Cassette, *, name: str = "replay") -> None:
        self.name = name
        if isinstance(cassette, Cassette):
            self.source, self._cassette, self._exists = "<in memory>", cassette, True
        else:
            self.source = str(cassette)
            # Keys are not re-hashed here: answers are looked up by the key of the prompt
            # asked, so an edited prompt text cannot change what is served (verify finds it).
            loaded = load(Path(cassette), case=Path(cassette).stem, verify_keys=False)
            self._exists = loaded is not None
            self._cassette = loaded or Cassette(case=Path(cassette).stem)
        self._responses = {k: e.response for k, e in self._cassette.entries.items()}

    def __len__(self) -> int:
        return len(self._responses)

    def complete(self, prompt: str) -> str:
        """Return the recorded answer to ``prompt`` or raise ``CassetteMiss``."""
        response = self._responses.get(prompt_key(prompt))
        if response is None:
            raise miss(self._cassette, prompt, source=self.source, exists=self._exists)
        return response


def miss(cassette: Cassette, prompt: str, *, source: str, exists: bool = True) -> CassetteMiss:
    """Build the error for a prompt that ``cassette`` (read from ``source``) cannot answer."""
    key = prompt_key(prompt)
    case = cassette.case or Path(source).stem
    lines = [
        f"no recording for this prompt in {source}",
        f"  key:     {key}",
        f"  prompt:  {_show(prompt)}",
        f"  closest: {_closest(cassette, prompt, exists)}",
        f"  fix:     record it once with a live provider: `gradekit record --case {case}`,",
        "           then commit the cassette. Graded runs never call a live provider.",
    ]
    return CassetteMiss("\n".join(lines), cassette=source, key=key, prompt=prompt)


def _closest(cassette: Cassette, prompt: str, exists: bool) -> str:
    if not exists:
        return "(the cassette file does not exist yet)"
    recorded = [(k, e.prompt) for k, e in cassette.entries.items() if e.prompt is not None]
    if not recorded:
        return "(the cassette has no recorded prompts)"
    target = prompt.strip()[:_COMPARED]
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(target)

    def score(item: tuple[str, str | None]) -> float:
        matcher.set_seq1((item[1] or "")[:_COMPARED])
        return matcher.quick_ratio()

    shortlist = sorted(recorded, key=score, reverse=True)[:5]
    best_key, best_prompt = max(shortlist, key=lambda item: _ratio(item[1] or "", target))
    percent = round(100 * _ratio(best_prompt or "", target))
    return f"{_show(best_prompt or '')} (key {best_key}, {percent}% similar)"


def _ratio(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a[:_COMPARED], b, autojunk=False).ratio()


def _show(text: str) -> str:
    flat = " ".join(text.split())
    return json.dumps(flat if len(flat) <= _SHOWN else flat[:_SHOWN] + "…", ensure_ascii=False)
