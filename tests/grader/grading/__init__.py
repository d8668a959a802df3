"""tests/grader/grading."""
