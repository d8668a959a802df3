"""Grade one submission: gather the evidence in the sandbox, score it, build the report.

The parent reads the submission (``grader.grading._reading``) and serves its recordings;
the child only ever sees answers. The runs: the primary run and one under a label of every
other family, the run that differs by its clock alone, the hash seeds' runs
(``grader.grading._runs``), the loud-failure probes (``grader.grading._probes``), the
own-Replay probe, the stretch goals' runs and the regression sets' replays, all as drawn
(``grader.grading._draws``). A broken manifest, a missing cassette or an unreadable
FAILURES.md is a finding that costs what it blocks, never a crash. Every piece of
submission text in a finding goes through ``quote``. The submission's Python source is
also scanned, never run, for code that reaches for the harness or the process
(``tamper_findings``): a flag for a person, worth no points.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

from gradekit import Entry, HttpCassette, prompt_key
from gradekit.internal import commands, recording_settings
from grader._cache import Derived
from grader._model import CaseOutcome, CriterionResult, Report, RunResult
from grader._text import FLAGGED, TEXT_LIMIT, quote
from grader.grading._draws import Draw, _probe_recordings, draw, submission_content
from grader.grading._grounds import grounds, recorded_keys
from grader.grading._inputs import _inputs, _recording_names
from grader.grading._packages import _require_packages
from grader.grading._preload import imported_packages, shipped_packages
from grader.grading._probes import _loud_probes
from grader.grading._reading import (
    _cassettes,
    _failures,
    _fixtures,
    _http_cassettes,
    _item_recordings,
    _manifest,
    _other_rubric,
    item_cases,
)
from grader.grading._regression import replay_set
from grader.grading._rerecording import _rerecording
from grader.grading._runs import _more_seeds, _reordered, _run_findings, _steady_messages
from grader.rubric import Rubric
from grader.sandbox import (
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
    ran,
    repeated_entries,
    seed_shifted,
    shown_keys,
    unsettled_cases,
)
from grader.submission import (
    Manifest,
    MissingSubmissionFile,
    SubmissionFileError,
    require_submission_folder,
    tamper_findings,
)

__all__ = ["Graded", "grade_submission"]


@dataclass(frozen=True, slots=True)
class Graded:
    """A report and the facts about the runs that the checkpoints need."""

    report: Report
    evidence: Evidence
    wall: Wall = PROCESS_WALL  # the wall its code ran behind: reported, never scored
    children: int = 0  # the sandboxed children its runs started: what a grade costs


def grade_submission(
    root: Path,
    rubric: Rubric,
    *,
    submission: str,
    scratch: Path,
    label: str | None = None,
    wall: Wall = PROCESS_WALL,
    drawn: Draw | None = None,
    draw_key: bytes | None = None,
    on_case: Callable[[str], None] | None = None,
    derived: Derived | None = None,
    hosts: Hosts | None = None,
) -> Graded:
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
    problems = {
        **http.problems,
        **{
            case: problem
            for case, problem in cassettes.problems.items()
            if case not in http.problems
        },
    }
    answers = cassettes.by_case
    inputs = _inputs(root, manifest, (*rubric.cases, *item_cases(rubric)))
    drawn = drawn or draw(draw_key, submission_content(inputs), label)
    # The recordings are the parent's to serve: no run reads them, so none can tell a
    # withheld answer from a missing one by looking.
    hidden = tuple(_recording_names(manifest, (*rubric.cases, *item_cases(rubric))))
    derived = derived or Derived()  # this process's memory alone, where no batch keeps one
    laid = (
        LaidOut(derived=derived, hidden=hidden)
        if hosts is None
        else LaidOut(derived=derived, hidden=hidden, hosts=hosts, lent=True)
    )
    sandbox = Sandbox(root, scratch, rubric.limits, wall, laid)
    try:
        if manifest is not None:
            sandbox.ahead(
                drawn.seeds,
                imported_packages(root, manifest, rubric.packages),
                shipped_packages(root, rubric.packages),
            )
        evidence, found = _evidence(
            sandbox, manifest, rubric, answers, drawn, on_case, http.by_case
        )
    finally:
        sandbox.close()
    children = sandbox.laid.children
    findings += found
    # Read once a grading, never run: code that reaches for the harness or the process
    # flags the grade for a person, and moves no points.
    findings += tamper_findings(root, manifest, derived)
    findings += _never_played(evidence, answers, http.by_case, folder)
    evidence = replace(
        evidence,
        recording_problems=problems,
        recorded_prompts={
            case: tuple(entry.prompt for entry in entries.values() if entry.prompt)
            for case, entries in answers.items()
        },
        recorded_with=recording_settings(
            entry.provider for entries in answers.values() for entry in entries.values()
        )
        or {},
    )
    criteria = tuple(_score(evidence, rubric))
    # An entry copied from the hand-out or from another entry earns nothing by itself, and
    # asks a person to read the log (the gradebook's reason, the dashboard's queue).
    if any(criterion.check == "written_summary" for criterion in rubric.criteria):
        findings += [
            FLAGGED + said for said in repeated_entries(evidence.failures, evidence.grounds)
        ]
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


def _never_played(
    evidence: Evidence,
    answers: Mapping[str, Mapping[str, Entry]],
    http: Mapping[str, HttpCassette],
    folder: str,
) -> list[str]:
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
        asked = {call.key for run in runs if (o := run.outcomes.get(case.id)) for call in o.calls}
        for suffix, keys in (
            (".json", set(answers.get(case.id, {}))),
            (".http.json", set(http[case.id].interactions) if case.id in http else set()),
        ):
            left = sorted(keys - asked)
            if left:
                command = commands.RERECORD_CASE(case=case.id, reason=_UNPLAYED)
                found.append(
                    f"{folder}/{case.id}{suffix} holds {len(left)} recording(s) that "
                    f"no run asked ({shown_keys(left)}): left over from prompts that "
                    f"changed; re-record the case to keep only what it asks: "
                    f"`{command}`"
                )
    return found


_UNPLAYED = "drop recordings no run asks"


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


def _evidence(
    sandbox: Sandbox,
    manifest: Manifest | None,
    rubric: Rubric,
    answers: dict[str, dict[str, Entry]],
    drawn: Draw,
    on_case: Callable[[str], None] | None,
    http: Mapping[str, HttpCassette],
) -> tuple[Evidence, list[str]]:
    """Every run's evidence, and the findings reading and running the submission gave, in
    the order they came."""
    root = sandbox.root
    failures, findings = _failures(root, manifest)
    if manifest is None:
        return Evidence(
            cases=rubric.cases,
            label=drawn.labels[0],
            primary=None,
            others=(),
            loud=(),
            probe=None,
            failures=failures,
            stretch=(),
            second_set=None,
            blocked="no usable [tool.gradekit] manifest",
        ), findings
    pairs = [(case.id, case.task) for case in rubric.cases]
    fixtures, found = _fixtures(root, manifest, rubric.cases)
    findings += found
    timed_out: dict[str, CaseOutcome] = {}

    def run(name: str, plan: RunPlan, only: Collection[str] | None = None) -> RunResult:
        # A case that timed out once is not run again: it counts as timed out in every
        # later run, so a hanging submission costs one timeout per case, not one per run.
        todo = [
            (case, task)
            for case, task in pairs
            if case not in timed_out and (only is None or case in only)
        ]
        result = sandbox.within(name).run(manifest.agent, todo, plan) if todo else RunResult({})
        known = {**timed_out, **result.outcomes}
        timed_out.update({c: o for c, o in result.outcomes.items() if o.status == "timeout"})
        repeated = {
            case: CaseOutcome(case, "timeout", detail=known[case].detail)
            for case, _ in pairs
            if case in known and (only is None or case in only)
        }
        return replace(result, outcomes={**repeated, **result.outcomes})

    def noted(result: RunResult) -> None:
        """A run made in another (a copy's): its timeouts count as a run's own do."""
        timed_out.update({c: o for c, o in result.outcomes.items() if o.status == "timeout"})

    recorded = Serving(
        _serve(answers),
        _serve_tools(fixtures),
        http,
        manifest.fixtures,
        manifest.cassettes,
        answers,
        derived=sandbox.laid.derived,
        registry=manifest.tools,
        recorded_tools=_tool_names(fixtures),
    )
    plan = RunPlan(drawn.labels[0], drawn.seeds[0], recorded, on_case=on_case, clock=drawn.clock)
    primary = run("primary", plan)
    _require_packages(root, manifest, rubric.packages, primary)
    blocked = (
        f"the agent could not be imported: {primary.import_error}" if primary.import_error else ""
    )
    others = tuple(
        run(f"label-{n}", replace(plan, label=other, hashseed=other_seed))
        for n, (other, other_seed) in enumerate(
            zip(drawn.labels[1:], drawn.seeds[1:], strict=True), 2
        )
    )
    # A run that differs from the primary run by its clock alone: what changes here changes
    # between identical runs (a date, a time, randomness), which no recording can pin.
    again = run("again", replace(plan, clock=drawn.again))
    primary, others, again = _steady_messages(primary, others, again)
    # Where the runs disagree, or a run was not served: the first label with each other
    # run's hash seed says whether the hash seed alone moves it, so the advice can name
    # the cause. They make the cases before as the primary run did: state carries over.
    unsettled = unsettled_cases(primary, (*others, again))
    upto = [case for case, _ in pairs][
        : max((index + 1 for index, (case, _) in enumerate(pairs) if case in unsettled), default=0)
    ]
    seeds = (
        tuple(
            run(f"seed-{n}", replace(plan, hashseed=seed), upto)
            for n, seed in enumerate(drawn.seeds[1:], 2)
        )
        if unsettled
        else ()
    )
    seeds += _more_seeds(
        run,
        plan,
        drawn.more,
        [case for case, _ in pairs],
        _reordered(unsettled, (primary, *others, *seeds)),
        (primary, others, again, seeds),
    )
    loud, copied_from, found = _loud_probes(
        run,
        plan,
        primary,
        skip=seed_shifted(primary, seeds),
        pick=drawn.pick,
        copied=sandbox.wall.copies,
        noted=noted,
    )
    for result in (primary, *others, again, *seeds, *copied_from, *(r for _, r in loud)):
        findings += _run_findings(result)
    findings += found
    case, recorded_prompts, unknown = _probe_recordings(
        answers, drawn, [c.id for c in rubric.cases]
    )
    probe = sandbox.within("probe").probe_replay(
        manifest.replay,
        recorded_prompts,
        unknown=unknown,
        hashseed=plan.hashseed,
        clock=plan.clock,
        case=case,
        cassettes=manifest.cassettes,
    )
    if probe.tampering:
        findings.append(FLAGGED + f"the own-Replay probe: {quote(probe.tampering)}")
    second_set, problem, found = _second_set(root, manifest, rubric, run, plan, answers)
    findings += found
    rerecorded, basis = (
        _rerecording(root, manifest)
        if "rerecord-review" in manifest.stretch
        else ("not claimed", "")
    )
    cut_point, found = (
        _cut_point(sandbox, manifest, plan.hashseed, plan.clock)
        if "cut-point" in manifest.stretch
        else ("not claimed", [])
    )
    findings += found
    # Every item of every set the rubric pins, against the submission's own code, served
    # from its own recordings of the item.
    recordings, found = _item_recordings(root, manifest, item_cases(rubric))
    findings += found
    regression = {
        ref: replay_set(
            sandbox.within(f"set-{number}"),
            pinned,
            manifest.agent,
            recordings,
            label=plan.label,
            hashseed=plan.hashseed,
            clock=plan.clock,
        )
        for number, (ref, pinned) in enumerate(rubric.sets.items())
        if pinned is not None
    }
    return Evidence(
        cases=rubric.cases,
        label=plan.label,
        primary=primary,
        others=others,
        loud=loud,
        probe=probe,
        failures=failures,
        stretch=manifest.stretch,
        second_set=second_set,
        second_set_problem=problem,
        blocked=blocked,
        rerecording_problem=rerecorded,
        second_cassettes=manifest.second_cassettes,
        fixtures=manifest.fixtures,
        rerecording_basis=basis,
        seeds=seeds,
        again=again,
        clock=plan.clock,
        cut_point_problem=cut_point,
        incident_test=manifest.incident_test,
        regression=regression,
        grounds=grounds(
            root,
            rubric.cases,
            recorded_keys(
                answers, fixtures, {case: cassette.interactions for case, cassette in http.items()}
            ),
            [
                text
                for entries in answers.values()
                for entry in entries.values()
                for text in (entry.prompt or "", entry.response)
            ],
            sandbox.laid.derived,
        ),
    ), findings


def _cut_point(
    sandbox: Sandbox, manifest: Manifest, hashseed: int, clock: int
) -> tuple[str | None, list[str]]:
    """The cut-point goal's evidence: the incident test, on the submission's guard and on
    one that allows everything, both in the sandbox; and the findings they gave."""
    test, guard = manifest.incident_test, manifest.guard
    if not test or not guard:
        return cut_point_problem(None, None, test=test, guard=guard), []
    runs = [
        sandbox.within(f"cut-point-{allow_all}").run_cut_point_test(
            test, guard, allow_all=allow_all, hashseed=hashseed, clock=clock
        )
        for allow_all in (False, True)
    ]
    findings = [
        FLAGGED + f"the cut-point test: {quote(run.tampering)}" for run in runs if run.tampering
    ]
    return cut_point_problem(runs[0], runs[1], test=test, guard=guard), findings


def _second_set(
    root: Path,
    manifest: Manifest,
    rubric: Rubric,
    run: Callable[..., RunResult],
    plan: RunPlan,
    first: Mapping[str, Mapping[str, Entry]],
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
        return (
            None,
            (
                f"{quote(manifest.second_cassettes)}/ holds only HTTP cassettes, which "
                "do not name the provider that answered: the goal is judged from the "
                "provider cassettes <case>.json, which an agent on the SDKs alone does "
                "not write; claim another stretch goal"
            ),
            findings,
        )
    problem = _not_another_provider(first, second.by_case, manifest.second_cassettes)
    if problem:
        return None, problem, findings
    serving = replace(
        plan.serving,
        answer=_serve(second.by_case),
        http=http.by_case,
        cassettes=manifest.second_cassettes,
        recorded=second.by_case,
    )
    result = run("second-set", replace(plan, serving=serving))
    return result, "", [*findings, *_run_findings(result)]


def _not_another_provider(
    first: Mapping[str, Mapping[str, Entry]], second: Mapping[str, Mapping[str, Entry]], folder: str
) -> str:
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
                return (
                    f"{folder}/{case}.json entry {key} names {named}, which is not a "
                    "second provider: record the set with "
                    f"`{commands.RECORD_SECOND(provider='PROVIDER', folder=folder)}`, "
                    "PROVIDER another provider than the first set's"
                )
    answers = {
        (case, key, e.response) for case, entries in first.items() for key, e in entries.items()
    }
    if all(
        (case, key, e.response) in answers
        for case, entries in second.items()
        for key, e in entries.items()
    ):
        return (
            f"every answer in {folder}/ is the first set's: record the set from the "
            "second provider instead of copying it"
        )
    return ""


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
