"""Grade one submission: gather the evidence in the sandbox, score it, build the report.

The parent reads the cassettes with its own codec and serves them; the child
only ever sees answers. A broken manifest, a missing cassette or an unreadable
FAILURES.md is a finding that costs what it blocks, never a crash. Every submission file
the parent reads goes through ``read_submission_file`` (no links, regular files only,
size caps), and every piece of submission text in a finding goes through ``quote``. The
submission's Python source is also scanned, never run, for code that reaches for the
harness or the process (``tamper_findings``): a flag for a person, worth no points.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib
import json
import secrets
import tomllib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Generic, TypeVar, cast

from gradekit import CassetteError, Entry, GradekitError, HttpCassette, prompt_key
from gradekit.internal import (
    LAB_HTTP_CASSETTE,
    commands,
    decode_cassette,
    decode_fixture,
    recording_settings,
)
from grader._cache import Derived
from grader._model import CaseOutcome, CriterionResult, Report, RunResult, Withhold
from grader._text import FLAGGED, TEXT_LIMIT, quote
from grader.grading._grounds import grounds, recorded_keys
from grader.grading._packages import missing_package
from grader.grading._preload import imported_packages, shipped_packages
from grader.grading._regression import ItemRecordings, replay_set
from grader.recordings import CHANGE_LOG, Change, change_matches, decode_changes, decode_recording
from grader.regression import recording_name
from grader.rubric import Case, Rubric
from grader.sandbox import (
    CLOCK,
    PROCESS_WALL,
    Answer,
    Hosts,
    LaidOut,
    RunPlan,
    Sandbox,
    Serving,
    ToolAnswer,
    Wall,
    cut_point_problem,
)
from grader.scoring import (
    BUILTIN_CHECKS,
    Check,
    Evidence,
    cause,
    loud_problem,
    planned_probes,
    ran,
    repeated_entries,
    seed_shifted,
    shown_keys,
    unsettled_cases,
)
from grader.submission import (
    CASSETTE_CAP,
    CHANGE_LOG_CAP,
    FAILURES_CAP,
    FIXTURE_CAP,
    INCIDENT_CAP,
    PYPROJECT_CAP,
    SOURCE_CAP,
    Manifest,
    ManifestError,
    MissingSubmissionFile,
    SubmissionFileError,
    load_manifest,
    read_submission_file,
    require_submission_folder,
    submission_files,
    tamper_findings,
)

__all__ = ["SEED_POOL", "Draw", "Graded", "draw", "grade_submission", "item_cases", "seed_pool"]

# The real provider families, as `gradekit record` names them (adapter:model). Every grading
# runs the agent once under a label of each family, each with its own hash seed, so an agent
# that branches on any family's name (its adapter or its models' word: gpt, claude, llama)
# shows it in every grading, not only when a draw happens to name that family.
FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("openai", ("gpt-4o-mini", "gpt-4.1-mini", "gpt-4o", "gpt-4.1-nano")),
    ("anthropic", ("claude-3-5-haiku", "claude-sonnet-4", "claude-3-7-sonnet")),
    ("ollama", ("llama3.2", "qwen2.5-7b", "mistral-small", "gemma2-9b", "phi3-mini")),
    ("llamacpp", ("smollm2-135m", "qwen2.5-0.5b", "llama-3.2-1b")),
    ("openai-compatible", ("mistral-small", "deepseek-chat", "qwen2.5-7b", "llama-3.1-8b")),
)
_WORDS = ("refund", "deadline", "cassette", "rubric", "latency", "policy", "incident",
          "grader", "summary", "tool", "trace", "retry", "budget", "quota", "schema", "review")
_DRAW = b"gradekit-draw/1"  # what a draw's HMAC is taken under: no other use of a key shares it


@dataclass(frozen=True, slots=True)
class Draw:
    """What a grading draws, so that no submission can special-case it: a provider label of
    each family and a hash seed for each, and the recording its own Replay is probed with.

    Drawn by ``draw``: a keyed function of the submission's content and a secret of the
    grader's, so grading the same submission again draws the same, while a student without
    the key cannot predict it. None of it reaches a report: an honest submission gets one
    digest whatever is drawn."""

    labels: tuple[str, ...]  # the primary run's first, then one of every other family
    seeds: tuple[int, ...]  # PYTHONHASHSEED of each of those runs: all different, all of
    # the key's pool (seed_pool)
    probe: Mapping[str, str]  # prompt -> answer: the probe cassette's one recording, where
    # the submission recorded nothing of its own to probe its Replay with
    unknown: str  # a prompt of the same kind that the probe cassette does not hold
    clock: int = CLOCK  # where the runs' wall clock starts (seconds since the epoch)
    again: int = CLOCK + 86400  # the clock of a run otherwise identical to the primary run
    pick: int = 0  # which case's recordings the own Replay is probed with, and which prompts
    more: tuple[int, ...] = ()  # the hash seeds tried, after those of ``seeds``, for a case
    # that asks a recording's words in another order until one moves it (MORE_SEEDS)


class _Keyed:
    """A stream of numbers from HMAC-SHA256 under ``key`` over ``content`` and a counter:
    the same key and content give the same stream on every machine and Python."""

    def __init__(self, key: bytes, content: str) -> None:
        self._mac = hmac.new(key, _DRAW + b"\0" + content.encode("utf-8") + b"\0",
                             hashlib.sha256)
        self._count = 0

    def below(self, n: int) -> int:
        """A number in ``range(n)`` (256 bits reduced: no bias worth the name)."""
        self._count += 1
        mac = self._mac.copy()
        mac.update(str(self._count).encode("ascii"))
        return int.from_bytes(mac.digest(), "big") % n

    def choice(self, options: Sequence[_Item]) -> _Item:
        return options[self.below(len(options))]

    def shuffled(self, items: Sequence[_Item]) -> list[_Item]:
        keyed = [(self.below(1 << 64), index) for index in range(len(items))]
        return [items[index] for _, index in sorted(keyed)]


_Item = TypeVar("_Item")


def draw(key: bytes | None = None, content: str = "", label: str | None = None) -> Draw:
    """The ``Draw`` for a submission whose content is ``content`` (its inputs' digests),
    under the grader's secret ``key`` (None: a fresh random one, so nothing repeats).

    ``label``, if given, is the primary label (an instructor reproducing something); the
    other families are still drawn beside it.
    """
    key = key if key is not None else secrets.token_bytes(32)
    keyed = _Keyed(key, content)
    labels = [f"{adapter}:{keyed.choice(models)}" for adapter, models in keyed.shuffled(FAMILIES)]
    if label is not None:
        labels = [label, *(other for other in labels
                           if other.partition(":")[0] != label.partition(":")[0])]
    pool = keyed.shuffled(seed_pool(key))
    seeds, more = pool[:len(labels)], pool[len(labels):]
    words = keyed.shuffled(_WORDS)
    prompt, unknown = (f"Task: summarise the {a} {b} notes for the {c} review."
                       for a, b, c in (words[0:3], words[3:6]))
    answer = f"The {words[6]} notes say: {keyed.below(10**6)}."
    # A day in the 50 years after CLOCK, never the day a grading or a recording is made,
    # and a later day at another time of day for the run that differs only by its clock.
    clock = CLOCK + keyed.below(_CLOCK_DAYS) * _DAY + keyed.below(_DAY)
    again = clock + (1 + keyed.below(_CLOCK_DAYS)) * _DAY + 1 + keyed.below(_DAY - 1)
    pick = keyed.below(1 << 32)
    while len(more) < MORE_SEEDS:  # past the pool: a host of their own, started if asked
        seed = keyed.below(1 << 32)
        more += [] if seed in pool or seed in more else [seed]
    return Draw(tuple(labels), tuple(seeds), {prompt: answer}, unknown, clock, again, pick,
                tuple(more))


_DAY = 86400
_CLOCK_DAYS = 365 * 50


SEED_POOL = 8  # hash seeds a key draws from: one more family and an instructor's label fit
# Hash seeds a case that asks a recording's words in another order is run under, one at a
# time, until one moves what it asks: a set of two words keeps its order under a seed
# about half the time, so with the others' seeds 16 runs leave about one chance in 65 000
# that such a case is told as anything but the hash seed's.
MORE_SEEDS = 12


def seed_pool(key: bytes) -> tuple[int, ...]:
    """The ``SEED_POOL`` different hash seeds every draw under ``key`` takes its seeds from.

    A run's hash seed is fixed when its interpreter starts, so behind namespaces runs fork
    from one host per seed (``grader.sandbox._host``); with a pool per key rather than
    seeds per submission, a batch starts its hosts once and every grading forks from them.
    Each grading still runs each label under a seed of its own, in an order and a choice
    keyed on its content; the seeds stay unknown without the key.
    """
    keyed = _Keyed(key, "hash seed pool")
    seeds: list[int] = []
    while len(seeds) < SEED_POOL:
        seed = keyed.below(1 << 32)
        seeds += [] if seed in seeds else [seed]
    return tuple(seeds)


def submission_content(inputs: Mapping[str, str]) -> str:
    """What a draw is keyed on: the digests of every file the grade depends on."""
    return json.dumps(inputs, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Graded:
    """A report and the facts about the runs that the checkpoints need."""

    report: Report
    evidence: Evidence
    wall: Wall = PROCESS_WALL  # the wall its code ran behind: reported, never scored
    children: int = 0  # the sandboxed children its runs started: what a grade costs


def grade_submission(root: Path, rubric: Rubric, *, submission: str, scratch: Path,
                     label: str | None = None, wall: Wall = PROCESS_WALL,
                     drawn: Draw | None = None, draw_key: bytes | None = None,
                     on_case: Callable[[str], None] | None = None,
                     derived: Derived | None = None, hosts: Hosts | None = None) -> Graded:
    """Grade the submission at ``root`` as ``submission``; ``scratch`` is a private, empty folder.

    ``submission`` is who it is, the report's ``submission``: the caller decides it on the
    instructor's side (a roster's student id, or the folder's name), never the manifest's
    ``student``, which a student could set to a classmate's name.
    ``wall`` is what its code runs behind (``choose_wall`` decides it).
    Labels, hash seeds and the probe's recording are ``drawn``, else drawn by ``draw``
    under ``draw_key`` (the grader's secret; None: a fresh random one) from the
    submission's inputs: none of them is a constant a submission could recognise, and
    the same key grades the same submission the same way again.
    ``on_case(case_id)`` is told as each sandboxed case starts. ``derived``: where a batch
    keeps what it derived from files' bytes (their tamper scans and bytecode), for the
    gradings after this one; the grade is the same with or without it. ``hosts``: what the
    runs fork from, lent by a caller that grades several times under one folder holding
    ``scratch`` and ends them itself (None: the grading's own, ended with it).
    """
    manifest, findings = _manifest(root)
    findings += _other_rubric(root, manifest, rubric)
    folder = manifest.cassettes if manifest else "cassettes"
    http = _http_cassettes(root, folder, rubric.cases)
    cassettes = _cassettes(root, folder, rubric.cases, sdk=http.present)
    findings += [*http.problems.values(), *cassettes.problems.values()]
    # A case's problem is its HTTP cassette's when that has one, else its cassette's.
    problems = {**http.problems, **{case: problem for case, problem in cassettes.problems.items()
                                    if case not in http.problems}}
    answers = cassettes.by_case
    inputs = _inputs(root, manifest, (*rubric.cases, *item_cases(rubric)))
    drawn = drawn or draw(draw_key, submission_content(inputs), label)
    # The recordings are the parent's to serve: no run reads them, so none can tell a
    # withheld answer from a missing one by looking.
    hidden = tuple(_recording_names(manifest, (*rubric.cases, *item_cases(rubric))))
    derived = derived or Derived()  # this process's memory alone, where no batch keeps one
    laid = LaidOut(derived=derived, hidden=hidden) if hosts is None \
        else LaidOut(derived=derived, hidden=hidden, hosts=hosts, lent=True)
    sandbox = Sandbox(root, scratch, rubric.limits, wall, laid)
    try:
        if manifest is not None:
            sandbox.ahead(drawn.seeds, imported_packages(root, manifest, rubric.packages),
                          shipped_packages(root, rubric.packages))
        evidence, found = _evidence(sandbox, manifest, rubric, answers, drawn, on_case,
                                    http.by_case)
    finally:
        sandbox.close()
    children = sandbox.laid.children
    findings += found
    # Read once a grading, never run: code that reaches for the harness or the process
    # flags the grade for a person, and moves no points.
    findings += tamper_findings(root, manifest, derived)
    findings += _never_played(evidence, answers, http.by_case, folder)
    evidence = replace(evidence, recording_problems=problems, recorded_prompts={
        case: tuple(entry.prompt for entry in entries.values() if entry.prompt)
        for case, entries in answers.items()}, recorded_with=recording_settings(
            entry.provider for entries in answers.values() for entry in entries.values())
        or {})
    criteria = tuple(_score(evidence, rubric))
    # An entry copied from the hand-out or from another entry earns nothing by itself, and
    # asks a person to read the log (the gradebook's reason, the dashboard's queue).
    if any(criterion.check == "written_summary" for criterion in rubric.criteria):
        findings += [FLAGGED + said for said in repeated_entries(evidence.failures,
                                                                 evidence.grounds)]
    report = Report(
        submission=submission,
        rubric_id=rubric.id,
        rubric_version=rubric.version,
        rubric_sha256=rubric.sha256,
        inputs=inputs,
        criteria=criteria,
        findings=tuple(dict.fromkeys(findings)),
        sets={ref: pinned.sha256 for ref, pinned in rubric.sets.items() if pinned is not None},
    )
    return Graded(report, evidence, wall, children)


def _other_rubric(root: Path, manifest: Manifest | None, rubric: Rubric) -> list[str]:
    """A finding when the submission's manifest names a rubric that is not, byte for byte,
    the one it is graded on: the grader only ever grades on the instructor's, and never
    reads more of the submission's than its [rubric] table, for the message."""
    if manifest is None or not manifest.rubric:
        return []
    named = quote(manifest.rubric)
    try:
        data = read_submission_file(root, manifest.rubric, cap=PYPROJECT_CAP)
    except SubmissionFileError:
        return [f"the manifest names rubric = {named}, which the submission does not hold as "
                f"a file: it was graded on the instructor's rubric {rubric.id} v{rubric.version}"]
    if hashlib.sha256(data).hexdigest() == rubric.sha256:
        return []
    try:
        table = tomllib.loads(data.decode("utf-8")).get("rubric", {})
        shown = f"{quote(str(table.get('id')))} v{quote(str(table.get('version')))}"
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
        shown = "not a readable rubric"
    return [f"the manifest names rubric = {named} ({shown}), which is not the rubric it was "
            f"graded on: {rubric.id} v{rubric.version}, the instructor's; the grade is that "
            "rubric's"]


def _never_played(evidence: Evidence, answers: Mapping[str, Mapping[str, Entry]],
                  http: Mapping[str, HttpCassette], folder: str) -> list[str]:
    """A finding per recording file that holds answers no run asked, in a case whose every
    run was served: left over from a prompt that changed, re-recorded without --rerecord.
    They move no points; they are what an unexplained answer could come from."""
    runs = [run for run in (evidence.primary, *evidence.others, evidence.again) if run]
    if evidence.primary is None:
        return []
    settled = set(evidence.primary.outcomes) - set(unsettled_cases(evidence.primary, runs[1:]))
    found = []
    for case in evidence.cases:
        if case.id not in settled or not ran(evidence.primary.outcomes.get(case.id)):
            continue  # a case that asks nothing plays nothing: it is told so elsewhere
        asked = {call.key for run in runs if (o := run.outcomes.get(case.id))
                 for call in o.calls}
        for suffix, keys in ((".json", set(answers.get(case.id, {}))),
                             (".http.json", set(http[case.id].interactions)
                              if case.id in http else set())):
            left = sorted(keys - asked)
            if left:
                command = commands.RERECORD_CASE(case=case.id, reason=_UNPLAYED)
                found.append(f"{folder}/{case.id}{suffix} holds {len(left)} recording(s) that "
                             f"no run asked ({shown_keys(left)}): left over from prompts that "
                             f"changed; re-record the case to keep only what it asks: "
                             f"`{command}`")
    return found


_UNPLAYED = "drop recordings no run asks"


def _manifest(root: Path) -> tuple[Manifest | None, list[str]]:
    """The submission's manifest, or None and the finding that says why not."""
    try:
        return load_manifest(root), []
    except ManifestError as exc:
        return None, [f"manifest: {quote(_relative(str(exc), root), TEXT_LIMIT)}"]


_Decoded = TypeVar("_Decoded")


@dataclass(frozen=True, slots=True)
class _Read(Generic[_Decoded]):
    """Recordings the parent read, by case, and the finding each case's file gave instead,
    if any (one a case at most, in the cases' order)."""

    by_case: dict[str, _Decoded]
    problems: dict[str, str]

    @property
    def present(self) -> set[str]:
        """The cases whose file is there, usable or not."""
        return {*self.by_case, *self.problems}


def _cassettes(root: Path, folder: str, cases: tuple[Case, ...], *,
               sdk: Collection[str] = ()) -> _Read[dict[str, Entry]]:
    """case -> key -> recorded entry, read by the parent, and each case's problem (a
    finding). A case in ``sdk`` has an HTTP cassette: its agent may use the SDKs only, so
    no ``<case>.json`` is no finding."""
    recorded: dict[str, dict[str, Entry]] = {}
    problems: dict[str, str] = {}
    for case in cases:
        relative = f"{folder}/{case.id}.json"
        missing = "" if case.id in sdk else _missing_advice(relative, case.id)
        cassette, problem = _recording(root, relative, CASSETTE_CAP, decode_cassette, case.id,
                                       missing)
        if problem:
            problems[case.id] = problem
        if cassette is not None:
            recorded[case.id] = dict(cassette.entries)
    return _Read(recorded, problems)


def _http_cassettes(root: Path, folder: str, cases: tuple[Case, ...]) -> _Read[HttpCassette]:
    """case -> its HTTP cassette (``<case>.http.json``, what an SDK-based agent's requests
    are served from), read by the parent, and each case's problem (a finding). None is
    needed: an agent that only calls ``complete`` has none, and a request of a case without
    one is a miss."""
    recorded: dict[str, HttpCassette] = {}
    problems: dict[str, str] = {}
    for case in cases:
        cassette, problem = _recording(root, f"{folder}/{case.id}.http.json", CASSETTE_CAP,
                                       LAB_HTTP_CASSETTE.decode, case.id, "")
        if problem:
            problems[case.id] = problem
        if cassette is not None:
            recorded[case.id] = cassette
    return _Read(recorded, problems)


def _fixtures(root: Path, manifest: Manifest,
              cases: tuple[Case, ...]) -> tuple[dict[str, dict[str, object]], list[str]]:
    """case -> tool key -> recorded result, from the manifest's fixtures folder, and the
    findings reading it gave.

    A submission whose agent declares tools needs every case's fixture: a missing one is a
    finding with the fix. One without tools may have none (its agent makes no tool call).
    """
    fixtures: dict[str, dict[str, object]] = {}
    folder, needed = manifest.fixtures, bool(manifest.tools) or manifest.fixtures != "fixtures"
    if needed and (problem := _folder_problem(root, folder)):
        return fixtures, [problem]
    findings = []
    for case in cases:
        relative = f"{folder}/{case.id}.json"
        missing = _missing_advice(relative, case.id) if needed else ""
        fixture, problem = _recording(root, relative, FIXTURE_CAP, decode_fixture, case.id,
                                      missing)
        findings += [problem] if problem else []
        if fixture is not None:
            fixtures[case.id] = {key: call.response for key, call in fixture.calls.items()}
    return fixtures, findings


def _missing_advice(relative: str, case: str) -> str:
    """What to do about a recording the submission lacks: commit it if it was made, else
    make it."""
    return (f"{relative} is missing: if `git status` lists it, commit it (`git add "
            f"{relative}`); otherwise record it with `{commands.RECORD_CASE(case=case)}` and "
            "commit it")


# The re-recording a change-log advice shows, with a reason for the student to make theirs.
_RERECORD = commands.RERECORD(reason="why the answers changed")


def _folder_problem(root: Path, folder: str) -> str:
    """"" when a folder the manifest names is there; else the finding, with the fix."""
    try:
        require_submission_folder(root, folder)
    except MissingSubmissionFile:
        return (f"the folder {quote(folder)}/ named in [tool.gradekit] does not exist: "
                f"record into it with `{commands.RECORD()}` and commit it, or fix the name")
    except SubmissionFileError as exc:
        return quote(str(exc), TEXT_LIMIT)
    return ""


def _recording(root: Path, relative: str, cap: int, decoder: Callable[..., _Decoded],
               case: str, missing: str) -> tuple[_Decoded | None, str]:
    """A cassette or fixture decoded by the parent and "", or None and the finding (``missing``
    when the file is absent, which may be "")."""
    try:
        return decoder(read_submission_file(root, relative, cap=cap), source=relative,
                       case=case), ""
    except MissingSubmissionFile:
        return None, missing
    except SubmissionFileError as exc:
        return None, quote(str(exc), TEXT_LIMIT)
    except CassetteError as exc:
        return None, f"{relative} cannot be used: {quote(str(exc), TEXT_LIMIT)}"
    except (ValueError, RecursionError) as exc:  # JSON too deep, or a number too long
        return None, _undecodable(relative, exc)


def _undecodable(relative: str, exc: Exception) -> str:
    """The finding for a recording that Python's JSON decoder itself gives up on."""
    return (f"{relative} cannot be decoded ({type(exc).__name__}): restore it with "
            f"`git checkout -- {relative}` or record the case again")


def item_cases(rubric: Rubric) -> tuple[Case, ...]:
    """Each item of the sets ``rubric`` pins as the case a submission records it as: its
    recording name and its task (an item two pinned versions share, once)."""
    named = {recording_name(pinned.name, item.id): item.task
             for pinned in rubric.sets.values() if pinned is not None for item in pinned.items}
    return tuple(Case(name, task) for name, task in named.items())


def _item_recordings(root: Path, manifest: Manifest,
                     items: tuple[Case, ...]) -> tuple[ItemRecordings, list[str]]:
    """The submission's recordings of the pinned items, and the findings of the files that
    are there but cannot be used. A missing one is no finding: a run of the item that asks
    for it says so, with the fix (an agent may make no call at all)."""
    answers: dict[str, dict[str, Entry]] = {}
    fixtures: dict[str, dict[str, object]] = {}
    http: dict[str, HttpCassette] = {}
    findings: list[str] = []
    for item in items:
        cassette, problem = _recording(root, f"{manifest.cassettes}/{item.id}.json",
                                       CASSETTE_CAP, decode_cassette, item.id, "")
        sdk, sdk_problem = _recording(root, f"{manifest.cassettes}/{item.id}.http.json",
                                      CASSETTE_CAP, LAB_HTTP_CASSETTE.decode, item.id, "")
        fixture, fixture_problem = _recording(root, f"{manifest.fixtures}/{item.id}.json",
                                              FIXTURE_CAP, decode_fixture, item.id, "")
        findings += [found for found in (problem, sdk_problem, fixture_problem) if found]
        if cassette is not None:
            answers[item.id] = dict(cassette.entries)
        if sdk is not None:
            http[item.id] = sdk
        if fixture is not None:
            fixtures[item.id] = {key: call.response for key, call in fixture.calls.items()}
    return ItemRecordings(answers, fixtures, http, cassettes=manifest.cassettes,
                          fixtures_folder=manifest.fixtures), findings


def _serve_tools(fixtures: Mapping[str, Mapping[str, object]]) -> ToolAnswer:
    def answer(case: str, key: str) -> tuple[bool, object]:
        recorded = fixtures.get(case, {})
        return (True, recorded[key]) if key in recorded else (False, None)

    return answer


def _tool_names(fixtures: Mapping[str, Mapping[str, object]]) -> frozenset[str]:
    """Every tool a fixture of the submission holds a call of: a read-only tool in every
    case, never one the child may run itself as a write tool."""
    return frozenset(key.partition(" ")[0] for calls in fixtures.values() for key in calls)


def _serve(recorded: Mapping[str, Mapping[str, Entry]]) -> Answer:
    def answer(case: str, prompt: str) -> str | None:
        entry = recorded.get(case, {}).get(prompt_key(prompt))
        return None if entry is None else entry.response

    return answer


def _evidence(sandbox: Sandbox, manifest: Manifest | None, rubric: Rubric,
              answers: dict[str, dict[str, Entry]], drawn: Draw,
              on_case: Callable[[str], None] | None,
              http: Mapping[str, HttpCassette]) -> tuple[Evidence, list[str]]:
    """Every run's evidence, and the findings reading and running the submission gave, in
    the order they came."""
    root = sandbox.root
    failures, findings = _failures(root, manifest)
    if manifest is None:
        return Evidence(cases=rubric.cases, label=drawn.labels[0], primary=None, others=(),
                        loud=(), probe=None, failures=failures, stretch=(), second_set=None,
                        blocked="no usable [tool.gradekit] manifest"), findings
    pairs = [(case.id, case.task) for case in rubric.cases]
    fixtures, found = _fixtures(root, manifest, rubric.cases)
    findings += found
    timed_out: dict[str, CaseOutcome] = {}

    def run(name: str, plan: RunPlan, only: Collection[str] | None = None) -> RunResult:
        # A case that timed out once is not run again: it counts as timed out in every
        # later run, so a hanging submission costs one timeout per case, not one per run.
        todo = [(case, task) for case, task in pairs
                if case not in timed_out and (only is None or case in only)]
        result = sandbox.within(name).run(manifest.agent, todo, plan) if todo else RunResult({})
        known = {**timed_out, **result.outcomes}
        timed_out.update({c: o for c, o in result.outcomes.items() if o.status == "timeout"})
        repeated = {case: CaseOutcome(case, "timeout", detail=known[case].detail)
                    for case, _ in pairs if case in known and (only is None or case in only)}
        return replace(result, outcomes={**repeated, **result.outcomes})

    def noted(result: RunResult) -> None:
        """A run made in another (a copy's): its timeouts count as a run's own do."""
        timed_out.update({c: o for c, o in result.outcomes.items() if o.status == "timeout"})

    recorded = Serving(_serve(answers), _serve_tools(fixtures), http, manifest.fixtures,
                       manifest.cassettes, answers, derived=sandbox.laid.derived,
                       registry=manifest.tools, recorded_tools=_tool_names(fixtures))
    plan = RunPlan(drawn.labels[0], drawn.seeds[0], recorded, on_case=on_case,
                   clock=drawn.clock)
    primary = run("primary", plan)
    _require_packages(root, manifest, rubric.packages, primary)
    blocked = f"the agent could not be imported: {primary.import_error}" \
        if primary.import_error else ""
    others = tuple(run(f"label-{n}", replace(plan, label=other, hashseed=other_seed))
                   for n, (other, other_seed) in enumerate(zip(drawn.labels[1:],
                                                               drawn.seeds[1:], strict=True), 2))
    # A run that differs from the primary run by its clock alone: what changes here changes
    # between identical runs (a date, a time, randomness), which no recording can pin.
    again = run("again", replace(plan, clock=drawn.again))
    primary, others, again = _steady_messages(primary, others, again)
    # Where the runs disagree, or a run was not served: the first label with each other
    # run's hash seed says whether the hash seed alone moves it, so the advice can name
    # the cause. They make the cases before as the primary run did: state carries over.
    unsettled = unsettled_cases(primary, (*others, again))
    upto = [case for case, _ in pairs][:max((index + 1 for index, (case, _) in enumerate(pairs)
                                             if case in unsettled), default=0)]
    seeds = tuple(run(f"seed-{n}", replace(plan, hashseed=seed), upto)
                  for n, seed in enumerate(drawn.seeds[1:], 2)) if unsettled else ()
    seeds += _more_seeds(run, plan, drawn.more, [case for case, _ in pairs],
                         _reordered(unsettled, (primary, *others, *seeds)),
                         (primary, others, again, seeds))
    loud, copied_from, found = _loud_probes(
        run, plan, primary, skip=seed_shifted(primary, seeds), pick=drawn.pick,
        copied=sandbox.wall.copies, noted=noted)
    for result in (primary, *others, again, *seeds, *copied_from, *(r for _, r in loud)):
        findings += _run_findings(result)
    findings += found
    case, recorded_prompts, unknown = _probe_recordings(answers, drawn,
                                                        [c.id for c in rubric.cases])
    probe = sandbox.within("probe").probe_replay(manifest.replay, recorded_prompts,
                                                 unknown=unknown, hashseed=plan.hashseed,
                                                 clock=plan.clock, case=case,
                                                 cassettes=manifest.cassettes)
    if probe.tampering:
        findings.append(FLAGGED + f"the own-Replay probe: {quote(probe.tampering)}")
    second_set, problem, found = _second_set(root, manifest, rubric, run, plan, answers)
    findings += found
    rerecorded, basis = _rerecording(root, manifest) if "rerecord-review" in manifest.stretch \
        else ("not claimed", "")
    cut_point, found = _cut_point(sandbox, manifest, plan.hashseed, plan.clock) \
        if "cut-point" in manifest.stretch \
        else ("not claimed", [])
    findings += found
    # Every item of every set the rubric pins, against the submission's own code, served
    # from its own recordings of the item.
    recordings, found = _item_recordings(root, manifest, item_cases(rubric))
    findings += found
    regression = {ref: replay_set(sandbox.within(f"set-{number}"), pinned, manifest.agent,
                                  recordings, label=plan.label, hashseed=plan.hashseed,
                                  clock=plan.clock)
                  for number, (ref, pinned) in enumerate(rubric.sets.items())
                  if pinned is not None}
    return Evidence(cases=rubric.cases, label=plan.label, primary=primary, others=others,
                    loud=loud, probe=probe, failures=failures,
                    stretch=manifest.stretch, second_set=second_set,
                    second_set_problem=problem, blocked=blocked, rerecording_problem=rerecorded,
                    second_cassettes=manifest.second_cassettes, fixtures=manifest.fixtures,
                    rerecording_basis=basis, seeds=seeds, again=again, clock=plan.clock,
                    cut_point_problem=cut_point,
                    incident_test=manifest.incident_test, regression=regression,
                    grounds=grounds(root, rubric.cases, recorded_keys(
                        answers, fixtures, {case: cassette.interactions
                                            for case, cassette in http.items()}),
                        [text for entries in answers.values() for entry in entries.values()
                         for text in (entry.prompt or "", entry.response)],
                        sandbox.laid.derived)), findings


def _reordered(cases: Sequence[str], runs: Sequence[RunResult]) -> list[str]:
    """The ``cases`` a run missed a provider call of that asks a recording's words in
    another order: the hash seed may be why, though the seeds tried so far kept it."""
    return [case for case in cases
            if any(call.reordered and not call.withheld for run in runs
                   if (outcome := run.outcomes.get(case)) for call in outcome.calls)]


def _more_seeds(run: Callable[..., RunResult], plan: RunPlan, more: Sequence[int],
                order: Sequence[str], reordered: Sequence[str],
                runs: tuple[RunResult, tuple[RunResult, ...], RunResult,
                            tuple[RunResult, ...]]) -> tuple[RunResult, ...]:
    """Runs with the primary label under the seeds of ``more``, one at a time, for the
    ``reordered`` cases no seed has moved yet and no clock explains, until each has moved
    or the seeds run out: whether a set's order is told as the hash seed's must not hang
    on which seeds a draw gave (a set of two words keeps its order under half of them)."""
    primary, others, again, seeds = runs
    found: list[RunResult] = []

    def still_open() -> list[str]:
        moved = seed_shifted(primary, (*seeds, *found))
        return [case for case in reordered if case not in moved
                and cause(case, primary, others, again, ()) != "identical"]

    cases = still_open()
    for n, seed in enumerate(more, len(seeds) + 2):
        if not cases:
            break
        upto = order[:max(order.index(case) + 1 for case in cases)]
        found.append(run(f"seed-{n}", replace(plan, hashseed=seed), upto))
        cases = still_open()
    return tuple(found)


def _steady_messages(primary: RunResult, others: tuple[RunResult, ...],
                     again: RunResult) -> tuple[RunResult, tuple[RunResult, ...], RunResult]:
    """The runs, each case's message of what run() raised kept only where every run that
    raised gave the same one: a message that holds a time, an id or an address would
    otherwise make one grading's report differ from the next."""
    runs = (primary, *others, again)
    unsteady = {case for case in primary.outcomes
                if len({o.message for run in runs if (o := run.outcomes.get(case))
                        and o.status == "raised"}) > 1}
    if not unsteady:
        return primary, others, again

    def steady(run: RunResult) -> RunResult:
        return replace(run, outcomes={case: replace(o, message="") if case in unsteady else o
                                      for case, o in run.outcomes.items()})

    return steady(primary), tuple(steady(run) for run in others), steady(again)


def _probe_recordings(answers: Mapping[str, Mapping[str, Entry]], drawn: Draw,
                      ids: Sequence[str]) -> tuple[str, dict[str, str], str]:
    """What the own Replay is probed with, so that it looks like any case of the lab: the
    case, its recordings (prompt -> answer) and a prompt it does not hold. A case with
    recordings of the submission's own is drawn; the unknown prompt is another case's
    recorded prompt where there is one. Without any recording: the draw's made-up ones,
    under a case of the rubric."""
    recorded = {case: {e.prompt: e.response for e in entries.values() if e.prompt}
                for case, entries in sorted(answers.items())}
    cases = [case for case, prompts in recorded.items() if prompts]
    if not cases:
        return ids[drawn.pick % len(ids)] if ids else "case", dict(drawn.probe), drawn.unknown
    case = cases[drawn.pick % len(cases)]
    held = {prompt_key(prompt) for prompt in recorded[case]}
    others = sorted({prompt for other in cases if other != case for prompt in recorded[other]
                     if prompt_key(prompt) not in held})
    unknown = others[drawn.pick % len(others)] if others else drawn.unknown
    return case, recorded[case], unknown


def _loud_probes(run: Callable[..., RunResult], plan: RunPlan, primary: RunResult, *,
                 skip: Collection[str] = (), pick: int = 0, copied: bool = False,
                 noted: Callable[[RunResult], None] = lambda result: None,
                 ) -> tuple[tuple[tuple[Withhold, RunResult], ...], tuple[RunResult, ...],
                            list[str]]:
    """The loud-failure probe runs, with the primary run's ``plan`` (its label, hash seed
    and clock): for each case that ran, one run per provider call and per tool call it
    made, each standing where the primary run stood at the case's start (a memo of an
    earlier case's answer is there). A case that failed a probe is not probed again: it
    has lost already. The cases in ``skip`` (their prompts change with the hash seed:
    whether the primary run was served is the draw's luck) are not probed, so that the
    draw moves no verdict.

    Where the wall can (``copied``), one run makes every case in order and copies itself
    at each probed case's start, one copy per probe (``_ProbeCopies``): a copy costs a
    fork, where a run of its own costs a child that makes every case before again. Each
    copied case is then checked by one probe in a run of its own, at the call whose copy
    failed, else at a call the draw picks (``pick``): a copy's verdict that a run of its
    own does not give is not kept. Where the copy alone raised the miss, the agent told a
    copy from a run (no honest agent can: the two stand alike), and that is flagged. A
    case that could not be copied (threads alive at its start, a run that ended) is
    probed in runs of its own, one per call. Returns the probes in order, the copying
    runs (for their findings) and what was flagged."""
    order = list(primary.outcomes)
    targets = {case: probes for case, outcome in primary.outcomes.items()
               if ran(outcome) and case not in skip and (probes := planned_probes(outcome))}
    copies = _ProbeCopies(targets)
    copying: tuple[RunResult, ...] = ()
    if copied and targets:
        last = max(order.index(case) for case in targets)
        copying = (run("loud-copies", replace(plan, copies=copies), order[:last + 1]),)
    runs: list[tuple[Withhold, RunResult]] = []
    flagged: list[str] = []
    for index, case in enumerate(order):
        if case not in targets:
            continue

        def alone(withhold: Withhold, index: int = index) -> RunResult:
            name = f"loud-{index + 1}-{withhold.kind}-{withhold.position}"
            return run(name, replace(plan, withhold=withhold), order[:index + 1])

        taken = copies.taken[case] if copies.complete(case) else []
        if not taken:
            runs += _probed_alone(case, targets[case], alone)
            continue
        failed = next((at for at, (withhold, result) in enumerate(taken)
                       if loud_problem(withhold, result.outcomes.get(case)) is not None), None)
        ended = taken[failed][1].outcomes.get(case) if failed is not None else None
        # A copy that ran out of time lost the case as a run of its own would, and a check
        # would cost the case's whole limit again.
        at = failed if failed is not None else (pick + index) % len(taken)
        withhold = taken[at][0]
        checked = None if ended is not None and ended.status == "timeout" else alone(withhold)
        for _, result in taken:  # after the check: a copy's timeout would have skipped it
            noted(result)
        if checked is None:
            runs += taken
            continue
        loud_alone = loud_problem(withhold, checked.outcomes.get(case)) is None
        runs += [*taken[:at], (withhold, checked)]
        if loud_alone != (failed is None):
            if loud_alone:  # the copy failed where a run of its own did not: the copy's fault
                runs += _probed_alone(case, targets[case][at + 1:], alone)
            else:
                flagged.append(FLAGGED + f"case {case}: the loud-failure probe of {withhold} "
                               "escaped run() in a copy of the run but not in a run of its "
                               "own, which alone counts: code that tells a probe from a run?")
        elif failed is None:
            runs += taken[at + 1:]
    return tuple(runs), copying, flagged


def _probed_alone(case: str, planned: Sequence[Withhold],
                  alone: Callable[[Withhold], RunResult]) -> list[tuple[Withhold, RunResult]]:
    """``case``'s probes in runs of their own, in order, until one fails."""
    runs = []
    for withhold in planned:
        result = alone(withhold)
        runs.append((withhold, result))
        if loud_problem(withhold, result.outcomes.get(case)) is not None:
            break
    return runs


class _ProbeCopies:
    """The loud-failure probes a run's copies make (``grader.sandbox.Copies``): for each
    case, one copy per planned probe in order, until one fails."""

    def __init__(self, planned: Mapping[str, Sequence[Withhold]]) -> None:
        self.cases = frozenset(planned)
        self._planned = planned
        self.taken: dict[str, list[tuple[Withhold, RunResult]]] = {case: [] for case in planned}
        self._lost: set[str] = set()

    def next(self, case: str) -> Withhold | None:
        if case not in self.taken or case in self._lost or self._ended(case):
            return None
        return self._planned[case][len(self.taken[case])]

    def took(self, withhold: Withhold, result: RunResult) -> None:
        if withhold.case in self.taken and not self._ended(withhold.case):
            self.taken[withhold.case].append((withhold, result))

    def lost(self, case: str) -> None:
        self._lost.add(case)

    def complete(self, case: str) -> bool:
        """Whether ``case`` got every copy it needed: one per probe, or up to a failure."""
        return case in self.taken and case not in self._lost and self._ended(case)

    def _ended(self, case: str) -> bool:
        taken = self.taken[case]
        return len(taken) == len(self._planned[case]) or (bool(taken) and loud_problem(
            taken[-1][0], taken[-1][1].outcomes.get(case)) is not None)


def _require_packages(root: Path, manifest: Manifest, packages: Mapping[str, str],
                      primary: RunResult) -> None:
    """Raise ``MissingPackage`` when the agent could not import a package the grader lacks,
    at import or in run() during a case (a lazy import), judged against the rubric's
    ``packages``: that is no grade at all, never a zero for the cases it lost."""
    specs = (manifest.agent, manifest.tools, manifest.replay)
    own = {spec.partition(":")[0].partition(".")[0] for spec in specs if spec}
    modules = [("when the agent is imported", primary.missing_module),
               *((f"in run(), case {case}", outcome.missing_module)
                 for case, outcome in sorted(primary.outcomes.items()))]
    for where, module in modules:
        missing = missing_package(root, module, packages, where=where, own=own) \
            if module else None
        if missing is not None:
            raise missing


def _cut_point(sandbox: Sandbox, manifest: Manifest, hashseed: int,
               clock: int) -> tuple[str | None, list[str]]:
    """The cut-point goal's evidence: the incident test, on the submission's guard and on
    one that allows everything, both in the sandbox; and the findings they gave."""
    test, guard = manifest.incident_test, manifest.guard
    if not test or not guard:
        return cut_point_problem(None, None, test=test, guard=guard), []
    runs = [sandbox.within(f"cut-point-{allow_all}").run_cut_point_test(
        test, guard, allow_all=allow_all, hashseed=hashseed, clock=clock)
        for allow_all in (False, True)]
    findings = [FLAGGED + f"the cut-point test: {quote(run.tampering)}"
                for run in runs if run.tampering]
    return cut_point_problem(runs[0], runs[1], test=test, guard=guard), findings


def _rerecording_problem(root: Path, manifest: Manifest) -> str | None:
    """None when a change-log entry names recordings whose keys really changed, and its
    digests match the files as they are now; else why not."""
    return _rerecording(root, manifest)[0]


def _rerecording(root: Path, manifest: Manifest) -> tuple[str | None, str]:
    """``_rerecording_problem``, and when there is none, the entry and keys the evidence
    rests on."""
    try:
        data = read_submission_file(root, CHANGE_LOG, cap=CHANGE_LOG_CAP)
        changes = decode_changes(data, log=Path(CHANGE_LOG))
    except MissingSubmissionFile:
        changes = []
    except GradekitError as exc:
        return f"{CHANGE_LOG} cannot be read: {quote(_relative(str(exc), root), TEXT_LIMIT)}", ""
    if not changes:
        return (f"no entry in {CHANGE_LOG}: re-record with `{_RERECORD}` and commit the log"), ""
    folders = tuple(f for f in (manifest.cassettes, manifest.second_cassettes, manifest.fixtures)
                    if f)
    recordings = [c for c in changes if c.digests and all(
        _inside(root, name) and _recording_name(name, folders) for name in c.digests)]
    if not recordings:
        return (f"no {CHANGE_LOG} entry names only recordings (.json files in "
                f"{', '.join(f'{f}/' for f in folders)}): log the re-recording with "
                f"`{_RERECORD}`"), ""
    seen: dict[PurePosixPath, str | None] = {}  # a log may name one file in many entries
    matching = [c for c in recordings if change_matches(c, root, seen=seen)]
    if not matching:
        return (f"no {CHANGE_LOG} entry's digests match the cassettes or fixtures as they are "
                "now: the recordings changed after the last logged re-recording"), ""
    for change in matching:
        held = _keys_held(root, change)
        if held:
            files = ", ".join(sorted(change.digests))
            return None, (f"the {CHANGE_LOG} entry of {change.date} for {quote(change.case)}: "
                          f"{files} as logged, holding changed keys {shown_keys(held)}")
    return (f"no matching {CHANGE_LOG} entry lists a changed key that its recordings hold: "
            f"the keys must come from the re-recording, as `{_RERECORD}` logs them"), ""


def _recording_name(name: str, folders: tuple[str, ...]) -> bool:
    """Whether a logged name is a recording: a .json file directly in a recordings folder."""
    path = PurePosixPath(name)
    return path.suffix == ".json" and str(path.parent) in folders


def _keys_held(root: Path, change: Change) -> list[str]:
    """The keys the entry says changed that the files it names hold now."""
    held: set[str] = set()
    for name in sorted(change.digests):
        try:
            data = read_submission_file(root, name, cap=CASSETTE_CAP)
            recording = decode_recording(data, source=name)
        except GradekitError:
            continue
        held |= set(change.changed_keys) & set(recording.recorded)
    return sorted(held)


def _inside(root: Path, name: str) -> bool:
    """A path the log names must stay inside the submission: the grader reads it."""
    return not name.startswith(("/", "~")) and ".." not in Path(name).parts


def _second_set(root: Path, manifest: Manifest, rubric: Rubric, run: Callable[..., RunResult],
                plan: RunPlan, first: Mapping[str, Mapping[str, Entry]],
                ) -> tuple[RunResult | None, str, list[str]]:
    """The two-providers goal's run, on the second set with the primary run's ``plan`` (or
    None), why the goal is not met ("" when it may be), and the findings reading the set
    and running it gave."""
    if "two-providers" not in manifest.stretch:
        return None, "not claimed", []
    if not manifest.second_cassettes:
        return None, 'declare second_cassettes = "FOLDER" in [tool.gradekit]', []
    try:
        require_submission_folder(root, manifest.second_cassettes)
    except MissingSubmissionFile:
        return None, f"the folder {quote(manifest.second_cassettes)}/ does not exist", []
    except SubmissionFileError as exc:
        return None, quote(str(exc), TEXT_LIMIT), []
    # Its SDK requests from its own HTTP cassettes: never the first set's.
    http = _http_cassettes(root, manifest.second_cassettes, rubric.cases)
    second = _cassettes(root, manifest.second_cassettes, rubric.cases, sdk=http.present)
    findings = [*http.problems.values(), *second.problems.values()]
    if http.present and not any(second.by_case.values()):
        return None, (f"{quote(manifest.second_cassettes)}/ holds only HTTP cassettes, which "
                      "do not name the provider that answered: the goal is judged from the "
                      "provider cassettes <case>.json, which an agent on the SDKs alone does "
                      "not write; claim another stretch goal"), findings
    problem = _not_another_provider(first, second.by_case, manifest.second_cassettes)
    if problem:
        return None, problem, findings
    serving = replace(plan.serving, answer=_serve(second.by_case), http=http.by_case,
                      cassettes=manifest.second_cassettes, recorded=second.by_case)
    result = run("second-set", replace(plan, serving=serving))
    return result, "", [*findings, *_run_findings(result)]


def _not_another_provider(first: Mapping[str, Mapping[str, Entry]],
                          second: Mapping[str, Mapping[str, Entry]], folder: str) -> str:
    """Why ``second`` is not a set recorded from another provider, or "" when it is one.

    Every entry of it names a provider that no entry of the first set names, and at least
    one of its answers is not the first set's: a copy of the first set, relabelled or not,
    shows nothing about a second provider.
    """
    providers = {e.provider for entries in first.values() for e in entries.values()}
    for case, entries in sorted(second.items()):
        for key, entry in sorted(entries.items()):
            if not entry.provider or entry.provider in providers:
                named = quote(entry.provider) if entry.provider else "no provider"
                return (f"{folder}/{case}.json entry {key} names {named}, which is not a "
                        "second provider: record the set with "
                        f"`{commands.RECORD_SECOND(provider='PROVIDER', folder=folder)}`, "
                        "PROVIDER another provider than the first set's")
    answers = {(case, key, e.response) for case, entries in first.items()
               for key, e in entries.items()}
    if all((case, key, e.response) in answers for case, entries in second.items()
           for key, e in entries.items()):
        return (f"every answer in {folder}/ is the first set's: record the set from the "
                "second provider instead of copying it")
    return ""




def _run_findings(result: RunResult) -> list[str]:
    """What a sandboxed run gave the report: tampering, an import error, refusals, traces
    that are not valid JSONL."""
    findings = [FLAGGED + quote(what) for what in result.tampering]
    if result.import_error:
        findings.append(f"the agent failed to import: {quote(result.import_error)}")
    for refusal in result.refusals:
        where = f" in case {refusal.case}" if refusal.case else " at import"
        findings.append(f"sandbox refused {quote(refusal.event)}{where}: "
                        f"{quote(refusal.detail)}")
    for outcome in sorted(result.outcomes.values(), key=lambda o: o.case):
        if outcome.trace_error:
            findings.append(f"trace of case {outcome.case} is not valid JSONL: "
                            f"{quote(outcome.trace_error)}")
    return findings


def _failures(root: Path, manifest: Manifest | None) -> tuple[str | None, list[str]]:
    """The failure log's text, or None and the finding that says why not."""
    name = manifest.failures if manifest else "FAILURES.md"
    try:
        return read_submission_file(root, name, cap=FAILURES_CAP).decode("utf-8"), []
    except MissingSubmissionFile:
        return None, [f"{name} is missing: write the failure log (its format: docs/formats.md)"]
    except SubmissionFileError as exc:
        return None, [quote(str(exc), TEXT_LIMIT)]
    except UnicodeDecodeError:
        return None, [f"{name} cannot be read (UnicodeDecodeError): save it as UTF-8"]


def _score(evidence: Evidence, rubric: Rubric) -> list[CriterionResult]:
    scored = []
    for criterion in rubric.criteria:
        check = BUILTIN_CHECKS.get(criterion.check) or _custom(criterion.check)
        scored.append(check(evidence, rubric, criterion))
    return scored


def _custom(spec: str) -> Check:
    """An instructor's check, ``package.module:function`` with the built-ins' signature:
    ``(evidence, rubric, criterion) -> CriterionResult``. ``load_rubric`` imported it."""
    module, _, function = spec.partition(":")
    return cast(Check, getattr(importlib.import_module(module), function))


def _recording_names(manifest: Manifest | None, cases: tuple[Case, ...]) -> list[str]:
    """The submission-relative paths of every recording of ``cases`` the manifest's folders
    may hold: cassettes, HTTP cassettes, fixtures, and the second set's."""
    folders = [manifest.cassettes if manifest else "cassettes"]
    if manifest and manifest.second_cassettes:
        folders.append(manifest.second_cassettes)
    names = [f"{folder}/{case.id}{kind}" for folder in folders for case in cases
             for kind in (".json", ".http.json")]
    fixtures = manifest.fixtures if manifest else "fixtures"
    return names + [f"{fixtures}/{case.id}.json" for case in cases]


def _inputs(root: Path, manifest: Manifest | None, cases: tuple[Case, ...]) -> dict[str, str]:
    """sha256 of every file the grade depends on, by submission-relative path: the
    recordings, the failure log, the agent's source and manifest, and the recorded
    incidents (the evidence an instructor may promote into a regression set).

    Only files the parent could read safely are listed: a missing file, and one refused
    (a link, not a regular file, over its cap), are left out, since their bytes were
    never part of the grade; a refusal is already a finding of its own.
    """
    folder = manifest.cassettes if manifest else "cassettes"
    names = [(f"{folder}/{case.id}{kind}", CASSETTE_CAP) for case in cases
             for kind in (".json", ".http.json")]
    fixtures = manifest.fixtures if manifest else "fixtures"
    names += [(f"{fixtures}/{case.id}.json", FIXTURE_CAP) for case in cases]
    names.append((manifest.failures if manifest else "FAILURES.md", FAILURES_CAP))
    if manifest and "rerecord-review" in manifest.stretch:
        names.append((CHANGE_LOG, CHANGE_LOG_CAP))
    if manifest:
        module = manifest.agent.partition(":")[0].replace(".", "/")
        names += [(f"{module}.py", SOURCE_CAP), (f"{module}/__init__.py", SOURCE_CAP),
                  ("pyproject.toml", PYPROJECT_CAP)]
        if manifest.second_cassettes and "two-providers" in manifest.stretch:
            names += [(f"{manifest.second_cassettes}/{case.id}{kind}", CASSETTE_CAP)
                      for case in cases for kind in (".json", ".http.json")]
    if manifest:
        names += [(f"{manifest.incidents}/{name}", INCIDENT_CAP) for name in _listed(
            root, manifest.incidents, ".jsonl")]
    inputs = {}
    for name, cap in names:
        try:
            inputs[name] = hashlib.sha256(read_submission_file(root, name, cap=cap)).hexdigest()
        except SubmissionFileError:
            continue
    return inputs


_MOST_INCIDENTS = 64  # incident files hashed into a report's inputs


def _listed(root: Path, folder: str, suffix: str) -> list[str]:
    """The submission's files in ``folder`` ending in ``suffix`` (none when it cannot be
    listed: a refused folder is a finding elsewhere, or nothing the grade uses)."""
    try:
        return submission_files(root, folder, suffix=suffix, most=_MOST_INCIDENTS)
    except SubmissionFileError:
        return []


def _relative(message: str, root: Path) -> str:
    """Keep the grading machine's paths out of the report."""
    return message.replace(str(root.resolve()) + "/", "").replace(str(root) + "/", "")

