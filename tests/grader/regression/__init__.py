"""tests/grader/regression."""
