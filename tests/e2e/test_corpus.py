"""A corpus of student agents the kit did not write, recorded for real and graded in one batch.

The grader was long tested on the reference agent plus one mutation at a time; agents shaped
otherwise (a tool call first, a class, a helper, a loop, a wrapper provider, the openai SDK)
hid holes. ``tests/corpus/<shape>/agent.py`` is an honest agent of each shape and every other
module there one mistake, written the way that shape's student writes it. One module fixture
builds a submission per (shape, module), records each with ``gradekit record`` against the
loopback server (``echo()``: every answer quotes its question), stops the server, and grades
them all offline in one ``gradekit grade`` batch on the short rubric. Each test then reads a
report: an honest shape scores full marks; a mistake loses exactly the criterion its mistake
breaks, keeps the honest shape's points everywhere else, and the detail says why. Some
modules look like mistakes and are not (``Full``); the later shapes try what an agent can know
beyond one run of one case: state kept across cases, threads, the probe itself, the clock, its
own exceptions and its own trace records.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import pytest

from gradekit import tool_key
from grader.cli import main
from grader.rubric import load_cases
from tests.loopback import Loopback, echo
from tests.submissions import short_rubric

pytestmark = pytest.mark.slow

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
HANDOUT_LAB = Path(__file__).resolve().parents[2] / "lab"  # its tools ship in the hand-out
BASE_URL = "http://127.0.0.1:8080/v1"  # the SDK shapes' constant, pointed at the server
CRITERIA = ("contract_stability", "loud_failure", "tracing", "written_summary", "stretch_goal")
HONEST = "agent"  # the honest module of every shape
MANIFEST = """\
[project]
name = "{name}"
version = "0.1.0"

