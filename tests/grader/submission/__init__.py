"""tests/grader/submission."""
