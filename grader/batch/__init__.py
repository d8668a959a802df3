"""Grading a cohort: discovery, sharding, one worker process per submission forked from a
pre-imported zygote, the gradebook written as rows finish, and the cohort compared for
copies (``compare_cohort``: files read, never run; ``copies.json`` and a note in the
gradebook's reason, never a point or a report). A worker gets the rubric as JSON
(``grader.rubric.rubric_document``) and writes its submission's outputs once through the
grades folder's home (``grader.ledger``); the batch signs them once. The identities the
command line computed are graded as they are (``grade_batch`` computes them only when
given folders).

``grade_cohort`` is the whole workflow ``gradekit grade`` and the Gradescope autograder
run: the idempotency key, the rubric's lineage, discovery and identities, the gradebook
found, the copies, ``grade_batch``, then the ledger's batch event (on Ctrl-C too:
``CohortInterrupted``) and the reviews brought into the gradebook. It prints nothing: it
returns a ``GradedCohort`` and tells a ``CohortListener`` each step.

May import: base, submission, sandbox, regression, rubric, scoring, outputs, ledger,
grading.
"""

from __future__ import annotations

from grader.batch._batch import (
    BatchInterrupted,
    Earlier,
    Shard,
    discover,
    earlier_rows,
    grade_batch,
    parse_shard,
    print_heartbeat,
    print_progress,
)
from grader.batch._cohort import CohortInterrupted, CohortListener, GradedCohort, grade_cohort
from grader.batch._copies import Comparison, compare_cohort, find_copies

__all__ = [
    "BatchInterrupted",
    "CohortInterrupted",
    "CohortListener",
    "Comparison",
    "Earlier",
    "GradedCohort",
    "Shard",
    "compare_cohort",
    "discover",
    "earlier_rows",
    "find_copies",
    "grade_batch",
    "grade_cohort",
    "parse_shard",
    "print_heartbeat",
    "print_progress",
]