[tool.gradekit]
agent = "lab.{agent}:run"
replay = "{replay}"
tools = "lab.tools:TOOLS"
stretch = ["tool-fixtures"]
"""
# A module that is the student's own Replay, not an agent: its submission runs the shape's
# honest agent, and the manifest's ``replay`` names the module's class (every other
# submission is probed with the kit's own Replay, which raises on a miss).
REPLAYS = {("probe_aware", "replay"): "lab.replay:Replay"}
# CORPUS_SHAPES="memo threads" (names split on commas or spaces) records and grades only those
# shapes, and every test of another shape is skipped: for iterating on a few shapes, since the
# whole corpus takes minutes. Unset or empty: every shape.
ONLY = frozenset(os.environ.get("CORPUS_SHAPES", "").replace(",", " ").split())

# -- what each mistake must cost ----------------------------------------------------------


@dataclass(frozen=True)
class Loud:
    """A miss withheld at provider call ``at`` (1-based), or at the first tool call
    (``"tool"``), does not escape run() in any case from the ``after``-th on (the cases before
    it raise: an agent that falls back on an earlier case's answer has none there): loud
    failure is lost, nothing else."""

    at: int | Literal["tool"]
    together: int = 1  # calls from ``at`` on sent at once: any of them may come first
    after: int = 0  # how many cases, first in the rubric's order, keep their share
    loses: frozenset[str] = frozenset({"loud_failure"})


@dataclass(frozen=True)
class OwnReplay:
    """The submission's own Replay (the manifest's ``replay``) answers a prompt it never
    recorded instead of raising: the ``own_replay`` check of loud failure is lost, and every
    case (the shape's honest agent runs) keeps its share."""

    loses: frozenset[str] = frozenset({"loud_failure"})


@dataclass(frozen=True)
class Unstable:
    """The answer depends on provider.name (``cause`` None), or on what ``cause`` (a regular
    expression) names, which each case's detail or its advice must match (and neither may
    blame the provider's name or the hash seed): contract stability is lost, nothing else."""

    cause: str | None = None
    loses: frozenset[str] = frozenset({"contract_stability"})


# What a case loses when no graded run can ask its recorded prompts again: no run of it
# answers, so there is nothing to probe for loud failure or to trace (the tool fixtures,
# asked before the prompt that misses, still show the stretch goal's evidence).
NOT_RUN = frozenset({"contract_stability", "loud_failure", "tracing"})


@dataclass(frozen=True)
class Unrecordable:
    """A prompt holds something a graded run does not ask again (today's date, a set's
    order): every case misses in every run. Each case's contract-stability advice matches
    every regular expression of ``causes`` and none of ``never``."""

    causes: tuple[str, ...]
    never: tuple[str, ...] = ()
    loses: frozenset[str] = NOT_RUN


@dataclass(frozen=True)
class Full:
    """Not a mistake, though it looks like one: full marks, as the honest module."""

    loses: frozenset[str] = frozenset()


@dataclass(frozen=True)
class CaseDependent:
    """A later case is served from what an earlier case cached (the recording did the same).
    Full marks, or a loss of contract stability and/or loud failure alone whose every lost
    check's detail, or its criterion's advice, names the dependence on another case."""

    loses: frozenset[str] = frozenset()  # the full-marks outcome; see _case_dependent


@dataclass(frozen=True)
class Untraced:
    """``untraced`` provider calls of each case write no trace record (None: none of them
    does; the tools stay traced): tracing is lost in part, nothing else."""

    untraced: int | None
    loses: frozenset[str] = frozenset({"tracing"})


@dataclass(frozen=True)
class UntracedProbe:
    """Every call of the primary run is traced, but a run that raises writes no record, so
    the loud-failure probes' withheld calls have none: tracing is lost in part, nothing else."""

    loses: frozenset[str] = frozenset({"tracing"})


Expect = (
    Loud | OwnReplay | Unstable | Unrecordable | Full | CaseDependent | Untraced | UntracedProbe
)

# What every shape's student got wrong in their own way, and what some of them did besides.
COMMON: dict[str, Expect] = {
    "swallow_first": Loud(1),
    "retry_default": Loud(1),
    "name_dependent": Unstable(),
    "untraced": Untraced(None),
}
SHAPES: dict[str, dict[str, Expect]] = {
    "tool_first": {
        **COMMON,
        "swallow_later": Loud(2),
        "swallow_tool": Loud("tool"),
        "partly_traced": Untraced(1),
    },
    "model_first": {
        **COMMON,
        "swallow_later": Loud(2),
        "fallback_continue": Loud(1),
        "partly_traced": Untraced(1),
    },
    "class_based": {
        **COMMON,
        "swallow_later": Loud(2),
        "swallow_tool": Loud("tool"),
        "partly_traced": Untraced(1),
        # the write first, its errors swallowed: no probe withholds a write, so no miss is
        "note_first": Full(),
    },
    "helper": {
        **COMMON,
        "suppress": Loud(1),
        "swallow_later": Loud(3),
        "partly_traced": Untraced(1),
    },
    "loop": {
        **COMMON,
        "swallow_later": Loud(2),
        "keep_draft": Loud(3),
        "partly_traced": Untraced(2),
    },  # both critique rounds untraced
    "wrapper": {
        **COMMON,
        "empty_wrapper": Loud(1),
        "swallow_later": Loud(2),
        "partly_traced": Untraced(1),
    },
    "sdk_sync": {
        **COMMON,
        "swallow_later": Loud(2),
        "sdk_retries_default": Loud(1),
        "partly_traced": Untraced(1),
    },
    "sdk_async": {
        **COMMON,
        "swallow_later": Loud(2),
        "gather_exceptions": Loud(1, together=2),
        "partly_traced": Untraced(1),
    },
    # The shapes below are not graded on COMMON: each tries one way an agent can know more
    # than a run shows it (state across cases, threads, the probe itself, the clock, its own
    # exceptions and traces).
    "memo": {
        "last_good": Loud(1, after=1),
        # Expected: full marks. The recording and every graded run play the cases in the
        # rubric's order in one process, so case 1 alone asks the shared prompt in both
        # and every cassette holds what a graded run asks. A grader that ran a case
        # without the ones before it would see it ask a prompt it never recorded: it
        # must then say the case depends on another one, never lose in silence.
        "lru_cross": CaseDependent(),
    },
    "threads": {"swallow_future": Loud(1, together=2)},
    "probe_aware": {"recorded_only": Loud(1), "withheld_words": Loud(1), "replay": OwnReplay()},
    # A prompt that holds today's date, or a set's order, cannot be recorded once for all
    # graded runs (their clock is the grader's, their hash seeds its draw): re-recording
    # never helps, so the advice must name the cause and never say to re-record.
    "clockwork": {
        "date_prompt": Unrecordable(causes=(r"\bdate\b|\bclock\b",), never=(r"\bre-?record",)),
        "clock_answer": Unstable(cause="changes between identical runs"),
        "set_order": Unrecordable(causes=(r"hash seed", r"\bsort"), never=(r"\bre-?record",)),
    },
    "reraise": {
        "from_none": Loud(1),
        "retry_reraise": Full(),
        "traces_batched": Full(),
        "traces_success_only": UntracedProbe(),
    },
}
SDK = frozenset({"sdk_sync", "sdk_async"})  # on the openai SDK: recorded with no provider
HAS_OPENAI = importlib.util.find_spec("openai") is not None
PAIRS = [(shape, mistake) for shape, mistakes in SHAPES.items() for mistake in mistakes]


def folder(shape: str, module: str) -> str:
    return f"{shape}--{module}"


def test_the_catalogue_is_the_corpus() -> None:
    """Every module under tests/corpus/<shape>/ is graded here, and nothing else."""
    on_disk = {
        (path.parent.name, path.stem) for path in CORPUS.glob("*/*.py") if path.stem != "__init__"
    }
    listed = {
        (shape, module) for shape, mistakes in SHAPES.items() for module in (HONEST, *mistakes)
    }
    assert on_disk == listed
    assert all((CORPUS / shape / "FAILURES.md").is_file() for shape in SHAPES)


# -- running the command line in this process ---------------------------------------------


@dataclass(frozen=True)
class Said:
    code: int
    out: str
    err: str


def gradekit(*argv: str) -> Said:
    """``gradekit ARGV`` here; every submission's own ``lab`` is dropped afterwards."""
    ours = [name for name in sys.modules if name.partition(".")[0] == "lab"]
    kept = {name: sys.modules[name] for name in ours}
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
    finally:
        for name in [name for name in sys.modules if name.partition(".")[0] == "lab"]:
            sys.modules.pop(name)
        sys.modules.update(kept)
    return Said(code, out.getvalue(), err.getvalue())


def build(root: Path, shape: str, module: str, url: str) -> Path:
    """A submission: the shape's honest module and ``module`` in ``lab/``, the tools (the
    hand-out's, web pages and all, as ``lab/course_tools.py``), a manifest running
    ``module`` (the honest module, with ``module``'s Replay, for one of ``REPLAYS``) and the
    shape's failure log."""
    lab = root / "lab"
    lab.mkdir(parents=True)
    (lab / "__init__.py").write_text("", "utf-8")
    shutil.copy(CORPUS / "tools.py", lab / "tools.py")
    shutil.copy(HANDOUT_LAB / "tools.py", lab / "course_tools.py")
    shutil.copytree(HANDOUT_LAB / "data" / "web", lab / "data" / "web")
    shutil.copy(CORPUS / "notes.txt", lab / "notes.txt")
    for name in dict.fromkeys((HONEST, module)):
        source = (CORPUS / shape / f"{name}.py").read_text("utf-8")
        if shape in SDK and name == HONEST:
            assert source.count(BASE_URL) == 1, shape
            source = source.replace(BASE_URL, url)
        (lab / f"{name}.py").write_text(source, "utf-8")
    name = folder(shape, module)
    replay = REPLAYS.get((shape, module))
    manifest = MANIFEST.format(
        name=name, agent=HONEST if replay else module, replay=replay or "gradekit:Replay"
    )
    (root / "pyproject.toml").write_text(manifest, "utf-8")
    shutil.copy(CORPUS / shape / "FAILURES.md", root / "FAILURES.md")
    return root


# -- the module's one recording and one grading ---------------------------------------------


@dataclass(frozen=True)
class World:
    submissions: Path
    grades: Path
    rubric: Path
    recorded: Mapping[str, Said]
    graded: Said

    def report(self, name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.grades / name / "report.json").read_bytes())
        return data

    def calls(self, name: str) -> dict[str, list[dict[str, Any]]]:
        """Each case's calls in the primary run, as the grader served them."""
        data = json.loads((self.grades / name / "calls.json").read_bytes())
        return {case["case"]: case["calls"] for case in data["cases"]}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    assert not ONLY - set(SHAPES), f"CORPUS_SHAPES names no shape: {sorted(ONLY - set(SHAPES))}"
    root = tmp_path_factory.mktemp("corpus")
    subs, grades = root / "submissions", root / "grades"
    rubric = short_rubric(root)
    # Short limits, but room for a sandboxed child to import the openai SDK on a busy machine:
    # an import that outlives the case's timeout is charged to that run's cases.
    text = rubric.read_text("utf-8")
    assert text.count("timeout_s = 5\n") == 1
    rubric.write_text(text.replace("timeout_s = 5\n", "timeout_s = 15\n"), "utf-8")
    shapes = [
        shape
        for shape in SHAPES
        if (HAS_OPENAI or shape not in SDK) and (not ONLY or shape in ONLY)
    ]
    recorded: dict[str, Said] = {}
    with pytest.MonkeyPatch.context() as env:
        for name in [n for n in os.environ if n.startswith("GRADEKIT_")]:
            env.delenv(name)
        env.setenv("OPENAI_API_KEY", "sk-corpus-not-a-real-key")
        with Loopback(default=echo()) as server:
            live = (
                "--provider",
                "openai-compatible",
                "--base-url",
                server.openai_url,
                "--model",
                "m",
            )
            for shape in shapes:
                for module in (HONEST, *SHAPES[shape]):
                    name = folder(shape, module)
                    path = build(subs / name, shape, module, server.openai_url)
                    recorded[name] = gradekit(
                        "record",
                        "--root",
                        str(path),
                        "--rubric",
                        str(rubric),
                        "--quiet",
                        *(() if shape in SDK else live),
                    )
        # The server is gone from here on: the grading is offline.
        jobs = str(min(4, max(2, os.cpu_count() or 1)))
        graded = gradekit(
            "grade",
            str(subs),
            "--out",
            str(grades),
            "--jobs",
            jobs,
            "--quiet",
            "--rubric",
            str(rubric),
        )
    return World(subs, grades, rubric, recorded, graded)


