"""A package the grader lacks is an error, not a grade (issue 21).

An agent that cannot import a package used to be graded as if it had failed every case
(an SDK lab graded where the grader lacked ``openai``: "graded, 20.00", exit 0). Now the
row is not graded: ``error`` with the install command when the rubric's ``[packages]``
lists the package (the grader's environment is at fault), ``ungradable`` when it does not
(the submission imports what the lab does not allow). A module of the submission's own
that it never shipped is still the submission's import error, and graded.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import shutil
import subprocess
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from grader import Limits
from grader.batch._worker import WorkerRequest, decode_request, encode_request
from grader.cli import main
from grader.grading._packages import MissingPackage, missing_package
from grader.handout import build
from grader.handout import run as run_autograder
from grader.rubric import KIT_RUBRIC, RubricError, install_command, load_rubric, parse_rubric
from grader.sandbox import HARNESS, RunPlan, Sandbox, Serving
from tests.submissions import REFERENCE, make_submission, short_rubric

# No project on any index is called this: no grader anywhere has it.
NOBODY = "gradekit_no_such_package_21"
REQUIREMENT = "gradekit-no-such-package-21>=1,<2"
AGENT = "lab/agent.py"
KIT_IMPORT = "from gradekit import Provider, Toolbox, Traced, TracedTools\n"
RUN_STARTS = '    with the lab\'s read-only tools when it is given them."""\n'


# -- the rubric's [packages] ------------------------------------------------------------------


def with_packages(table: str, *, before: str = "") -> bytes:
    """The kit's rubric with its [packages] table replaced by ``table`` (and ``before`` put
    at the top of the file)."""
    text = KIT_RUBRIC.read_text("utf-8")
    kept, found, _ = text.partition("\n[packages]\n")
    assert found, "the kit's rubric has a [packages] table, last"
    return (before + kept + "\n" + table).encode("utf-8")


def line_of(data: bytes, text: str) -> int:
    return data.decode("utf-8").splitlines().index(text) + 1


def test_the_kit_rubric_allows_exactly_the_sdk_extra() -> None:
    """The rubric's [packages] and pyproject's sdk extra are one list: what the grader allows
    an agent to import is what `make grade` and `pip install 'gradekit[sdk]'` install."""
    extras = tomllib.loads((REFERENCE / "pyproject.toml").read_text("utf-8"))["project"][
        "optional-dependencies"
    ]
    rubric = load_rubric(KIT_RUBRIC)
    assert dict(rubric.packages) == {"openai": "openai>=3.50,<4", "anthropic": "anthropic>=2.10,<3"}
    assert sorted(rubric.packages.values()) == sorted(extras["sdk"])
    assert "gradekit[sdk]" in extras["dev"]  # the tests run against the same ranges
    assert {install_command(r) for r in rubric.packages.values()} == {
        "pip install 'gradekit[sdk]'"
    }, "stale metadata: pip install -e '.[dev]' again"


def test_packages_keep_their_order_and_an_absent_table_allows_none() -> None:
    rubric = parse_rubric(
        with_packages(
            '[packages]\nyaml = " PyYAML[libyaml] >= 6 , <7 "\nopenai = "openai>=3.50,<4"\n'
        ),
        source="lab.toml",
    )
    assert list(rubric.packages.items()) == [
        ("yaml", "PyYAML[libyaml] >= 6 , <7"),
        ("openai", "openai>=3.50,<4"),
    ]
    assert install_command(rubric.packages["yaml"]) == "pip install 'PyYAML[libyaml] >= 6 , <7'"
    assert dict(parse_rubric(with_packages(""), source="lab.toml").packages) == {}


