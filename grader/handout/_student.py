"""What the starter adds to the reference: the student's own tests (``tests/test_lab.py``:
the submission contract on scripted answers, a test skipping while the part it checks is a
stub) and, with ``--own-replay``, a stub ``Replay`` (``<package>/replay.py``).

Both are written for the lab in hand: its package (the top package of the manifest's
``agent``), the task of its rubric's first case, the ``replay`` its manifest falls back
to, and the commands its Makefile has (``make test``, ``make check``) or, without them,
what runs the same (``pytest``, the kit's ``check``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection
from string import Template

from gradekit.internal import commands

__all__ = ["replay_stub", "student_tests"]

_WIDTH = 88  # columns of one piece of a wrapped string literal, its indent left out


def replay_stub(package: str) -> str:
    """The stub ``<package>/replay.py`` that ``--own-replay`` writes."""
    return _REPLAY_STUB.substitute(package=package)


def student_tests(
    *, task: str, case: str, replay: str, make: Collection[str], kit_inside: bool = False
) -> str:
    """The hand-out's ``tests/test_lab.py``: the agent run on ``task`` (the rubric's first
    case, ``case``), the manifest's Replay loaded with ``replay`` as its default, and its
    docstring naming the Makefile's targets in ``make`` (``test``, ``check``) where they
    exist. ``kit_inside``: the hand-out holds the kit's ``gradekit/`` folder, so that its
    imports sort as the lab's own (isort's first party), not beside pytest's."""
    return _STUDENT_TESTS.substitute(
        kit="\n" if kit_inside else "",
        task=_literal(task, prefix="TASK = "),
        case=case,
        replay=_quoted(replay),
        run=(
            "Run them with ``make test`` (or ``pytest``)"
            if "test" in make
            else "Run them with ``pytest``"
        ),
        check=f"``{commands.CHECK(form='make' if 'check' in make else 'gradekit')}`` runs",
    )


def _literal(text: str, *, prefix: str) -> str:
    """``prefix`` and ``text`` as a Python string literal within ``_WIDTH``: on one line, or
    as pieces Python joins, one a line, in parentheses."""
    if _columns(prefix + _quoted(text)) <= _WIDTH:
        return prefix + _quoted(text)
    pieces: list[str] = []
    for word in re.findall(r"\s+|\S+\s*", text):
        for part in _split(word):
            if pieces and _columns(_quoted(pieces[-1] + part)) <= _WIDTH:
                pieces[-1] += part
            else:
                pieces.append(part)
    return prefix + "(\n" + "".join(f"    {_quoted(piece)}\n" for piece in pieces) + ")"


def _split(word: str) -> list[str]:
    """``word`` in parts that each fit ``_WIDTH`` quoted: a word longer than a line is cut."""
    parts = [""]
    for char in word:
        if parts[-1] and _columns(_quoted(parts[-1] + char)) > _WIDTH:
            parts.append("")
        parts[-1] += char
    return parts


def _quoted(text: str) -> str:
    """``text`` as a double-quoted Python string literal; what does not print is escaped."""
    return (
        '"'
        + "".join(
            "\\" + char
            if char in '"\\'
            else char
            if char.isprintable()
            else char.encode("unicode_escape").decode("ascii")
            for char in text
        )
        + '"'
    )


def _columns(text: str) -> int:
    """The columns ``text`` takes in an editor (and for ruff's line length): wide
    characters take two."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


_REPLAY_STUB = Template('''\
"""Your own ``Replay``: answer every prompt from a recorded cassette, offline.

The manifest names it (``replay = "${package}.replay:Replay"`` in pyproject.toml) and the
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
            "${package}/replay.py: read the cassette, look the prompt up by prompt_key(prompt) "
            "(outer whitespace is not part of a prompt) and raise CassetteMiss on a miss"
        )
''')

_STUDENT_TESTS = Template('''\
"""Your lab's own tests: the submission contract, offline, on scripted answers.

${run}.
A test that reaches a part of the lab that still raises ``NotImplementedError`` skips and
says which; write that part and it runs. ${check} the grader's three
checkpoints on your recordings.

The answers are scripted (``gradekit.FakeProvider``). An agent on the official ``openai`` or
``anthropic`` SDK gets them too, through ``Traced(provider).http_client()``: the fake answers
the SDK's requests in its own protocol, offline.
"""

from __future__ import annotations

import importlib
import inspect
import json
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
${kit}from gradekit import CassetteMiss, FakeProvider, Recorder, Replay, Toolbox, Tools, prompt_key

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["gradekit"]
# The task of the rubric's first case, ${case}: the agent is run on it here.
${task}


@pytest.fixture(autouse=True)
def _offline(gradekit_network: None) -> None:
    """Every test runs with the network closed: scripted answers, the lab's own tools."""


def _load(spec: str) -> object:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def _run(provider: object) -> object:
    agent = _load(MANIFEST["agent"])
    assert callable(agent)
    try:
        return agent(provider, TASK, *_tools(agent))
    except NotImplementedError as exc:
        pytest.skip(f"the agent is not written yet: {exc}")


def _tools(agent: Callable[..., object]) -> tuple[Toolbox, ...]:
    """The lab's tools, as the grader gives them: only to an agent that takes them, as
    ``run(provider, task, tools)``. These are the real tools (the manifest's ``tools``)."""
    parameters = inspect.signature(agent).parameters.values()
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) < 3 and not any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return ()
    tools = _load(MANIFEST["tools"]) if "tools" in MANIFEST else Tools()
    assert isinstance(tools, Tools), "the manifest's tools must name a gradekit.Tools registry"
    return (tools.for_run(),)


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
    first, second = _scripted("provider-a"), _scripted("provider-b")
    assert _run(first) == _run(second)
    assert first.keys == second.keys, "the agent asked other things under another name"


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
    assert [r["key"] for r in calls] == provider.keys  # a prompt's key, or an SDK request's
    assert all(r["provider"] == "provider-a" and r["ok"] is True for r in calls)


def _replay() -> Callable[[Path], object]:
    replay = _load(MANIFEST.get("replay", ${replay}))
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
''')
