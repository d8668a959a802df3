"""tests/grader/ledger."""
