"""tests/grader/outputs."""
