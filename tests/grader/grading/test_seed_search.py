"""A case whose prompt joins a set of two words keeps its order under about half the hash
seeds, so the five seeds of a grading's runs can all agree with one another and still not
with the recording. The run then asks a recording's words in another order, and the grader
tries further seeds, one at a time, until one moves the prompt: the advice names the hash
seed whichever seeds the draw gave. Without those seeds (``more=()``), the same draw is told
as a plain miss, so the test shows what the search changes.

Eli's agent is written from scratch: two topic words, deduplicated with a set, joined into
every prompt. The seeds are picked by asking fresh interpreters for the set's order under
each seed, so the draw is the worst one on purpose.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from grader.grading import grade_submission
from grader.grading._draws import draw
from grader.rubric import load_rubric
from grader.scoring import BY_SEED, SEED_PROMPTS
from tests.submissions import REFERENCE, echo_provider, record_in_process

pytestmark = pytest.mark.slow
RUBRIC = REFERENCE / "rubric" / "bootcamp.toml"
TOPICS = '{"refunds", "deadlines"}'  # the agent's set, written the same way everywhere
AGENT = f'''
"""Eli's agent: the topics of the week, once each, then the task."""
from gradekit import Traced


def run(provider, task):
    topics = {TOPICS}
    return Traced(provider).complete("Topics: " + ", ".join(topics) + ". Task: " + task)
'''
MANIFEST = """\
[project]
name = "eli"
version = "0.1.0"

[tool.gradekit]
agent = "lab.agent:run"
replay = "gradekit:Replay"
"""


def _order(seed: int) -> str:
    """How the agent's set joins under ``seed``, told by an interpreter started with it."""
    said = subprocess.run(
        [sys.executable, "-S", "-c", f'print(", ".join({TOPICS}))'],
        env={"PYTHONHASHSEED": str(seed)},
        capture_output=True,
        text=True,
        check=True,
    )
    return said.stdout.strip()


@pytest.fixture(scope="module")
def eli(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Eli's recorded submission, and the order its recording joined the set in."""
    root = tmp_path_factory.mktemp("eli") / "eli"
    (root / "lab").mkdir(parents=True)
    (root / "lab" / "__init__.py").write_text("", "utf-8")
    (root / "lab" / "agent.py").write_text(AGENT.lstrip(), "utf-8")
    (root / "echo.py").write_text(echo_provider("You asked: ", 48), "utf-8")
    (root / "pyproject.toml").write_text(MANIFEST, "utf-8")
    (root / "FAILURES.md").write_bytes((REFERENCE / "FAILURES.md").read_bytes())
    assert record_in_process(root, RUBRIC, "echo:provider") == 0
    prompts = [
        entry["prompt"]
        for path in sorted((root / "cassettes").glob("*.json"))
        for entry in json.loads(path.read_bytes())["entries"].values()
    ]
    recorded = {prompt.partition(". Task:")[0].removeprefix("Topics: ") for prompt in prompts}
    assert len(recorded) == 1, recorded
    return root, recorded.pop()


def _grade(root: Path, tmp_path: Path, seeds: list[int], more: list[int]) -> dict[str, str]:
    """The contract-stability criterion's advice and each case's detail, graded under a draw
    with these seeds."""
    drawn = replace(draw(b"k" * 32, "eli"), seeds=tuple(seeds), more=tuple(more))
    assert len(drawn.labels) == len(seeds)
    graded = grade_submission(
        root, load_rubric(RUBRIC), submission="eli", scratch=tmp_path, drawn=drawn
    )
    stability = next(c for c in graded.report.criteria if c.id == "contract_stability")
    return {
        "advice": " ".join(stability.advice),
        **{check.id: check.detail for check in stability.checks},
    }


def test_seeds_that_all_keep_a_set_s_order_are_followed_by_one_that_moves_it(
    eli: tuple[Path, str], tmp_path: Path
) -> None:
    root, recorded = eli
    orders = {seed: _order(seed) for seed in range(1, 40)}
    assert set(orders.values()) == {recorded, ", ".join(reversed(recorded.split(", ")))}
    kept = [seed for seed, order in orders.items() if order != recorded]
    moved = [seed for seed, order in orders.items() if order == recorded]
    labels = len(draw(b"k" * 32, "eli").labels)
    # Every run of the draw asks the other order, the same in each: no run moves it.
    seeds, more = kept[:labels], [*kept[labels : labels + 2], moved[0]]
    told = _grade(root, tmp_path / "searched", seeds, more)
    assert SEED_PROMPTS in told["advice"], told
    assert all(detail == BY_SEED for name, detail in told.items() if name != "advice"), told
    # The same draw without the seeds to search: a plain miss, told to record again.
    plain = _grade(root, tmp_path / "plain", seeds, [])
    assert SEED_PROMPTS not in plain["advice"], plain
    assert "record" in plain["advice"], plain
