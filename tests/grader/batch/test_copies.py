"""The copy detector on its own (``grader.batch.find_copies``): what it sees, what it does
not take for a copy, and that the same folders always give the same bytes.

A copy across a cohort went unseen: a late submission byte-identical to a classmate's
was graded with no finding. The detector reads each submission's agent package,
FAILURES.md and cassettes (files only, never run), normalises them (names by kind, no
comments or docstrings, each def on its own) and flags pairs that share most of their
fingerprints, leaving out what the cohort has in common. The batch's side of it (the
gradebook, the review sheet, the dashboard, the digests) is ``test_copies_batch``.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.batch import _copies, find_copies
from grader.batch._copies import COMMON_MOST, common_over
from grader.batch._fingerprints import code_documents, fingerprints
from grader.outputs import copy_notes, read_copies, render_copies, renoted
from tests.grader.batch.cohorts import (
    ALICE,
    CAROL,
    DAVE,
    ERIN,
    FAILURES,
    MALLORY,
    cassette,
    submission,
)

CORPUS = Path(__file__).resolve().parents[2] / "corpus"
REPO = Path(__file__).resolve().parents[3]


def cohort(base: Path, **agents: str) -> list[tuple[str, Path]]:
    """Submissions named as the keywords, each with its agent and the hand-out's helpers."""
    return [(name, submission(base / name, agent, handout=True)) for name, agent in agents.items()]


def flagged(pairs: list[tuple[str, Path]], **options: Path) -> dict[tuple[str, str], str]:
    return {(pair.a, pair.b): pair.said() for pair in find_copies(pairs, **options).pairs}


def test_byte_identical_submissions_are_flagged_with_each_others_name(tmp_path: Path) -> None:
    subs = cohort(tmp_path, alice=ALICE, carol=CAROL, dave=DAVE)
    shutil.copytree(tmp_path / "alice", tmp_path / "bob")
    copies = find_copies([*subs, ("bob", tmp_path / "bob")])
    assert [(pair.a, pair.b) for pair in copies.pairs] == [("alice", "bob")]
    code = copies.pairs[0].parts["code"]
    assert (code.score, code.flagged) == (100, True) and code.shared >= 20
    assert code.excerpt is not None and code.excerpt.a == code.excerpt.b
    assert code.excerpt.a.startswith("lab/agent.py:")
    notes = copy_notes(copies)
    assert notes == {
        "alice": "similar to bob's agent code (100%): flagged for review",
        "bob": "similar to alice's agent code (100%): flagged for review",
    }


def test_a_copy_with_its_names_changed_and_its_functions_reordered_is_flagged(
    tmp_path: Path,
) -> None:
    # Not a line of Mallory's agent that holds code is in Alice's as it stands: only the
    # normalised tokens, each def apart, find it.
    code_lines = {line.strip() for line in ALICE.splitlines() if len(line.strip()) > 12}
    assert not code_lines & {line.strip() for line in MALLORY.splitlines()} - {
        'return result or "I could not find anything to say about this task."',
        'return answer or "I could not find anything to say about this task."',
    }
    subs = cohort(tmp_path, alice=ALICE, carol=CAROL, dave=DAVE, mallory=MALLORY)
    copies = find_copies(subs)
    assert [(pair.a, pair.b) for pair in copies.pairs] == [("alice", "mallory")]
    code = copies.pairs[0].parts["code"]
    assert code.flagged and code.score >= 90
    # The excerpt says where the run is in each: summarise() is condense(), moved up.
    assert code.excerpt is not None
    assert code.excerpt.a == "lab/agent.py:26-32" and code.excerpt.b == "lab/agent.py:13-20"
    assert code.excerpt.lines[0] == "def summarise(text, limit=3):"


def test_two_agents_written_apart_are_not_flagged(tmp_path: Path) -> None:
    for first, second in ((ALICE, CAROL), (DAVE, ERIN), (ALICE, ERIN), (CAROL, DAVE)):
        subs = [
            (name, submission(tmp_path / name, agent))
            for name, agent in (("one", first), ("two", second))
        ]
        assert find_copies(subs).pairs == ()


