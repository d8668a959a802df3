"""tests/kit."""
