"""Scoring, pure: from what the parent observed (``grader._model``) and the rubric to points,
details and advice. The five built-in checks, the checks judged against expectation
snapshots and regression sets, loud failure, trace pairing and FAILURES.md. Nothing here
reads a file, starts a process or knows where a result is written.

May import: base, regression, rubric.
"""

from __future__ import annotations

from grader.scoring._causes import cause, holds_date, said, seed_shifted, unsettled_cases
from grader.scoring._checks import (
    BY_SEED,
    ESCAPED,
    SEED_PROMPTS,
    STABLE,
    STRETCH_GOALS,
    STUB_ERROR,
    WRAP_ADVICE,
    WRAP_TOOLS_ADVICE,
    Check,
    Evidence,
    StretchGoal,
    loud_failure,
    loudness,
    shown_keys,
    stability_advice,
    stability_detail,
    stretch_goal,
    stretch_goals,
    tracing,
    unstable_cause,
)
from grader.scoring._failures import (
    find_placeholders,
    parse_failures,
    repeated_entries,
    score_written_summary,
)
from grader.scoring._judged import (
    BUILTIN_CHECKS,
    contract_gaps,
    expectations,
    judged_item,
    observed,
    regression,
)
from grader.scoring._loud import loud_problem, planned_probes, ran
from grader.scoring._summary import EXAMPLE_ENTRY, Grounds
from grader.scoring._traces import pair_records

__all__ = [
    "BUILTIN_CHECKS",
    "BY_SEED",
    "ESCAPED",
    "EXAMPLE_ENTRY",
    "SEED_PROMPTS",
    "STABLE",
    "STRETCH_GOALS",
    "STUB_ERROR",
    "WRAP_ADVICE",
    "WRAP_TOOLS_ADVICE",
    "Check",
    "Evidence",
    "Grounds",
    "StretchGoal",
    "cause",
    "contract_gaps",
    "expectations",
    "find_placeholders",
    "holds_date",
    "judged_item",
    "loud_failure",
    "loud_problem",
    "loudness",
    "observed",
    "pair_records",
    "parse_failures",
    "planned_probes",
    "ran",
    "regression",
    "repeated_entries",
    "said",
    "score_written_summary",
    "seed_shifted",
    "shown_keys",
    "stability_advice",
    "stability_detail",
    "stretch_goal",
    "stretch_goals",
    "tracing",
    "unsettled_cases",
    "unstable_cause",
]
