"""Rubric files: the shipped rubric, every validation error with its line, exact points."""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from grader import Limits
from grader.rubric import (
    SUBCHECKS,
    Criterion,
    Rubric,
    RubricError,
    check_maxima,
    distribute,
    load_cases,
    load_custom_check,
    load_rubric,
    parse_rubric,
    per_case_points,
)

REPO = Path(__file__).resolve().parents[3]
SOURCE = "lab.toml"

BASE = """\
[rubric]
id = "lab"
version = 1
title = "A lab"

[[case]]
id = "one"
task = "First task"

[[case]]
id = "two"
task = \"\"\"Second task, over
[two lines] with id = "one" inside the string\"\"\"

[[case]]
id = "three"
task = "Third task"

[[criterion]]
id = "stable"
title = "Stable"
weight = 25
check = "contract_stability"
full = "Same score under two labels"
typical_loss = "Depends on the label"

[[criterion]]
id = "loud"
title = "Loud"
weight = 25
check = "loud_failure"
full = "Misses propagate"
typical_loss = "Returns an empty string"

[[criterion]]
id = "traced"
title = "Traced"
weight = 20
check = "tracing"
full = "Every call traced"
typical_loss = "Nothing traced"

[[criterion]]
id = "summary"
title = "Summary"
weight = 20
check = "written_summary"
full = "An honest log"
typical_loss = "Says it works"

[[criterion]]
id = "stretch"
title = "Stretch"
weight = 10
check = "stretch_goal"
full = "One goal finished"
typical_loss = "Three started"
"""


def line_of(text: str, needle: str, occurrence: int = 1) -> int:
    """1-based line of the ``occurrence``-th line that starts with ``needle``."""
    hits = [n for n, line in enumerate(text.splitlines(), 1) if line.startswith(needle)]
    return hits[occurrence - 1]


def after(text: str, anchor: str, added: str) -> str:
    """``text`` with the line ``added`` inserted after the line ``anchor``."""
    return text.replace(f"{anchor}\n", f"{anchor}\n{added}\n", 1)


def reweigh(text: str, check: str, weight: str) -> str:
    """``text`` with the weight of the criterion checked by ``check`` set to ``weight``."""
    return re.sub(rf'weight = .*\ncheck = "{check}"', f'weight = {weight}\ncheck = "{check}"', text)


def error_of(text: str) -> str:
    with pytest.raises(RubricError) as caught:
        parse_rubric(text.encode(), source=SOURCE)
    return str(caught.value)


def criterion(rubric_text: str, criterion_id: str) -> tuple[Rubric, Criterion]:
    rubric = parse_rubric(rubric_text.encode(), source=SOURCE)
    found = next(c for c in rubric.criteria if c.id == criterion_id)
    return rubric, found


# -- the shipped rubric -----------------------------------------------------------------


def test_the_shipped_rubric_loads_with_five_criteria_summing_to_100_and_four_cases() -> None:
    path = REPO / "rubric" / "bootcamp.toml"
    rubric = load_rubric(path)
    assert [c.id for c in rubric.criteria] == [
        "contract_stability",
        "loud_failure",
        "tracing",
        "written_summary",
        "stretch_goal",
    ]
    assert [c.weight for c in rubric.criteria] == [30, 25, 20, 15, 10]
    assert sum(c.weight for c in rubric.criteria) == 100
    assert len(rubric.cases) == 4
    assert list(rubric.cases) == load_cases(path)
    assert (rubric.id, rubric.version) == ("provider-swap-lab", 2)
    assert rubric.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_shipped_rubric_scores_each_case_of_contract_stability_at_7_50() -> None:
    rubric = load_rubric(REPO / "rubric" / "bootcamp.toml")
    stability = rubric.criteria[0]
    assert set(per_case_points(rubric, stability).values()) == {Decimal("7.50")}
    for item in rubric.criteria:
        assert sum(check_maxima(rubric, item).values()) == item.weight


def test_defaults_give_the_documented_sub_check_points_at_the_shipped_weights() -> None:
    rubric = load_rubric(REPO / "rubric" / "bootcamp.toml")
    points = {c.id: dict(c.points) for c in rubric.criteria}
    assert points["written_summary"] == {
        "entries": Decimal("6.00"),
        "boundaries": Decimal("4.00"),
        "no_placeholders": Decimal("5.00"),
    }
    assert points["stretch_goal"] == {"evidence": Decimal("6.00"), "write_up": Decimal("4.00")}
    assert points["loud_failure"] == {"own_replay": Decimal("5.00")}
    assert points["tracing"] == {}


