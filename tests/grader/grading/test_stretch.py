"""The stretch goals' evidence checks: tool-fixtures and rerecord-review.

It tests the private ``_written_up`` (``grader.scoring._checks``) on purpose: when a goal
named in FAILURES.md counts as written up."""

from __future__ import annotations

from pathlib import Path

from gradekit import Cassette, Entry, prompt_key
from gradekit.internal import encode_cassette
from grader import CaseOutcome, RunResult, Served, TraceRecord
from grader.grading._rerecording import _rerecording, _rerecording_problem
from grader.recordings import append_change, digest_file
from grader.rubric import Case
from grader.scoring import parse_failures
from grader.scoring._checks import STRETCH_GOALS, Evidence, _written_up
from grader.submission import Manifest

CASES = (Case("one", "first task"), Case("two", "second task"))
TOOL = Served('read_docs {"query":"x"}', True, "read_docs")
PROMPT = Served("0123456789abcdef", True)


def traced(call: Served) -> TraceRecord:
    return TraceRecord(call.key, None if call.tool else "p", 0.5, True, call.tool)


def evidence(*outcomes: CaseOutcome) -> Evidence:
    primary = RunResult({o.case: o for o in outcomes})
    return Evidence(
        cases=CASES,
        label="p",
        primary=primary,
        others=(),
        loud=(),
        probe=None,
        failures=None,
        stretch=("tool-fixtures",),
        second_set=None,
    )


def outcome(
    case: str,
    calls: tuple[Served, ...],
    trace: tuple[TraceRecord, ...] | None = None,
) -> CaseOutcome:
    records = tuple(traced(c) for c in calls) if trace is None else trace
    return CaseOutcome(case, "returned", answer="a", calls=calls, trace=records)


def tool_fixtures(e: Evidence) -> str | None:
    return STRETCH_GOALS["tool-fixtures"].evidence(e)


def test_tool_fixtures_holds_when_a_tool_is_used_served_and_traced() -> None:
    assert (
        tool_fixtures(evidence(outcome("one", (TOOL, PROMPT)), outcome("two", (PROMPT,)))) is None
    )


def test_tool_fixtures_needs_a_tool_call() -> None:
    why = tool_fixtures(evidence(outcome("one", (PROMPT,)), outcome("two", (PROMPT,))))
    assert why is not None and "made no tool call" in why


def test_tool_fixtures_needs_every_call_recorded() -> None:
    unserved = Served(TOOL.key, False, "read_docs")
    why = tool_fixtures(evidence(outcome("one", (TOOL,)), outcome("two", (unserved,))))
    assert why == "case two made a tool call its fixture does not hold"


def test_tool_fixtures_needs_the_tool_calls_traced() -> None:
    only_prompts = (traced(PROMPT),)
    why = tool_fixtures(
        evidence(outcome("one", (PROMPT, TOOL), only_prompts), outcome("two", (PROMPT,)))
    )
    assert why is not None and "case one: tool calls are not traced" in why


def test_tool_fixtures_pairs_each_tool_record_by_key_not_by_line() -> None:
    """The prompt is untraced, so the tool's record is on line 1, not line 2: still its."""
    only_tool = (traced(TOOL),)
    assert (
        tool_fixtures(evidence(outcome("one", (PROMPT, TOOL), only_tool), outcome("two", (TOOL,))))
        is None
    )


WRITE_UP = """\
# Failures
## {heading}
- Symptom: a tool answered differently on Tuesday than on Monday.
- Cause: the search index was rebuilt overnight between the two runs.
- Fix: {fix}
"""