@pytest.mark.parametrize(
    ("table", "wrong", "fix"),
    [
        # a quoted key is found by its table's line
        (
            '[packages]\n"my-helpers" = "my-helpers"',
            "key 'my-helpers' is not a top-level module name",
            'write openai = "openai>=3.50,<4"',
        ),
        (
            '[packages]\njson = "json"',
            "json is part of Python's standard library",
            "remove it from [packages]",
        ),
        (
            '[packages]\ngradekit = "gradekit"',
            "gradekit is gradekit's own",
            "remove it from [packages]",
        ),
        (
            "[packages]\nopenai = 3",
            "packages.openai must be the pip requirement",
            'not 3: write openai = "openai>=3.50,<4"',
        ),
        (
            '[packages]\nopenai = "openai @ https://example.com/openai.whl"',
            "no URL, marker or option",
            'write openai = "openai>=3.50,<4"',
        ),
        (
            '[packages]\nopenai = "--index-url=https://example.com openai"',
            "must be the pip requirement",
            'write openai = "openai>=3.50,<4"',
        ),
        (
            "[packages]\nopenai = 'openai; python_version < \"3.12\"'",
            "must be the pip requirement",
            'write openai = "openai>=3.50,<4"',
        ),
        ('[packages]\nopenai = ""', "must be the pip requirement", "write openai ="),
    ],
)
def test_a_bad_packages_table_is_a_rubric_error_at_its_line_with_the_fix(
    table: str, wrong: str, fix: str
) -> None:
    data = with_packages(table + "\n")
    with pytest.raises(RubricError) as raised:
        parse_rubric(data, source="lab.toml")
    message = str(raised.value)
    at = table.splitlines()[0 if table.startswith('[packages]\n"') else 1]
    assert message.startswith(f"lab.toml:{line_of(data, at)}: ")
    assert wrong in message and fix in message


def test_packages_that_are_no_table_are_a_rubric_error() -> None:
    with pytest.raises(
        RubricError,
        match=r"^lab\.toml: packages must be a table of import name "
        r"= pip requirement: \[packages\], then openai = ",
    ):
        parse_rubric(with_packages("", before='packages = ["openai"]\n'), source="lab.toml")


def test_a_worker_gets_the_rubric_s_packages(tmp_path: Path) -> None:
    rubric = parse_rubric(
        with_packages(f'[packages]\n{NOBODY} = "{REQUIREMENT}"\n'), source="lab.toml"
    )
    request = WorkerRequest(
        parent=1,
        root=tmp_path,
        folder="alice",
        student="alice",
        out=tmp_path / "out",
        scratch=tmp_path / "scratch",
        label=None,
        isolation="process",
        rubric=rubric,
        check_folders={},
    )
    assert decode_request(encode_request(request)).rubric.packages == {NOBODY: REQUIREMENT}


# -- whose missing module it is, and what the row says -------------------------------------------


def test_only_a_package_absent_from_the_grader_is_a_missing_package(tmp_path: Path) -> None:
    (tmp_path / "lab").mkdir()
    (tmp_path / "helpers.py").write_text("", "utf-8")
    listed = {NOBODY: REQUIREMENT}
    for own in ("lab", "lab.helpers_never_shipped", "helpers", "gradekit.nothing_here"):
        assert missing_package(tmp_path, own, listed) is None, own  # the submission's or kit's
    assert missing_package(tmp_path, "mylab.agent", listed, own={"mylab"}) is None  # manifest's
    # The child's word that the grader's environment lacks these does not hold: graded.
    assert missing_package(tmp_path, "httpx", listed) is None
    assert missing_package(tmp_path, "json", listed) is None
    missing = missing_package(tmp_path, NOBODY, listed, where="when the agent is imported")
    assert isinstance(missing, MissingPackage)
    assert (missing.module, missing.package, missing.status) == (NOBODY, NOBODY, "error")


def test_the_reason_names_the_package_and_the_fix_for_each_status(tmp_path: Path) -> None:
    where = "in run(), case sql-explain"
    unlisted = missing_package(tmp_path, NOBODY, {"openai": "openai>=3.50,<4"}, where=where)
    assert unlisted is not None and unlisted.status == "ungradable"
    assert str(unlisted) == (
        f"the agent imports {NOBODY} (in run(), case sql-explain), a package the rubric does "
        "not allow (its [packages] lists: openai), so the submission cannot be graded as it "
        f"stands: remove the import from the agent (if {NOBODY} is a module of the "
        f"submission's own, commit it) and submit again; or, if the lab allows {NOBODY}, the "
        f'instructor adds {NOBODY} = "<its pip requirement>" to the rubric\'s [packages], '
        "installs it for the grader and grades it again"
    )
    listed = missing_package(tmp_path, NOBODY, {NOBODY: REQUIREMENT}, where=where)
    assert listed is not None and listed.status == "error"
    assert (
        f"which the rubric's [packages] allows ({REQUIREMENT}) but the grader's "
        "environment does not have" in str(listed)
    )
    assert (
        f"install it for the grader, `pip install '{REQUIREMENT}'` (on Gradescope: build "
        "the autograder again with `.venv/bin/gradekit gradescope build --out "
        "autograder`" in str(listed)
    )
    # One of the sdk extra's: its install command is the extra's (this environment has the
    # SDK, so the error is built as missing_package builds it for a grader that has not).
    sdk = MissingPackage("openai", packages={"openai": "openai>=3.50,<4"})
    assert (sdk.status, sdk.listed) == ("error", True)
    assert (
        "install it for the grader, `pip install 'gradekit[sdk]'`; in a checkout of the kit "
        "`make grade` does it (on Gradescope: build the autograder again" in str(sdk)
    )


