"""One word, one meaning: in the grader's code as in docs/glossary.md.

The glossary lists each term once (a bold phrase is a term it defines). Two words had many
meanings and are held here: "record" (only the verb, run live once and write recordings,
and the trace record, a line of the agent's trace: never a ledger's append, a CSV row or a
case's outcome) and "review" (only a person's verdict on a criterion: the code calls the
stretch goal's check of a re-recording *re-recording*). And no public class name is used
twice in the grader, so a name says which thing it is.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GRADER = ROOT / "grader"
GLOSSARY = ROOT / "docs" / "glossary.md"
# The words of "record" that are recordings themselves, never another meaning.
_RECORDINGS = re.compile(r"recording|recorded|rerecord", re.IGNORECASE)
# Every name in the grader that says "record", as (module, name), and which glossary term
# it means. A new one is classified here, under a term the glossary defines.
RECORD_MEANINGS: dict[str, frozenset[tuple[str, str]]] = {
    "record": frozenset(
        {
            ("grader.cli._incident", "_add_record"),
            ("grader.cli._incident", "_record"),
            ("grader.cli._incident", "record"),
            ("grader.cli._incident", "recorder"),
            ("grader.cli._record", "_add_record"),
            ("grader.cli._record", "_record"),
            ("grader.cli._record", "_record_cases"),
            ("grader.cli._record", "record"),
            ("grader.cli._record", "recorder"),
            ("grader.grading._regression", "record"),
        }
    ),
    "trace record": frozenset(
        {
            ("grader._model", "TraceRecord"),
            ("grader._model", "trace_records"),
            ("grader.outputs._calls", "_trace_record"),
            ("grader.outputs._calls", "record"),
            ("grader.sandbox._sandbox", "record"),
            ("grader.sandbox._sandbox", "records"),
            ("grader.scoring._checks", "_judge_records"),
            ("grader.scoring._checks", "_record_ok"),
            ("grader.scoring._checks", "_record_problem"),
            ("grader.scoring._checks", "record"),
            ("grader.scoring._traces", "pair_records"),
            ("grader.scoring._traces", "record"),
            ("grader.scoring._traces", "records"),
        }
    ),
}
# The one name that says both: the check of the stretch goal ``rerecord-review``, named
# for the goal's id (a rubric's contract).
REVIEW_OF_RERECORDING = {("grader.scoring._checks", "_rerecord_review")}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def defined_names() -> Iterator[tuple[str, str, ast.AST]]:
    """(module, name, node) for every name the grader defines: functions, classes, their
    arguments, and every name assigned."""
    for path in sorted(GRADER.rglob("*.py")):
        module = _module(path)
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                yield module, node.name, node
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                yield module, node.id, node
            elif isinstance(node, ast.arg):
                yield module, node.arg, node


def unclassified(names: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """The names that say "record" without being a recording's word or classified."""
    classified = set().union(*RECORD_MEANINGS.values())
    return sorted(
        pair
        for pair in names
        if "record" in pair[1].lower()
        and not _RECORDINGS.search(pair[1])
        and pair not in classified
    )


def misnamed_reviews(names: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """The names that say "review" for a re-recording's work: one that also says
    "record" (but the stretch goal's check), or any where recordings are made or read."""
    return sorted(
        (module, name)
        for module, name in names
        if "review" in name.lower()
        and (
            ("record" in name.lower() and (module, name) not in REVIEW_OF_RERECORDING)
            or module.startswith("grader.recordings")
            or "record" in module.rpartition(".")[2]
        )
    )


def glossary_terms() -> Counter[str]:
    """Each bold phrase of the glossary (a term it defines), and how often it is bold."""
    return Counter(
        term.lower() for term in re.findall(r"\*\*([^*]+)\*\*", GLOSSARY.read_text("utf-8"))
    )


def test_the_glossary_defines_each_term_once() -> None:
    assert [term for term, count in glossary_terms().items() if count > 1] == []


def test_no_public_class_name_is_used_twice_in_the_grader() -> None:
    classes = Counter(
        name
        for _, name, node in defined_names()
        if isinstance(node, ast.ClassDef) and not name.startswith("_")
    )
    assert sorted(name for name, count in classes.items() if count > 1) == []


def test_record_means_the_verb_or_a_trace_record_and_nothing_else() -> None:
    terms = glossary_terms()
    assert all(term in terms for term in RECORD_MEANINGS)  # each meaning is a glossary term
    found = {(module, name) for module, name, _ in defined_names()}
    assert unclassified(found) == [], "classify each under a glossary term, or rename"
    classified = set().union(*RECORD_MEANINGS.values())
    assert sorted(classified - found) == []  # nothing listed that the code no longer has
    verb, trace = RECORD_MEANINGS["record"], RECORD_MEANINGS["trace record"]
    assert not verb & trace
    # The verb lives where a recording is made; a trace record where traces are read.
    assert {module for module, _ in verb} <= {
        "grader.cli._incident",
        "grader.cli._record",
        "grader.grading._regression",
    }


def test_review_means_a_persons_verdict_and_never_a_re_recordings_check() -> None:
    terms = glossary_terms()
    assert "review" in terms and "re-record review" in terms
    found = {(module, name) for module, name, _ in defined_names()}
    assert any("review" in name.lower() for _, name in found)  # the people's reviews
    assert misnamed_reviews(found) == []
    assert found >= REVIEW_OF_RERECORDING


def test_the_checks_above_catch_a_second_meaning_put_back() -> None:
    """``record_grading`` (a ledger's append under the verb's name) and a ``_review`` where
    recordings are re-recorded are what these tests were written for."""
    put_back = {
        ("grader.ledger._ledger", "record_grading"),
        ("grader.grading._rerecording", "_review"),
    }
    assert unclassified(put_back) == [("grader.ledger._ledger", "record_grading")]
    assert misnamed_reviews(put_back) == [("grader.grading._rerecording", "_review")]
