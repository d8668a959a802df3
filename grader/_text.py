"""Text the grader did not write, as a report may show it: ``quote``.

Any text in a report may come from the submission (an answer, an exception's name, a
FAILURES.md title, a stretch goal's id); every part of the grader that puts such a text in
a sentence quotes it here, so invisible and control characters are escapes and the length
is capped, with a marker.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["FLAGGED", "HEAD", "QUOTE_LIMIT", "TEXT_LIMIT", "flagged", "one_line", "quote"]

# How a finding that asks a person to look at the whole submission starts (a forged
# verdict, a replaced harness function): report.md counts them, the gradebook row names them.
FLAGGED = "flagged for review: "


def flagged(reason: str) -> bool:
    """Whether a gradebook row's ``reason`` asks a person to look at the whole submission:
    a finding that starts with ``FLAGGED``, or a copy of a classmate's work."""
    return FLAGGED.strip(": ") in reason


QUOTE_LIMIT = 500  # characters of one piece of submission text inside a sentence
TEXT_LIMIT = 2000  # characters of one detail, finding or advice as a whole
HEAD = 60  # characters of a call's prompt that feedback names it by

# Characters that could be invisible or act on a terminal: checked one by one.
_SUSPECT = re.compile(r"[^\t\n\x20-\x7e]")
_HIDDEN = frozenset(("Cc", "Cf", "Cs"))  # controls, format characters (bidi), surrogates


def one_line(text: str, most: int = HEAD) -> str:
    """``text`` on one line (each run of white space one space), its first ``most``
    characters, the last of them "…" when it is cut: how feedback names a call."""
    flat = " ".join(text.split())
    return flat if len(flat) <= most else flat[: most - 1] + "…"


def quote(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``text`` as a report may show it: at most ``limit`` characters, nothing hidden.

    Control, format (bidi, zero-width) and surrogate characters are written as Python
    escapes (``\\x1b``, ``\\u202e``); a longer text is cut and ends with
    ``… [cut: N more characters]``, N counted in ``text``. Quoting quoted text changes
    nothing, so a text may be quoted where it is made and again where it is shown.
    """
    if len(text) <= limit:
        shown = _SUSPECT.sub(_visible, text)
        if len(shown) <= limit:
            return shown
    budget = limit - len(_cut(len(text)))
    pieces, used = [], 0
    for char in text:
        piece = _SUSPECT.sub(_visible, char)
        if used + len(piece) > budget:
            break
        pieces.append(piece)
        used += len(piece)
    return "".join(pieces) + _cut(len(text) - len(pieces))


def _visible(match: re.Match[str]) -> str:
    char = match[0]
    if unicodedata.category(char) not in _HIDDEN:
        return char
    code = ord(char)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )


def _cut(count: int) -> str:
    return f"… [cut: {count} more characters]"