def test_the_harness_finds_a_missing_module_anywhere_in_the_chain() -> None:
    spec = importlib.util.spec_from_file_location("gradekit_harness_packages", HARNESS)
    assert spec is not None and spec.loader is not None
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    found: Callable[[BaseException], str | None] = harness.missing_module

    def raised(code: Callable[[], object]) -> BaseException:
        try:
            code()
        except BaseException as exc:  # what run() raised, whatever it is
            return exc
        raise AssertionError("nothing raised")

    def lazy() -> object:
        return importlib.import_module(NOBODY)

    def wrapped() -> object:
        try:
            return lazy()
        except ImportError as exc:
            raise RuntimeError("the helper is missing") from exc

    def in_handler() -> object:
        try:
            return lazy()
        except ImportError:
            raise KeyError("while importing")  # noqa: B904  # the import error is its context

    class Named(str):
        pass

    assert found(raised(lazy)) == NOBODY
    assert found(raised(wrapped)) == NOBODY
    assert found(raised(in_handler)) == NOBODY  # its context
    assert found(ExceptionGroup("many", [ValueError(), ModuleNotFoundError(name="x.y")])) == "x.y"
    assert found(raised(lambda: (_ for _ in ()).throw(RuntimeError("none")))) is None
    hidden = RuntimeError("hidden")
    hidden.__context__, hidden.__suppress_context__ = ModuleNotFoundError(name="x"), True
    assert found(hidden) is None  # `raise ... from None`: not in the chain Python prints
    assert found(ModuleNotFoundError("made up")) is None  # no name
    assert found(ModuleNotFoundError(name=Named("x"))) is None  # a str the agent wrote


@pytest.mark.slow
def test_the_child_says_which_module_it_could_not_import(tmp_path: Path) -> None:
    """At import and in run() (a lazy import, wrapped or not), over the sandbox's pipe."""
    root = tmp_path / "sub"
    (root / "agents").mkdir(parents=True)
    (root / "agents" / "__init__.py").write_text("", "utf-8")
    (root / "agents" / "eager.py").write_text(
        f"import {NOBODY}\n\ndef run(provider, task):\n    return 'never'\n", "utf-8"
    )
    (root / "agents" / "lazy.py").write_text(
        "def run(provider, task):\n"
        "    if task == 'fine':\n        return 'ok'\n"
        f"    if task == 'plain':\n        import {NOBODY}\n"
        f"    try:\n        import {NOBODY}\n"
        "    except ImportError as exc:\n"
        "        raise RuntimeError('the helper is missing') from exc\n",
        "utf-8",
    )
    limits = Limits(timeout_s=10)

    def run(agent: str, cases: list[str]) -> Any:
        return Sandbox(root, tmp_path / agent.replace(":", "-"), limits).run(
            agent,
            [(case, case) for case in cases],
            RunPlan("openai:gpt-4o-mini", 0, Serving(lambda case, prompt: None)),
        )

    eager = run("agents.eager:run", ["fine"])
    assert eager.missing_module == NOBODY and NOBODY in (eager.import_error or "")
    lazy = run("agents.lazy:run", ["fine", "plain", "wrapped"])
    assert {case: (o.status, o.missing_module) for case, o in lazy.outcomes.items()} == {
        "fine": ("returned", None),
        "plain": ("raised", NOBODY),
        "wrapped": ("raised", NOBODY),
    }
    assert lazy.missing_module is None


# -- graded end to end: gradekit grade, gradekit check, Gradescope ---------------------------------


def edit(root: Path, old: str, new: str) -> None:
    path = root / AGENT
    text = path.read_text("utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")


