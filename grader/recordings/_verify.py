"""``gradekit cassette verify``: everything that can be wrong with a committed cassette."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from gradekit import CassetteError
from gradekit.internal import (
    commands,
    credential_values,
    decode_cassette,
    find_secret,
    journal_path,
)

__all__ = ["verify_cassette"]


def verify_cassette(path: Path, env: Mapping[str, str] | None = None) -> tuple[list[str], int]:
    """Return the problems found in the cassette at ``path`` and its number of entries."""
    try:
        cassette = decode_cassette(path.read_bytes(), source=str(path), case=path.stem)
    except OSError as exc:
        return [f"cannot read it ({exc.strerror}); check the path"], 0
    except CassetteError as exc:
        return [str(exc)], 0
    problems = []
    secrets = credential_values(env)
    for key, entry in cassette.entries.items():
        name = find_secret((entry.prompt or "", entry.response, entry.provider), secrets)
        if name is not None:
            problems.append(
                f"entry {key} contains the value of {name}: delete the entry, rotate the "
                "credential, and record again"
            )
    if journal_path(path).exists():
        problems.append(
            f"{journal_path(path)} holds answers not yet folded in: run "
            f"`{commands.RECORD_CASE(case=cassette.case or path.stem)}` (it folds them first) and "
            "commit the result"
        )
    return problems, len(cassette.entries)
