"""grader/batch."""

from __future__ import annotations

from grader.batch._batch import (
    BatchInterrupted,
    Shard,
    discover,
    grade_batch,
    parse_shard,
    print_heartbeat,
    print_progress,
)

__all__ = [
    "BatchInterrupted",
    "Shard",
    "discover",
    "grade_batch",
    "parse_shard",
    "print_heartbeat",
    "print_progress",
]