SUBMISSIONS: Mapping[str, Callable[[Path], None]] = {
    # imports a package nobody has, when the agent is imported
    "imports-nobody": lambda root: edit(root, KIT_IMPORT, f"{KIT_IMPORT}import {NOBODY}\n"),
    # imports it in run(), in one case only: a lazy import
    "lazy-nobody": lambda root: edit(
        root, RUN_STARTS, RUN_STARTS + (f"    if 'SQL' in task:\n        import {NOBODY}\n")
    ),
    # a module of its own it never shipped: its own import error, graded
    "own-module": lambda root: edit(
        root, KIT_IMPORT, f"{KIT_IMPORT}import lab.helpers_never_shipped\n"
    ),
    # says the grader lacks a package the grader has: a claim that does not hold, graded
    "claims-httpx": lambda root: edit(
        root,
        RUN_STARTS,
        RUN_STARTS
        + (
            "    if 'SQL' in task:\n"
            "        raise ModuleNotFoundError(\"No module named 'httpx'\", name='httpx')\n"
        ),
    ),
}


@dataclass(frozen=True, slots=True)
class Graded:
    code: int
    shown: str
    rows: Mapping[str, Mapping[str, str]]
    out: Path


def grade(paths: list[Path], rubric: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> Graded:
    code = main(
        [
            "grade",
            *map(str, paths),
            "--rubric",
            str(rubric),
            "--out",
            str(out),
            "--jobs",
            "2",
            "--quiet",
        ]
    )
    return Graded(code, capsys.readouterr().out, rows_of(out), out)


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The submissions, the kit's rubric with short limits, and one that lists NOBODY."""
    root = tmp_path_factory.mktemp("packages")
    for name, mutate in SUBMISSIONS.items():
        mutate(make_submission(root / "submissions" / name))
    (root / "listing").mkdir()
    listing = short_rubric(root / "listing")
    listing.write_text(listing.read_text("utf-8") + f'{NOBODY} = "{REQUIREMENT}"\n', "utf-8")
    assert NOBODY in load_rubric(listing).packages
    short_rubric(root)
    return root


@pytest.fixture(scope="module")
def batch(course: Path) -> Graded:
    """Every submission graded once, by `gradekit grade`, with the rubric that does not list
    NOBODY (what it prints is read in the tests that grade on their own)."""
    out = course / "out"
    code = main(
        [
            "grade",
            str(course / "submissions"),
            "--rubric",
            str(course / "bootcamp-short.toml"),
            "--out",
            str(out),
            "--jobs",
            "2",
            "--quiet",
        ]
    )
    return Graded(code, "", rows_of(out), out)


def rows_of(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "gradebook.csv", encoding="utf-8", newline="") as book:
        return {row["submission"]: row for row in csv.DictReader(book)}


@pytest.mark.slow
def test_an_unlisted_package_is_ungradable_and_grade_exits_1(batch: Graded) -> None:
    assert batch.code == 1
    row = batch.rows["imports-nobody"]
    assert (row["status"], row["total"], row["final"], row["digest"]) == ("ungradable", "", "", "")
    assert row["reason"].startswith(
        f"the agent imports {NOBODY} (when the agent is imported), a package the rubric does "
        "not allow (its [packages] lists: anthropic, openai), so the submission cannot be "
        "graded as it stands: remove the import from the agent"
    )
    assert not (batch.out / "imports-nobody" / "report.json").exists()  # no grade at all


@pytest.mark.slow
def test_a_lazy_import_in_run_counts_too(batch: Graded) -> None:
    row = batch.rows["lazy-nobody"]
    assert row["status"] == "ungradable"
    assert row["reason"].startswith(
        f"the agent imports {NOBODY} (in run(), case sql-explain), "
        "a package the rubric does not allow"
    )


@pytest.mark.slow
def test_a_module_of_its_own_never_shipped_is_still_graded_as_its_import_error(
    batch: Graded,
) -> None:
    row = batch.rows["own-module"]
    assert (row["status"], row["reason"]) == ("graded", "")
    report = json.loads((batch.out / "own-module" / "report.json").read_bytes())
    line = (REFERENCE / AGENT).read_text("utf-8").splitlines().index(KIT_IMPORT.strip()) + 2
    assert (
        "the agent failed to import: ModuleNotFoundError: No module named "
        f"'lab.helpers_never_shipped' (lab/agent.py, line {line})" in report["findings"]
    )
    assert report["total"] != report["max"]


@pytest.mark.slow
def test_a_made_up_claim_that_the_grader_lacks_a_package_is_graded(batch: Graded) -> None:
    row = batch.rows["claims-httpx"]
    assert (row["status"], row["reason"]) == ("graded", "")
    report = json.loads((batch.out / "claims-httpx" / "report.json").read_bytes())
    assert report["total"] != report["max"]  # the case it raised in is lost, as any raise


@pytest.mark.slow
def test_a_listed_package_is_an_error_with_the_install_command(
    course: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    graded = grade(
        [course / "submissions" / "imports-nobody"],
        course / "listing" / "bootcamp-short.toml",
        tmp_path / "out",
        capsys,
    )
    assert graded.code == 1
    row = graded.rows["imports-nobody"]
    assert (row["status"], row["total"]) == ("error", "")
    reason = (
        f"the agent imports {NOBODY} (when the agent is imported), which the rubric's "
        f"[packages] allows ({REQUIREMENT}) but the grader's environment does not have, "
        "so the submission was not graded (it is not at fault): install it for the "
        f"grader, `pip install '{REQUIREMENT}'` (on Gradescope: build the autograder "
        "again with `.venv/bin/gradekit gradescope build --out autograder`, whose "
        "setup.sh installs the rubric's "
        "[packages]), then grade it again"
    )
    assert row["reason"] == reason
    assert f"imports-nobody: NOT GRADED: {reason}\n" in graded.shown


@pytest.mark.slow
def test_check_prints_the_reason_and_exits_1_without_a_traceback(
    course: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "check",
            str(course / "submissions" / "imports-nobody"),
            "--rubric",
            str(course / "bootcamp-short.toml"),
            "--wall",
            "process",
        ]
    )
    captured = capsys.readouterr()
    assert code == 1
    assert (
        f"FAIL  UNGRADABLE: the agent imports {NOBODY} (when the agent is imported), a "
        "package the rubric does not allow" in captured.out
    )
    # The submission's folder has no Makefile: the command is gradekit's own.
    assert "`gradekit grade` would not grade this submission" in captured.out
    assert "Traceback" not in captured.out + captured.err


# -- Gradescope ------------------------------------------------------------------------------


@pytest.mark.slow
def test_setup_sh_installs_the_rubric_s_packages(tmp_path: Path) -> None:
    rubric = tmp_path / "course" / "lab.toml"
    rubric.parent.mkdir()
    rubric.write_bytes(
        with_packages(f'[packages]\n{NOBODY} = "{REQUIREMENT}"\nopenai = "openai>=3.50,<4"\n')
    )
    build(tmp_path / "source", rubric)
    setup = (tmp_path / "source" / "setup.sh").read_text("utf-8")
    kit_line = '"$ROOT/venv/bin/pip" install --no-cache-dir "$ROOT/source/kit"\n'
    assert (
        f'{kit_line}# the rubric\'s [packages]\n"$ROOT/venv/bin/pip" install --no-cache-dir '
        f"'{REQUIREMENT}' 'openai>=3.50,<4'\n" + '"$ROOT/venv/bin/gradekit" --version\n'
    ) in setup
    assert (
        subprocess.run(
            ["bash", "-n", str(tmp_path / "source" / "setup.sh")], check=False
        ).returncode
        == 0
    )
    build(tmp_path / "kit-source", KIT_RUBRIC)  # the kit's rubric: both SDKs
    assert "install --no-cache-dir 'openai>=3.50,<4' 'anthropic>=2.10,<3'\n" in (
        tmp_path / "kit-source" / "setup.sh"
    ).read_text("utf-8")
    rubric.write_bytes(with_packages(""))
    build(tmp_path / "none", rubric)
    assert "\n# the rubric's [packages] lists none" in (tmp_path / "none" / "setup.sh").read_text(
        "utf-8"
    )


@pytest.mark.slow
def test_gradescope_results_say_what_to_do_about_a_missing_package(
    course: Path, tmp_path: Path
) -> None:
    root = tmp_path / "autograder"
    shutil.copytree(course / "submissions" / "imports-nobody", root / "submission")
    assert (
        run_autograder(root, course / "listing" / "bootcamp-short.toml", isolation="process")
        is False
    )
    results: dict[str, Any] = json.loads((root / "results" / "results.json").read_bytes())
    assert (results["score"], results["tests"]) == (0.0, [])
    error = results["extra_data"]["error"]
    assert error.startswith(
        f"the agent imports {NOBODY} (when the agent is imported), which "
        "the rubric's [packages] allows"
    )
    assert (
        "build the autograder again with `.venv/bin/gradekit gradescope build --out "
        "autograder`" in error
    )
    assert results["output"].startswith("**Not graded.** the agent imports ")
    assert not (root / "results" / "report.json").exists()
