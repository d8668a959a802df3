"""The targets the brief sets; every tool's row in a table is held to the same one."""

from __future__ import annotations

from bench._table import Target

__all__ = ["LOAD_TARGET", "RECORD_TARGET", "REPLAY_TARGET"]

REPLAY_TARGET = Target(5_000)  # a hit: under 5 µs median at every cassette size
RECORD_TARGET = Target(23_000)  # recording overhead: agent-chronicle's per-crossing figure
LOAD_TARGET = Target(1e9)  # loading the cassette: under 1 s at 100 000 entries
