"""tests/e2e."""
