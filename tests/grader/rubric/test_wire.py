"""The rubric as JSON and back (what the batch sends its workers): every rubric the tests
grade with comes back equal, and what the TOML loader refuses the wire decoder refuses too,
with the same words."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from grader.rubric import (
    Rubric,
    RubricError,
    load_rubric,
    parse_rubric,
    rubric_document,
    rubric_from_document,
)
from tests.e2e.test_explained import PINNED
from tests.grader.rubric.test_expectations import EXPECTING, KIT, _with_expectations
from tests.grader.rubric.test_rubric import BASE, REPO, SOURCE, after, reweigh

SENT = "the rubric the batch sent"

# The shapes a rubric takes in the tests: every table, every kind of value.
EXTRAS = {
    "points-table": after(
        BASE,
        'check = "written_summary"',
        "points.entries = 8.5\npoints.boundaries = 6.25\npoints.no_placeholders = 5.25",
    ),
    "named-points-of-a-splitting-check": after(
        BASE, 'check = "loud_failure"', "points.own_replay = 4.99"
    ),
    "odd-weights": reweigh(reweigh(BASE, "loud_failure", "27"), "tracing", "18"),
    "limits": BASE + "\n[limits]\ntimeout_s = 2.5\nbudget_s = 90\nmemory_mb = 512\n",
    "packages": BASE + '\n[packages]\nyaml = "PyYAML>=6,<7"\nhttpx = "httpx[http2]"\n',
    "custom-check": reweigh(BASE, "stretch_goal", "5")
    + """
[[criterion]]
id = "mine"
title = "Mine"
weight = 5
check = "course.checks:score"
full = "All of it"
typical_loss = "Some of it"
[criterion.params]
threshold = "0.5"
mode = "strict"
""",
}


def _limited(text: str, **limits: int) -> str:
    """``text`` with some of its ``[limits]`` set, as the batch's tests set them."""
    for key, value in limits.items():
        text, count = re.subn(rf"^{key} = .*$", f"{key} = {value}", text, flags=re.MULTILINE)
        assert count == 1, key
    return text


def _parsed(text: str) -> Rubric:
    return parse_rubric(text.encode(), source=SOURCE)


def rubrics(tmp_path: Path) -> dict[str, Rubric]:
    """Every rubric the tests grade with, loaded as they load it."""
    course = tmp_path / "course"
    course.mkdir()
    (course / "pinned.toml").write_text(PINNED, "utf-8")  # no regression/ beside it: None
    (course / "short.toml").write_text(_limited(KIT, timeout_s=5, budget_s=7), "utf-8")
    return {
        "shipped": load_rubric(REPO / "rubric" / "bootcamp.toml"),
        "batch-short": load_rubric(course / "short.toml"),
        "pinned-set": load_rubric(course / "pinned.toml"),
        "expectations": _parsed(_with_expectations(EXPECTING)),
        "base": _parsed(BASE),
        **{name: _parsed(text) for name, text in EXTRAS.items()},
    }


def sent(rubric: Rubric) -> dict[str, Any]:
    """The document as a worker reads it: through JSON's own text."""
    document: dict[str, Any] = json.loads(json.dumps(rubric_document(rubric)))
    return document


def test_every_rubric_the_tests_use_comes_back_equal(tmp_path: Path) -> None:
    found = rubrics(tmp_path)
    assert found["pinned-set"].sets == {"refunds@1": None}
    assert found["batch-short"].limits.budget_s == 7
    for name, rubric in found.items():
        back = rubric_from_document(sent(rubric))
        assert back == rubric, name
        assert rubric_document(back) == rubric_document(rubric), name


def test_points_come_back_as_the_exact_cents_they_were(tmp_path: Path) -> None:
    rubric = rubrics(tmp_path)["points-table"]
    summary = next(c for c in rubric.criteria if c.check == "written_summary")
    back = next(
        c for c in rubric_from_document(sent(rubric)).criteria if c.check == "written_summary"
    )
    assert [str(points) for points in back.points.values()] == ["8.50", "6.25", "5.25"]
    assert back.points == summary.points


