"""Attacks on the grader's parent process: hostile submission files and hostile report text.

A student controls every file of a submission and every string their code produces.
The parent must read submission files only as regular files inside the submission, a
bounded number of bytes each, and must render student text in report.md and Gradescope's
results.json as text that cannot link, embed, or format anything. Each test here is an
attack that worked on the grader before these bounds existed.

It tests the private openers ``_open_at`` and ``_open_by_path``
(``grader.submission._files``) on purpose: each must refuse what the other does.
"""

from __future__ import annotations

import functools
import json
import os
import re
import resource
import threading
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import TypeVar

import pytest

from grader import (
    CheckResult,
    CriterionResult,
    ManifestError,
    Report,
    RunResult,
    load_manifest,
    load_rubric,
)
from grader.grading._grade import _second_set, grade_submission
from grader.grading._inputs import _inputs
from grader.grading._reading import _cassettes, _failures, _fixtures
from grader.grading._rerecording import _rerecording_problem
from grader.outputs import render_gradescope, render_markdown, render_report_json, report_digest
from grader.recordings import append_change, digest_file
from grader.rubric import Case
from grader.sandbox import RunPlan, Serving
from grader.submission import Manifest
from tests.grader.outputs.test_render_commonmark import shown as shown_line
from tests.submissions import REFERENCE, make_submission

T = TypeVar("T")

CASES = (Case("one", "first task"),)
SECRET = "grader-secret-7f3a9c"  # what an outside file holds; it must never reach a report
PYPROJECT = '[tool.gradekit]\nagent = "lab.agent:run"\n'
MIB = 1024 * 1024
WITHIN = 60.0  # seconds a parent-side read may take before the test calls it a hang
HOSTILE = (
    "[click me](http://evil.example/steal) ![](http://tracker.example/pixel.gif) "
    "<img src=x onerror=alert(1)> a | b # heading `code` &lt;b&gt; **bold** "
    "<http://evil.example> www.evil.example mail@evil.example ~~gone~~ \\"
)


# -- helpers ----------------------------------------------------------------------------


def finish(call: Callable[[], T], *, fifo: Path | None = None, within: float = WITHIN) -> T:
    """``call()``, failing the test instead of hanging when it does not return in time."""
    box: dict[str, T] = {}
    errors: list[BaseException] = []

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # re-raised in the test's own thread
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(within)
    if thread.is_alive():
        if fifo is not None:  # a writer that closes at once unblocks the reader
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(5)
        pytest.fail(f"the grader was still blocked after {within} s on a submission file")
    if errors:
        raise errors[0]
    return box["value"]


@pytest.fixture
def memory_ceiling() -> Iterator[None]:
    """At most 1 GiB more address space: a regression raises MemoryError, not an OOM kill."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    status = Path("/proc/self/status").read_text(encoding="ascii")
    used = int(re.search(r"VmSize:\s+(\d+) kB", status)[1]) * 1024  # type: ignore[index]
    ceiling = used + 1024 * MIB
    resource.setrlimit(resource.RLIMIT_AS, (min(ceiling, hard) if hard > 0 else ceiling, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An empty submission folder, with ``tmp_path/outside`` beside it."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "one.json").write_text(json.dumps({"k" * 16: SECRET}), "utf-8")
    (tmp_path / "outside" / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    folder = tmp_path / "alice"
    folder.mkdir()
    return folder


def sparse(path: Path, size: int) -> Path:
    """A file of ``size`` zero bytes that takes no disk space."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.truncate(size)
    return path


def live(text: str) -> list[str]:
    """The tags GitHub's renderer makes of one escaped line beyond its paragraph and code
    spans (a student's backticks make code, in which nothing is read): none, if inert."""
    return [tag for tag in shown_line(text)[0] if tag not in ("p", "code")]


def unescape(text: str) -> str:
    """What GitHub's renderer shows for one escaped line."""
    return shown_line(text)[1]


# -- submission files: FAILURES.md ------------------------------------------------------


def test_failures_linked_to_dev_zero_is_a_finding_not_a_memory_error(
    root: Path, memory_ceiling: None
) -> None:
    (root / "FAILURES.md").symlink_to("/dev/zero")
    assert finish(lambda: _failures(root, None)) == (
        None,
        ["FAILURES.md is a symlink: the grader follows no links, so commit the file itself"],
    )


