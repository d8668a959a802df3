"""What a grading keeps or cuts short to spend less CPU, held to giving exactly what the
long way gives.

A grade's parent once spent most of its CPU on text: the closest recording a withheld
miss names, the entries a failure log repeats, the names a submission's code holds. Each
now takes a shortcut (an upper bound that ends a search early, a reading kept for the rest
of the grading or the batch); each test here puts the shortcut beside the long way on
inputs written to make them part, and fails where the answers differ.

It tests private helpers on purpose: each shortcut (``grader._cache``, the sandbox's
``_Run._miss``, ``judge_entries``, ``repeats``) is held to the long way inside its own
module.
"""

from __future__ import annotations

import difflib
import random
import string
from pathlib import Path

import pytest

from gradekit import Entry, prompt_key
from gradekit.internal import closest
from grader import _cache
from grader._cache import Derived
from grader.grading._grounds import grounds
from grader.rubric import Case
from grader.sandbox import DEFAULT_LIMITS
from grader.sandbox._sandbox import RunPlan, Serving, _Case, _Run
from grader.scoring._failures import judge_entries, parse_failures
from grader.scoring._summary import NEAR, Grounds, repeats
from tests.submissions import REFERENCE


def whole_shortlist(target: str, texts: list[str]) -> tuple[int, float]:
    """``closest`` the long way: every one of the five shortlisted gets its exact ratio."""

    def rough(index: int) -> float:
        return difflib.SequenceMatcher(
            None, texts[index][:400], target[:400], autojunk=False
        ).quick_ratio()

    def exact(index: int) -> float:
        return difflib.SequenceMatcher(
            None, texts[index][:400], target[:400], autojunk=False
        ).ratio()

    best = max(sorted(range(len(texts)), key=rough, reverse=True)[:5], key=exact)
    return best, exact(best)


def prompt_like(draw: random.Random, stem: str) -> str:
    """A prompt that shares a stem with others and parts from them at a random point,
    from few letters, so that rough ratios tie and exact ones are close."""
    tail = "".join(draw.choice("abcde ") for _ in range(draw.randrange(0, 60)))
    return stem[: draw.randrange(0, len(stem) + 1)] + tail


@pytest.mark.parametrize("seed", range(40))
def test_the_closest_recording_is_the_one_the_whole_shortlist_names(seed: int) -> None:
    draw = random.Random(seed)
    stem = "".join(draw.choice("abcde ") for _ in range(draw.randrange(5, 120)))
    texts = [prompt_like(draw, stem) for _ in range(draw.randrange(1, 12))]
    if draw.random() < 0.3:
        texts.append(texts[0])  # a tie in every ratio: the earlier one wins, as max() says
    target = prompt_like(draw, stem)
    found, alike = closest(target, texts, str)
    index, ratio = whole_shortlist(target, texts)
    assert (found, alike) == (texts[index], ratio)
    assert texts.index(found) == texts.index(texts[index])


@pytest.mark.parametrize("seed", range(30))
def test_an_entry_repeats_another_exactly_when_the_whole_ratio_says_so(seed: int) -> None:
    draw = random.Random(seed)
    words = [
        draw.choice(["the", "miss", "agent", "cause", "fix", "trace", "case"])
        for _ in range(draw.randrange(1, 30))
    ]
    text = " ".join(words)
    others = []
    for number in range(6):
        changed = list(words)
        for _ in range(draw.randrange(0, 8)):
            changed.insert(draw.randrange(0, len(changed) + 1), draw.choice(string.ascii_lowercase))
        others.append((f"entry {number}", " ".join(changed[: draw.randrange(0, len(changed) + 1)])))
    expected = next(
        (
            name
            for name, other in others
            if text.split()
            and other.split()
            and difflib.SequenceMatcher(None, text.split(), other.split(), autojunk=False).ratio()
            >= NEAR
        ),
        None,
    )
    assert repeats(text, others) == expected


