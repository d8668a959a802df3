"""What a failure-log entry says that the grader can check: its anchors, and its copies.

An entry of ``FAILURES.md`` counts when it says something that holds in the submission and
the course: a case of the rubric, a path of the submission, an error Python, the kit or
the submission raises, a command that exists, a key the submission recorded, a name its
code uses (in backticks, or called: ``ask()``), a quotation its code or recordings hold,
a number, a re-record ``DATASET_CHANGES.md`` logs (its case named as re-recorded, or its
reason's words said). A
claim that can be checked and does not hold (a case the rubric lacks, a path of the
submission's own folders that is not there, a key nobody recorded, a command that does not
exist) keeps the entry from counting, and the detail says which. Text that names none of
these ("There was a bug somewhere. It was fixed.") counts for nothing, whatever its form.

An entry equal or nearly equal to the hand-out's example, or to an earlier entry of the same
log, never counts by itself: it is named beside the entry it repeats, for the person who
reviews the summary.
"""

from __future__ import annotations

import builtins
import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import gradekit
from grader._text import quote

__all__ = ["EXAMPLE_ENTRY", "SUBCOMMANDS", "Grounds", "claims", "repeats"]

# The gradekit commands a student may name (``gradekit --help`` lists them; a test holds
# the two lists together).
SUBCOMMANDS = frozenset(
    {
        "record",
        "run",
        "replay",
        "key",
        "cassette",
        "grade",
        "check",
        "report",
        "gradebook",
        "history",
        "ledger",
        "gradescope",
        "starter",
        "new",
        "incident",
        "review",
        "reviews",
        "regression",
        "case",
        "investigate",
        "disposition",
        "approve",
        "dashboard",
    }
)
# The kit's hand-out shows this entry as the form to follow (handout/README.md; a test holds
# them together): pasted in, it is the hand-out's text, not the student's.
EXAMPLE_ENTRY = """\
## The answer changed with the provider's name
- Symptom: make check said case sql-explain answers differently under another label.
- Cause: my agent put provider.name into the first prompt, so each name was a new prompt.
- Fix: the prompt no longer names the provider; I recorded the case again.
"""
_ERRORS = frozenset(
    name
    for source in (vars(builtins), vars(gradekit))
    for name, value in source.items()
    if isinstance(value, type) and issubclass(value, BaseException)
)
_ERROR = re.compile(r"\b([A-Z][A-Za-z0-9]*(?:Error|Exception|Miss|Warning|Interrupt|Exit))\b")
_CLASS = re.compile(r"\b[A-Z][A-Za-z0-9]+\b")  # a class the submission defines, by name
_CASE = re.compile(r"\bcases?[ \t]+[`'\"]?([a-z0-9][a-z0-9_.-]*[a-z0-9])", re.IGNORECASE)
_KEY = re.compile(r"\b[0-9a-f]{16}\b")
_NUMBER = re.compile(
    r"(?<![\w.])\d[\d,.]*(?![\w])|\b\d+(?:ms|s|kb|mb|gb|%)\b|\b(?:two|three|"
    r"four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|"
    r"fifty|hundred|thousand|million)\b",
    re.IGNORECASE,
)  # "one" is not
_PATH = re.compile(
    r"(?<![\w/.~:-])((?:[\w.-]+/)+[\w.-]*|[\w-]+\.(?:py|json|jsonl|md|toml|"
    r"txt|csv|sql|cfg|ini|yaml|yml|sh))(?![\w/])"
)
_SPAN = re.compile(r"(`+)(.+?)\1")
_COMMAND = re.compile(r"^(?:\.venv/bin/)?(gradekit|make)[ \t]+([a-z][\w-]*)")
_PROSE_COMMAND = re.compile(r"\b(gradekit|make)[ \t]+([a-z][\w-]*)")
_WORDS = re.compile(r"[^\W_]+")
_NAME = re.compile(r"[A-Za-z_][\w.]*(?:\(\))?")  # a code span that is a name: `notes`, `ask()`
_CALLED = re.compile(r"\b[A-Za-z_]\w*\(\)")  # ask(), in prose
_QUOTED = re.compile(r'"([^"\n]+)"|\u201c([^\u201d\n]+)\u201d')  # "what it printed"
_RECORDED_AGAIN = re.compile(
    r"--rerecord|\bre-?record|\brecord(?:ed|ing)?\b[^.\n]{0,40}?\bagain\b", re.IGNORECASE
)
_KIT = frozenset(gradekit.__all__)  # the kit's names: Traced, TracedTools, Replay, ...
NEAR = 0.8  # word-sequence similarity at which one entry repeats another
REASON_SAID = 0.6  # the share of a logged reason's words an entry says to match it


