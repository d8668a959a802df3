"""tests/grader/recordings."""
