"""The command line's exit codes: one table, printed by ``--help`` and written out in the
README and docs/formats.md (a test holds all three to it)."""

from __future__ import annotations

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_MISS",
    "EXIT_OK",
    "EXIT_PROVIDER",
    "EXIT_TABLE",
    "EXIT_USAGE",
    "exit_help",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_MISS = 3
EXIT_PROVIDER = 4
EXIT_INTERRUPTED = 130

EXIT_TABLE: tuple[tuple[int, str], ...] = (
    (EXIT_OK, "success"),
    (EXIT_FAILED, "a check or verification failed, or a submission could not be graded"),
    (
        EXIT_USAGE,
        "usage or configuration error: bad flags, a bad rubric, manifest or roster, "
        "a corrupt or locked cassette",
    ),
    (
        EXIT_MISS,
        "a recording miss, cassette or tool fixture, or a replay that left its recorded incident",
    ),
    (
        EXIT_PROVIDER,
        "the live provider failed after its retries: auth, rate limit, connection, bad response",
    ),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
)


def exit_help() -> str:
    """The table as ``--help`` ends with it."""
    return "exit codes:\n" + "\n".join(f"  {code:<4} {meaning}" for code, meaning in EXIT_TABLE)