# -- points -------------------------------------------------------------------------------


@pytest.mark.parametrize(("total", "parts"), [(25, 3), (20, 3), (10, 7), (1, 3), (30, 4)])
def test_distribute_sums_exactly_and_gives_extra_cents_to_the_first(total: int, parts: int) -> None:
    shares = distribute(Decimal(total), [1] * parts)
    assert sum(shares) == total
    assert all(share == share.quantize(Decimal("0.01")) for share in shares)
    assert shares == sorted(shares, reverse=True)
    assert max(shares) - min(shares) <= Decimal("0.01")


def test_25_points_over_3_cases_are_8_34_8_33_8_33_in_case_order() -> None:
    rubric, stable = criterion(BASE, "stable")
    assert per_case_points(rubric, stable) == {
        "one": Decimal("8.34"),
        "two": Decimal("8.33"),
        "three": Decimal("8.33"),
    }


def test_named_points_come_off_the_weight_before_the_split_over_cases() -> None:
    text = after(BASE, 'check = "loud_failure"', "points.own_replay = 4")
    rubric, loud = criterion(text, "loud")
    assert check_maxima(rubric, loud) == {
        "one": Decimal("7.00"),
        "two": Decimal("7.00"),
        "three": Decimal("7.00"),
        "own_replay": Decimal("4.00"),
    }


def test_a_points_table_replaces_the_defaults_and_keeps_exact_decimals() -> None:
    text = BASE + "\n[criterion.points]\nevidence = 2.5\nwrite_up = 7.50\n"
    rubric, stretch = criterion(text, "stretch")
    assert dict(stretch.points) == {
        "evidence": Decimal("2.50"),
        "write_up": Decimal("7.50"),
    }
    assert per_case_points(rubric, stretch) == {}


def test_default_points_scale_to_another_weight_and_still_sum_to_it() -> None:
    text = reweigh(reweigh(BASE, "written_summary", "15"), "stretch_goal", "15")
    _, stretch = criterion(text, "stretch")
    assert dict(stretch.points) == {
        "evidence": Decimal("9.00"),
        "write_up": Decimal("6.00"),
    }
    _, summary = criterion(BASE, "summary")
    assert sum(summary.points.values()) == 20
    # 8, 5.333.., 6.666..: the cent left over goes to the part rounded down most
    assert dict(summary.points) == {
        "entries": Decimal("8.00"),
        "boundaries": Decimal("5.33"),
        "no_placeholders": Decimal("6.67"),
    }


# -- errors point at the line and say the fix --------------------------------------------


def test_weights_that_do_not_sum_to_100_say_what_they_sum_to() -> None:
    text = BASE.replace("weight = 10", "weight = 5")
    message = error_of(text)
    assert f"{SOURCE}:{line_of(text, 'weight = 25')}:" in message
    assert "must sum to 100, they sum to 95" in message
    assert "stretch 5" in message


def test_an_unknown_check_lists_the_built_in_ones_at_its_line() -> None:
    text = BASE.replace('check = "tracing"', 'check = "tracin"')
    message = error_of(text)
    line = line_of(text, 'check = "tracin"')
    assert message.startswith(f"{SOURCE}:{line}:")
    assert "unknown check 'tracin'" in message
    for name in SUBCHECKS:
        assert name in message
    assert "package.module:function" in message


def test_a_case_id_twice_points_at_the_second_and_the_first() -> None:
    text = BASE.replace('id = "three"', 'id = "one"')
    message = error_of(text)
    first, second = line_of(text, 'id = "one"'), line_of(text, 'id = "one"', 2)
    assert message.startswith(f"{SOURCE}:{second}:")
    assert f"first at {SOURCE}:{first}" in message
    assert "case ids are unique" in message


@pytest.mark.parametrize("bad", ["Two", "-two", "two_cases", ""])
def test_a_case_id_must_name_a_cassette_file(bad: str) -> None:
    line = f'id = "{bad}"'
    text = BASE.replace('id = "two"', line)
    message = error_of(text)
    assert message.startswith(f"{SOURCE}:{line_of(text, line)}:")
    assert "[a-z0-9][a-z0-9-]*" in message


def test_a_criterion_id_twice_is_an_error_at_the_second() -> None:
    text = BASE.replace('id = "traced"', 'id = "loud"')
    message = error_of(text)
    second = line_of(text, 'id = "loud"', 2)
    assert message.startswith(f"{SOURCE}:{second}:")
    assert "criterion id 'loud' appears twice" in message


