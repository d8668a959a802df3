"""The verdict for the mistakes students really make, end to end: ``gradekit check`` names
them and ``gradekit grade`` charges them, on agents of the corpus (tests/corpus/) recorded
for real against the loopback server.

- A tool-first agent that swallows the miss of its first model call: checkpoint 2 fails
  naming the case and the call, and every case loses its loud-failure points.
- An agent that branches on ``"gpt" in provider.name``: checkpoint 3 fails naming the case
  and the cause, and it loses its stability points in every grading, twelve of twelve.
- An agent whose answer follows set order: checkpoint 3 names the hash seed.
- The hand-out's unwritten ``run()``: every checkpoint names it, with the first thing to do.
- An agent with no recordings at all earns nothing for loud failure or tracing.
"""

from __future__ import annotations

import json
import secrets
import shutil
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from grader.grading._grade import grade_submission
from grader.rubric import load_rubric
from tests.e2e.test_corpus import HONEST, MANIFEST, Said, build, gradekit
from tests.loopback import Loopback, echo
from tests.submissions import short_rubric

pytestmark = pytest.mark.slow

SHAPE = "tool_first"
# Wrappers around the shape's honest agent, each one mistake, as lab/<name>.py.
AGENTS = {
    "gpt_heading": '''\
"""GPT answers get a heading: they "read better that way"."""

from lab.agent import run as plain


def run(provider, task, tools):
    answer = plain(provider, task, tools)
    return "Answer:\\n" + answer if "gpt" in provider.name else answer
''',
    "keywords": '''\
"""The answer ends with its keywords, from a set of the words it found."""

from lab.agent import run as plain


def run(provider, task, tools):
    answer = plain(provider, task, tools)
    words = {word.strip(".,:;?").lower() for word in task.split() if len(word) > 6}
    return answer + "\\n\\nKeywords: " + ", ".join(words)
''',
    "stub": '''\
"""The hand-out as given: run() is for the student to write."""


def run(provider, task, tools):
    raise NotImplementedError("lab/stub.py: write run()")
''',
}


@dataclass(frozen=True)
class Lab:
    """The recorded submissions (by name) and the short rubric they are graded on."""

    subs: Path
    rubric: Path

    def check(self, name: str) -> Said:
        return gradekit("check", str(self.subs / name), "--rubric", str(self.rubric))


def _submission(root: Path, module: str, url: str) -> Path:
    """The tool-first shape running ``module``: a corpus module or one of ``AGENTS``."""
    if module not in AGENTS:
        return build(root, SHAPE, module, url)
    build(root, SHAPE, HONEST, url)
    (root / "lab" / f"{module}.py").write_text(AGENTS[module], "utf-8")
    manifest = MANIFEST.format(name=module, agent=module, replay="gradekit:Replay")
    (root / "pyproject.toml").write_text(manifest, "utf-8")
    return root


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    root = tmp_path_factory.mktemp("verdict")
    subs, rubric = root / "submissions", short_rubric(root)
    with Loopback(default=echo()) as server:
        live = ("--provider", "openai-compatible", "--base-url", server.openai_url, "--model", "m")
        for module in (HONEST, "swallow_first", "gpt_heading", "keywords", "stub"):
            path = _submission(subs / module, module, server.openai_url)
            if module != "stub":  # the stub cannot record: it raises before asking anything
                said = gradekit(
                    "record", "--root", str(path), "--rubric", str(rubric), "--quiet", *live
                )
                assert said.code == 0, said.err
    no_recordings = subs / "no_recordings"
    shutil.copytree(subs / HONEST, no_recordings)
    for folder in ("cassettes", "fixtures"):
        shutil.rmtree(no_recordings / folder)
    return Lab(subs, rubric)


def _lines(said: Said) -> list[str]:
    return said.out.splitlines()


def test_an_honest_agent_passes_every_checkpoint(lab: Lab) -> None:
    said = lab.check(HONEST)
    assert said.code == 0, said.out
    assert [line[:4] for line in _lines(said)[:3]] == ["PASS"] * 3
    assert "the miss escaped run() in all " in _lines(said)[1]


def test_a_tool_first_swallower_fails_checkpoint_2_naming_the_case_and_the_call(lab: Lab) -> None:
    said = lab.check("swallow_first")
    first, second, third = _lines(said)[:3]
    assert said.code == 1
    assert first.startswith("PASS  1.") and third.startswith("PASS  3.")
    assert second.startswith("FAIL  2. A miss is loud")
    # The first case of the rubric, the first model call (after the glossary tool call).
    assert "case refund-policy, call 1 of 2 ('Background: " in second, second
    assert "run() returned" in second and "after the miss: a miss must raise" in second


