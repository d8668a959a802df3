"""tests/lab."""
