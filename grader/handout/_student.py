"""What the starter adds to the reference: the student's own tests (``tests/test_lab.py``:
the submission contract on scripted answers, a test skipping while the part it checks is a
stub) and, with ``--own-replay``, a stub ``Replay`` (``lab/replay.py``)."""

from __future__ import annotations

__all__ = ["REPLAY_STUB", "STUDENT_TESTS"]


REPLAY_STUB = '''\
"""Your own ``Replay``: answer every prompt from a recorded cassette, offline.

The manifest names it (``replay = "lab.replay:Replay"`` in pyproject.toml) and the
grader probes it: a recorded prompt asked with extra leading and trailing whitespace
must get its recorded answer, and a prompt the cassette does not hold must raise
``gradekit.CassetteMiss``, never answer. The cassette's format and its keys
(``gradekit.prompt_key``) are in docs/formats.md; ``tests/test_lab.py`` checks both.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["Replay"]


class Replay:
    """A provider that serves the answers recorded in the cassette at ``path``."""

    def __init__(self, path: str | Path, *, name: str = "replay") -> None:
        self.name = name
        self.path = Path(path)

    def complete(self, prompt: str) -> str:
        """The answer recorded for ``prompt``; ``CassetteMiss`` when there is none."""
        raise NotImplementedError(
            "lab/replay.py: read the cassette, look the prompt up by prompt_key(prompt) "
            "(outer whitespace is not part of a prompt) and raise CassetteMiss on a miss"
        )
'''

STUDENT_TESTS = '''\
"""Your lab's own tests: the submission contract, offline, on scripted answers.

``make test`` runs them after ruff and mypy. A test that reaches a part of the lab that
still raises ``NotImplementedError`` skips and says which; write that part and it runs.
``make check`` runs the grader's three checkpoints on your recordings.
"""

from __future__ import annotations

import importlib
import json
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from gradekit import CassetteMiss, FakeProvider, Recorder, Replay, prompt_key

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["gradekit"]
TASK = "A student asks whether a bootcamp seat can be refunded after the first week."


def _load(spec: str) -> object:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def _run(provider: object) -> object:
    agent = _load(MANIFEST["agent"])
    assert callable(agent)
    try:
        return agent(provider, TASK)
    except NotImplementedError as exc:
        pytest.skip(f"the agent is not written yet: {exc}")


def _scripted(name: str = "fake") -> FakeProvider:
    return FakeProvider(lambda prompt: f"YES. Answer {prompt_key(prompt)}.", name=name)


def _cassette(folder: Path) -> Path:
    """A cassette holding one recorded prompt."""
    path = folder / "one.json"
    with Recorder(FakeProvider(["the recorded answer"]), path) as recorder:
        recorder.complete("What is a cassette?")
    return path


def test_the_agent_answers_with_a_string_from_the_provider() -> None:
    provider = _scripted()
    answer = _run(provider)
    assert isinstance(answer, str) and answer.strip()
    assert provider.calls, "the agent never asked the provider"


def test_the_answer_does_not_depend_on_the_provider_name() -> None:
    assert _run(_scripted("provider-a")) == _run(_scripted("provider-b"))


def test_a_miss_escapes_the_agent(tmp_path: Path) -> None:
    raised = _raised(Replay(_cassette(tmp_path)))
    assert raised is not None, "the agent answered after a miss: let CassetteMiss escape"
    chain: list[BaseException] = []
    error: BaseException | None = raised
    while error is not None and error not in chain:  # a wrapped miss is fine: in the chain
        chain.append(error)
        error = error.__cause__ or error.__context__
    assert any(isinstance(e, CassetteMiss) for e in chain), f"the miss was lost: {raised!r}"


def _raised(provider: object) -> Exception | None:
    try:
        _run(provider)
    except Exception as exc:
        return exc
    return None


def test_every_provider_call_is_traced_after_it_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv("GRADEKIT_TRACE", str(trace))
    provider = _scripted("provider-a")
    _run(provider)
    records = [json.loads(line) for line in trace.read_text("utf-8").splitlines()]
    calls = [r for r in records if "tool" not in r]
    assert [r["key"] for r in calls] == [prompt_key(p) for p in provider.calls]
    assert all(r["provider"] == "provider-a" and r["ok"] is True for r in calls)


def _replay() -> Callable[[Path], object]:
    replay = _load(MANIFEST.get("replay", "lab:Replay"))
    assert callable(replay)
    return replay


def _complete(provider: object, prompt: str) -> object:
    complete = getattr(provider, "complete", None)
    assert callable(complete), "a Replay needs a complete(prompt) method"
    try:
        return complete(prompt)
    except NotImplementedError as exc:
        pytest.skip(f"your Replay is not written yet: {exc}")


def test_the_replay_ignores_outer_whitespace(tmp_path: Path) -> None:
    provider = _replay()(_cassette(tmp_path))
    assert _complete(provider, "  \\n What is a cassette?\\t ") == "the recorded answer"


def test_the_replay_raises_on_a_miss(tmp_path: Path) -> None:
    provider = _replay()(_cassette(tmp_path))
    with pytest.raises(CassetteMiss):
        _complete(provider, "A prompt nobody recorded")
'''
