"""Each cause of a disagreement between runs is told by the run that isolates it: the run on
another day (the clock, randomness), the seed runs (the hash seed), the other labels. Pure
functions, on outcomes built by hand; the sandbox gathers them for real in
tests/e2e/test_corpus.py (the clockwork shape) and tests/grader/grading/."""

from __future__ import annotations

from grader import CaseOutcome, RunResult, Served
from grader.scoring import cause, holds_date, said, seed_shifted, unsettled_cases

CASE = "refund-policy"


def _run(*keys: str, answer: str | None = "a" * 64, served: bool = True) -> RunResult:
    calls = tuple(Served(key=key, served=served) for key in keys)
    outcome = CaseOutcome(
        CASE,
        "returned" if answer else "raised",
        answer_sha256=answer,
        calls=calls,
        exception=None if answer else "CassetteMiss",
    )
    return RunResult({CASE: outcome})


def test_what_a_run_said_is_its_calls_as_a_multiset_and_its_answer() -> None:
    """Two threads' calls arrive in either order: the same calls, the same run."""
    assert said(_run("k1", "k2").outcomes[CASE]) == said(_run("k2", "k1").outcomes[CASE])
    assert said(_run("k1").outcomes[CASE]) != said(_run("k1", answer="b" * 64).outcomes[CASE])
    timed_out = CaseOutcome(CASE, "timeout", detail="did not finish within 1 s")
    assert said(timed_out) is None


def test_agreeing_served_runs_are_settled_and_nothing_else_is() -> None:
    same = _run("k1")
    assert unsettled_cases(same, [_run("k1"), _run("k1")]) == []
    assert unsettled_cases(same, [_run("k1"), _run("k1", answer="b" * 64)]) == [CASE]
    assert unsettled_cases(
        _run("k9", answer=None, served=False), [_run("k9", answer=None, served=False)]
    ) == [CASE]


def test_the_run_on_another_day_names_the_clock() -> None:
    primary = _run("k1")
    assert cause(CASE, primary, [_run("k1")], _run("k1", answer="c" * 64), ()) == "identical"
    assert cause(CASE, primary, [_run("k1")], _run("k1"), ()) is None


def test_the_seed_runs_name_the_seed_and_the_labels_what_is_left() -> None:
    primary, day = _run("k1"), _run("k1")
    by_label = _run("k1", answer="b" * 64)
    # Another label differs, the primary label under its seed does not: the label.
    assert cause(CASE, primary, [by_label], day, [_run("k1")]) == "label"
    # The primary label under that seed differs just as the other label's run: the seed.
    assert cause(CASE, primary, [by_label], day, [_run("k1", answer="b" * 64)]) == "seed"
    # It differs, but otherwise than the other label's run: both.
    assert cause(CASE, primary, [by_label], day, [_run("k1", answer="d" * 64)]) == "both"
    # Only the seed runs differ (the other labels' seeds happened to agree): the seed.
    assert cause(CASE, primary, [_run("k1")], day, [_run("k1", answer="d" * 64)]) == "seed"


def test_prompts_that_move_with_the_seed_are_shifted_answers_alone_are_not() -> None:
    primary = _run("k1", answer=None, served=False)
    assert seed_shifted(primary, [_run("k2", answer=None, served=False)]) == {CASE}
    assert seed_shifted(primary, [_run("k1", answer=None, served=False)]) == set()
    assert seed_shifted(_run("k1"), [_run("k1", answer="b" * 64)]) == set()


def test_a_date_is_found_by_the_year_its_clock_read() -> None:
    clock = 3_000_000_000  # 2065-01-24
    assert holds_date("Today is 2065-01-24. Answer briefly.", clock)
    assert not holds_date("Today is 2026-12-06. Answer briefly.", clock)
