"""tests/grader/handout."""
