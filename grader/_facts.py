"""How a fact is found in a text, as a reader would find it: the text and the fact are
both brought to NFKC, format characters (zero-width spaces and joiners, bidi marks) are
dropped, case is folded and every run of whitespace is one space; a fact then matches
where it stands as whole words (``14 days`` is not found in ``140 days``). So
``no re\\u200bfund`` still counts as ``no refund``, and a forbidden fact cannot be hidden
by an invisible character. Pure; ``grader._expect`` re-exports both names.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["mentioned", "normalised"]

_SPACE = re.compile(r"\s+")


def normalised(text: str) -> str:
    """``text`` as facts are compared: NFKC, no format characters, case folded, one space."""
    folded = "".join(
        char for char in unicodedata.normalize("NFKC", text) if unicodedata.category(char) != "Cf"
    ).casefold()
    return _SPACE.sub(" ", folded).strip()


def mentioned(answer: str, fact: str) -> bool:
    """Whether ``fact`` stands in ``answer`` as whole words, once both are ``normalised``."""
    wanted = normalised(fact)
    pattern = rf"(?<!\w){re.escape(wanted)}(?!\w)"
    return re.search(pattern, normalised(answer)) is not None