def _criterion(check: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda tables: next(c for c in tables["criterion"] if c["check"] == check)


def _set(
    key: str, value: object, table: Callable[[dict[str, Any]], dict[str, Any]]
) -> Callable[[dict[str, Any]], None]:
    return lambda tables: table(tables).__setitem__(key, value)


# Each: the rubric file edited as an instructor might, and its tables edited alike.
REFUSED = [
    pytest.param(
        reweigh(BASE, "tracing", "21"),
        _set("weight", 21, _criterion("tracing")),
        id="weights-sum-to-101",
    ),
    pytest.param(
        BASE.replace('check = "tracing"', 'check = "tracing_v2"'),
        _set("check", "tracing_v2", _criterion("tracing")),
        id="unknown-check",
    ),
    pytest.param(
        BASE.replace('id = "traced"', 'id = "total"'),
        _set("id", "total", _criterion("tracing")),
        id="a-gradebook-column",
    ),
    pytest.param(
        BASE.replace('id = "two"', 'id = "Two Words"'),
        _set("id", "Two Words", lambda t: t["case"][1]),
        id="a-bad-case-id",
    ),
    pytest.param(
        after(BASE, 'check = "written_summary"', "points.entries = 1.234"),
        _set(
            "points",
            {"entries": 1.234, "boundaries": 10, "no_placeholders": 8.766},
            _criterion("written_summary"),
        ),
        id="points-past-the-cent",
    ),
    pytest.param(
        after(BASE, 'check = "tracing"', "points.own_replay = 1"),
        _set("points", {"own_replay": 1}, _criterion("tracing")),
        id="points-of-a-check-without-named-ones",
    ),
    pytest.param(
        BASE + "\n[limits]\nbudget_s = 0\n",
        lambda tables: tables["limits"].__setitem__("budget_s", 0),
        id="no-budget",
    ),
    pytest.param(
        BASE + '\n[packages]\njson = "json"\n',
        lambda tables: tables["packages"].__setitem__("json", "json"),
        id="a-standard-library-package",
    ),
    pytest.param(
        after(BASE, 'task = "First task"', 'expect = { outcome = "maybe" }'),
        _set("expect", {"outcome": "maybe"}, lambda t: t["case"][0]),
        id="an-expectation-that-is-none",
    ),
]


def _problem(message: str, where: str) -> str:
    """A refusal without the place it names: ``lab.toml:12`` or the wire's source."""
    return re.sub(rf"^{re.escape(where)}(:\d+)?: ", "", message)


@pytest.mark.parametrize(("toml", "edit"), REFUSED)
def test_what_the_toml_loader_refuses_the_wire_refuses_in_the_same_words(
    toml: str,
    edit: Callable[[dict[str, Any]], None],
) -> None:
    with pytest.raises(RubricError) as loading:
        parse_rubric(toml.encode(), source=SOURCE)
    document = sent(_parsed(BASE))
    edit(document["tables"])
    with pytest.raises(RubricError) as decoding:
        rubric_from_document(document)
    assert str(decoding.value).startswith(f"{SENT}: ")
    assert _problem(str(decoding.value), SENT) == _problem(str(loading.value), SOURCE)


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda d: d.pop("format"), "is not a gradekit.rubric/1 document"),
        (
            lambda d: d.update(tables={**d["tables"], "grading": {}}),
            "unknown top-level table grading; the valid ones are case, criterion, limits, packages",
        ),
        (lambda d: d.update(sha256="not-a-digest"), "sha256 is 'not-a-digest', not 64 hex digits"),
        (
            lambda d: d.update(sets={"refunds@1": "0" * 64}),
            "regression set refunds@1 changed while the batch ran",
        ),
        (lambda d: d.update(sets={"refunds": None}), "regression set refunds: 'refunds' is not"),
        (lambda d: d.update(sets=["refunds@1"]), "sets is not a table"),
    ],
)
def test_what_no_rubric_file_could_give_is_refused(
    tmp_path: Path,
    edit: Callable[[dict[str, Any]], object],
    says: str,
) -> None:
    document = sent(_parsed(BASE))
    document["sets_folder"] = str(tmp_path)  # holds no regression set at all
    edit(document)
    with pytest.raises(RubricError, match=re.escape(says)):
        rubric_from_document(document)