@pytest.mark.parametrize("weight", ["0", "-5", "2.5", "true", '"20"'])
def test_a_weight_must_be_a_positive_whole_number(weight: str) -> None:
    text = reweigh(BASE, "tracing", weight)
    message = error_of(text)
    assert message.startswith(f"{SOURCE}:{line_of(text, f'weight = {weight}')}:")
    assert "'traced' needs weight = a positive whole number" in message


@pytest.mark.parametrize(
    "line",
    [
        'title = "Stable"',
        'check = "contract_stability"',
        'full = "Same score under two labels"',
        'typical_loss = "Depends on the label"',
    ],
)
def test_a_criterion_without_a_required_key_names_it(line: str) -> None:
    text = BASE.replace(line + "\n", "")
    message = error_of(text)
    assert message.startswith(f"{SOURCE}:{line_of(text, '[[criterion]]')}:")
    assert f"criterion 'stable' needs {line.split(' =')[0]} = " in message


def test_a_misspelt_criterion_key_lists_the_valid_ones() -> None:
    text = BASE.replace('weight = 25\ncheck = "contract', 'wieght = 25\ncheck = "contract')
    message = error_of(text)
    assert message.startswith(f"{SOURCE}:{line_of(text, 'wieght')}:")
    assert "unknown key in [[criterion]] wieght" in message
    assert "weight" in message


@pytest.mark.parametrize(
    ("key", "line"),
    [("id", 'id = "lab"'), ("version", "version = 1"), ("title", 'title = "A lab"')],
)
def test_the_rubric_table_needs_id_version_and_title(key: str, line: str) -> None:
    text = BASE.replace(line + "\n", "")
    assert f"[rubric] needs {key} = " in error_of(text)


def test_a_version_of_zero_is_refused_at_its_line() -> None:
    text = BASE.replace("version = 1", "version = 0")
    assert error_of(text).startswith(f"{SOURCE}:{line_of(text, 'version')}: [rubric] needs")


def test_no_rubric_table_says_to_add_one() -> None:
    assert "no [rubric] table" in error_of(BASE[BASE.index("[[case]]") :])


def test_a_toml_syntax_error_carries_line_and_column() -> None:
    text = BASE.replace('title = "Traced"', "title = Traced")
    message = error_of(text)
    assert message.startswith(f"{SOURCE}:{line_of(text, 'title = Traced')}:9: not valid TOML")
    assert "fix the syntax there" in message


def test_a_file_that_is_not_utf8_says_so() -> None:
    with pytest.raises(RubricError, match="byte 0 is not UTF-8"):
        parse_rubric(b"\xff[rubric]", source=SOURCE)


def test_a_points_table_may_only_name_the_checks_sub_checks() -> None:
    text = BASE + "\n[criterion.points]\nevidence = 6\nproof = 4\n"
    message = error_of(text)
    assert message.startswith(f"{SOURCE}:{line_of(text, 'proof = 4')}:")
    assert "unknown sub-check of stretch_goal proof; the valid ones are evidence, write_up" in (
        message
    )


def test_a_check_without_named_sub_checks_refuses_any_points() -> None:
    text = after(BASE, 'check = "tracing"', "points.everything = 1")
    assert "no named sub-checks" in error_of(text)


def test_points_of_a_summing_check_must_equal_the_weight() -> None:
    text = BASE + "\n[criterion.points]\nevidence = 6\nwrite_up = 3\n"
    message = error_of(text)
    assert message.startswith(f"{SOURCE}:{line_of(text, '[criterion.points]')}:")
    assert "must sum to the weight 10, they sum to 9" in message


def test_named_points_of_a_splitting_check_must_leave_some_for_every_case() -> None:
    text = after(BASE, 'check = "loud_failure"', "points.own_replay = 25")
    message = error_of(text)
    assert message.startswith(f"{SOURCE}:{line_of(text, 'points.own_replay')}:")
    assert "must stay below the weight 25" in message


@pytest.mark.parametrize("value", ["2.555", "-1", '"two"', "nan", "inf", "1e30"])
def test_a_point_value_is_a_non_negative_number_with_two_places(value: str) -> None:
    text = BASE + f"\n[criterion.points]\nevidence = {value}\nwrite_up = 4\n"
    message = error_of(text)
    assert message.startswith(f"{SOURCE}:{line_of(text, 'evidence =')}: points.evidence")


def test_a_criterion_id_that_is_a_gradebook_column_is_refused() -> None:
    text = BASE.replace('id = "traced"', 'id = "total"')
    assert "is a gradebook column" in error_of(text)


# -- limits -------------------------------------------------------------------------------