def _needs(shape: str) -> None:
    if ONLY and shape not in ONLY:
        pytest.skip(f"CORPUS_SHAPES leaves {shape} out")
    if shape in SDK:
        pytest.importorskip("openai")


# -- reading a report -------------------------------------------------------------------------


def criterion(report: Mapping[str, Any], criterion_id: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in report["criteria"] if c["id"] == criterion_id)
    return found


def points(report: Mapping[str, Any]) -> dict[str, Decimal]:
    return {c["id"]: Decimal(c["points"]) for c in report["criteria"]}


def checks(report: Mapping[str, Any], criterion_id: str) -> dict[str, dict[str, Any]]:
    return {check["id"]: check for check in criterion(report, criterion_id)["checks"]}


def lost_checks(report: Mapping[str, Any], criterion_id: str) -> set[str]:
    return {
        check_id
        for check_id, check in checks(report, criterion_id).items()
        if Decimal(check["points"]) < Decimal(check["max"])
    }


# -- the recordings -----------------------------------------------------------------------------


@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_submission_of_a_shape_records_each_case_with_a_tool_call(
    world: World, shape: str
) -> None:
    _needs(shape)
    cases = [case.id for case in load_cases(world.rubric)]
    for module in (HONEST, *SHAPES[shape]):
        name = folder(shape, module)
        said = world.recorded[name]
        assert said.code == 0, (name, said.err)
        root = world.submissions / name
        for case in cases:
            recording = root / "cassettes" / f"{case}{'.http' if shape in SDK else ''}.json"
            assert recording.is_file(), recording
            fixture = json.loads((root / "fixtures" / f"{case}.json").read_bytes())
            assert fixture["calls"], (name, case)  # the stretch goal needs a tool call per case


