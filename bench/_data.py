"""Deterministic 1 KB prompts and real cassette files built from them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gradekit import Cassette, Entry, prompt_key
from gradekit.internal import encode_cassette, write_atomic

__all__ = ["PROMPT_BYTES", "BuiltCassette", "answer", "build_cassette", "prompt", "prompts"]

PROMPT_BYTES = 1024
_FILLER = "Grade the student's answer against the rubric and explain each point. " * 20
_RECORDED_AT = "2024-01-01T00:00:00Z"  # fixed, so the files are byte-identical run to run


def prompt(index: int, tag: str = "case") -> str:
    """The ``index``-th distinct prompt of exactly ``PROMPT_BYTES`` ASCII bytes."""
    text = f"{tag} {index:09d}: {_FILLER}"
    return text[: PROMPT_BYTES - 1] + "."  # a non-space last byte: stripping changes nothing


def prompts(count: int, tag: str = "case") -> list[str]:
    """``count`` distinct prompts."""
    return [prompt(index, tag) for index in range(count)]


def answer(index: int) -> str:
    """The recorded answer to ``prompt(index)``."""
    return f"answer {index}"


@dataclass(frozen=True, slots=True)
class BuiltCassette:
    """A cassette file on disk and the value it was written from."""

    size: int
    path: Path
    cassette: Cassette

    @property
    def hit_index(self) -> int:
        """The entry every timed hit asks for: the middle one, not the first."""
        return self.size // 2


def build_cassette(folder: Path, size: int) -> BuiltCassette:
    """Write a ``size``-entry cassette the way gradekit does: ``encode`` + ``write_atomic``."""
    entries = {}
    for index in range(size):
        text = prompt(index)
        entries[prompt_key(text)] = Entry(text, answer(index), "fake", _RECORDED_AT)
    cassette = Cassette(case=f"bench-{size}", entries=entries)
    path = folder / f"bench-{size}.json"
    write_atomic(path, encode_cassette(cassette))
    return BuiltCassette(size, path, cassette)
