"""The submission is laid out once per grading and compiled once; each run still writes only
in a copy of its own. Real children behind each wall, real files in tmp folders."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from grader import Limits, RunResult
from grader.sandbox import RunPlan, Sandbox, Serving, Wall, harness_code

pytestmark = pytest.mark.slow

LIMITS = Limits(timeout_s=60)
TAG = sys.implementation.cache_tag

AGENT = """
import gc, importlib, os, sys, _thread
from pathlib import Path


def hook_off():
    for obj in gc.get_objects():
        if getattr(obj, "__name__", "") == "guard" and getattr(obj, "__closure__", None):
            for cell in obj.__closure__:
                if isinstance(cell.cell_contents, set):
                    cell.cell_contents.add(_thread.get_ident())
                    return


def run(provider, task):
    name, _, arg = task.partition(" ")
    return str(globals()["do_" + name](arg))


def do_write(arg):  # in its own copy: its cwd
    Path("written.txt").write_text(arg)
    return sorted(p.name for p in Path(".").iterdir() if p.suffix == ".txt")


def do_edit(arg):  # rewrite a compiled module, then import it
    Path("lab", "extra.py").write_text(f"VALUE = {arg!r}\\n")
    importlib.invalidate_caches()
    import lab.extra
    return lab.extra.VALUE


def do_extra(arg):
    import lab.extra
    return lab.extra.VALUE


def do_poison(arg):  # with the hook off: the laid-out copy, behind namespaces
    hook_off()
    try:
        Path(arg).write_text("VALUE = 'poisoned'\\n")
        return "written"
    except OSError as exc:
        return type(exc).__name__