def test_failures_as_a_fifo_is_a_finding_and_never_blocks(root: Path) -> None:
    os.mkfifo(root / "FAILURES.md")
    text, findings = finish(lambda: _failures(root, None), fifo=root / "FAILURES.md")
    assert text is None
    assert len(findings) == 1
    assert "FAILURES.md is not a regular file (it is a FIFO)" in findings[0]
    assert "commit an ordinary file" in findings[0]


def test_failures_linked_to_a_terminal_never_blocks(root: Path) -> None:
    (root / "FAILURES.md").symlink_to("/proc/self/fd/0")
    text, findings = finish(lambda: _failures(root, None))
    assert text is None and findings and "symlink" in findings[0]


def test_a_failure_log_larger_than_its_cap_is_a_finding(root: Path) -> None:
    sparse(root / "FAILURES.md", 256 * 1024 + 1)
    assert _failures(root, None) == (
        None,
        ["FAILURES.md is larger than 256 KiB, the most the grader reads: make it smaller"],
    )


# -- submission files: cassettes and fixtures ---------------------------------------------


def test_a_cassette_linked_outside_is_refused_and_never_served(root: Path) -> None:
    (root / "cassettes").mkdir()
    (root / "cassettes" / "one.json").symlink_to(root.parent / "outside" / "one.json")
    read = _cassettes(root, "cassettes", CASES)
    assert read.by_case == {}
    assert read.problems == {
        "one": "cassettes/one.json is a symlink: the grader follows no "
        "links, so commit the file itself"
    }


@pytest.mark.parametrize("target", ["outside", "/etc"])
def test_a_linked_folder_on_the_path_is_refused(root: Path, target: str) -> None:
    (root / "cassettes").symlink_to(root.parent / target)
    (root / "fixtures").symlink_to(root.parent / target)
    read = _cassettes(root, "cassettes", CASES)
    fixtures, found = _fixtures(root, Manifest(root, "lab.agent:run"), CASES)
    assert read.by_case == fixtures == {}
    findings = [*read.problems.values(), *found]
    assert findings == [
        f"{folder} (on the path {folder}/one.json) is a symlink: the grader follows no links, "
        "so commit the folder itself"
        for folder in ("cassettes", "fixtures")
    ]
    assert SECRET not in " ".join(findings)


@pytest.mark.parametrize("folder", ["cassettes", "fixtures"])
def test_a_recording_larger_than_its_cap_is_a_finding(root: Path, folder: str) -> None:
    sparse(root / folder / "one.json", 16 * MIB + 1)
    read, findings = _read(root, folder)
    assert read == {}
    assert findings == [
        f"{folder}/one.json is larger than 16 MiB, the most the grader reads: make it smaller"
    ]


@pytest.mark.parametrize("data", [b"[" * 100_000, b'{"k": ' + b"1" * 5000 + b"}"])
@pytest.mark.parametrize("folder", ["cassettes", "fixtures"])
def test_a_recording_json_cannot_decode_is_a_finding_not_a_crash(
    root: Path, folder: str, data: bytes
) -> None:
    (root / folder).mkdir()
    (root / folder / "one.json").write_bytes(data)
    read, findings = _read(root, folder)
    assert read == {}
    assert len(findings) == 1 and findings[0].startswith(
        f"{folder}/one.json cannot be used: {folder}/one.json: not valid JSON ("
    )
    assert f"`git checkout -- {folder}/one.json`" in findings[0]


def _read(root: Path, folder: str) -> tuple[dict[str, object], list[str]]:
    """What the parent read of ``folder`` (cassettes or fixtures), and its findings."""
    if folder == "cassettes":
        read = _cassettes(root, "cassettes", CASES)
        return dict(read.by_case), list(read.problems.values())
    fixtures, findings = _fixtures(root, Manifest(root, "lab.agent:run"), CASES)
    return dict(fixtures), findings


def test_a_missing_cassette_still_says_to_record_it(root: Path) -> None:
    read = _cassettes(root, "cassettes", CASES)
    assert read.by_case == {}
    assert list(read.problems.values()) == [
        "cassettes/one.json is missing: if `git status` lists it, commit it (`git add "
        "cassettes/one.json`); otherwise record it with `make record ARGS='--case one'` and "
        "commit it"
    ]


