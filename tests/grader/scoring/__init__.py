"""tests/grader/scoring."""