"""


@pytest.fixture
def submission(tmp_path: Path) -> Path:
    root = tmp_path / "submission"
    (root / "lab").mkdir(parents=True)
    (root / "lab" / "__init__.py").write_text("")
    (root / "lab" / "agent.py").write_text(AGENT)
    (root / "lab" / "extra.py").write_text("VALUE = 'original'\n")
    (root / "notes.txt").write_text("the student's\n")
    return root


def _run(sandbox: Sandbox, task: str, name: str) -> str:
    case = task.split(" ")[0]
    result: RunResult = sandbox.within(name).run(
        "lab.agent:run", [(case, task)], RunPlan("provider-a", 7, Serving(lambda c, p: None))
    )
    outcome = result.outcomes[case]
    assert outcome.status == "returned", (outcome, result.import_error, result.stderr)
    assert outcome.answer is not None
    return outcome.answer


def test_one_layout_serves_every_run_and_no_run_sees_anothers_writes(
    submission: Path, tmp_path: Path, isolation: Wall
) -> None:
    sandbox = Sandbox(submission, tmp_path / "scratch", LIMITS, isolation)
    assert _run(sandbox, "write first", "one") == "['notes.txt', 'written.txt']"
    assert _run(sandbox, "write second", "two") == "['notes.txt', 'written.txt']"
    laid = sorted((tmp_path / "scratch").glob("*/submission-*/copy"))
    assert len(laid) == 1  # laid out by the first run, copied by both
    assert not (laid[0] / "written.txt").exists()
    assert not (submission / "written.txt").exists()
    assert sorted(p.name for p in submission.iterdir()) == ["lab", "notes.txt"]


def test_the_agents_package_is_compiled_once_and_an_edited_module_is_imported_anew(
    submission: Path, tmp_path: Path, isolation: Wall
) -> None:
    sandbox = Sandbox(submission, tmp_path / "scratch", LIMITS, isolation)
    assert _run(sandbox, "extra", "one") == "original"
    (laid,) = (tmp_path / "scratch").glob("*/submission-*/copy")
    compiled = sorted(p.name for p in (laid / "lab" / "__pycache__").iterdir())
    assert compiled == [f"{name}.{TAG}.pyc" for name in ("__init__", "agent", "extra")]
    # A checked-hash pyc: a run that rewrites the module imports what it wrote.
    assert _run(sandbox, "edit edited", "two") == "edited"
    assert _run(sandbox, "extra", "three") == "original"
    assert not (submission / "lab" / "__pycache__").exists()  # the original is not written


def test_a_grading_sees_its_submission_as_it_was_when_its_first_run_began(
    submission: Path, tmp_path: Path, isolation: Wall
) -> None:
    sandbox = Sandbox(submission, tmp_path / "scratch", LIMITS, isolation)
    assert _run(sandbox, "extra", "one") == "original"
    (submission / "lab" / "extra.py").write_text("VALUE = 'changed'\n")
    assert _run(sandbox, "extra", "two") == "original"
    fresh = Sandbox(submission, tmp_path / "fresh", LIMITS, isolation)
    assert _run(fresh, "extra", "one") == "changed"


def test_a_module_that_warns_at_compile_time_is_left_for_the_child(
    submission: Path, tmp_path: Path, isolation: Wall
) -> None:
    (submission / "lab" / "extra.py").write_text("VALUE = 'orig' 'inal' if 1 is 1 else ''\n")
    sandbox = Sandbox(submission, tmp_path / "scratch", LIMITS, isolation)
    result = sandbox.run(
        "lab.agent:run", [("extra", "extra")], RunPlan("provider-a", 7, Serving(lambda c, p: None))
    )
    assert result.outcomes["extra"].answer == "original"
    assert "SyntaxWarning" in result.stderr  # printed by the child, as without a layout
    (laid,) = (tmp_path / "scratch").glob("submission-*/copy")
    assert not (laid / "lab" / "__pycache__" / f"extra.{TAG}.pyc").exists()
    assert (laid / "lab" / "__pycache__" / f"agent.{TAG}.pyc").exists()


def test_behind_namespaces_the_laid_out_copy_cannot_be_poisoned_for_later_runs(
    submission: Path, tmp_path: Path
) -> None:
    from grader.sandbox import NamespacesWall
    from tests.conftest import require_namespaces

    require_namespaces()
    sandbox = Sandbox(submission, tmp_path / "scratch", LIMITS, NamespacesWall())
    for target in (
        "/gradekit/original/lab/extra.py",
        f"/gradekit/original/lab/__pycache__/extra.{TAG}.pyc",
    ):
        assert _run(sandbox, f"poison {target}", "one") in ("OSError", "PermissionError")
    assert _run(sandbox, "extra", "two") == "original"


def test_the_harness_is_compiled_once_per_process_and_readable_by_every_user() -> None:
    code = harness_code()
    assert code is harness_code()  # once per process
    assert code.name == "_harness.pyc" and code.read_bytes()[:4] == _magic()
    assert code.stat().st_mode & 0o777 == 0o644 and code.parent.stat().st_mode & 0o777 == 0o755


def _magic() -> bytes:
    import importlib.util

    return importlib.util.MAGIC_NUMBER


def test_a_laid_out_copy_is_readable_to_every_user_and_no_link_in_it_is_followed(
    submission: Path, tmp_path: Path
) -> None:
    from grader.sandbox import LaidOut, readable

    outside = tmp_path / "outside.txt"
    outside.write_text("not the submission's")
    outside.chmod(0o600)
    (submission / "lab" / "secret.py").write_text("X = 1\n")
    (submission / "lab" / "secret.py").chmod(0o600)
    (submission / "link.txt").symlink_to(outside)
    (submission / "notes").mkdir(mode=0o700)
    (submission / "notes" / "data.txt").write_text("read by the agent")
    (submission / "notes" / "data.txt").chmod(0o600)
    umask = os.umask(0o077)  # a grader's own umask: what it makes, it makes private
    try:
        copy = LaidOut().source(submission, tmp_path / "scratch", ["lab"])
    finally:
        os.umask(umask)
    assert (copy / "lab" / "secret.py").stat().st_mode & 0o777 == 0o644
    assert (copy / "lab" / "__pycache__").stat().st_mode & 0o777 == 0o755
    compiled = list((copy / "lab" / "__pycache__").glob("secret.*.pyc"))
    assert compiled and compiled[0].stat().st_mode & 0o777 == 0o644
    assert (copy / "notes").stat().st_mode & 0o777 == 0o755  # not compiled: made readable
    assert (copy / "notes" / "data.txt").stat().st_mode & 0o777 == 0o644
    assert copy.stat().st_mode & 0o777 == 0o755
    assert (copy / "link.txt").is_symlink()
    readable(copy)
    assert outside.stat().st_mode & 0o777 == 0o600  # the link's target was not touched


@pytest.mark.slow
def test_a_copy_laid_out_ahead_is_the_one_every_run_sees_and_a_partial_one_is_not(
    submission: Path, tmp_path: Path, isolation: Wall
) -> None:
    """A batch's idle helper lays the next submission out in its scratch folder before its
    grading begins (``LAID_AHEAD``, renamed so once whole): the grading's runs use that copy
    instead of copying again. One still being laid out (another name), or a link where
    the folder would be, is not used: the grading copies the submission itself."""
    from grader.sandbox import LAID_AHEAD, copy_submission

    def laid_ahead(scratch: Path, name: str) -> Path:
        copy_submission(str(submission), str(scratch / name / "copy"), (), shared=True)
        (scratch / name / "copy" / "lab" / "extra.py").write_text("VALUE = 'laid ahead'\n")
        return scratch / name

    scratch = tmp_path / "scratch"
    ahead = laid_ahead(scratch, LAID_AHEAD)
    sandbox = Sandbox(submission, scratch, LIMITS, isolation)
    assert _run(sandbox, "extra", "one") == "laid ahead"
    assert _run(sandbox, "write x", "two") == "['notes.txt', 'written.txt']"
    assert not list(scratch.glob("*/submission-*"))  # no second copy was made
    assert (ahead / "copy" / "lab" / "__pycache__").is_dir()  # compiled where it lies

    partial = tmp_path / "partial"
    laid_ahead(partial, f"{LAID_AHEAD}.laying")
    assert _run(Sandbox(submission, partial, LIMITS, isolation), "extra", "one") == "original"

    empty = tmp_path / "empty"
    (empty / LAID_AHEAD).mkdir(parents=True)  # a folder with no copy in it
    assert _run(Sandbox(submission, empty, LIMITS, isolation), "extra", "one") == "original"

    linked = tmp_path / "linked"
    elsewhere = laid_ahead(tmp_path / "elsewhere", "folder")
    linked.mkdir()
    (linked / LAID_AHEAD).symlink_to(elsewhere)
    assert _run(Sandbox(submission, linked, LIMITS, isolation), "extra", "one") == "original"