def test_a_stretch_goal_named_in_a_heading_is_written_up() -> None:
    """A person reads "## tool-fixtures: ..." as the goal's entry: so does the grader."""
    named = WRITE_UP.format(
        heading="tool-fixtures: the index changed under me",
        fix="each read-only call is recorded once and replayed.",
    )
    unnamed = WRITE_UP.format(
        heading="The index changed under me",
        fix="each read-only call is recorded once and replayed.",
    )
    in_body = WRITE_UP.format(
        heading="The index changed under me",
        fix="recorded every call as tool fixtures, replayed offline.",
    )
    names = STRETCH_GOALS["tool-fixtures"].names
    assert _written_up(parse_failures(named).entries, names)
    assert not _written_up(parse_failures(unnamed).entries, names)
    assert _written_up(parse_failures(in_body).entries, names)


def _cassette(path: Path, answer: str) -> str:
    """Write a one-entry cassette at ``path``; its key."""
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = Entry("What changed?", answer, "openai:gpt-4o-mini", "2026-11-29T00:00:00Z")
    path.write_bytes(encode_cassette(Cassette("one", {prompt_key("What changed?"): entry})))
    return prompt_key("What changed?")


def test_rerecord_review_needs_a_log_entry_matching_the_files(tmp_path: Path) -> None:
    manifest = Manifest(tmp_path, "lab.agent:run")
    assert "no entry in DATASET_CHANGES.md" in (_rerecording_problem(tmp_path, manifest) or "")
    cassette = tmp_path / "cassettes" / "one.json"
    key = _cassette(cassette, "first answer")
    append_change(
        tmp_path / "DATASET_CHANGES.md",
        date="2026-11-29",
        case="one",
        kind="cassette",
        changed_keys=[key],
        reason="model upgraded",
        digests={"cassettes/one.json": digest_file(cassette)},
    )
    assert _rerecording(tmp_path, manifest) == (
        None,
        (
            f"the DATASET_CHANGES.md entry of 2026-11-29 for one: cassettes/one.json as logged, "
            f"holding changed keys {key}"
        ),
    )
    _cassette(cassette, "second answer")  # changed after the review
    assert "digests match" in (_rerecording_problem(tmp_path, manifest) or "")


def test_rerecord_review_needs_keys_the_recordings_hold(tmp_path: Path) -> None:
    """A hand-written entry listing keys that no recording holds shows no re-recording."""
    manifest = Manifest(tmp_path, "lab.agent:run")
    cassette = tmp_path / "cassettes" / "one.json"
    _cassette(cassette, "first answer")
    append_change(
        tmp_path / "DATASET_CHANGES.md",
        date="2026-11-29",
        case="one",
        kind="cassette",
        changed_keys=["0123456789abcdef"],
        reason="made up",
        digests={"cassettes/one.json": digest_file(cassette)},
    )
    assert "lists a changed key that its recordings hold" in (
        _rerecording_problem(tmp_path, manifest) or ""
    )


def test_rerecord_review_needs_an_entry_that_names_recordings_only(tmp_path: Path) -> None:
    """An entry naming README.md (digest and all) is not a re-recording."""
    manifest = Manifest(tmp_path, "lab.agent:run")
    readme = tmp_path / "README.md"
    readme.write_text("# my lab\n", encoding="utf-8")
    append_change(
        tmp_path / "DATASET_CHANGES.md",
        date="2026-11-29",
        case="one",
        kind="cassette",
        changed_keys=["0123456789abcdef"],
        reason="made up",
        digests={"README.md": digest_file(readme)},
    )
    assert (
        "no DATASET_CHANGES.md entry names only recordings (.json files in cassettes/, "
        "fixtures/)" in (_rerecording_problem(tmp_path, manifest) or "")
    )


def test_rerecord_review_never_reads_outside_the_submission(tmp_path: Path) -> None:
    outside = tmp_path / "secret.json"
    outside.write_text("{}", encoding="utf-8")
    root = tmp_path / "alice"
    root.mkdir()
    append_change(
        root / "DATASET_CHANGES.md",
        date="2026-11-29",
        case="one",
        kind="cassette",
        changed_keys=["k"],
        reason="r",
        digests={"../secret.json": digest_file(outside)},
    )
    assert _rerecording_problem(root, Manifest(root, "lab.agent:run")) is not None
