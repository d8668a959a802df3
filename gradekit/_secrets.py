"""Keep credentials out of everything gradekit writes."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from gradekit._exceptions import SecretLeak

__all__ = ["credential_values", "find_secret", "refuse_secrets"]

# Names that hold credentials by convention: OPENAI_API_KEY, GH_TOKEN, DB_PASSWORD, ...
_CREDENTIAL_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
# Shorter values ("1", "yes") would match ordinary text and are not real credentials.
_MIN_SECRET_LENGTH = 8


def credential_values(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Map each credential-looking variable's value to its variable name."""
    source = os.environ if env is None else env
    return {
        value: name
        for name, value in sorted(source.items())
        if _CREDENTIAL_NAME.search(name) and len(value.strip()) >= _MIN_SECRET_LENGTH
    }


def find_secret(texts: Iterable[str], secrets: Mapping[str, str]) -> str | None:
    """Return the name of the first secret whose value appears in ``texts``."""
    for text in texts:
        for value, name in secrets.items():
            if value in text:
                return name
    return None


def refuse_secrets(texts: Iterable[str], secrets: Mapping[str, str], *, where: str) -> None:
    """Raise ``SecretLeak`` (naming the variable, never its value) if a secret appears."""
    name = find_secret(texts, secrets)
    if name is not None:
        raise SecretLeak(
            f"refusing to write {where}: it contains the value of {name}. Nothing was written. "
            f"Keep credentials out of prompts and answers (read {name} only in the live "
            "adapter), or unset it if it is not a credential."
        )