def test_a_tool_first_swallower_loses_the_loud_failure_points_of_every_case(
    lab: Lab, tmp_path: Path
) -> None:
    report = _graded(lab, "swallow_first", tmp_path)
    loud = next(c for c in report["criteria"] if c["id"] == "loud_failure")
    per_case = [check for check in loud["checks"] if check["id"] != "own_replay"]
    assert len(per_case) == 4 and all(check["points"] == "0.00" for check in per_case)
    assert all(check["detail"].startswith("call 1 of 2 ('Background: ") for check in per_case)
    kept = {c["id"]: c["points"] for c in report["criteria"] if c["id"] != "loud_failure"}
    assert kept == _graded(lab, HONEST, tmp_path / "honest")["kept"]


def test_label_dependence_fails_checkpoint_3_naming_the_case_and_the_cause(lab: Lab) -> None:
    third = _lines(lab.check("gpt_heading"))[2]
    assert third.startswith("FAIL  3. Two providers, one score")
    assert (
        "case refund-policy: the answer changes with the provider's name alone: never "
        "read provider.name" in third
    )
    assert "hash seed" not in third.split("never read", 1)[0]


def test_hash_seed_dependence_fails_checkpoint_3_naming_the_seed(lab: Lab) -> None:
    third = _lines(lab.check("keywords"))[2]
    assert third.startswith("FAIL  3. Two providers, one score")
    assert (
        "case refund-policy: the answer changes with the hash seed alone: iterate over "
        "sets and dict keys in sorted order" in third
    )


def test_an_unwritten_run_is_named_on_every_checkpoint_with_the_first_thing_to_do(lab: Lab) -> None:
    said = lab.check("stub")
    lines = _lines(said)
    # The fixes the predicted grade lists start there too: recording cannot work yet.
    assert (
        "fix: refund-policy: write run() first: it raises NotImplementedError, as the "
        "hand-out's stub does; then record the case once" in said.out
    )
    fixes = [line for line in _lines(said) if line.strip().startswith("fix: ")]
    assert fixes and not [line for line in fixes if " is missing: " in line], fixes
    assert "Let every CassetteMiss" not in said.out  # no swallowed miss to blame
    for number, line in enumerate(lines[:3], 1):
        assert line.startswith(f"FAIL  {number}. "), line
        assert line.endswith(
            "run() is not written yet: it raises NotImplementedError in "
            "every case. Write it first in lab/stub.py (its docstring says "
            "what it must do), then record its answers once with "
            "`make record`"
        ), line


def test_a_gpt_branching_agent_loses_stability_in_twelve_gradings_of_twelve(
    lab: Lab, tmp_path: Path
) -> None:
    """Each grading draws with a key of its own, as twelve instructors' would."""
    rubric = load_rubric(lab.rubric)
    for number in range(12):
        graded = grade_submission(
            lab.subs / "gpt_heading",
            rubric,
            submission="gpt",
            scratch=tmp_path / str(number),
            draw_key=secrets.token_bytes(32),
        )
        stability = next(c for c in graded.report.criteria if c.id == "contract_stability")
        assert stability.points == 0, (number, [c.detail for c in stability.checks])


def test_the_same_key_grades_the_same_submission_the_same_way(lab: Lab, tmp_path: Path) -> None:
    """The draw is keyed: the same key and submission draw the same labels and seeds."""
    rubric, key = load_rubric(lab.rubric), secrets.token_bytes(32)
    labels = []
    for number in range(2):
        graded = grade_submission(
            lab.subs / "gpt_heading",
            rubric,
            submission="gpt",
            scratch=tmp_path / str(number),
            draw_key=key,
        )
        labels.append(graded.evidence.label)
    assert labels[0] == labels[1]


def test_an_agent_with_no_recordings_earns_nothing_for_loud_failure_or_tracing(
    lab: Lab, tmp_path: Path
) -> None:
    report = _graded(lab, "no_recordings", tmp_path)
    points = {c["id"]: Decimal(c["points"]) for c in report["criteria"]}
    assert points["loud_failure"] == points["tracing"] == points["contract_stability"] == 0
    loud = next(c for c in report["criteria"] if c["id"] == "loud_failure")
    assert {c["detail"] for c in loud["checks"]} == {
        "not probed: its primary run asked 1 tool call(s) the fixtures do not hold; record "
        "them first",
        "not credited: no case of the agent ran on its recordings, so nothing showed that a "
        "miss is loud",
    }


def _graded(lab: Lab, name: str, out: Path) -> dict[str, Any]:
    """``gradekit grade`` of one submission: its report, and ``kept``, the points of every
    criterion but loud failure."""
    said = gradekit(
        "grade", str(lab.subs / name), "--out", str(out), "--rubric", str(lab.rubric), "--quiet"
    )
    assert said.code == 0, said.out + said.err
    report: dict[str, Any] = json.loads((out / name / "report.json").read_bytes())
    report["kept"] = {c["id"]: c["points"] for c in report["criteria"] if c["id"] != "loud_failure"}
    return report
