"""``gradekit starter``: the students' repository, made from the reference lab.

The starter is built from a snapshot of the reference taken once per session, so that
engineers editing the checkout meanwhile cannot make two builds differ. Most builds here
pass ``--no-grade``: grading each built folder is tested on its own (slow).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from grader import Expectation
from grader.cli import main
from grader.handout import strip_solutions
from grader.regression import Item, add_item, world_json
from grader.rubric import load_rubric
from tests.grader.handout.starters import with_table

REFERENCE = Path(__file__).resolve().parents[3]
GRADEKIT = Path(sys.executable).with_name("gradekit")
PY_MARKER = re.compile(r"^[ \t]*# ((BEGIN|END) SOLUTION|STUB\b)", re.MULTILINE)
MD_MARKER = re.compile(r"^[ \t]*<!--[ \t]*((BEGIN|END) SOLUTION|STUB\b)", re.MULTILINE)


@pytest.fixture(scope="session")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the reference lab as it is now, without environments and caches."""
    target = tmp_path_factory.mktemp("reference") / "lab-reference"
    shutil.copytree(
        REFERENCE,
        target,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv*",
            "__pycache__",
            "build",
            "grades",
            "*.egg-info",
            ".*_cache",
            ".hypothesis",
        ),
    )
    return target


def _starter(snapshot: Path, out: Path, *extra: str, grade: bool = False) -> Path:
    flags = [] if grade else ["--no-grade"]
    assert main(["starter", "--from", str(snapshot), "--out", str(out), *flags, *extra]) == 0
    return out


