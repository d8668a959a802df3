"""tests/grader/dashboard."""
