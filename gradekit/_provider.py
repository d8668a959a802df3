"""The one swappable contract: anything with a ``name`` and ``complete`` is a provider."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["Provider"]


@runtime_checkable
class Provider(Protocol):
    """A text-in, text-out model. Live adapters, recorders and replays all satisfy it.

    ``name`` is a label for people and traces; an agent must never branch on it.
    """

    name: str

    def complete(self, prompt: str) -> str:
        """Return the model's answer to ``prompt``."""
        ...
