"""``gradekit starter`` ships an allow-list: the reference's ``[tool.gradekit.starter]``.

It tests ``grader.handout._allow``'s helpers on purpose: the pattern matching and what is
held back, beneath ``gradekit starter``."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from grader.cli import main
from grader.handout._allow import TABLE_EXAMPLE, held_back, is_built, matches
from tests.grader.handout.starters import files, small_lab, with_table


def _build(root: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["starter", "--no-grade", "--from", str(root), "--out", str(out)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("lab/**", "lab/agent.py", True),
        ("lab/**", "lab/data/docs/x.md", True),
        ("lab/**", "lab", True),  # ** is zero segments too
        ("lab/**", "labs/agent.py", False),
        ("docs/*.md", "docs/formats.md", True),
        ("docs/*.md", "docs/sub/formats.md", False),
        ("**/*.py", "agent.py", True),
        ("**/*.py", "a/b/c.py", True),
        ("lab/**/*.sql", "lab/data/course.sql", True),
        ("lab/**/*.sql", "lab/course.sql", True),
        ("Makefile", "Makefile", True),
        ("Makefile", "lab/Makefile", False),
        ("rubric/*.toml", "rubric/regression/refunds/v1.json", False),
        ("lab/?gent.py", "lab/agent.py", True),
    ],
)
def test_a_pattern_matches_posix_paths_segment_by_segment(
    pattern: str, path: str, expected: bool
) -> None:
    assert matches(pattern, path) is expected


def test_what_is_held_back_by_default() -> None:
    folders = {"cassettes": "a recording", "evidence": "an incident"}
    assert held_back("cassettes/refund-policy.json", folders) == "a recording"
    assert held_back("evidence/x.jsonl", folders) == "an incident"
    assert held_back("examples/openai-sdk/lab/agent.py", folders).startswith("an example")
    assert held_back("DATASET_CHANGES.md", folders) == "the change log of the recordings"
    assert (
        held_back("rubric/regression/refunds/v1.json", folders) == "an instructor's regression set"
    )
    assert held_back("lab/x.previous.json", folders) != ""
    assert held_back("lab/agent.py", folders) == ""
    assert held_back("cassettes-llm/x.json", folders) == ""  # not under cassettes/
    assert is_built("lab/__pycache__/agent.cpython-311.pyc")
    assert is_built(".venv-model/bin/python") and is_built("gradekit.egg-info/PKG-INFO")
    assert not is_built("lab/agent.py")


def test_only_what_include_lists_ships(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = small_lab(tmp_path / "ref")
    (root / "notes").mkdir()
    (root / "notes" / "answers.md").write_text("mine\n", "utf-8")
    (root / "README.md").write_text("# The instructor's README\n", "utf-8")
    (root / "setup.sh").write_text("echo hi\n", "utf-8")
    code, _, err = _build(root, tmp_path / "out", capsys)
    assert code == 0, err
    assert sorted(files(tmp_path / "out")) == [
        "FAILURES.md",
        "cassettes/.gitkeep",
        "fixtures/.gitkeep",
        "lab/__init__.py",
        "lab/agent.py",
        "pyproject.toml",
        "tests/__init__.py",
        "tests/test_lab.py",
    ]


def test_held_back_files_stay_home_even_when_include_names_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = small_lab(
        tmp_path / "ref", include=("lab/**", "incidents/**", "FAILURES.md", "pyproject.toml")
    )
    (root / "incidents").mkdir()
    (root / "incidents" / "x.jsonl").write_text("{}\n", "utf-8")
    code, _, err = _build(root, tmp_path / "out", capsys)
    assert code == 2
    assert (
        "'incidents/**' matches only files held back by default (an incident, e.g. "
        "incidents/x.jsonl): name those that students get in ship" in err
    ), err
    assert not (tmp_path / "out").exists()


def test_ship_hands_a_held_back_file_out_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = small_lab(tmp_path / "ref")
    with_table(
        root,
        include=["lab/**", "FAILURES.md", "pyproject.toml"],
        ship=["incidents/x.jsonl", "examples"],
    )
    (root / "incidents").mkdir()
    (root / "incidents" / "x.jsonl").write_text("{}\n", "utf-8")
    (root / "incidents" / "y.jsonl").write_text("{}\n", "utf-8")
    (root / "examples" / "one").mkdir(parents=True)
    (root / "examples" / "one" / "a.py").write_text("x = 1\n", "utf-8")
    code, out, err = _build(root, tmp_path / "out", capsys)
    assert code == 0, err
    shipped = files(tmp_path / "out")
    assert "incidents/x.jsonl" in shipped and "incidents/y.jsonl" not in shipped
    assert "examples/one/a.py" in shipped
    assert (
        "shipping incidents/x.jsonl (an incident) because [tool.gradekit.starter] ship "
        "lists it" in out
    )
    assert "shipping examples/one/a.py (an example, a worked solution) because" in out


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("", "no [tool.gradekit.starter] table, so nothing says what the students get"),
        ("[tool.gradekit.starter]\ninclude = []\n", "include is empty"),
        (
            '[tool.gradekit.starter]\ninclude = ["lab/**"]\nexclude = ["x"]\n',
            "unknown [tool.gradekit.starter] key(s) exclude",
        ),
        ('[tool.gradekit.starter]\ninclude = ["lab/**", "../x"]\n', "holds '../x': write a path"),
        (
            '[tool.gradekit.starter]\ninclude = ["lab/**", "pyproject.toml"]\nship = ["inc*"]\n',
            "ship takes literal paths",
        ),
        (
            '[tool.gradekit.starter]\ninclude = ["lab/**", "pyproject.toml", "docs/*.md"]\n',
            "'docs/*.md' matches no file of the reference: fix the path",
        ),
        (
            '[tool.gradekit.starter]\ninclude = ["lab/**"]\n',
            'include does not list "pyproject.toml"',
        ),
        (
            '[tool.gradekit.starter]\ninclude = ["lab/**", "pyproject.toml"]\nreadme = "h/R.md"\n',
            'readme = "h/R.md": there is no such file',
        ),
    ],
)
def test_a_bad_table_is_a_usage_error_that_says_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], table: str, message: str
) -> None:
    root = small_lab(tmp_path / "ref")
    with_table(root, table=table)
    code, _, err = _build(root, tmp_path / "out", capsys)
    assert code == 2
    assert message in err, err
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ref"]  # no build left behind


def test_no_table_prints_one_to_paste(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = small_lab(tmp_path / "ref")
    with_table(root, table="")
    _, _, err = _build(root, tmp_path / "out", capsys)
    assert TABLE_EXAMPLE in err
    assert tomllib.loads(TABLE_EXAMPLE)["tool"]["gradekit"]["starter"]["include"][0] == "lab/**"


def test_the_grader_accepts_the_table_and_refuses_a_starter_key_that_is_not_one(
    tmp_path: Path,
) -> None:
    from grader.submission import ManifestError, load_manifest

    root = small_lab(tmp_path / "ref")
    assert load_manifest(root).agent == "lab.agent:run"
    (root / "pyproject.toml").write_text(
        '[tool.gradekit]\nagent = "lab.agent:run"\nstarter = "all"\n', "utf-8"
    )
    with pytest.raises(ManifestError, match="starter must be a table"):
        load_manifest(root)


def test_the_readme_source_is_written_as_readme_md_and_the_kits_stays_home(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = small_lab(tmp_path / "ref")
    (root / "README.md").write_text("# Instructor only: signing keys\n", "utf-8")
    (root / "handout").mkdir()
    (root / "handout" / "README.md").write_text(
        "# Your lab\n\n## What is graded\n\n<!-- gradekit:criteria -->\n", "utf-8"
    )
    with_table(
        root, include=["lab/**", "FAILURES.md", "pyproject.toml"], readme="handout/README.md"
    )
    code, out, err = _build(root, tmp_path / "out", capsys)
    assert code == 0, err
    readme = (tmp_path / "out" / "README.md").read_text("utf-8")
    assert readme.startswith("# Your lab\n") and "Instructor" not in readme
    assert "| Contract stability |" in readme  # the kit's rubric's criteria
    assert "handout/README.md" not in files(tmp_path / "out")
    assert "README.md: written from handout/README.md" in out

    with_table(
        root,
        include=["lab/**", "README.md", "FAILURES.md", "pyproject.toml"],
        readme="handout/README.md",
    )
    code, _, err = _build(root, tmp_path / "out2", capsys)
    assert code == 2 and "take README.md out of include" in err, err


def test_a_project_readme_the_hand_out_lacks_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = small_lab(tmp_path / "ref")
    (root / "README.md").write_text("# x\n", "utf-8")
    pyproject = root / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text("utf-8").replace('name = "x"\n', 'name = "x"\nreadme = "README.md"\n'),
        "utf-8",
    )
    code, _, err = _build(root, tmp_path / "out", capsys)
    assert code == 2
    assert '[project] readme = "README.md", which the hand-out would not hold' in err, err


def test_the_manifest_loses_the_instructors_keys_and_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = small_lab(tmp_path / "ref")
    pyproject = root / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text("utf-8")
        .replace(
            'agent = "lab.agent:run"\n',
            'agent = "lab.agent:run"\nstretch = ["cut-point"]\nstudent = "ref"\n'
            'incident_test = "lab.regression:test"\nguard = "lab.agent:guard"\n'
            'incidents = "incidents"\n',
        )
        .replace(
            "[tool.gradekit.starter]", "# the table below: what ships\n[tool.gradekit.starter]"
        )
        + "\n[tool.mypy]\n"
        'files = ["lab", "tests", "bench"]\n\n[tool.setuptools]\npackages = [\n    "lab",\n'
        '    "bench",\n]\n',
        "utf-8",
    )
    code, _, err = _build(root, tmp_path / "out", capsys)
    assert code == 0, err
    shipped = (tmp_path / "out" / "pyproject.toml").read_text("utf-8")
    document = tomllib.loads(shipped)
    assert document["tool"]["gradekit"] == {"agent": "lab.agent:run", "stretch": []}
    assert document["tool"]["mypy"]["files"] == ["lab", "tests"]
    assert document["tool"]["setuptools"]["packages"] == ["lab"]
    assert "what ships" not in shipped


def test_the_incident_test_module_stays_home_unless_it_is_marked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = small_lab(tmp_path / "ref")
    pyproject = root / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text("utf-8").replace(
            'agent = "lab.agent:run"\n',
            'agent = "lab.agent:run"\nincident_test = "lab.regression:no_refund"\n',
        ),
        "utf-8",
    )
    (root / "lab" / "regression.py").write_text("def no_refund() -> None:\n    pass\n", "utf-8")
    code, _, err = _build(root, tmp_path / "out", capsys)
    assert code == 0, err
    assert not (tmp_path / "out" / "lab" / "regression.py").exists()

    (root / "lab" / "regression.py").write_text(
        "def no_refund() -> None:\n    # BEGIN SOLUTION\n    pass\n    # END SOLUTION\n", "utf-8"
    )
    code, _, err = _build(root, tmp_path / "out2", capsys)
    assert code == 0, err
    assert "raise NotImplementedError" in (tmp_path / "out2" / "lab" / "regression.py").read_text(
        "utf-8"
    )
