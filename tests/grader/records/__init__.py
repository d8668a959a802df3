"""tests/grader/records."""
