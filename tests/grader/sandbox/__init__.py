"""tests/grader/sandbox."""
