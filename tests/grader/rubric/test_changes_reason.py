"""A rubric version after the first carries its reason (``[rubric] changes``): one without is
refused with the fix, from the file and from the batch's wire alike. The kit's own version
2, released before the key existed, loads as it is: its bytes (and so every course's ledger
and every report's digest) stay as they were."""

from __future__ import annotations

import json

import pytest

from grader.rubric import (
    KIT_RUBRIC,
    RubricError,
    load_rubric,
    parse_rubric,
    rubric_document,
    rubric_from_document,
)
from tests.grader.rubric.test_rubric import BASE, SOURCE, line_of

KIT = KIT_RUBRIC.read_text("utf-8")
FIX = 'add changes = "..." under [rubric], saying what changed since version'


def _refusal(text: str) -> str:
    with pytest.raises(RubricError) as caught:
        parse_rubric(text.encode(), source=SOURCE)
    return str(caught.value)


@pytest.mark.parametrize("version", [2, 3, 12])
def test_a_later_version_without_a_reason_is_refused_at_its_version_line(version: int) -> None:
    text = BASE.replace("version = 1", f"version = {version}")
    assert _refusal(text) == (
        f"{SOURCE}:{line_of(text, 'version = ')}: version {version} gives no reason for its "
        f"change: {FIX} {version - 1} and why (the ledger keeps it, and a grade's history "
        "shows it beside what changed; a version a ledger already graded with takes a new "
        "number too)"
    )


def test_a_blank_reason_is_no_reason_and_is_refused_at_its_own_line() -> None:
    text = BASE.replace("version = 1", 'version = 2\nchanges = "  "')
    message = _refusal(text)
    assert message.startswith(f"{SOURCE}:{line_of(text, 'changes = ')}: version 2 gives no reason")
    assert FIX in message


def test_a_later_version_with_its_reason_loads_and_keeps_it() -> None:
    text = BASE.replace("version = 1", 'version = 2\nchanges = " tracing weighs more "')
    rubric = parse_rubric(text.encode(), source=SOURCE)
    assert (rubric.version, rubric.changes) == (2, "tracing weighs more")


def test_a_first_version_needs_no_reason() -> None:
    assert parse_rubric(BASE.encode(), source=SOURCE).changes == ""


def test_the_kits_own_version_2_loads_as_shipped_and_only_it() -> None:
    """The exception is the kit's rubric id at version 2: a lab's copy under its own id, or
    the kit's next version, says why like any other."""
    assert "\nchanges" not in KIT and "\nversion = 2\n" in KIT
    kit = load_rubric(KIT_RUBRIC)
    assert (kit.id, kit.version, kit.changes) == ("provider-swap-lab", 2, "")
    own = KIT.replace('id = "provider-swap-lab"', 'id = "my-lab"', 1)
    assert "version 2 gives no reason" in _refusal(own)
    assert "version 3 gives no reason" in _refusal(KIT.replace("version = 2", "version = 3", 1))


def test_the_reason_travels_to_the_workers_and_a_document_without_it_is_refused() -> None:
    text = BASE.replace("version = 1", 'version = 2\nchanges = "tracing weighs more"')
    rubric = parse_rubric(text.encode(), source=SOURCE)
    sent = json.loads(json.dumps(rubric_document(rubric)))
    assert sent["tables"]["rubric"]["changes"] == "tracing weighs more"
    assert rubric_from_document(sent) == rubric
    del sent["tables"]["rubric"]["changes"]
    with pytest.raises(RubricError) as caught:
        rubric_from_document(sent)
    assert str(caught.value).startswith("the rubric the batch sent: version 2 gives no reason")