def test_a_linked_second_cassette_folder_is_refused(root: Path) -> None:
    (root / "c2").symlink_to(root.parent / "outside")
    manifest = Manifest(
        root=root, agent="lab.agent:run", stretch=("two-providers",), second_cassettes="c2"
    )
    rubric = load_rubric(REFERENCE / "rubric" / "bootcamp.toml")
    ran: list[str] = []

    def run(name: str, plan: RunPlan) -> RunResult:
        ran.append(name)
        return RunResult({})

    plan = RunPlan("openai:gpt-4o-mini", 7, Serving(lambda case, prompt: None))
    second, problem, findings = _second_set(root, manifest, rubric, run, plan, {})
    assert (second, ran, findings) == (None, [], [])
    assert problem == "c2 is a symlink: the grader follows no links, so commit the folder itself"


# -- submission files: pyproject.toml, the change log, the report's inputs ----------------


def test_a_linked_pyproject_is_a_manifest_error(root: Path) -> None:
    (root / "pyproject.toml").symlink_to(root.parent / "outside" / "pyproject.toml")
    with pytest.raises(ManifestError) as caught:
        load_manifest(root)
    assert str(caught.value) == (
        "pyproject.toml is a symlink: the grader follows no links, so commit the file itself"
    )


def test_a_pyproject_fifo_is_a_manifest_error_and_never_blocks(root: Path) -> None:
    os.mkfifo(root / "pyproject.toml")
    with pytest.raises(ManifestError, match=r"pyproject\.toml is not a regular file"):
        finish(lambda: load_manifest(root), fifo=root / "pyproject.toml")


def test_a_pyproject_larger_than_its_cap_is_a_manifest_error(root: Path) -> None:
    sparse(root / "pyproject.toml", 256 * 1024 + 1)
    with pytest.raises(ManifestError, match=r"larger than 256 KiB"):
        load_manifest(root)


def test_a_pyproject_that_is_not_utf8_is_a_manifest_error(root: Path) -> None:
    (root / "pyproject.toml").write_bytes(b'[tool.gradekit]\nagent = "\xff"\n')
    with pytest.raises(ManifestError, match="not UTF-8"):
        load_manifest(root)


def test_a_change_log_entry_through_a_link_does_not_match(root: Path) -> None:
    outside = root.parent / "outside" / "one.json"
    (root / "linked").symlink_to(outside.parent)
    append_change(
        root / "DATASET_CHANGES.md",
        date="2026-11-29",
        case="one",
        kind="cassette",
        changed_keys=["k"],
        reason="r",
        digests={"linked/one.json": digest_file(outside)},
    )
    problem = _rerecording_problem(root, Manifest(root, "lab.agent:run", fixtures="linked"))
    assert problem is not None and "no DATASET_CHANGES.md entry's digests match" in problem


def test_a_linked_change_log_cannot_be_read(root: Path) -> None:
    log = root.parent / "outside" / "DATASET_CHANGES.md"
    append_change(
        log,
        date="2026-11-29",
        case="one",
        kind="cassette",
        changed_keys=["k"],
        reason="r",
        digests={"cassettes/one.json": "ab" * 32},
    )
    (root / "DATASET_CHANGES.md").symlink_to(log)
    assert _rerecording_problem(root, Manifest(root, "lab.agent:run")) == (
        "DATASET_CHANGES.md cannot be read: DATASET_CHANGES.md is a symlink: the grader "
        "follows no links, so commit the file itself"
    )


def test_inputs_leave_out_what_cannot_be_read_safely(root: Path) -> None:
    (root / "FAILURES.md").symlink_to(root.parent / "outside" / "one.json")
    (root / "cassettes").mkdir()
    (root / "cassettes" / "one.json").write_text("{}", encoding="utf-8")
    os.mkfifo(root / "fixtures")
    inputs = finish(lambda: _inputs(root, None, CASES), fifo=root / "fixtures")
    assert list(inputs) == ["cassettes/one.json"]


def test_paths_that_leave_the_submission_are_refused_unopened(root: Path) -> None:
    from grader.submission import SubmissionFileError, read_submission_file

    for path in ("../outside/one.json", "/etc/passwd", "", ".", "a\0b"):
        with pytest.raises(SubmissionFileError, match="is not a path inside the submission"):
            read_submission_file(root, path, cap=MIB)


