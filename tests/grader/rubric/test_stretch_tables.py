"""A lab's own stretch goals, ``[[stretch]]`` in its rubric: imported from the rubric's folder
as a custom check is, refused with the fix where a claim could mean two goals or the code
does not load, part of the rubric's identity, and sent to the batch's workers whole."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.rubric import (
    KIT_GOALS,
    LabGoal,
    RubricError,
    load_rubric,
    parse_rubric,
    rubric_from_document,
)
from grader.rubric import rubric_document as document_of
from grader.scoring import STRETCH_GOALS
from tests.grader.rubric.test_rubric import BASE, SOURCE, line_of

CODE = """\
def evidence(found):
    return None


def basis(found):
    return "it rests on nothing"
"""


@pytest.fixture
def module() -> Iterator[str]:
    """A fresh module name for the goal's code (imports are cached), forgotten afterwards."""
    name = f"lab_goals_{uuid.uuid4().hex}"
    yield name
    sys.modules.pop(name, None)


def _table(module: str, goal_id: str = "retry-budget", **keys: str) -> str:
    lines = [
        f'id = "{goal_id}"',
        'names = ["retry budget", "retries"]',
        f'evidence = "{module}:evidence"',
        f'basis = "{module}:basis"',
    ]
    lines += [f"{key} = {value}" for key, value in keys.items()]
    return "\n[[stretch]]\n" + "\n".join(lines) + "\n"


def _rubric(folder: Path, text: str, code: str | None = CODE, module: str = "") -> Path:
    if code is not None:
        (folder / f"{module}.py").write_text(code, "utf-8")
    path = folder / "rubric.toml"
    path.write_text(text, "utf-8")
    return path


def _refused(path: Path) -> str:
    with pytest.raises(RubricError) as caught:
        load_rubric(path)
    return str(caught.value)


def test_the_kit_goals_a_lab_may_not_reuse_are_the_ones_scoring_knows() -> None:
    assert tuple(STRETCH_GOALS) == KIT_GOALS


def test_a_stretch_table_loads_with_its_functions_imported_from_beside_the_rubric(
    tmp_path: Path, module: str
) -> None:
    before = list(sys.path)
    rubric = load_rubric(_rubric(tmp_path, BASE + _table(module), module=module))
    assert sys.path == before
    assert rubric.stretch == (
        LabGoal(
            "retry-budget",
            ("retry-budget", "retry budget", "retries"),
            f"{module}:evidence",
            f"{module}:basis",
        ),
    )
    code = rubric.stretch_code
    assert sorted(code) == [f"{module}:basis", f"{module}:evidence"]
    assert code[f"{module}:evidence"](None) is None
    assert code[f"{module}:basis"](None) == "it rests on nothing"


def test_names_and_basis_are_optional_and_the_id_always_names_the_goal(
    tmp_path: Path, module: str
) -> None:
    text = BASE + f'\n[[stretch]]\nid = "mine"\nevidence = "{module}:evidence"\n'
    rubric = load_rubric(_rubric(tmp_path, text, module=module))
    assert rubric.stretch == (LabGoal("mine", ("mine",), f"{module}:evidence", ""),)
    assert list(rubric.stretch_code) == [f"{module}:evidence"]


def test_a_changed_goal_is_a_changed_rubric(tmp_path: Path, module: str) -> None:
    base = parse_rubric(BASE.encode(), source=SOURCE)
    goal = parse_rubric((BASE + _table(module)).encode(), source=SOURCE)
    renamed = parse_rubric((BASE + _table(module, "retry-cap")).encode(), source=SOURCE)
    assert len({base.sha256, goal.sha256, renamed.sha256}) == 3
    assert goal != renamed and goal.stretch != renamed.stretch


def test_a_lab_goal_travels_to_the_workers_and_its_code_is_imported_there_again(
    tmp_path: Path, module: str
) -> None:
    rubric = load_rubric(_rubric(tmp_path, BASE + _table(module), module=module))
    sent = json.loads(json.dumps(document_of(rubric)))
    assert sent["tables"]["stretch"] == [
        {
            "id": "retry-budget",
            "names": ["retry-budget", "retry budget", "retries"],
            "evidence": f"{module}:evidence",
            "basis": f"{module}:basis",
        }
    ]
    sys.modules.pop(module)  # as in a fresh worker: nothing imported yet
    back = rubric_from_document(sent)
    assert back == rubric and back.stretch == rubric.stretch
    assert back.stretch_code[f"{module}:basis"](None) == "it rests on nothing"
    assert module in sys.modules