def test_the_batch_graded_every_submission(world: World) -> None:
    assert world.graded.code == 0, world.graded.err
    graded = sorted(path.parent.name for path in world.grades.glob("*/report.json"))
    assert graded == sorted(world.recorded)


# -- an honest shape --------------------------------------------------------------------------


@pytest.mark.parametrize("shape", list(SHAPES))
def test_an_honest_shape_scores_full_marks(world: World, shape: str) -> None:
    _needs(shape)
    report = world.report(folder(shape, HONEST))
    for criterion_id in CRITERIA:
        found = criterion(report, criterion_id)
        assert found["points"] == found["max"], (
            criterion_id,
            [(c["id"], c["detail"]) for c in found["checks"] if not c["passed"]],
        )
    assert report["total"] == report["max"] == "100.00"
    assert report["findings"] == []


def test_the_web_search_replays_from_its_fixture_and_notes_start_empty_each_run(
    world: World,
) -> None:
    """class_based searches the hand-out's offline web and saves its research as a note (the
    write tool), then asks a prompt that says which note of the run it was. The search was
    recorded into each case's fixture and every graded call of it was served from there; the
    note never was: it ran in the child, and every case of every graded run (the cases one
    after another in one child, the runs under other labels and clocks) asked the recorded
    prompt, so each started with an empty store: full contract stability says so."""
    _needs("class_based")
    name = folder("class_based", HONEST)
    root, calls = world.submissions / name, world.calls(name)
    for case in (case.id for case in load_cases(world.rubric)):
        fixture = json.loads((root / "fixtures" / f"{case}.json").read_bytes())
        recorded = {tool_key(c["tool"], c["args"]) for c in fixture["calls"]}
        assert {c["tool"] for c in fixture["calls"]} == {"glossary", "search_notes", "web_search"}
        cassette = json.loads((root / "cassettes" / f"{case}.json").read_bytes())
        assert any(
            "(research note 1 saved)" in entry["prompt"] for entry in cassette["entries"].values()
        )
        made = [
            (c["tool"], c["served"], c["key"] in recorded, c.get("write", False))
            for c in calls[case]
            if c["kind"] == "tool"
        ]
        assert made == [
            ("glossary", True, True, False),
            ("search_notes", True, True, False),
            ("web_search", True, True, False),
            ("save_note", True, False, True),
        ]
    stability = criterion(world.report(name), "contract_stability")
    assert stability["points"] == stability["max"]


