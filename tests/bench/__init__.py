"""tests/bench."""