def test_a_missing_file_is_told_apart_from_a_refused_one(root: Path) -> None:
    from grader.submission import MissingSubmissionFile, SubmissionFileError, read_submission_file

    (root / "real").mkdir()
    (root / "real" / "file").write_bytes(b"ok")
    assert read_submission_file(root, "real/file", cap=2) == b"ok"
    for missing in ("nothing", "nowhere/file"):
        with pytest.raises(MissingSubmissionFile, match=f"{missing} is missing"):
            read_submission_file(root, missing, cap=MIB)
    with pytest.raises(SubmissionFileError, match="is a file, not a folder") as caught:
        read_submission_file(root, "real/file/deeper", cap=MIB)
    assert not isinstance(caught.value, MissingSubmissionFile)
    with pytest.raises(SubmissionFileError, match="real/file is larger than 1 byte,"):
        read_submission_file(root, "real/file", cap=1)


def test_the_path_walk_without_openat_refuses_the_same(root: Path) -> None:
    from grader.submission._files import SubmissionFileError, _open_at, _open_by_path

    (root / "real").mkdir()
    (root / "real" / "file").write_bytes(b"ok")
    (root / "linked").symlink_to(root / "real")
    (root / "file-link").symlink_to(root / "real" / "file")
    os.mkfifo(root / "fifo")
    refused = {
        "linked/file": "linked (on the path linked/file) is a symlink",
        "file-link": "file-link is a symlink",
        "fifo": "fifo is not a regular file",
        "real/file/x": "real/file (on the path real/file/x) is a file, not a folder",
        "real": "real is not a regular file (it is a folder)",
        "nothing/x": "nothing/x is missing",
    }
    for opener in (_open_at, _open_by_path):  # the second is what Windows runs
        fd = opener(root, "real/file", ("real", "file"))
        assert os.read(fd, 10) == b"ok"
        os.close(fd)
        for relative, message in refused.items():
            with pytest.raises(SubmissionFileError, match=re.escape(message)):
                finish(
                    functools.partial(opener, root, relative, tuple(relative.split("/"))),
                    fifo=root / "fifo",
                )


# -- reports: student text is inert and bounded -------------------------------------------


def hostile_report(detail: str = HOSTILE, findings: tuple[str, ...] = (HOSTILE,)) -> Report:
    """A report whose submission name, a check id, a detail and a finding are all hostile."""
    checks = (
        CheckResult(HOSTILE, False, Decimal("0.00"), Decimal("5.00"), detail),
        CheckResult("fine", True, Decimal("5.00"), Decimal("5.00"), "ok"),
    )
    criterion = CriterionResult(
        "stretch_goal",
        "Stretch goal",
        Decimal("5.00"),
        Decimal("10.00"),
        checks,
        advice=(f"Complete these: {HOSTILE}",),
    )
    return Report(
        submission=HOSTILE,
        rubric_id="lab",
        rubric_version=1,
        rubric_sha256="ab" * 32,
        inputs={},
        criteria=(criterion,),
        findings=findings,
    )


def test_markup_in_student_text_renders_inert_in_report_md() -> None:
    escaped = (
        "\\[click me\\](http\\://evil\\.example/steal) "
        "\\!\\[\\](http\\://tracker\\.example/pixel\\.gif) "
        "\\<img src=x onerror=alert(1)\\> a \\| b \\# heading `code` "
        "\\&lt;b\\&gt; \\*\\*bold\\*\\* \\<http\\://evil\\.example\\> "
        "www\\.evil\\.example mail`@`evil\\.example \\~\\~gone\\~\\~ \\\\"
    )
    assert live(escaped) == [] and unescape(escaped) == HOSTILE.replace("`", "")
    lines = render_markdown(hostile_report()).splitlines()
    assert [line for line in lines if "click me" in line] == [
        f"# Grade report: {escaped}",
        f"| Stretch goal | 5.00 | 10.00 | lost: {escaped} |",  # a student pipe splits no cell
        f"- {escaped} (0.00 / 5.00): {escaped}",
        f"- Complete these: {escaped}",
        f"- {escaped}",
    ]


def test_gradescope_tests_are_plain_text_and_its_summary_is_escaped() -> None:
    results = json.loads(render_gradescope(hostile_report(), report_digest(hostile_report())))
    assert results["output_format"] == "md"
    assert results["output"] == render_markdown(hostile_report())
    for test in results["tests"]:  # text: Gradescope renders no HTML, Markdown or ANSI
        assert (test["output_format"], test["name_format"]) == ("text", "text")
    lost = results["tests"][0]
    assert lost["output"].startswith(HOSTILE)
    assert lost["name"] == f"Stretch goal: {HOSTILE}"