# -- a mistake ------------------------------------------------------------------------------


@pytest.mark.parametrize(("shape", "mistake"), PAIRS, ids=[f"{s}-{m}" for s, m in PAIRS])
def test_a_mistake_loses_only_what_it_breaks(world: World, shape: str, mistake: str) -> None:
    _needs(shape)
    expect = SHAPES[shape][mistake]
    honest = points(world.report(folder(shape, HONEST)))
    name = folder(shape, mistake)
    report = world.report(name)
    earned = points(report)
    cases = [case.id for case in load_cases(world.rubric)]
    if isinstance(expect, CaseDependent):
        _case_dependent(report, honest, cases)
        return
    assert {c for c in CRITERIA if earned[c] != honest[c]} == set(expect.loses), {
        c: (str(earned[c]), [k["detail"] for k in checks(report, c).values() if not k["passed"]])
        for c in CRITERIA
        if earned[c] != honest[c] or c in expect.loses
    }
    assert all(earned[c] < honest[c] for c in expect.loses)
    assert report["findings"] == []
    if isinstance(expect, Loud):
        _loud(world, name, report, cases, expect)
    elif isinstance(expect, OwnReplay):
        _own_replay(report)
    elif isinstance(expect, Unstable):
        _unstable(report, cases, expect.cause)
    elif isinstance(expect, Unrecordable):
        _unrecordable(report, cases, expect)
    elif isinstance(expect, Full):
        _full(report)
    elif isinstance(expect, UntracedProbe):
        _untraced_probe(world, name, report, cases)
    else:
        _untraced(world, name, report, cases, expect)