@pytest.fixture(scope="session")
def starter(snapshot: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _starter(snapshot, tmp_path_factory.mktemp("starter") / "lab")


def _tree(root: Path) -> dict[str, tuple[bytes | None, int]]:
    """Every file's bytes and every entry's mode, by relative path."""
    tree: dict[str, tuple[bytes | None, int]] = {}
    for path in sorted(root.rglob("*")):
        data = path.read_bytes() if path.is_file() else None
        tree[path.relative_to(root).as_posix()] = (data, path.stat().st_mode & 0o7777)
    return tree


# -- what the starter holds ---------------------------------------------------------------------


def test_two_runs_give_byte_identical_trees(snapshot: Path, tmp_path: Path) -> None:
    first = _tree(_starter(snapshot, tmp_path / "one"))
    second = _tree(_starter(snapshot, tmp_path / "two"))
    assert first == second
    assert {mode for data, mode in first.values() if data is not None} == {0o644}
    assert {mode for data, mode in first.values() if data is None} == {0o755}
    assert len(first) > 50


def test_the_starter_holds_no_solution_recording_or_identity(starter: Path, snapshot: Path) -> None:
    names = {p.relative_to(starter).as_posix() for p in starter.rglob("*") if p.is_file()}
    # Only what [tool.gradekit.starter] include lists, and what the starter writes itself.
    assert {n.split("/")[0] for n in names} == {
        ".gitignore",
        "FAILURES.md",
        "Makefile",
        "README.md",
        "pyproject.toml",
        "cassettes",
        "cassettes-llm",
        "fixtures",
        "docs",
        "gradekit",
        "grader",
        "lab",
        "rubric",
        "tests",
    }
    assert (snapshot / "examples").is_dir() and (snapshot / "incidents").is_dir()
    assert not [n for n in names if n.startswith("handout/")]
    for folder in ("cassettes", "cassettes-llm", "fixtures"):
        assert [n for n in names if n.startswith(folder + "/")] == [f"{folder}/.gitkeep"]
        assert list((snapshot / folder).glob("*.json"))  # the reference has recordings
    assert "DATASET_CHANGES.md" not in names
    assert not [
        n
        for n in names
        if n.split("/")[0] in {"bench", ".ci", "grades", "build"}
        or "__pycache__" in n
        or ".egg-info" in n
        or n.endswith(".previous.json")
    ]
    assert sorted(n for n in names if n.startswith("tests/")) == [
        "tests/__init__.py",
        "tests/test_lab.py",
    ]
    assert {
        "lab/agent.py",
        "lab/tools.py",
        "gradekit/_replay.py",
        "grader/cli/_main.py",
        "rubric/bootcamp.toml",
        "Makefile",
        "README.md",
        "docs/formats.md",
    } <= names
    # The lab's tools ship whole: the offline web's pages, the write tool beside the rest.
    web = {f"lab/data/web/{page.name}" for page in (snapshot / "lab/data/web").glob("*.md")}
    assert web and web <= names
    tools = (starter / "lab" / "tools.py").read_text("utf-8")
    assert "def web_search(" in tools and "def save_note(" in tools
    # The README is the students', rendered from the table's readme; the kit's stays home.
    readme = (starter / "README.md").read_text("utf-8")
    assert readme != (snapshot / "README.md").read_text("utf-8")
    assert "<!-- gradekit:criteria -->" not in readme
    assert "| Contract stability |" in readme
    for name in sorted(names):
        data = (starter / name).read_bytes()
        if name.endswith(".md"):
            assert not MD_MARKER.search(data.decode("utf-8")), name
        elif name.endswith((".py", ".toml")):
            assert not PY_MARKER.search(data.decode("utf-8")), name
    for name in ("lab/agent.py", "FAILURES.md"):  # the reference's own marked files
        text = (snapshot / name).read_text("utf-8")
        assert (MD_MARKER if name.endswith(".md") else PY_MARKER).search(text), name

    pyproject = (starter / "pyproject.toml").read_text("utf-8")
    reference = (snapshot / "pyproject.toml").read_text("utf-8")
    for key in ("student", "incident_test", "guard", "incidents"):
        assert f"\n{key} = " in reference and f"\n{key} = " not in pyproject, key
    assert "student" not in pyproject
    assert "[tool.gradekit.starter]" in reference
    assert "gradekit.starter" not in pyproject and "include = " not in pyproject
    assert "\nstretch = []\n" in pyproject
    assert '\nfiles = ["gradekit", "lab", "grader", "tests"]\n' in pyproject
    assert "replay =" not in pyproject

    agent = (starter / "lab" / "agent.py").read_text("utf-8")
    assert "def run(provider: Provider, task: str, tools: Toolbox | None = None) -> str:" in agent
    assert "raise NotImplementedError(" in agent
    assert "llm.complete" not in agent and "def _look_up" not in agent
    assert "def _says_no" not in agent and "def _json" in agent  # a given utility stays
    failures = (starter / "FAILURES.md").read_text("utf-8")
    assert failures.startswith("# Failures\n\nOne section per failure")
    assert "## Boundaries\nName what your lab cannot measure" in failures
    assert failures.count("## ") == 1  # no entry left, only the Boundaries heading

    # The fixed guard and the cut-point test are regions: the guard raises, the test is gone.
    guard = (starter / "lab" / "refunds" / "__init__.py").read_text("utf-8")
    assert 'return int(terms["refund_cents"])' in (snapshot / "lab/refunds/__init__.py").read_text(
        "utf-8"
    )
    assert 'return int(terms["refund_cents"])' not in guard
    assert "def refund_outside_window_is_not_issued" not in (
        starter / "lab" / "refunds" / "regression.py"
    ).read_text("utf-8")


def test_the_students_tests_run_on_the_kit_rubrics_first_task(starter: Path) -> None:
    tests = (starter / "tests" / "test_lab.py").read_text("utf-8")
    first = load_rubric(REFERENCE / "rubric" / "bootcamp.toml").cases[0]
    assert f"# The task of the rubric's first case, {first.id}:" in tests
    assign = next(
        node
        for node in ast.parse(tests).body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "TASK"
    )
    assert ast.literal_eval(assign.value) == first.task
    # The kit's Makefile has both targets: the docstring names them.
    assert "Run them with ``make test`` (or ``pytest``)." in tests and "``make check``" in tests
    assert 'MANIFEST.get("replay", "gradekit:Replay")' in tests


def test_own_replay_writes_a_stub_replay_that_the_manifest_names(
    snapshot: Path, tmp_path: Path
) -> None:
    out = _starter(snapshot, tmp_path / "own", "--own-replay")
    pyproject = (out / "pyproject.toml").read_text("utf-8")
    assert '\ntools = "lab.tools:TOOLS"\nreplay = "lab.replay:Replay"\n' in pyproject
    stub = (out / "lab" / "replay.py").read_text("utf-8")
    assert "class Replay:" in stub and "raise NotImplementedError(" in stub
    compile(stub, "replay.py", "exec")
    ruff = subprocess.run(
        [str(Path(sys.executable).with_name("ruff")), "check", "--no-cache", "lab/replay.py"],
        cwd=out,
        capture_output=True,
        text=True,
        check=False,
    )
    assert ruff.returncode == 0, ruff.stdout


# -- grading it ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def graded(
    snapshot: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, object]]:
    """The raw starter, the one with --own-replay, and the latter with its Replay written,
    graded by the command line in one batch."""
    root = tmp_path_factory.mktemp("starters")
    subs = root / "subs"
    _starter(snapshot, subs / "raw")
    _starter(snapshot, subs / "own-replay", "--own-replay")
    solved = _starter(snapshot, subs / "own-replay-written", "--own-replay")
    (solved / "lab" / "replay.py").write_text(
        "from gradekit import Replay as _KitReplay\n\n\nclass Replay(_KitReplay):\n    pass\n",
        "utf-8",
    )
    out = root / "out"
    done = subprocess.run(
        [str(GRADEKIT), "grade", str(subs), "--out", str(out), "--jobs", "3"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return {
        name: json.loads((out / name / "report.json").read_text("utf-8"))
        for name in ("raw", "own-replay", "own-replay-written")
    }


def _checks(report: dict[str, object]) -> Iterator[tuple[dict[str, object], dict[str, object]]]:
    criteria = report["criteria"]
    assert isinstance(criteria, list)
    for criterion in criteria:
        for check in criterion["checks"]:
            yield criterion, check


@pytest.mark.slow  # runs the starter's own suite, or grades it, in a process
def test_the_raw_starter_scores_low_and_every_lost_point_says_what_to_do(
    graded: dict[str, dict[str, object]],
) -> None:
    for name in ("raw", "own-replay"):
        report = graded[name]
        assert Decimal(str(report["total"])) <= Decimal("5.00"), (name, report["total"])
        lost = [(criterion, check) for criterion, check in _checks(report) if not check["passed"]]
        assert len(lost) >= 15
        for criterion, check in lost:
            assert str(check["detail"]).strip(), (criterion["id"], check["id"])
            advice = criterion["advice"]
            assert isinstance(advice, list) and any(str(a).strip() for a in advice), criterion["id"]
        lost_criteria = {criterion["id"] for criterion, _ in lost}
        assert lost_criteria == {
            "contract_stability",
            "loud_failure",
            "tracing",
            "written_summary",
            "stretch_goal",
        }
        details = {str(check["detail"]) for _, check in lost}
        assert any(detail.startswith("raised NotImplementedError: ") for detail in details)


def test_own_replay_is_what_the_grader_probes(graded: dict[str, dict[str, object]]) -> None:
    def own_replay(name: str) -> dict[str, object]:
        return next(
            check
            for criterion, check in _checks(graded[name])
            if criterion["id"] == "loud_failure" and check["id"] == "own_replay"
        )

    # A Replay that works is credited only beside an agent that ran on its recordings, and
    # run() is still the stub: the kit's Replay and a written one are probed and pass, but
    # earn nothing yet; the stub Replay fails the probe itself.
    for name in ("raw", "own-replay-written"):
        check = own_replay(name)
        assert check["passed"] is False and str(check["detail"]).startswith(
            "not credited: no case of the agent ran on its recordings"
        ), (name, check)
    stub = own_replay("own-replay")
    assert stub["passed"] is False and "NotImplementedError" in str(stub["detail"]), stub


# -- the student's own tests ----------------------------------------------------------------------


def _pytest(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-rs",
            "tests/test_lab.py",
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow  # runs the starter's own suite, or grades it, in a process
def test_the_student_suite_passes_on_the_reference_and_skips_the_stubs(
    snapshot: Path, starter: Path, tmp_path: Path
) -> None:
    solved = tmp_path / "solved"
    shutil.copytree(snapshot, solved, ignore=shutil.ignore_patterns("tests"))
    (solved / "tests").mkdir()
    (solved / "tests" / "__init__.py").write_text("", "utf-8")
    shutil.copy2(starter / "tests" / "test_lab.py", solved / "tests" / "test_lab.py")
    done = _pytest(solved)
    assert done.returncode == 0 and re.search(r"\b6 passed\b", done.stdout), done.stdout
    assert "skipped" not in done.stdout

    done = _pytest(starter)
    assert done.returncode == 0, done.stdout
    ruff = subprocess.run(
        [str(Path(sys.executable).with_name("ruff")), "check", "--no-cache", "tests", "lab"],
        cwd=starter,
        capture_output=True,
        text=True,
        check=False,
    )
    assert ruff.returncode == 0, ruff.stdout
    assert re.search(r"\b2 passed, 4 skipped\b", done.stdout), done.stdout
    assert re.search(
        r"SKIPPED \[4\] .*the agent is not written yet: lab/agent\.py: write "
        r"run\(\)",
        done.stdout,
    ), done.stdout


# -- markers --------------------------------------------------------------------------------------

BEGIN, END = "# BEGIN " + "SOLUTION", "# END " + "SOLUTION"  # no marker line in this file


def test_a_python_region_becomes_a_stub_at_its_indentation() -> None:
    source = textwrap.dedent(f"""\
        import os


        def f(x: int) -> int:
            {BEGIN} hint: double it
            return x * 2
            {END}


        {BEGIN}
        def _helper() -> str:
            return os.sep
        {END}


        class C:
            def g(self) -> str:
                {BEGIN}
                return "solved"
                # STUB
                # value = os.sep
                #
                # return value
                {END}
        """)
    text, count = strip_solutions(source, "lab/x.py")
    assert count == 3
    assert text == textwrap.dedent("""\
        import os


        def f(x: int) -> int:
            raise NotImplementedError("double it")




        class C:
            def g(self) -> str:
                value = os.sep

                return value
        """)
    compile(text, "x.py", "exec")


def test_a_long_hint_is_wrapped_within_the_line_length() -> None:
    hint = " ".join(["plan, answer, self-check"] * 8)
    text, _ = strip_solutions(
        f"def f() -> None:\n    {BEGIN} hint: {hint}\n    pass\n    {END}\n", "a.py"
    )
    assert max(len(line) for line in text.splitlines()) <= 100
    namespace: dict[str, object] = {}
    exec(compile(text, "a.py", "exec"), namespace)
    function = namespace["f"]
    assert callable(function)
    with pytest.raises(NotImplementedError, match=r"^plan, answer") as raised:
        function()
    assert str(raised.value) == hint


def test_a_markdown_region_becomes_its_hint_or_its_stub() -> None:
    source = (
        "# Log\n\n<!-- BEGIN SOLUTION hint: Write yours. -->\nmine\n<!-- END SOLUTION -->\n"
        "<!-- BEGIN SOLUTION -->\nsecret\n<!-- STUB\n## Template\n-->\n"
        "<!-- END SOLUTION -->\n"
    )
    assert strip_solutions(source, "LOG.md") == ("# Log\n\nWrite yours.\n## Template\n", 2)


def _lab(root: Path, agent: str, failures: str = "# Failures\n") -> Path:
    (root / "lab").mkdir(parents=True)
    (root / "lab" / "__init__.py").write_text("", "utf-8")
    (root / "lab" / "agent.py").write_text(agent, "utf-8")
    (root / "FAILURES.md").write_text(failures, "utf-8")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.gradekit]\nagent = "lab.agent:run"\nstudent = "ref"\n'
        '\n[tool.gradekit.starter]\ninclude = ["lab/**", "FAILURES.md", "pyproject.toml"]\n',
        "utf-8",
    )
    return root


RUN = "def run(provider, task):\n"
BAD = [
    (
        "unclosed",
        RUN + f"    {BEGIN}\n    return 'x'\n",
        "agent.py:2: BEGIN SOLUTION is never closed",
    ),
    (
        "stray-end",
        RUN + "    return 'x'\n" + f"    {END}\n",
        "agent.py:3: END SOLUTION without a BEGIN",
    ),
    (
        "nested",
        RUN + f"    {BEGIN}\n    {BEGIN}\n    return 'x'\n    {END}\n    {END}\n",
        "agent.py:3: BEGIN SOLUTION inside the region opened at line 2",
    ),
    (
        "stub-not-comment",
        RUN + f"    {BEGIN}\n    return 'x'\n    # STUB\n    return 'y'\n    {END}\n",
        "agent.py:5: a STUB line must be a comment",
    ),
    (
        "bad-indent",
        RUN + f"    return 'x'\n{BEGIN}\n    x = 1\n# STUB\n#    y = 1\n{END}\n",
        "agent.py:6: the starter's code does not compile",
    ),
    (
        "malformed",
        RUN + f"    {BEGIN} please\n    return 'x'\n    {END}\n",
        "agent.py:2: a malformed marker",
    ),
]


@pytest.mark.parametrize(
    ("agent", "message"), [(a, m) for _, a, m in BAD], ids=[name for name, _, _ in BAD]
)
def test_a_marker_out_of_place_is_an_error_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], agent: str, message: str
) -> None:
    root = _lab(tmp_path / "ref", agent)
    out = tmp_path / "out"
    assert main(["starter", "--no-grade", "--from", str(root), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("UsageError: lab/"), err
    assert message in err, err
    assert not out.exists()  # nothing written


def test_a_markdown_marker_out_of_place_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _lab(
        tmp_path / "ref",
        RUN + "    return 'x'\n",
        "# Failures\n\n<!-- BEGIN SOLUTION -->\n## Mine\n",
    )
    assert main(["starter", "--no-grade", "--from", str(root), "--out", str(tmp_path / "out")]) == 2
    assert "FAILURES.md:3: BEGIN SOLUTION is never closed" in capsys.readouterr().err


def test_the_output_folder_must_be_new_or_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _lab(tmp_path / "ref", RUN + "    return 'x'\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine", "utf-8")
    assert main(["starter", "--no-grade", "--from", str(root), "--out", str(out)]) == 2
    assert "is not an empty folder" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    (out / "keep.txt").unlink()  # an empty folder is taken, and keeps its place
    assert main(["starter", "--no-grade", "--from", str(root), "--out", str(out)]) == 0
    assert (out / "lab" / "agent.py").is_file()
    assert main(["starter", "--no-grade", "--from", str(root), "--out", str(tmp_path / "new")]) == 0
    assert "student" not in (tmp_path / "new" / "pyproject.toml").read_text("utf-8")


# -- a fresh copy installs and runs its own make targets -------------------------------------------

CHECKPOINT = re.compile(r"^(PASS|FAIL)  ([123])\. (.+?)\s+\d+\.\d\ds  (.*)$", re.MULTILINE)


@pytest.mark.slow
def test_a_fresh_starter_installs_and_runs_its_own_make_test_and_make_check(
    starter: Path, tmp_path: Path
) -> None:
    fresh = tmp_path / "student"
    shutil.copytree(starter, fresh)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("VIRTUAL_ENV", "GRADEKIT_", "PYTHONPATH"))
    }
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(REFERENCE))
    )

    test = subprocess.run(
        ["make", "test"],
        cwd=fresh,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert test.returncode == 0, test.stdout[-4000:] + test.stderr[-4000:]
    assert (fresh / ".venv" / "bin" / "gradekit").exists()
    assert "All checks passed!" in test.stdout
    assert re.search(r"Success: no issues found in \d+ source files", test.stdout), test.stdout
    assert re.search(r"\b2 passed, 4 skipped\b", test.stdout), test.stdout

    check = subprocess.run(
        ["make", "check"],
        cwd=fresh,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    verdicts = {
        int(number): (verdict, title)
        for verdict, number, title, _ in CHECKPOINT.findall(check.stdout)
    }
    assert verdicts == {
        1: ("FAIL", "Whitespace is not a new prompt"),
        2: ("FAIL", "A miss is loud"),
        3: ("FAIL", "Two providers, one score"),
    }, check.stdout + check.stderr
    # The agent is the stub: every checkpoint names it as the cause, with the first step.
    assert (
        check.stdout.count(
            "run() is not written yet: it raises NotImplementedError in every "
            "case. Write it first in lab/agent.py"
        )
        == 3
    ), check.stdout
    assert check.returncode != 0


def test_the_instructors_regression_sets_never_ship_in_the_hand_out(
    snapshot: Path,
    tmp_path: Path,
) -> None:
    """A set holds reviewed failures from students' own runs: a classmate's incident, task
    and answers. The hand-out is given to every student, so it must not carry them."""
    source = tmp_path / "kit"
    shutil.copytree(snapshot, source, symlinks=True)
    with_table(
        source,
        include=[
            "lab/**",
            "gradekit/**",
            "grader/**",
            "rubric/**",
            "Makefile",
            "FAILURES.md",
            "pyproject.toml",
        ],
        readme="handout/README.md",
    )
    promoted = source / "rubric" / "regression" / "refunds"
    (promoted / "items").mkdir(parents=True)
    (promoted / "v1.json").write_text('{"name": "refunds"}\n', "utf-8")
    (promoted / "items" / "abc.jsonl").write_text('{"task": "alice asks"}\n', "utf-8")
    names = {
        p.relative_to(out).as_posix()
        for out in [_starter(source, tmp_path / "lab")]
        for p in out.rglob("*")
    }
    assert "rubric/bootcamp.toml" in names
    assert not [n for n in names if n.startswith("rubric/regression")]


def test_a_pinned_sets_public_view_ships_and_nothing_else_of_it(
    snapshot: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Students record a pinned set's items from its public view: the view ships with the
    rubric that pins it, the set itself (who each item came from) stays home."""
    source = tmp_path / "kit"
    shutil.copytree(snapshot, source, symlinks=True)
    rubric = source / "rubric" / "bootcamp.toml"
    rubric.write_text(
        rubric.read_text("utf-8").replace("weight = 30", "weight = 20", 1)
        + (
            '\n[[criterion]]\nid = "regression"\ntitle = "Known failures"\nweight = 10\n'
            'check = "regression"\nfull = "f"\ntypical_loss = "t"\n[criterion.params]\n'
            'set = "refunds@1"\n'
        ),
        "utf-8",
    )
    item = Item(
        id="refund-policy",
        kind="case",
        task="A refund after 40 days?",
        agent=None,
        expect=Expectation("answer"),
        added_in=0,
        source={
            "case": "case-1",
            "version": 1,
            "candidate": "cand-1",
            "approved_by": "kim",
            "run": {
                "path": "cassettes/refund-policy.json",
                "report": "0" * 64,
                "seq": 2,
                "student": "alice-ames",
                "submission": "alice-ames",
            },
        },
        reviewed_by="kim",
        reason="alice erred",
        world=world_json([("read_docs", {"query": "refund"}, {"doc": "policy"})]),
    )
    sets = source / "rubric" / "regression"
    add_item(sets, "refunds", item, created_by="kim", then=lambda *_: None)
    out = _starter(source, tmp_path / "lab")
    shipped = sorted(
        p.relative_to(out).as_posix()
        for p in (out / "rubric").rglob("*")
        if p.is_file() and "regression" in p.parts
    )
    assert shipped == ["rubric/regression/refunds/v1.public.json"]
    view = (out / shipped[0]).read_bytes()
    assert view == (sets / "refunds" / "v1.public.json").read_bytes()
    assert b"alice" not in view and b"policy" in view
    # The hand-out's own rubric finds the set there: its items are what `make record` asks.
    pinned = load_rubric(out / "rubric" / "bootcamp.toml").sets["refunds@1"]
    assert pinned is not None and pinned.public
    assert [(i.id, i.task) for i in pinned.items] == [("refund-policy", item.task)]
    # A pinned version with no public view could not be recorded: refused, nothing written.
    (sets / "refunds" / "v1.public.json").unlink()
    assert (
        main(["starter", "--from", str(source), "--out", str(tmp_path / "lab2"), "--no-grade"]) == 2
    )
    err = capsys.readouterr().err
    assert (
        "rubric/bootcamp.toml pins refunds@1, whose public view rubric/regression/refunds/"
        "v1.public.json is not in the reference" in err
    )
    assert "regression public refunds --sets" in err
    assert not (tmp_path / "lab2").exists()


def test_the_hand_outs_first_block_puts_it_in_git_with_nothing_left_over(
    starter: Path, tmp_path: Path
) -> None:
    """The README's first command, run as written in a fresh copy of the hand-out: every
    file it hands out is committed, and `git status` has nothing left to say."""
    copy = tmp_path / "lab"
    shutil.copytree(starter, copy)
    readme = (copy / "README.md").read_text("utf-8")
    intro = readme.split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", intro, re.DOTALL)
    assert block, "the hand-out's README lost its git block before its first section"
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Ada",
        "GIT_AUTHOR_EMAIL": "ada@example.org",
        "GIT_COMMITTER_NAME": "Ada",
        "GIT_COMMITTER_EMAIL": "ada@example.org",
    }
    done = subprocess.run(
        ["bash", "-c", block.group(1)],
        cwd=copy,
        env=env,
        text=True,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=copy,
        text=True,
        capture_output=True,
        check=True,
    ).stdout
    assert status == ""
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=copy, text=True, capture_output=True, check=True
    ).stdout.splitlines()
    assert "lab/agent.py" in tracked and "FAILURES.md" in tracked and "Makefile" in tracked
