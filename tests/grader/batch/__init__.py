"""tests/grader/batch."""