def test_a_cohort_of_honest_agents_and_failure_logs_has_no_pair(tmp_path: Path) -> None:
    # tests/corpus: thirteen agents, and their failure logs, written apart in a bootcamp's
    # style; they share the kit's idioms (Traced, TracedTools, the glossary tool).
    subs = []
    for folder in sorted(CORPUS.glob("*/agent.py")):
        root = tmp_path / folder.parent.name
        submission(
            root,
            folder.read_text("utf-8"),
            failures=(folder.parent / "FAILURES.md").read_text("utf-8"),
        )
        subs.append((root.name, root))
    assert len(subs) >= 12
    assert find_copies(subs).pairs == ()


def test_hand_out_code_everyone_keeps_is_not_flagged_but_a_copy_among_them_is(
    tmp_path: Path,
) -> None:
    subs = cohort(tmp_path, alice=ALICE, carol=CAROL, dave=DAVE, erin=ERIN)
    assert flagged(subs) == {}
    shutil.copytree(tmp_path / "erin", tmp_path / "frank")
    assert flagged([*subs, ("frank", tmp_path / "frank")]) == {
        ("erin", "frank"): "agent code (100%)"
    }


def test_two_submissions_alone_need_the_hand_out_to_tell_it_from_a_copy(tmp_path: Path) -> None:
    # Of two submissions nothing is "common": what both hold may be copied. Given the
    # starter they were handed, what it holds counts for nothing.
    subs = cohort(tmp_path, alice=ALICE, carol=CAROL)
    assert flagged(subs) == {("alice", "carol"): "agent code (50%)"}
    starter = submission(tmp_path / "starter", "", handout=True)
    assert flagged(subs, handout=starter) == {}


def test_a_shared_failure_log_and_shared_cassettes_are_flagged_apart_from_the_code(
    tmp_path: Path,
) -> None:
    recorded = cassette(
        "refund-policy",
        {
            "Task: refund after ten days? Plan first.": "1. Read the policy. 2. Count the days. "
            "3. Say that ten days falls inside the fourteen day window for a full refund.",
            "Task: write the reply from the plan above.": "Dear student, you bought your seat "
            "ten days ago, which is inside the fourteen days of a full refund: we will refund "
            "the whole price to the card you paid with within five working days.",
        },
    )
    subs = cohort(tmp_path, carol=CAROL, dave=DAVE, erin=ERIN)
    submission(
        tmp_path / "alice",
        ALICE,
        handout=True,
        failures=FAILURES,
        cassettes={"refund-policy.json": recorded},
    )
    submission(
        tmp_path / "bob",
        MALLORY.replace("mallory", "bob"),
        handout=True,
        failures=FAILURES.replace("# Failures", "# My failures"),
        cassettes={"refund-policy.json": recorded},
    )
    pairs = find_copies([*subs, ("alice", tmp_path / "alice"), ("bob", tmp_path / "bob")]).pairs
    assert [(pair.a, pair.b) for pair in pairs] == [("alice", "bob")]
    parts = pairs[0].parts
    assert all(parts[part].flagged for part in ("code", "failures", "cassettes"))
    assert parts["failures"].excerpt is not None
    assert parts["failures"].excerpt.a.startswith("FAILURES.md:")
    assert parts["cassettes"].excerpt is not None
    assert parts["cassettes"].excerpt.a.startswith("cassettes/refund-policy.json ")
    # A failure log written anew, the same failure in other words, is not seen.
    paraphrase = (
        "# Failures\n\n## Replies ended halfway through a word\n- Symptom: the "
        "refund reply stopped at 'purch', so it was judged too short.\n- Cause: a "
        "character limit chopped the text without looking for spaces.\n- Fix: trim "
        "at a space below the limit and end with three dots.\n"
    )
    submission(
        tmp_path / "bob",
        "def run(provider, task, tools=None):\n    return task\n",
        handout=True,
        failures=paraphrase,
    )
    assert (
        find_copies([*subs, ("alice", tmp_path / "alice"), ("bob", tmp_path / "bob")]).pairs == ()
    )