@dataclass(frozen=True, slots=True)
class Grounds:
    """What an entry's claims are checked against: the rubric's cases and the submission's
    own files, recorded keys, Makefile targets and exception classes, and the example
    entries its hand-out shows (``README.md``'s fenced Markdown, and the kit's)."""

    cases: frozenset[str] = frozenset()
    files: frozenset[str] = frozenset()  # relative POSIX paths: every file and folder
    keys: frozenset[str] = frozenset()
    targets: frozenset[str] = frozenset()  # the submission's Makefile's
    errors: frozenset[str] = frozenset()  # the classes its Python defines (its errors)
    identifiers: frozenset[str] = frozenset()  # every name its Python uses
    text: str = ""  # its Python and its recordings' prompts and answers, for a quotation
    rerecords: tuple[tuple[str, str], ...] = ()  # DATASET_CHANGES.md's (case, reason)
    examples: tuple[str, ...] = field(default=(EXAMPLE_ENTRY,))
    # The submission's top-level names (a path is its own only under one of them), and every
    # path's ends after a "/" (where a shorter path an entry names may be found), made once.
    tops: frozenset[str] = field(init=False, repr=False, compare=False)
    tails: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tops", frozenset(path.partition("/")[0] for path in self.files))
        object.__setattr__(
            self,
            "tails",
            frozenset(
                path[at + 1 :]
                for path in self.files
                for at in (i for i, char in enumerate(path) if char == "/")
            ),
        )


def claims(text: str, grounds: Grounds) -> tuple[list[str], list[str]]:
    """What ``text`` names that holds, and what it names that does not, each in words."""
    held: list[str] = _rerecords(text, grounds)
    broken: list[str] = []
    for match in _CASE.finditer(text):
        name = match[1]
        if name in grounds.cases:
            held.append(f"the case {name}")
        elif "-" in name and not _NUMBER.fullmatch(name):
            broken.append(f"the case {name}, which the rubric does not have")
    held += [
        f"the case {case}"
        for case in sorted(grounds.cases)
        if re.search(rf"(?<![\w-]){re.escape(case)}(?![\w-])", text)
    ]
    for match in _PATH.finditer(text):
        path = match[1].rstrip(".").removeprefix("./")
        if any(mark in path for mark in "<>*{}") or not path:
            continue
        if path.rstrip("/") in grounds.files or path in grounds.tails:
            held.append(path)
        elif path.partition("/")[0] in grounds.tops and "/" in path:
            broken.append(f"{path}, which the submission does not have")
    for match in _ERROR.finditer(text):
        if match[1] in _ERRORS:
            held.append(match[1])
    held += [name for name in _CLASS.findall(text) if name in grounds.errors]
    for key in _KEY.findall(text):
        (held if key in grounds.keys else broken).append(
            f"the key {key}" + ("" if key in grounds.keys else ", which nothing recorded")
        )
    spans = [span[2].strip() for span in _SPAN.finditer(text)]
    for span in spans:  # a make target is checked only where the submission has a Makefile
        command = _COMMAND.match(span)
        if (
            command
            and not _exists(command[1], command[2], grounds)
            and (command[1] == "gradekit" or "Makefile" in grounds.files)
        ):
            broken.append(f"`{command[0]}`, which is no command here")
    for program, name in _PROSE_COMMAND.findall(text):
        if _exists(program, name, grounds):
            held.append(f"{program} {name}")
    for name in [span for span in spans if _NAME.fullmatch(span)] + _CALLED.findall(text):
        bare = name.rstrip("()").rpartition(".")[2]
        if bare in grounds.identifiers or bare in _KIT:  # no union built per name
            held.append(f"`{name}`")
    for quoted in _QUOTED.findall(text):
        said = next(part for part in quoted if part).strip()
        if len(said) >= 6 and said in grounds.text:
            held.append(f'"{said}"')
    if _NUMBER.search(_KEY.sub(" ", text)):
        held.append("a number")
    return list(dict.fromkeys(held)), list(dict.fromkeys(broken))


def _rerecords(text: str, grounds: Grounds) -> list[str]:
    """The logged re-records ``text`` matches: it says it recorded the case again and names
    it, or it says most of the words of the reason the log gives."""
    said = set(_words(text))
    again = _RECORDED_AGAIN.search(text) is not None
    found = []
    for case, reason in grounds.rerecords:
        words = {word for word in _words(reason) if len(word) > 3}
        if (again and re.search(rf"(?<![\w-]){re.escape(case)}(?![\w-])", text)) or (
            len(words) >= 2 and len(words & said) >= REASON_SAID * len(words)
        ):
            found.append(
                f"the re-record of {case} that DATASET_CHANGES.md logs "
                f"(reason: '{quote(reason, 80)}')"
            )
    return found


def _exists(program: str, name: str, grounds: Grounds) -> bool:
    return name in (SUBCOMMANDS if program == "gradekit" else grounds.targets)


def _words(text: str) -> list[str]:
    return _WORDS.findall(text.lower())


def repeats(text: str, earlier: Sequence[tuple[str, str]]) -> str | None:
    """The first of ``earlier`` (name, text) that ``text`` equals or nearly equals: the
    same words in nearly the same order. None when it repeats none."""
    words = _words(text)
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq1(words)
    for name, other in earlier:
        theirs = _words(other)
        if not words or not theirs:
            continue
        matcher.set_seq2(theirs)
        # Each ratio bounds the next from above: most pairs are told apart by their length.
        if (
            matcher.real_quick_ratio() >= NEAR
            and matcher.quick_ratio() >= NEAR
            and matcher.ratio() >= NEAR
        ):
            return name
    return None
