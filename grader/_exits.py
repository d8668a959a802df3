"""The command line's exit codes: one table, as ``--help``, the README and docs/formats.md
print it."""

from __future__ import annotations

__all__ = [
    "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_MISS", "EXIT_OK", "EXIT_PROVIDER", "EXIT_USAGE",
]

EXIT_OK = 0  # success
EXIT_FAILED = 1  # a check or verification failed, or a submission could not be graded
EXIT_USAGE = 2  # usage or configuration error: flags, rubric, manifest, roster, cassette
EXIT_MISS = 3  # a recording miss: cassette or tool fixture
EXIT_PROVIDER = 4  # the live provider failed after its retries
EXIT_INTERRUPTED = 130  # Ctrl-C
