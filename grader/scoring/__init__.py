"""Scoring, pure: from what the parent observed (``grader._model``) and the rubric to points,
details and advice. The five built-in checks, the checks judged against expectation
snapshots and regression sets, loud failure, trace pairing and FAILURES.md. Nothing here
reads a file, starts a process or knows where a result is written.

May import: base, regression, rubric.
"""

from __future__ import annotations

from grader.scoring._causes import cause, seed_shifted, unsettled_cases
from grader.scoring._checks import (
    ESCAPED,
    STABLE,
    STRETCH_GOALS,
    STUB_ERROR,
    Check,
    Evidence,
    StretchGoal,
    loudness,
    shown_keys,
    stability_advice,
    stability_detail,
    stretch_goals,
    unstable_cause,
)
from grader.scoring._failures import parse_failures, repeated_entries, score_written_summary
from grader.scoring._judged import BUILTIN_CHECKS, contract_gaps, judged_item
from grader.scoring._loud import loud_problem, planned_probes, ran
from grader.scoring._summary import EXAMPLE_ENTRY, Grounds
from grader.scoring._traces import pair_records

__all__ = [
    "BUILTIN_CHECKS",
    "ESCAPED",
    "EXAMPLE_ENTRY",
    "STABLE",
    "STRETCH_GOALS",
    "STUB_ERROR",
    "Check",
    "Evidence",
    "Grounds",
    "StretchGoal",
    "cause",
    "contract_gaps",
    "judged_item",
    "loud_problem",
    "loudness",
    "pair_records",
    "parse_failures",
    "planned_probes",
    "ran",
    "repeated_entries",
    "score_written_summary",
    "seed_shifted",
    "shown_keys",
    "stability_advice",
    "stability_detail",
    "stretch_goals",
    "unsettled_cases",
    "unstable_cause",
]