def test_control_characters_are_shown_not_sent_to_a_terminal() -> None:
    sneaky = "ok\x1b[2J\x1b]8;;http://evil.example\x07link\u202egnp.exe\x00"
    report = hostile_report(detail=sneaky, findings=(sneaky,))
    for output in (
        render_markdown(report).encode(),
        render_gradescope(report, "d" * 64),
        render_report_json(report),
    ):
        assert not re.search(rb"\x1b|\x07|\x00|\xe2\x80\xae", output)
        assert b"x1b" in output and b"u202e" in output


def test_a_lone_surrogate_is_reported_not_a_crash() -> None:
    report = hostile_report(detail="half \ud800 a pair", findings=("\udcff",))
    assert "ud800" in json.loads(render_report_json(report))["criteria"][0]["checks"][0]["detail"]
    assert "udcff" in render_markdown(report)


def test_a_megabyte_detail_is_cut_with_a_marker() -> None:
    report = hostile_report(detail="x" * 1_000_000, findings=("y" * 1_000_000,))
    text = render_markdown(report)
    gradescope = json.loads(render_gradescope(report, "d" * 64))
    document = json.loads(render_report_json(report))
    assert len(text) < 20_000 and len(render_gradescope(report, "d" * 64)) < 40_000
    lost = text.split("(0.00 / 5.00): ", 1)[1].splitlines()[0]
    for shown, char in (
        (unescape(lost), "x"),
        (gradescope["tests"][0]["output"].split("\n")[0], "x"),
        (document["criteria"][0]["checks"][0]["detail"], "x"),
        (document["findings"][0], "y"),
    ):
        marker = re.fullmatch(rf"({char}+)… \[cut: (\d+) more characters\]", shown)
        assert marker is not None, shown[-80:]
        assert len(marker[1]) + int(marker[2]) == 1_000_000


def test_five_hundred_findings_show_fifty_and_a_count() -> None:
    findings = tuple(f"finding number {n}" for n in range(500))
    text = render_markdown(hostile_report(findings=findings))
    listed = text.split("## Findings\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert listed[:50] == [f"- finding number {n}" for n in range(50)]
    assert listed[50:] == [
        "- … and 450 more findings: fix the ones above first; report.json lists them all"
    ]
    assert len(json.loads(render_report_json(hostile_report(findings=findings)))["findings"]) == 500


# -- end to end: one hostile submission through grade_submission --------------------------


@pytest.mark.slow
def test_a_hostile_submission_is_graded_promptly_and_leaks_nothing(
    tmp_path: Path, memory_ceiling: None
) -> None:
    submission = make_submission(tmp_path / "mallory")
    outside = tmp_path / "outside.json"
    cassette = submission / "cassettes" / "refund-policy.json"
    outside.write_text(
        cassette.read_text("utf-8").replace('"response": "', f'"response": "{SECRET} ', 1), "utf-8"
    )
    cassette.unlink()
    cassette.symlink_to(outside)
    (submission / "FAILURES.md").unlink()
    (submission / "FAILURES.md").symlink_to("/dev/zero")
    pyproject = submission / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text("utf-8").replace(
            'stretch = ["two-providers"]', 'stretch = ["[pwned](http://evil.example) <img src=x>"]'
        ),
        encoding="utf-8",
    )
    rubric = load_rubric(REFERENCE / "rubric" / "bootcamp.toml")
    graded = finish(
        lambda: grade_submission(
            submission,
            rubric,
            submission="mallory",
            label="provider-a",
            scratch=tmp_path / "scratch",
        ),
        within=600,
    )
    report = graded.report
    assert (
        "cassettes/refund-policy.json is a symlink: the grader follows no links, so commit "
        "the file itself" in report.findings
    )
    assert (
        "FAILURES.md is a symlink: the grader follows no links, so commit the file itself"
        in report.findings
    )
    assert "FAILURES.md" not in report.inputs
    assert "cassettes/refund-policy.json" not in report.inputs
    text = render_markdown(report)
    goal = "\\[pwned\\](http\\://evil\\.example) \\<img src=x\\>"  # the escaped id
    assert live(goal) == []
    assert (
        f"- {goal} (0.00 / 10.00): unknown stretch goal '{goal}'; known: rerecord-review, "
        "tool-fixtures, cut-point, two-providers" in text.splitlines()
    )
    for output in (text.encode(), render_gradescope(report, "d" * 64), render_report_json(report)):
        assert SECRET.encode() not in output
