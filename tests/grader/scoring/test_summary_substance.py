"""The written summary judged on what it says: the issue's table of logs, each written as a
student would, and what each earns. An honest log earns the same in any shape a person
reads as entries; a hollow one earns nothing for its entries in any shape; a copy of the
hand-out's example or of another entry is named, never counted.

It reaches the command line's private ``_parser`` and ``grader.scoring._summary``'s
``SUBCOMMANDS`` on purpose: the commands a summary may name are the parser's."""

from __future__ import annotations

import argparse
import re
from decimal import Decimal

import pytest

from grader import CriterionResult
from grader.cli._main import _parser
from grader.scoring import score_written_summary
from grader.scoring._summary import EXAMPLE_ENTRY, SUBCOMMANDS, Grounds
from tests.submissions import REFERENCE

POINTS = {
    "entries": Decimal("6.00"),
    "boundaries": Decimal("4.00"),
    "no_placeholders": Decimal("5.00"),
}
GROUNDS = Grounds(
    cases=frozenset({"refund-policy", "incident-summary", "sql-explain", "flaky-grade"}),
    files=frozenset(
        {
            "lab",
            "lab/agent.py",
            "lab/tools.py",
            "cassettes",
            "cassettes/sql-explain.json",
            "Makefile",
            "FAILURES.md",
        }
    ),
    keys=frozenset({"91dfba8f3c1ef5d9"}),
    targets=frozenset({"record", "check", "grade"}),
    errors=frozenset({"BudgetSpent"}),
)
BOUNDARIES = """
## Boundaries
- What this lab cannot measure: whether an answer is right, only that it is the recorded one.
"""
HONEST = (
    """\
# Failures

## The agent answered "" when a recording was missing
- Symptom: `make check` passed checkpoint 1 but case sql-explain scored 0 for loud failure.
- Cause: lab/agent.py wrapped the model call in `except Exception: return ""`, so the
  CassetteMiss never left run().
- Fix: the bare except is gone; a miss now reaches the caller.

## A set's order changed the prompt
- Symptom: the key 91dfba8f3c1ef5d9 was asked in one run and another key in the next.
- Cause: the keywords came from a set and were joined in hash order.
- Fix: sorted(...) before joining, then recorded case refund-policy again.
"""
    + BOUNDARIES
)
HOLLOW = (
    """\
# Failures

## A bug
- Symptom: There was a bug somewhere.
- Cause: Something was wrong in the code.
- Fix: It was fixed and now it works.

## Another problem
- Symptom: Things did not work as expected.
- Cause: The code had an issue in it.
- Fix: The issue was resolved by changing it.
"""
    + BOUNDARIES
)


def score(text: str, grounds: Grounds = GROUNDS) -> CriterionResult:
    return score_written_summary(text, points=POINTS, weight=Decimal(15), grounds=grounds)


def entries(result: CriterionResult) -> tuple[Decimal, str]:
    check = next(c for c in result.checks if c.id == "entries")
    return check.points, check.detail


def test_an_honest_log_earns_full_marks() -> None:
    result = score(HONEST)
    assert result.points == Decimal(15), [c.detail for c in result.checks]
    assert "names the case sql-explain" in entries(result)[1]


def test_boilerplate_in_the_right_form_earns_nothing_for_its_entries() -> None:
    points, detail = entries(score(HOLLOW))
    assert points == Decimal("0.00")
    assert "'A bug' (line 3): names nothing the grader can check" in detail
    assert "'Another problem' (line 8): names nothing the grader can check" in detail


def test_the_hand_outs_example_pasted_twice_earns_nothing_and_is_named() -> None:
    pasted = "# Failures\n\n" + EXAMPLE_ENTRY + "\n" + EXAMPLE_ENTRY + BOUNDARIES
    points, detail = entries(score(pasted))
    assert points == Decimal("0.00")
    assert detail.count("repeats the hand-out's example") == 2


def test_an_entry_written_twice_counts_once_and_both_places_are_named() -> None:
    first = HONEST.split("## A set's")[0]
    again = first.split("# Failures\n\n")[1].replace("## The agent", "## Again, the agent")
    points, detail = entries(score(first + "\n" + again + BOUNDARIES))
    assert points == Decimal("3.00")
    assert (
        "'Again, the agent answered \"\" when a recording was missing' (line 10): repeats "
        "'The agent answered \"\" when a recording was missing' (line 3)"
    ) in detail


@pytest.mark.parametrize(
    "shape", ["###", "#", "setext", "prose", "bold", "numbered", "field headings", "comment"]
)
def test_the_honest_log_in_another_shape_earns_what_it_earns(shape: str) -> None:
    text = HONEST
    if shape == "###":
        text = text.replace("\n## ", "\n### ")
    elif shape == "#":
        text = text.replace("\n## ", "\n# ").replace("# Failures\n\n", "")
    elif shape == "setext":
        text = re.sub(r"\n## (.+)\n", lambda m: f"\n{m[1]}\n{'-' * len(m[1])}\n", text)
    elif shape == "prose":
        text = re.sub(r"\n- (Symptom|Cause|Fix)", r"\n\n\1", text)
    elif shape == "bold":
        text = re.sub(r"\n- (Symptom|Cause|Fix):", r"\n- **\1:**", text)
    elif shape == "numbered":
        for n, name in enumerate(("Symptom", "Cause", "Fix"), 1):
            text = text.replace(f"\n- {name}:", f"\n{n}. {name}:")
    elif shape == "field headings":
        text = re.sub(r"\n- (Symptom|Cause|Fix): ", r"\n### \1\n\n", text)
    else:
        text = text.replace("# Failures\n", "# Failures\n<!-- the entries below -->\n")
    assert score(text).points == Decimal(15), (shape, [c.detail for c in score(text).checks])