def test_a_store_keeps_what_it_read_and_a_write_replaces_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_cache, "_MEMORY", {})
    monkeypatch.setattr(_cache, "_held", [0])
    key, other = "a" * 64, "b" * 64
    kept = Derived(tmp_path / "batch")
    kept.write("scan", key, b"first")
    (tmp_path / "batch" / "scan" / key).unlink()
    assert kept.read("scan", key) == b"first"  # from memory: the disk is not read again
    kept.write("scan", key, b"second")
    assert kept.read("scan", key) == b"second"
    assert (tmp_path / "batch" / "scan" / key).read_bytes() == b"second"
    assert Derived(tmp_path / "another").read("scan", key) is None  # each store its own
    alone = Derived()  # memory alone: nothing on disk
    alone.write("pyc", other, b"code")
    assert alone.read("pyc", other) == b"code" and Derived().read("pyc", key) is None
    monkeypatch.setattr(_cache, "MEMORY_CAP", 40)  # 10 bytes held; each entry at most 10
    alone.write("pyc", "c" * 64, b"x" * 11)  # too large to keep: only the others stay
    assert alone.read("pyc", "c" * 64) is None and alone.read("pyc", other) == b"code"
    for name in "def0":
        alone.write("pyc", name * 64, b"y" * 10)  # 50 bytes: the two oldest go
    assert kept.read("scan", key) == b"second"  # from disk again
    assert alone.read("pyc", other) is None and alone.read("pyc", "f" * 64) == b"y" * 10
    assert _cache._held[0] <= 40


def miss_of(serving: Serving, prompt: str) -> str:
    run = _Run(RunPlan("provider-a", 0, serving), DEFAULT_LIMITS, None)  # type: ignore[arg-type]
    return run._miss(_Case("refund-policy", "task", Path("trace")), prompt, prompt_key(prompt))[
        "miss"
    ]


def test_a_kept_miss_message_is_the_one_made_and_is_made_again_for_other_recordings(
    tmp_path: Path,
) -> None:
    derived = Derived(tmp_path / "batch")
    asked = "Task: refund a seat bought ten days ago, and say why"
    near = "Task: refund a seat bought nine days ago"
    far = "Summarise this incident for the on-call channel"

    def serving(*prompts: str, kept: Derived | None = derived) -> Serving:
        recorded = {"refund-policy": {prompt_key(p): Entry(p, "answer") for p in prompts}}
        return Serving(lambda case, prompt: None, recorded=recorded, derived=kept)

    made = miss_of(serving(near, far, kept=None), asked)
    assert "nine days" in made  # the closest recording, named
    assert miss_of(serving(near, far), asked) == made  # kept, then
    assert miss_of(serving(near, far), asked) == made  # read back
    elsewhere = miss_of(serving(far), asked)  # other recordings: another message
    assert elsewhere != made and "on-call" in elsewhere
    withheld = miss_of(serving(asked, near, far), asked)  # its own recording left out
    assert withheld == made


def test_a_submissions_names_read_through_a_store_are_those_read_alone(tmp_path: Path) -> None:
    cases = [Case("refund-policy", "task")]
    alone = grounds(REFERENCE, cases, ["k"], ["said"])
    derived = Derived(tmp_path / "batch")
    first = grounds(REFERENCE, cases, ["k"], ["said"], derived)
    assert list((tmp_path / "batch" / "names").iterdir())  # kept
    again = grounds(REFERENCE, cases, ["k"], ["said"], Derived(tmp_path / "batch"))
    for made in (first, again):
        assert (made.identifiers, made.errors) == (alone.identifiers, alone.errors)
    assert "CassetteMiss" in alone.identifiers and alone.errors


def test_a_log_judged_again_under_other_grounds_is_judged_anew() -> None:
    log = parse_failures(
        "# Failures\n\n## The case refund-policy missed\n- Symptom: it "
        "raised\n- Cause: lab/agent.py swallowed it\n- Fix: it re-raises\n"
    )
    holds = Grounds(cases=frozenset({"refund-policy"}))
    lacks = Grounds(cases=frozenset({"sql-explain"}))
    assert not judge_entries(log, holds)[0].problems
    assert judge_entries(log, lacks)[0].problems  # not the judgement kept for `holds`
    assert judge_entries(log, holds) == judge_entries(log, holds)
    assert not judge_entries(log, holds)[0].problems
