"""The cassette codec, format ``gradekit.cassette/1``. Pure: bytes in, values out.

Reading accepts v1 and the flat form of earlier labs (key -> response
string). Writing always produces v1 with deterministic bytes: UTF-8, keys
sorted, two-space indent, one trailing newline, so a re-recording is a clean
git diff. A file that cannot be read is an error naming where it broke; it is
never treated as empty.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gradekit._codec import Codec, Entry, Fold
from gradekit._exceptions import CassetteCollision, CassetteCorrupt
from gradekit._keys import prompt_key

__all__ = [
    "CASSETTE",
    "FORMAT",
    "REPLAYED",
    "Cassette",
    "CassetteCodec",
    "Entry",
    "decode_cassette",
    "encode_cassette",
    "merge_entry",
]

FORMAT = "gradekit.cassette/1"


@dataclass(frozen=True, slots=True)
class Cassette:
    """A case's recordings, keyed by ``prompt_key``."""

    case: str
    entries: Mapping[str, Entry] = field(default_factory=dict)


class CassetteCodec(Codec[Cassette]):
    """Cassettes: a case's prompt answers, each under the ``prompt_key`` of its prompt.

    With ``verify_keys`` (the default) decoding checks every key against its
    prompt; ``REPLAYED`` does not, since a replay looks answers up by the key
    of the prompt asked.
    """

    document, format, error = Cassette, FORMAT, CassetteCorrupt
    noun, things, rerecord = "cassette", "answers", False
    asked, fix = "for this prompt", "record it once with a live provider"
    then = "commit the cassette. Graded runs never call a live provider."

    def __init__(self, *, verify_keys: bool = True) -> None:
        self.verify_keys = verify_keys

    def encode(self, document: Cassette) -> bytes:
        """Return the canonical v1 bytes of a cassette."""
        return self.canonical(
            {
                "format": FORMAT,
                "case": document.case,
                "entries": {
                    key: {
                        "prompt": entry.prompt,
                        "provider": entry.provider,
                        "recorded_at": entry.recorded_at,
                        "response": entry.response,
                    }
                    for key, entry in document.entries.items()
                },
            }
        )

    def decode(self, data: bytes, *, source: str, case: str = "") -> Cassette:
        """Parse cassette bytes; ``source`` names the file in every error.

        ``case`` is used for the flat form, which does not carry one.
        """
        text = self.text(data, source=source, case=case)
        document = self.json_object(text, source=source, case=case)
        if "format" in document:
            return self._decode_v1(document, text, source)
        return self._decode_flat(document, text, source, case)

    def answers(self, document: Cassette) -> Mapping[str, object]:
        """Each key's prompt and answer."""
        return {key: (entry.prompt, entry.response) for key, entry in document.entries.items()}

    def merge(self, base: Cassette | None, fold: Fold) -> Cassette:
        """``base`` with the journalled answers on top; one under a key that holds another
        prompt is a ``CassetteCollision``."""
        entries = dict(base.entries) if base else {}
        for key, entry in fold.pending:
            merge_entry(entries, key, entry, source=str(fold.path))
        return Cassette(case=base.case if base else fold.case, entries=fold.kept(entries))

    def _decode_v1(self, document: dict[str, Any], text: str, source: str) -> Cassette:
        version = document["format"]
        if version != FORMAT:
            unknown = self.format_problem(version, reads=" and the flat form of earlier labs")
            raise self.corrupt(source, text, _at(text, "format"), unknown)
        case, entries = document.get("case", ""), document.get("entries")
        if not isinstance(case, str) or not isinstance(entries, dict):
            raise self.error(
                f"{source}: a {FORMAT} cassette needs a string 'case' and an object 'entries'. "
                f"{self.restore_hint(source, case if isinstance(case, str) else '')}"
            )
        decoded: dict[str, Entry] = {}
        for key, raw in entries.items():
            problem = _entry_problem(key, raw, self.verify_keys)
            if problem is not None:
                # Locating the entry scans the text: error path only, or loading is quadratic.
                raise self.corrupt(source, text, _at(text, key), f"entry {key} {problem}")
            decoded[key] = Entry(
                raw["prompt"], raw["response"], raw.get("provider", ""), raw.get("recorded_at", "")
            )
        return Cassette(case=case, entries=decoded)

    def _decode_flat(self, document: dict[str, Any], text: str, source: str, case: str) -> Cassette:
        entries: dict[str, Entry] = {}
        for key, response in document.items():
            if not isinstance(response, str):
                raise self.corrupt(
                    source,
                    text,
                    _at(text, key),
                    f"entry {key}: a flat cassette maps keys to response strings, found "
                    f'{type(response).__name__}. A v1 cassette needs "format": "{FORMAT}".',
                )
            entries[key] = Entry(None, response)
        return Cassette(case=case, entries=entries)


def merge_entry(entries: dict[str, Entry], key: str, entry: Entry, *, source: str) -> None:
    """Put ``entry`` under ``key``; a different prompt already there is a collision."""
    old = entries.get(key)
    if old is not None and None not in (old.prompt, entry.prompt) and old.prompt != entry.prompt:
        raise CassetteCollision(
            f"{source}: key {key} is already recorded for a different prompt.\n"
            f"  recorded: {_clip(old.prompt or '')}\n"
            f"  new:      {_clip(entry.prompt or '')}\n"
            "Two prompts sharing a 16-hex-digit key is almost always a hand-edited file: "
            "restore the cassette from git, or delete the entry and record again."
        )
    entries[key] = entry


def _entry_problem(key: str, raw: object, verify_key: bool) -> str | None:
    """What is wrong with one v1 entry, or None. Pure and cheap: it runs on every entry."""
    if type(raw) is not dict:
        return "must be an object with 'prompt' and 'response'."
    prompt = raw.get("prompt", 0)
    if type(raw.get("response")) is not str or not (prompt is None or type(prompt) is str):
        return "needs a string 'prompt' and a string 'response'."
    if type(raw.get("provider", "")) is not str or type(raw.get("recorded_at", "")) is not str:
        return "has a 'provider' or 'recorded_at' that is not a string."
    if verify_key and prompt is not None and prompt_key(prompt) != key:
        return (
            f"does not match its prompt (the prompt hashes to {prompt_key(prompt)}). "
            "The prompt or key was edited by hand: restore the file from git or record again."
        )
    return None


def _at(text: str, name: str) -> int:
    """Best-effort offset of a JSON member name, for shape errors (the start when not found)."""
    return max(text.find(json.dumps(name, ensure_ascii=False)), 0)


def _clip(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return json.dumps(flat if len(flat) <= limit else flat[: limit - 1] + "…", ensure_ascii=False)


CASSETTE = CassetteCodec()
# What a replay reads with: answers are looked up by the key of the prompt asked, so an edited
# prompt text cannot change what is served (``gradekit verify`` finds it).
REPLAYED = CassetteCodec(verify_keys=False)
encode_cassette = CASSETTE.encode
decode_cassette = CASSETTE.decode
