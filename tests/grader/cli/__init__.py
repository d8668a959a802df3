"""tests/grader/cli."""
