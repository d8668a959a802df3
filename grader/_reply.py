"""A reply template (``reply_template``): the fixed words every answer of a case shares,
around ``{name}`` placeholders that each stand for some non-empty text, as in
``"Decision: {decision}. Reason: {reason}."``. Pure.

An answer follows a template when the template's fixed parts appear in it, in order, each
compared as facts are (``grader._facts``: NFKC, no format characters, case folded, whitespace
runs one space): a fixed part that begins or ends with a letter or digit matches there as
a whole word, unless the template glues it to a placeholder (``{amount}USD``). The first
fixed part is found at its first place, each next one at its first place after the last,
with text for every placeholder between; where that fails is where the answer parts from
the template.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gradekit import UsageError
from grader._facts import normalised

__all__ = ["check_template", "departure"]

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_EXAMPLE = 'e.g. "Decision: {decision}. Reason: {reason}."'


def check_template(template: str, where: str) -> None:
    """A ``UsageError`` naming ``where`` and the fix unless ``template`` is one: balanced
    ``{name}`` placeholders, at least one, and fixed text beside them."""
    stray = _PLACEHOLDER.sub("", template)
    brace = next((at for at, char in enumerate(stray) if char in "{}"), -1)
    if brace >= 0:
        raise UsageError(
            f"{where} = {template!r} has an unbalanced or unnamed brace; write "
            "each placeholder as {name} (letters, digits and _) with no other "
            f"brace, {_EXAMPLE}"
        )
    if not _PLACEHOLDER.search(template):
        raise UsageError(
            f"{where} = {template!r} has no {{name}} placeholder: mark the part "
            f"that varies from answer to answer, {_EXAMPLE}; a fact every answer "
            "states is a mentions entry"
        )
    if not normalised(stray):
        raise UsageError(
            f"{where} = {template!r} has no fixed text, so any answer follows "
            f"it: write the words every answer shares around the placeholders, "
            f"{_EXAMPLE}"
        )


@dataclass(frozen=True, slots=True)
class _Part:
    shown: str  # the fixed part as the template writes it, stripped
    pattern: re.Pattern[str]
    before: str  # the placeholder that stands right before it; "" when none


def _parts(template: str) -> tuple[list[_Part], str]:
    """The template's fixed parts, in order, and the placeholder after the last ("")."""
    pieces = _PLACEHOLDER.split(template)  # fixed, name, fixed, name, ..., fixed
    parts, pending = [], ""
    for index in range(0, len(pieces), 2):
        raw, wanted = pieces[index], normalised(pieces[index])
        if not wanted:  # nothing fixed between two placeholders: they are one stretch
            pending = pending or (pieces[index + 1] if index + 1 < len(pieces) else "")
            continue
        glued_left = index > 0 and not raw[:1].isspace()
        glued_right = index + 1 < len(pieces) and not raw[-1:].isspace()
        pattern = (
            ("" if glued_left or not wanted[0].isalnum() else r"(?<!\w)")
            + re.escape(wanted)
            + ("" if glued_right or not wanted[-1].isalnum() else r"(?!\w)")
        )
        parts.append(_Part(raw.strip(), re.compile(pattern), pending))
        pending = pieces[index + 1] if index + 1 < len(pieces) else ""
    return parts, pending


def departure(template: str, answer: str) -> str:
    """Where ``answer`` parts from ``template``, in words ("" when it follows it): the
    fixed part it lacks, or the placeholder nothing stands for."""
    text = normalised(answer)
    parts, tail = _parts(template)
    at, last = 0, ""
    for part in parts:
        start = at
        if part.before:
            ahead = text[at:].lstrip()
            start = len(text) - len(ahead) + 1  # one visible character stands for it
        found = part.pattern.search(text, start) if start <= len(text) else None
        if found is None:
            if part.before and part.pattern.search(text, at):
                return f"nothing stands for {{{part.before}}} before {part.shown!r}"
            return f"no {part.shown!r}" + (f" after {last!r}" if last else "")
        at, last = found.end(), part.shown
    if tail and not text[at:].strip():
        return f"nothing stands for {{{tail}}} after {last!r}"
    return ""
