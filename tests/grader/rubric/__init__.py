"""tests/grader/rubric."""
