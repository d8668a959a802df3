"""The draw: what a grading draws, so that no submission can special-case it.

A provider label of each family, a hash seed for each (from the key's pool of
``SEED_POOL``, then ``MORE_SEEDS`` past it), the runs' clocks, and the recording the own
Replay is probed with: a keyed function of the submission's inputs (``submission_content``)
and a secret of the grader's, so the same key grades the same submission the same way
again while a student without it cannot predict any of it. And what the own Replay is
probed with (``_probe_recordings``): a case and its recordings, as the draw picks them.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from gradekit import Entry, prompt_key
from grader.sandbox import CLOCK

__all__ = ["FAMILIES", "MORE_SEEDS", "SEED_POOL", "Draw", "draw", "seed_pool", "submission_content"]


# The real provider families, as `gradekit record` names them (adapter:model). Every grading
# runs the agent once under a label of each family, each with its own hash seed, so an agent
# that branches on any family's name (its adapter or its models' word: gpt, claude, llama)
# shows it in every grading, not only when a draw happens to name that family.
FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("openai", ("gpt-4o-mini", "gpt-4.1-mini", "gpt-4o", "gpt-4.1-nano")),
    ("anthropic", ("claude-3-5-haiku", "claude-sonnet-4", "claude-3-7-sonnet")),
    ("ollama", ("llama3.2", "qwen2.5-7b", "mistral-small", "gemma2-9b", "phi3-mini")),
    ("llamacpp", ("smollm2-135m", "qwen2.5-0.5b", "llama-3.2-1b")),
    ("openai-compatible", ("mistral-small", "deepseek-chat", "qwen2.5-7b", "llama-3.1-8b")),
)
_WORDS = (
    "refund",
    "deadline",
    "cassette",
    "rubric",
    "latency",
    "policy",
    "incident",
    "grader",
    "summary",
    "tool",
    "trace",
    "retry",
    "budget",
    "quota",
    "schema",
    "review",
)
_DRAW = b"gradekit-draw/1"  # what a draw's HMAC is taken under: no other use of a key shares it


@dataclass(frozen=True, slots=True)
class Draw:
    """What a grading draws, so that no submission can special-case it: a provider label of
    each family and a hash seed for each, and the recording its own Replay is probed with.

    Drawn by ``draw``: a keyed function of the submission's content and a secret of the
    grader's, so grading the same submission again draws the same, while a student without
    the key cannot predict it. None of it reaches a report: an honest submission gets one
    digest whatever is drawn."""

    labels: tuple[str, ...]  # the primary run's first, then one of every other family
    seeds: tuple[int, ...]  # PYTHONHASHSEED of each of those runs: all different, all of
    # the key's pool (seed_pool)
    probe: Mapping[str, str]  # prompt -> answer: the probe cassette's one recording, where
    # the submission recorded nothing of its own to probe its Replay with
    unknown: str  # a prompt of the same kind that the probe cassette does not hold
    clock: int = CLOCK  # where the runs' wall clock starts (seconds since the epoch)
    again: int = CLOCK + 86400  # the clock of a run otherwise identical to the primary run
    pick: int = 0  # which case's recordings the own Replay is probed with, and which prompts
    more: tuple[int, ...] = ()  # the hash seeds tried, after those of ``seeds``, for a case
    # that asks a recording's words in another order until one moves it (MORE_SEEDS)


class _Keyed:
    """A stream of numbers from HMAC-SHA256 under ``key`` over ``content`` and a counter:
    the same key and content give the same stream on every machine and Python."""

    def __init__(self, key: bytes, content: str) -> None:
        self._mac = hmac.new(key, _DRAW + b"\0" + content.encode("utf-8") + b"\0", hashlib.sha256)
        self._count = 0

    def below(self, n: int) -> int:
        """A number in ``range(n)`` (256 bits reduced: no bias worth the name)."""
        self._count += 1
        mac = self._mac.copy()
        mac.update(str(self._count).encode("ascii"))
        return int.from_bytes(mac.digest(), "big") % n

    def choice(self, options: Sequence[_Item]) -> _Item:
        return options[self.below(len(options))]

    def shuffled(self, items: Sequence[_Item]) -> list[_Item]:
        keyed = [(self.below(1 << 64), index) for index in range(len(items))]
        return [items[index] for _, index in sorted(keyed)]


_Item = TypeVar("_Item")


def draw(key: bytes | None = None, content: str = "", label: str | None = None) -> Draw:
    """The ``Draw`` for a submission whose content is ``content`` (its inputs' digests),
    under the grader's secret ``key`` (None: a fresh random one, so nothing repeats).

    ``label``, if given, is the primary label (an instructor reproducing something); the
    other families are still drawn beside it.
    """
    key = key if key is not None else secrets.token_bytes(32)
    keyed = _Keyed(key, content)
    labels = [f"{adapter}:{keyed.choice(models)}" for adapter, models in keyed.shuffled(FAMILIES)]
    if label is not None:
        labels = [
            label,
            *(other for other in labels if other.partition(":")[0] != label.partition(":")[0]),
        ]
    pool = keyed.shuffled(seed_pool(key))
    seeds, more = pool[: len(labels)], pool[len(labels) :]
    words = keyed.shuffled(_WORDS)
    prompt, unknown = (
        f"Task: summarise the {a} {b} notes for the {c} review."
        for a, b, c in (words[0:3], words[3:6])
    )
    answer = f"The {words[6]} notes say: {keyed.below(10**6)}."
    # A day in the 50 years after CLOCK, never the day a grading or a recording is made,
    # and a later day at another time of day for the run that differs only by its clock.
    clock = CLOCK + keyed.below(_CLOCK_DAYS) * _DAY + keyed.below(_DAY)
    again = clock + (1 + keyed.below(_CLOCK_DAYS)) * _DAY + 1 + keyed.below(_DAY - 1)
    pick = keyed.below(1 << 32)
    while len(more) < MORE_SEEDS:  # past the pool: a host of their own, started if asked
        seed = keyed.below(1 << 32)
        more += [] if seed in pool or seed in more else [seed]
    return Draw(
        tuple(labels), tuple(seeds), {prompt: answer}, unknown, clock, again, pick, tuple(more)
    )


_DAY = 86400
_CLOCK_DAYS = 365 * 50


SEED_POOL = 8  # hash seeds a key draws from: one more family and an instructor's label fit
# Hash seeds a case that asks a recording's words in another order is run under, one at a
# time, until one moves what it asks: a set of two words keeps its order under a seed
# about half the time, so with the others' seeds 16 runs leave about one chance in 65 000
# that such a case is told as anything but the hash seed's.
MORE_SEEDS = 12


def seed_pool(key: bytes) -> tuple[int, ...]:
    """The ``SEED_POOL`` different hash seeds every draw under ``key`` takes its seeds from.

    A run's hash seed is fixed when its interpreter starts, so behind namespaces runs fork
    from one host per seed (``grader.sandbox._host``); with a pool per key rather than
    seeds per submission, a batch starts its hosts once and every grading forks from them.
    Each grading still runs each label under a seed of its own, in an order and a choice
    keyed on its content; the seeds stay unknown without the key.
    """
    keyed = _Keyed(key, "hash seed pool")
    seeds: list[int] = []
    while len(seeds) < SEED_POOL:
        seed = keyed.below(1 << 32)
        seeds += [] if seed in seeds else [seed]
    return tuple(seeds)


def submission_content(inputs: Mapping[str, str]) -> str:
    """What a draw is keyed on: the digests of every file the grade depends on."""
    return json.dumps(inputs, sort_keys=True, separators=(",", ":"))


def _probe_recordings(
    answers: Mapping[str, Mapping[str, Entry]], drawn: Draw, ids: Sequence[str]
) -> tuple[str, dict[str, str], str]:
    """What the own Replay is probed with, so that it looks like any case of the lab: the
    case, its recordings (prompt -> answer) and a prompt it does not hold. A case with
    recordings of the submission's own is drawn; the unknown prompt is another case's
    recorded prompt where there is one. Without any recording: the draw's made-up ones,
    under a case of the rubric."""
    recorded = {
        case: {e.prompt: e.response for e in entries.values() if e.prompt}
        for case, entries in sorted(answers.items())
    }
    cases = [case for case, prompts in recorded.items() if prompts]
    if not cases:
        return ids[drawn.pick % len(ids)] if ids else "case", dict(drawn.probe), drawn.unknown
    case = cases[drawn.pick % len(cases)]
    held = {prompt_key(prompt) for prompt in recorded[case]}
    others = sorted(
        {
            prompt
            for other in cases
            if other != case
            for prompt in recorded[other]
            if prompt_key(prompt) not in held
        }
    )
    unknown = others[drawn.pick % len(others)] if others else drawn.unknown
    return case, recorded[case], unknown