def test_a_rubric_without_goals_sends_the_document_it_sent_before(tmp_path: Path) -> None:
    rubric = parse_rubric(BASE.encode(), source=SOURCE)
    assert "stretch" not in document_of(rubric)["tables"]
    assert "changes" not in document_of(rubric)["tables"]["rubric"]


@pytest.mark.parametrize("goal_id", KIT_GOALS)
def test_a_goal_that_reuses_a_kit_id_is_refused_with_the_fix(
    tmp_path: Path, module: str, goal_id: str
) -> None:
    path = _rubric(tmp_path, BASE + _table(module, goal_id), module=module)
    message = _refused(path)
    line = line_of(path.read_text(), 'id = "' + goal_id)
    assert message.startswith(f"{path}:{line}:")
    assert f"stretch goal id {goal_id!r} is one of the kit's own goals" in message
    assert "give the lab's goal an id of its own" in message


def test_evidence_that_does_not_import_is_refused_at_its_line_with_the_fix(
    tmp_path: Path, module: str
) -> None:
    path = _rubric(
        tmp_path, BASE + _table(module), code="raise RuntimeError('broken')\n", module=module
    )
    message = _refused(path)
    line = line_of(path.read_text(), "evidence = ")
    assert message.startswith(f"{path}:{line}: stretch goal retry-budget: evidence = ")
    assert "RuntimeError: broken" in message
    assert f"put {module}.py in {tmp_path}" in message and "make it import cleanly" in message


def test_evidence_in_a_module_that_is_not_there_is_refused(tmp_path: Path, module: str) -> None:
    path = _rubric(tmp_path, BASE + _table(module), code=None)
    message = _refused(path)
    assert message.startswith(f"{path}:{line_of(path.read_text(), 'evidence = ')}:")
    assert f"importing {module} failed (ModuleNotFoundError" in message
    assert f"put {module}.py in {tmp_path}" in message


def test_a_basis_the_module_does_not_define_is_refused_naming_it(
    tmp_path: Path, module: str
) -> None:
    path = _rubric(
        tmp_path,
        BASE + _table(module),
        code="def evidence(found):\n    return None\n",
        module=module,
    )
    message = _refused(path)
    assert message.startswith(f"{path}:{line_of(path.read_text(), 'basis = ')}:")
    assert (
        f"basis = \"{module}:basis\": {module} defines no 'basis'; define it or fix the name"
        in message
    )


@pytest.mark.parametrize(
    ("table", "key", "said"),
    [
        (
            'id = "x"\nevidence = "mod"',
            "evidence",
            'evidence must name your function as "package.module:function"',
        ),
        ('id = "x"', None, 'evidence must name your function as "package.module:function"'),
        (
            'id = "x"\nevidence = "m:f"\nbasis = 3',
            "basis",
            'basis must name your function as "package.module:function"',
        ),
        ('id = "Retry Budget"\nevidence = "m:f"', "id", "needs an id matching [a-z0-9][a-z0-9-]*"),
        ('id = "x"\nevidence = "m:f"\nnames = "x"', "names", "names must be a list of words"),
        ('id = "x"\nevidence = "m:f"\nnames = [""]', "names", "names must be a list of words"),
        (
            'id = "x"\nevidence = "m:f"\npoints = 3',
            "points",
            "unknown key in [[stretch]] points; the valid ones are basis, evidence, id, names",
        ),
    ],
)
def test_a_malformed_stretch_table_is_refused_at_its_line(
    table: str, key: str | None, said: str
) -> None:
    """At the key's line in the table, or the table's own where the key is missing."""
    text = BASE + "\n[[stretch]]\n" + table + "\n"
    with pytest.raises(RubricError) as caught:
        parse_rubric(text.encode(), source=SOURCE)
    header = line_of(text, "[[stretch]]")
    line = (
        header
        if key is None
        else header
        + table.splitlines().index(
            next(row for row in table.splitlines() if row.startswith(f"{key} = "))
        )
        + 1
    )
    assert str(caught.value).startswith(f"{SOURCE}:{line}:")
    assert said in str(caught.value)


def test_two_goals_with_one_id_are_refused() -> None:
    table = '\n[[stretch]]\nid = "x"\nevidence = "m:f"\n'
    text = BASE + table + table
    with pytest.raises(RubricError) as caught:
        parse_rubric(text.encode(), source=SOURCE)
    first, second = line_of(text, 'id = "x"'), line_of(text, 'id = "x"', 2)
    assert str(caught.value) == (
        f"{SOURCE}:{second}: stretch goal id 'x' appears twice (first "
        f"at {SOURCE}:{first}); give each its own id"
    )
