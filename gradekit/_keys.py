"""Prompt keys: what makes two prompts "the same prompt"."""

from __future__ import annotations

from hashlib import sha256

__all__ = ["KEY_LENGTH", "prompt_key"]

KEY_LENGTH = 16


def prompt_key(prompt: str) -> str:
    """Return the first 16 hex characters of SHA-256 over ``prompt.strip()`` in UTF-8.

    Only leading and trailing whitespace is ignored: whitespace inside a
    prompt changes what the model sees, so it changes the key.
    """
    return sha256(prompt.strip().encode("utf-8")).hexdigest()[:KEY_LENGTH]