def test_comments_docstrings_and_spacing_change_no_fingerprint() -> None:
    plain = b"def f(a, b):\n    c = a + b\n    return [c * 2 for c in range(c)] + list(b)\n"
    dressed = (
        b'def f( a,b ):  # sum\n    """Twice."""\n    c = (a\n         + b)\n\n'
        b"    return [c * 2 for c in range(c)] + list(b)  # done\n"
    )
    renamed = b"def g(x, y):\n    z = x + y\n    return [z * 2 for z in range(z)] + list(y)\n"
    other = b"def f(a, b):\n    c = a - b\n    return [c * 2 for c in range(c)] + tuple(b)\n"

    def prints(source: bytes) -> set[int]:
        return set().union(*(fingerprints(d) for d in code_documents("a.py", source)))

    assert prints(plain) == prints(dressed) == prints(renamed)
    assert prints(plain) != prints(other)
    assert prints(b"def broken(:\n") == set()  # nothing imports it: nothing to compare


def test_the_same_folders_give_the_same_bytes_in_any_order_and_under_any_hash_seed(
    tmp_path: Path,
) -> None:
    subs = cohort(tmp_path, alice=ALICE, carol=CAROL, dave=DAVE, erin=ERIN, mallory=MALLORY)
    shutil.copytree(tmp_path / "carol", tmp_path / "bob")
    folders = [str(path) for _, path in subs] + [str(tmp_path / "bob")]
    script = (
        "import sys; from pathlib import Path; from grader.batch import find_copies; "
        "from grader.outputs import render_copies; "
        "sys.stdout.buffer.write(render_copies(find_copies("
        "[(Path(p).name, Path(p)) for p in sys.argv[1:]])))"
    )
    outputs = set()
    for seed, zone in (("0", "UTC"), ("4242", "Asia/Kolkata"), ("random", "America/Lima")):
        random.Random(seed).shuffle(folders)
        done = subprocess.run(
            [sys.executable, "-c", script, *folders],
            cwd=REPO,
            env={**os.environ, "PYTHONHASHSEED": seed, "TZ": zone},
            capture_output=True,
            check=True,
        )
        outputs.add(done.stdout)
    assert len(outputs) == 1
    (data,) = outputs
    copies = read_copies(data)
    assert [(pair.a, pair.b) for pair in copies.pairs] == [("alice", "mallory"), ("bob", "carol")]
    assert render_copies(copies) == data


def test_the_index_in_shards_finds_what_one_shard_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    subs = cohort(tmp_path, alice=ALICE, carol=CAROL, dave=DAVE, erin=ERIN, mallory=MALLORY)
    whole = render_copies(find_copies(subs))
    monkeypatch.setattr(_copies, "_SHARD_SIZE", 7)  # dozens of shards of the hash range
    assert render_copies(find_copies(subs)) == whole
    assert b'"a":"alice","b":"mallory"' in whole


def test_what_is_common_grows_with_the_cohort_up_to_a_cap() -> None:
    # More than half the cohort is common; past 2 * COMMON_MOST submissions, more than
    # COMMON_MOST is (MOSS's -m: each such fingerprint makes n * (n - 1) / 2 pairs);
    # two submissions of three sharing a fingerprint are never common.
    assert [common_over(n) for n in (1, 2, 3, 4, 5, 6, 40, 41, 200, 10_000)] == [
        2,
        2,
        2,
        2,
        2,
        3,
        20,
        20,
        COMMON_MOST,
        COMMON_MOST,
    ]


def test_a_note_is_replaced_never_doubled_and_goes_when_its_pair_goes() -> None:
    old = "similar to bob's agent code (100%): flagged for review"
    new = "similar to carol's cassettes (80%): flagged for review"
    flag = "flagged for review: lab/agent.py:3: walks the call stack's frames (sys._getframe)"
    assert renoted("", "", old) == old
    assert renoted(old, old, old) == old
    assert renoted(f"{flag}; {old}", old, new) == f"{flag}; {new}"
    assert renoted(f"{flag}; {new}", old, new) == f"{flag}; {new}"  # given already
    assert renoted(f"{flag}; {old}", old, "") == flag
    assert renoted(flag, old, "") == flag