def test_a_short_fix_and_the_hand_outs_status_open_pass_their_own_rules() -> None:
    short = HONEST.replace(
        "- Fix: the bare except is gone; a miss now reaches the caller.", "- Status: open"
    ).replace(
        "- Fix: sorted(...) before joining, then recorded case refund-policy again.",
        "- Fix: sorted the keywords.",
    )
    assert score(short).points == Decimal(15), [c.detail for c in score(short).checks]


def test_an_unquoted_option_with_its_value_left_out_is_no_placeholder() -> None:
    text = HONEST.replace(
        "then recorded case refund-policy again.",
        "then ran make record with --rerecord --reason ... for refund-policy.",
    )
    placeholders = next(c for c in score(text).checks if c.id == "no_placeholders")
    assert placeholders.passed, placeholders.detail


@pytest.mark.parametrize(
    ("claim", "said"),
    [
        ("case refund-polcy", "the case refund-polcy, which the rubric does not have"),
        ("lab/agnt.py", "lab/agnt.py, which the submission does not have"),
        ("key 0123456789abcdef", "the key 0123456789abcdef, which nothing recorded"),
        ("`gradekit recrod --case sql-explain`", "`gradekit recrod`, which is no command here"),
    ],
)
def test_a_claim_that_does_not_hold_keeps_the_entry_from_counting(claim: str, said: str) -> None:
    text = HONEST.replace(
        "a miss now reaches the caller.", f"a miss now reaches the caller; {claim}."
    )
    points, detail = entries(score(text))
    assert points == Decimal("3.00")
    assert f"names {said}" in detail


def test_what_holds_in_one_submission_is_checked_against_that_submission() -> None:
    """The same entry names the submission's own exception: it holds where the submission
    defines it, and names nothing checkable where it does not."""
    entry = (
        "# Failures\n\n## The budget ran out\n- Symptom: the run stopped with BudgetSpent.\n"
        "- Cause: the agent asked again on every refusal.\n"
        "- Fix: retries stop before the budget does.\n"
    )
    assert "names BudgetSpent" in entries(score(entry))[1]
    assert "names nothing the grader can check" in entries(score(entry, Grounds()))[1]


def test_the_kits_example_is_the_hand_outs() -> None:
    readme = (REFERENCE / "handout" / "README.md").read_text("utf-8")
    assert EXAMPLE_ENTRY in readme


def test_the_commands_an_entry_may_name_are_gradekits() -> None:
    commands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(commands.choices) == SUBCOMMANDS


# Noor's log: written in her own way, in a shape the kit's hand-out never shows: setext
# headings, bold labels inside prose paragraphs, a Status in place of a Fix, a closing note.
NOOR = """\
What broke while I built my agent
=================================

<!-- kept short on purpose -->

Replay said my prompt was new
-----------------------------

**Symptom:** `gradekit check` failed checkpoint 1 for incident-summary: the
prompt I asked had a trailing newline the recording did not.

**Cause:** I built the prompt with an f-string that ended in "\\n", and my own
Replay compared prompts without stripping them.

**Status:** fixed in lab/agent.py, the prompt is stripped before it is sent.

Tools answered twice as slowly offline
--------------------------------------

**Symptom:** the second run of flaky-grade took 2.4 s instead of 1.1 s.

**Cause:** lab/tools.py re-read its data file on every call.

**Fix:** the file is read once when the module loads.

Boundaries
----------

- What this lab cannot measure: how a different model would phrase the answers.
"""


def test_a_log_written_from_scratch_in_an_unseen_shape_earns_full_marks() -> None:
    result = score(NOOR)
    assert result.points == Decimal(15), [c.detail for c in result.checks]
    detail = entries(result)[1]
    assert detail.startswith("2 complete entries ('Replay said my prompt was new' (line 6) ")


# Sam's log: nothing in it but what the change log can bear out; no case, path, name or
# number of the submission.
SAM = (
    """\
# Failures

## My cassettes went stale
- Symptom: the recorded answers no longer matched what my agent asks.
- Cause: I changed how the agent looks things up, and every prompt moved with it.
- Fix: I recorded them again, with a reason in the change log.

## The grader said the recording was made twice
- Symptom: my second recording run asked the model again for the policy question.
- Cause: the plan prompt now names the policy, so its key was new.
- Fix: logged with its reason and recorded once more.
"""
    + BOUNDARIES
)
LOGGED = (
    ("refund-policy", "the agent now looks things up with its tools, so every prompt changed"),
    ("sql-explain", "the plan prompt now names the policy"),
)


def test_a_re_record_the_change_log_holds_is_something_an_entry_can_name() -> None:
    """An entry that says the words of a logged reason, or names a case it says it recorded
    again, names the re-record; without the log the same words name nothing."""
    logged = Grounds(rerecords=LOGGED)
    points, detail = entries(score(SAM, logged))
    assert points == Decimal("6.00"), detail
    assert "names the re-record of refund-policy that DATASET_CHANGES.md logs" in detail
    assert "names the re-record of sql-explain" in detail
    assert entries(score(SAM, Grounds()))[0] == Decimal("0.00")
    # The case named as recorded again: that re-record, even in words of the entry's own.
    named = SAM.replace("I recorded them again", "I re-recorded sql-explain")
    assert (
        "names the re-record of sql-explain"
        in entries(score(named, Grounds(rerecords=LOGGED[1:], cases=frozenset({"sql-explain"}))))[1]
    )
    # A reason the log does not give, or a case it did not re-record, matches nothing.
    other = Grounds(rerecords=(("flaky-grade", "the grade prompt lost its trailing space"),))
    assert entries(score(SAM, other))[0] == Decimal("0.00")