def test_a_limits_table_sets_the_sandbox_limits_and_keeps_the_defaults_of_the_rest() -> None:
    rubric = parse_rubric(
        (BASE + "\n[limits]\ntimeout_s = 2.5\nmemory_mb = 512\n").encode(), source=SOURCE
    )
    assert rubric.limits == Limits(timeout_s=2.5, memory_mb=512)


def test_an_unknown_limit_lists_the_valid_ones_at_its_line() -> None:
    text = BASE + "\n[limits]\ntimeout = 5\n"
    message = error_of(text)
    assert message.startswith(f"{SOURCE}:{line_of(text, 'timeout = 5')}: unknown limit timeout")
    assert "timeout_s, memory_mb, cpu_s, file_mb, open_files, output_kb" in message


@pytest.mark.parametrize(
    "setting", ["timeout_s = 0", "memory_mb = -1", "cpu_s = 1.5", "open_files = true"]
)
def test_a_limit_must_be_positive(setting: str) -> None:
    text = BASE + f"\n[limits]\n{setting}\n"
    message = error_of(text)
    key = setting.split(" =")[0]
    assert message.startswith(f"{SOURCE}:{line_of(text, setting)}: limits.{key} must be")


def test_an_unknown_top_level_table_is_an_error() -> None:
    text = BASE + "\n[limit]\ntimeout_s = 5\n"
    assert error_of(text).startswith(f"{SOURCE}:{line_of(text, '[limit]')}: unknown top-level")


# -- custom checks ---------------------------------------------------------------------------


@pytest.fixture
def module_name() -> Iterator[str]:
    name = "gradekit_test_custom_checks"
    yield name
    for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[loaded]


def custom_rubric(folder: Path, spec: str) -> Path:
    path = folder / "rubric.toml"
    path.write_text(BASE.replace('check = "stretch_goal"', f'check = "{spec}"'), encoding="utf-8")
    return path


def test_a_custom_check_is_imported_from_beside_the_rubric_and_sys_path_is_restored(
    tmp_path: Path, module_name: str
) -> None:
    (tmp_path / f"{module_name}.py").write_text("def score(*args):\n    return 42\n")
    before = list(sys.path)
    rubric = load_rubric(custom_rubric(tmp_path, f"{module_name}:score"))
    assert rubric.criteria[-1].custom
    check = load_custom_check(f"{module_name}:score", rubric_dir=tmp_path)
    assert check() == 42
    assert sys.path == before
    # a custom check has its whole weight split over the cases
    assert sum(per_case_points(rubric, rubric.criteria[-1]).values()) == 10


def test_a_custom_check_that_fails_to_import_is_a_rubric_error_at_its_line(
    tmp_path: Path, module_name: str
) -> None:
    (tmp_path / f"{module_name}.py").write_text("raise RuntimeError('broken on purpose')\n")
    path = custom_rubric(tmp_path, f"{module_name}:score")
    with pytest.raises(RubricError) as caught:
        load_rubric(path)
    line = line_of(path.read_text(), f'check = "{module_name}:score"')
    assert str(caught.value).startswith(f"{path}:{line}:")
    assert "RuntimeError: broken on purpose" in str(caught.value)


def test_a_custom_check_without_the_function_says_so(tmp_path: Path, module_name: str) -> None:
    (tmp_path / f"{module_name}.py").write_text("VALUE = 1\n")
    with pytest.raises(RubricError, match="defines no 'score'"):
        load_custom_check(f"{module_name}:score", rubric_dir=tmp_path)


@pytest.mark.parametrize("spec", ["module", "module:", ":function", "a-b:c", "a.b:c.d"])
def test_a_custom_check_spec_must_look_like_module_colon_function(spec: str) -> None:
    with pytest.raises(RubricError, match="package\\.module:function"):
        load_custom_check(spec, rubric_dir=Path("."))


def test_a_custom_check_takes_no_points_table() -> None:
    text = BASE.replace('check = "tracing"', 'check = "mine.checks:score"')
    text = after(text, 'check = "mine.checks:score"', "points.a = 1")
    assert "a custom check has no points table" in error_of(text)


# -- load_cases, the CLI's view ---------------------------------------------------------


def test_load_cases_reads_only_the_cases_and_reports_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "r.toml"
    path.write_text('[[case]]\nid = "only"\ntask = "Do it"\n', encoding="utf-8")
    assert [c.id for c in load_cases(path)] == ["only"]
    with pytest.raises(RubricError, match=r"no rubric at .*pass --rubric PATH"):
        load_cases(tmp_path / "absent.toml")
