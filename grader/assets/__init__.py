"""The evaluation assets: cases (a task, the world it starts from and the truth a run is
judged by, versioned, never edited), investigations, dispositions and approvals, the cases'
runs as batches, and the path from a failing run or an incident to a regression item, all
in the asset ledger (``regression/ledger.jsonl``) beside the sets.

Inside, promotion (``_promote``: a case from a graded run, a candidate's item) is the
bottom; the case store (``_assets``) appends every event through the ledger room's
``append_events``.

May import: base, submission, regression, rubric, scoring, outputs, ledger.
"""

from __future__ import annotations

from grader.assets._assets import (
    ASSETS,
    DISPOSITIONS,
    SOURCES,
    Assets,
    StoredCase,
    append_case_batch,
    approve,
    archive,
    candidate_item,
    case_batch,
    case_item,
    dispose,
    investigate,
    new_case,
    read_assets,
    revise,
    save_from_run,
)
from grader.assets._promote import FromRun, PromotionRequest, applicable_agent, from_run

__all__ = [
    "ASSETS",
    "DISPOSITIONS",
    "SOURCES",
    "Assets",
    "FromRun",
    "PromotionRequest",
    "StoredCase",
    "append_case_batch",
    "applicable_agent",
    "approve",
    "archive",
    "candidate_item",
    "case_batch",
    "case_item",
    "dispose",
    "from_run",
    "investigate",
    "new_case",
    "read_assets",
    "revise",
    "save_from_run",
]