def test_a_prompt_that_depends_on_the_hash_seed_grades_alike_twice(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """clockwork/set_order asks a prompt whose words come in a set's order: graded again into
    fresh grades folders, each under a draw key of its own (other labels, other hash seeds,
    another clock; whichever seed happens to match the recorded order), its report is the
    same, digest and all: nothing in it depends on the draw."""
    _needs("clockwork")
    name = folder("clockwork", "set_order")
    first = world.report(name)
    assert lost_checks(first, "contract_stability") == {c.id for c in load_cases(world.rubric)}
    for variable in [n for n in os.environ if n.startswith("GRADEKIT_")]:
        monkeypatch.delenv(variable)
    for n in range(2):
        again = tmp_path / f"grades-{n}"
        said = gradekit(
            "grade",
            str(world.submissions),
            "--only",
            name,
            "--out",
            str(again),
            "--quiet",
            "--rubric",
            str(world.rubric),
        )
        assert said.code == 0, said.err
        assert (again / ".gradekit-draw-key").read_bytes() != (
            world.grades / ".gradekit-draw-key"
        ).read_bytes()
        second: dict[str, Any] = json.loads((again / name / "report.json").read_bytes())
        assert second["criteria"] == first["criteria"]
        assert second["digest"] == first["digest"]


def _loud(
    world: World, name: str, report: Mapping[str, Any], cases: list[str], expect: Loud
) -> None:
    """Every case from the ``after``-th on loses its share, and its detail names the withheld
    call (its position of how many, and the head of what it asked) that the agent did not let
    out; the cases before it (and the kit's Replay) keep theirs."""
    lost = cases[expect.after :]
    assert lost_checks(report, "loud_failure") == set(lost)
    calls = world.calls(name)
    for case in lost:
        detail = checks(report, "loud_failure")[case]["detail"]
        kind = "tool" if expect.at == "tool" else "provider"
        made = [call for call in calls[case] if (call["kind"] == "tool") == (kind == "tool")]
        position = 1 if expect.at == "tool" else expect.at
        called = f"{'tool ' if kind == 'tool' else ''}call {position} of {len(made)} ("
        assert detail.startswith(called), (case, detail)
        heads = [
            _asked(world.submissions / name, case, call)
            for call in made[position - 1 : position - 1 + expect.together]
        ]
        assert any(head in detail for head in heads), (case, heads, detail)


def _asked(root: Path, case: str, call: Mapping[str, Any]) -> str:
    """The start of what ``call`` asked, from the submission's own recordings: a prompt, an
    SDK request's last message, or a tool call's name and arguments."""
    key = call["key"]
    if call["kind"] == "tool":
        fixture = json.loads((root / "fixtures" / f"{case}.json").read_bytes())
        text = next(
            f"{c['tool']} {json.dumps(c['args'], sort_keys=True)}"
            for c in fixture["calls"]
            if tool_key(c["tool"], c["args"]) == key
        )
    elif call["kind"] == "http":
        http = json.loads((root / "cassettes" / f"{case}.http.json").read_bytes())
        text = http["interactions"][key][0]["request"]["body"]["messages"][-1]["content"]
    else:
        cassette = json.loads((root / "cassettes" / f"{case}.json").read_bytes())
        text = cassette["entries"][key]["prompt"]
    flat = " ".join(text.split())
    return re.split(r"['\"\\]", flat[:40])[0]  # up to any character repr() might escape


def _said(report: Mapping[str, Any], criterion_id: str, case: str) -> list[str]:
    """A case's check detail in ``criterion_id``, then the advice lines that name the case."""
    advice = criterion(report, criterion_id)["advice"]
    return [
        checks(report, criterion_id)[case]["detail"],
        *(line for line in advice if line.startswith(f"{case}: ")),
    ]


# The causes the grader gives for answers that change between runs, when it blames the
# provider's name or the hash seed (unstable_cause in grader/scoring/_checks.py).
BLAMED = re.compile(r"changes with (both )?the (provider's name|hash seed)")


def _unstable(report: Mapping[str, Any], cases: list[str], cause: str | None = None) -> None:
    """Every case loses its share; the advice names the provider's name as the cause, or
    the case's detail or advice matches ``cause`` and blames neither the name nor the seed."""
    assert lost_checks(report, "contract_stability") == set(cases)
    stability = checks(report, "contract_stability")
    advice = criterion(report, "contract_stability")["advice"]
    if cause is not None:
        for case in cases:
            said = _said(report, "contract_stability", case)
            assert any(re.search(cause, text) for text in said), (case, cause, said)
            assert not any(BLAMED.search(text) for text in said), (case, said)
        return
    for case in cases:
        assert stability[case]["detail"].startswith(
            "the answer changed with the provider label or the hash seed"
        ), stability[case]
        assert any(
            line.startswith(f"{case}: the answer changes with the provider's name alone")
            for line in advice
        ), advice


def _own_replay(report: Mapping[str, Any]) -> None:
    """The own_replay check alone is lost, all its points, and it says the Replay answered."""
    assert lost_checks(report, "loud_failure") == {"own_replay"}
    check = checks(report, "loud_failure")["own_replay"]
    assert Decimal(check["points"]) == 0 < Decimal(check["max"]), check
    assert check["detail"] == "your Replay answered an unrecorded prompt instead of raising", check


def _unrecordable(report: Mapping[str, Any], cases: list[str], expect: Unrecordable) -> None:
    """Every case loses contract stability, with advice naming the cause (and never what
    ``never`` names); with no run of the case that answered, loud failure and tracing say
    so rather than judge the agent."""
    assert lost_checks(report, "contract_stability") == set(cases)
    for case in cases:
        said = " ".join(_said(report, "contract_stability", case))
        for cause in expect.causes:
            assert re.search(cause, said, re.IGNORECASE), (case, cause, said)
        for wrong in expect.never:
            assert not re.search(wrong, said, re.IGNORECASE), (case, wrong, said)
        assert checks(report, "loud_failure")[case]["detail"].startswith("not probed: "), case
        assert checks(report, "tracing")[case]["detail"].startswith("not checked: "), case


def _full(report: Mapping[str, Any]) -> None:
    """Every check of every criterion passed: full marks, as the honest module."""
    assert report["total"] == report["max"] == "100.00"
    failed = [
        (c["id"], check["id"], check["detail"])
        for c in report["criteria"]
        for check in c["checks"]
        if not check["passed"]
    ]
    assert failed == []


# A detail that says a case depends on another one, or on the order the cases run in.
DEPENDENCE = re.compile(
    r"(earlier|previous|another|other|preceding) case|case order|"
    r"order of the cases|cases? (before|run before)|across cases",
    re.IGNORECASE,
)


def _case_dependent(
    report: Mapping[str, Any], honest: Mapping[str, Decimal], cases: list[str]
) -> None:
    """Full marks; or contract stability and/or loud failure lost (nothing else), each lost
    check saying (in its detail or its criterion's advice) that the case depends on another."""
    assert report["findings"] == []
    earned = points(report)
    lost = {c for c in CRITERIA if earned[c] != honest[c]}
    if not lost:
        _full(report)
        return
    assert lost <= {"contract_stability", "loud_failure"}, lost
    for criterion_id in lost:
        for check_id in lost_checks(report, criterion_id):
            said = (
                _said(report, criterion_id, check_id)
                if check_id in cases
                else [
                    checks(report, criterion_id)[check_id]["detail"],
                    *criterion(report, criterion_id)["advice"],
                ]
            )
            assert any(DEPENDENCE.search(text) for text in said), (criterion_id, check_id, said)


def _lost_in_part(
    world: World, name: str, report: Mapping[str, Any], cases: list[str]
) -> dict[str, list[dict[str, Any]]]:
    """Every case lost part of its tracing share, never all of it; each case's calls."""
    assert lost_checks(report, "tracing") == set(cases)
    found = criterion(report, "tracing")
    assert Decimal("0") < Decimal(found["points"]) < Decimal(found["max"])
    return world.calls(name)


def _untraced_probe(world: World, name: str, report: Mapping[str, Any], cases: list[str]) -> None:
    """Every case loses part of its share: each call of the primary run has its record, and
    no call withheld in a loud-failure probe has one (one withheld per call position)."""
    calls = _lost_in_part(world, name, report, cases)
    for case in cases:
        made = calls[case]
        assert all(call["record"] is not None for call in made), (case, made)
        detail = checks(report, "tracing")[case]["detail"]
        assert detail == (
            f"{len(made)} of {len(made)} calls traced correctly; 0 of {len(made)} "
            "withheld calls traced with ok false and their error"
        ), (case, detail)


def _untraced(
    world: World, name: str, report: Mapping[str, Any], cases: list[str], expect: Untraced
) -> None:
    """Every case loses part of its share: the untraced calls alone, paired by key."""
    calls = _lost_in_part(world, name, report, cases)
    for case in cases:
        made = calls[case]
        untraced = (
            expect.untraced
            if expect.untraced is not None
            else sum(1 for call in made if call["kind"] != "tool")
        )
        detail = checks(report, "tracing")[case]["detail"]
        assert detail.startswith(f"{len(made) - untraced} of {len(made)} calls traced correctly"), (
            case,
            detail,
        )
