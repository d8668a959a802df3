"""``gradekit check`` predicts the grade: the four mistakes students make most, each once
three green checkpoints and exit 0, now fail the check with the grade ``gradekit grade``
gives, what was lost and the fix that names the real cause."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from grader.cli import main
from grader.grading._checkpoints import _drawn, run_checkpoints
from grader.grading._draws import draw
from grader.rubric import load_rubric
from grader.sandbox import Host, wall_named
from tests.conftest import require_namespaces
from tests.submissions import make_submission


def _stale_prompts(root: Path) -> None:
    agent = root / "lab" / "agent.py"
    agent.write_text(
        agent.read_text("utf-8").replace(
            "You are a teaching assistant", "You are a helpful teaching assistant", 1
        ),
        "utf-8",
    )


def _corrupt_cassette(root: Path) -> None:
    cassette = root / "cassettes" / "sql-explain.json"
    cassette.write_text(cassette.read_text("utf-8")[:-40], "utf-8")


def _no_tracing(root: Path) -> None:
    agent = root / "lab" / "agent.py"
    text = agent.read_text("utf-8").replace("    llm = Traced(provider)\n", "    llm = provider\n")
    agent.write_text(text.replace("TracedTools(tools)", "tools"), "utf-8")


def _empty_failures(root: Path) -> None:
    (root / "FAILURES.md").write_text("", "utf-8")


MISTAKES: dict[str, tuple[Callable[[Path], None], str]] = {
    # make_submission's folder has no Makefile: check prints the kit's own command there.
    # the provider the cassettes were recorded with (SmolLM2 on llama.cpp), so it runs as printed
    "stale_prompts": (
        _stale_prompts,
        "`GRADEKIT_PROVIDER=llamacpp gradekit record --case "
        "refund-policy`; the prompt asked first differs",
    ),
    "corrupt_cassette": (_corrupt_cassette, "cassettes/sql-explain.json:22:2: not valid JSON"),
    "no_tracing": (_no_tracing, "Wrap the provider in Traced"),
    "empty_failures": (_empty_failures, "Write at least two complete failure entries"),
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
@pytest.mark.slow
def test_a_common_mistake_fails_the_check_with_the_grade_and_its_real_fix(
    mistake: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    mutate, fix = MISTAKES[mistake]
    root = make_submission(tmp_path / mistake)
    mutate(root)

    assert main(["check", str(root), "--wall", "process"]) == 1
    shown = capsys.readouterr().out
    assert main(["grade", str(root), "--out", str(tmp_path / "out"), "--wall", "process"]) == 0
    capsys.readouterr()
    report = json.loads((tmp_path / "out" / mistake / "report.json").read_bytes())

    assert f"grade now: {report['total']} / 100.00 " in shown  # what grade gives, exactly
    assert report["total"] != "100.00"
    for criterion in report["criteria"]:
        lost = criterion["points"] != criterion["max"]
        assert (f" of {criterion['title']} ({criterion['points']} / " in shown) is lost
    assert fix in shown
    assert "never read provider.name" not in shown  # the cause is not the label
    assert shown.splitlines()[-1].startswith("FAIL  in ")


@pytest.mark.slow
def test_the_reference_lab_passes_the_check_with_full_marks(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = make_submission(tmp_path / "alice")
    assert main(["check", str(root), "--wall", "process"]) == 0
    shown = capsys.readouterr().out
    assert [line[:4] for line in shown.splitlines()[:3]] == ["PASS"] * 3
    assert (
        "grade now: 100.00 / 100.00 (what gradekit grade gives this submission, same "
        "rubric, same grading); 25.00 of it pending human review (Written summary, Stretch "
        "goal)\n" in shown
    )
    assert "  lost " not in shown
    assert re.search(r"^PASS  in \d+\.\ds: every checkpoint passed", shown, re.MULTILINE)


def test_the_second_grading_deals_the_first_ones_seeds_out_anew() -> None:
    first, second = _drawn()
    assert sorted(second.seeds) == sorted(first.seeds)  # one host a seed serves both
    assert len(set(first.seeds)) == len(first.seeds) == len(first.labels)
    assert all(a != b for a, b in zip(first.seeds, second.seeds, strict=True))
    assert not set(second.more) & set(second.seeds)
    # The rest is drawn anew: what a submission could special-case differs between the two.
    assert (second.clock, second.probe, second.pick) != (first.clock, first.probe, first.pick)
    again, _ = _drawn()
    assert again.seeds != first.seeds  # a fresh key every check: nothing to learn


@pytest.mark.slow
def test_both_gradings_and_the_probe_fork_from_one_host_a_seed(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Checkpoint 3's second grading and checkpoint 1's probe start no host of their own:
    five hosts serve the whole check, and every run forks from one of them."""
    require_namespaces()
    started: list[int] = []
    forked: list[int] = []
    start, spawn = Host.__init__, Host.spawn

    def counted(self: Host, scratch: Path, hashseed: int, *args: Any, **kwargs: Any) -> None:
        started.append(hashseed)
        start(self, scratch, hashseed, *args, **kwargs)

    def told(self: Host, request: Mapping[str, Any], *args: Any) -> Any:
        forked.append(int(request["env"]["PYTHONHASHSEED"]))
        return spawn(self, request, *args)

    monkeypatch.setattr(Host, "__init__", counted)
    monkeypatch.setattr(Host, "spawn", told)
    root = make_submission(tmp_path / "alice")
    rubric = load_rubric(Path(__file__).parents[3] / "rubric" / "bootcamp.toml")

    checked = run_checkpoints(root, rubric, wall=wall_named("namespaces"))

    assert [point.passed for point in checked.checkpoints] == [True, True, True]
    assert "in two gradings" in checked.checkpoints[2].reason
    assert checked.report is not None
    assert len(started) == len(set(started)) == len(draw().labels)
    assert set(forked) == set(started)  # every seed served runs, and only those hosts did
    assert len(forked) > 2 * len(started)  # two gradings and the probe, not one run a host
