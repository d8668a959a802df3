"""The checks judged against the rubric's own truth: each case's expectation snapshot
(``expectations``) and the items of a pinned regression set (``regression``), beside the
core checks of ``grader.scoring._checks``; ``BUILTIN_CHECKS`` is all of them.

Both are pure, like every check. Where the rubric cannot say what success is (a case
without an expected outcome, a regression criterion that names no set, a set version or
an item's recording that the instructor's side lacks), the check is **degraded**: it
scores nothing, is never passed, and its first point of divergence is
``evaluation.contract`` (``grader._model.CONTRACT``). Never a silent full score.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from gradekit.internal import commands
from grader._expect import Expectation, Observed, Shortfall, ToolCall, judge, met
from grader._model import CaseOutcome, CheckResult, CriterionResult, Divergence, ItemRun
from grader._text import quote
from grader.regression import Item
from grader.rubric import Case, Criterion, Rubric, distribute, per_case_points
from grader.scoring._checks import CORE_CHECKS, ZERO, Check, Evidence, criterion_result

__all__ = [
    "BUILTIN_CHECKS",
    "contract_gaps",
    "expectations",
    "judged_item",
    "observed",
    "regression",
]

_AGAIN = "bump the rubric's version and grade again"


def _degraded(check_id: str, maximum: Decimal, why: str) -> CheckResult:
    return CheckResult(check_id, False, ZERO, maximum, why, degraded=True)


def observed(outcome: CaseOutcome | None) -> Observed:
    """What the grader saw of a run, as the fact oracle judges it: how it ended, the
    answer it kept, and every tool the agent called (served or not), in order, each with
    the arguments the parent read and the result it answered with. Nothing the child
    says of its own calls (its trace) is evidence here."""
    if outcome is None:
        return Observed("not_run", None)
    return Observed(
        outcome.status,
        outcome.answer,
        tuple(call.tool for call in outcome.calls if call.tool is not None),
        tuple(call.tool or "" for call in outcome.calls),
        tuple(
            ToolCall(step, call.tool, call.served, call.args or "{}", call.result)
            for step, call in enumerate(outcome.calls, 1)
            if call.tool is not None
        ),
    )


def _judged(
    check_id: str, problems: list[Shortfall], share: Decimal, expect: Expectation
) -> CheckResult:
    """A judged check: passed with the expectation met, or failed at its first shortfall,
    every shortfall in the detail."""
    first = problems[0] if problems else None
    return CheckResult(
        check_id,
        not problems,
        ZERO if problems else share,
        share,
        "; ".join(quote(str(p)) for p in problems) or met(expect),
        judged=True,
        divergence=None if first is None else Divergence(first.at, first.expected, first.observed),
    )


# -- expectations ----------------------------------------------------------------------------


def _no_outcome(case: Case) -> str:
    expect = case.expect
    if expect is not None and expect.outcome and not expect.goal:
        return (
            f'case {case.id} has no business goal: add goal = "what the run is for" to '
            f"its [case.expect] in the rubric, {_AGAIN}"
        )
    return (
        f"case {case.id} has no expected outcome: add [case.expect] with outcome = "
        f'"answer" or "raise" and a goal under it in the rubric, {_AGAIN}'
    )


def _expected(case: Case) -> Expectation | None:
    """The case's expectation when it can judge a run: with an outcome and a goal."""
    expect = case.expect
    return expect if expect is not None and expect.outcome and expect.goal else None


def _item_gap(item: Item) -> str:
    """Why an item cannot be judged whatever the submission does ("" when it can): its world
    is gone, or it has no business goal."""
    if item.missing:
        return f"{item.missing}; {_AGAIN}"
    if not item.expect.goal:
        return (
            f"item {item.id} has no business goal, so it cannot pass: revise its case "
            "with --goal, take the new version through investigate, disposition and "
            f"approve, promote it into a new set version, pin that and {_AGAIN}"
        )
    return ""


def expectations(evidence: Evidence, rubric: Rubric, criterion: Criterion) -> CriterionResult:
    """Per case: the primary run meets the case's expectation snapshot (outcome, forbidden
    actions, facts); degraded where the rubric gives the case no expected outcome."""
    shares = per_case_points(rubric, criterion)
    checks, advice = [], []
    for case in evidence.cases:
        expect = _expected(case)
        if expect is None:
            checks.append(_degraded(case.id, shares[case.id], _no_outcome(case)))
            continue
        outcome = None if evidence.primary is None else evidence.primary.outcomes.get(case.id)
        problems = judge(expect, observed(outcome))
        if outcome is None and evidence.blocked:
            problems = [_unrun(evidence.blocked)]
        checks.append(_judged(case.id, problems, shares[case.id], expect))
        if problems:
            advice.append(
                f"{case.id}: {quote(str(problems[0]))}: the rubric expects {_wanted(expect)}"
            )
    return criterion_result(criterion, checks, advice)


def _wanted(expect: Expectation) -> str:
    parts = [f"outcome {expect.outcome}"]
    parts += [f"a mention of {fact!r}" for fact in expect.mentions]
    parts += [f"no mention of {fact!r}" for fact in expect.never_mentions]
    parts += [f"no call of {tool}" for tool in expect.forbidden_actions]
    if expect.reply_template:
        parts.append(f"an answer that follows {expect.reply_template!r}")
    parts += [f"a served call of {call}" for call in expect.requires]
    parts += [
        f"{text.partition(':')[2].strip()!r} stated as a {text.partition(':')[0]} "
        "result returned it"
        for text in expect.cites
    ]
    return ", ".join(parts)


# -- regression ------------------------------------------------------------------------------


def _no_set(criterion: Criterion) -> str:
    return (
        f"criterion {criterion.id} names no regression set: add [criterion.params] "
        f'set = "NAME@VERSION" under it in the rubric, {_AGAIN}'
    )


def _promote(name: str) -> str:
    return commands.REGRESSION_PROMOTE(name=name, candidate="CANDIDATE", by="NAME")


def _set_missing(ref: str) -> str:
    return (
        f"regression set {ref} is not in the rubric's regression/ folder: promote into "
        f"it (`{_promote(ref.partition('@')[0])}`) or pin a version that exists, "
        f"{_AGAIN}"
    )


def regression(evidence: Evidence, rubric: Rubric, criterion: Criterion) -> CriterionResult:
    """Per item of the pinned regression set: its replay against the submission's code
    stayed on the item's record and met the item's expectation; the weight is split over
    the items. Degraded without a set, or for an item whose recording the set lacks."""
    weight = Decimal(criterion.weight).quantize(Decimal("0.01"))
    ref = criterion.params.get("set", "")
    pinned = rubric.sets.get(ref) if ref else None
    if pinned is None:
        why = _no_set(criterion) if not ref else _set_missing(ref)
        return criterion_result(criterion, [_degraded("set", weight, why)], [])
    shares = distribute(weight, [1] * len(pinned.items))
    runs: Mapping[str, ItemRun] = evidence.regression.get(pinned.ref, {})
    checks, advice = [], []
    for item, share in zip(pinned.items, shares, strict=True):
        if gap := _item_gap(item):
            checks.append(_degraded(item.id, share, gap))
            continue
        problems = _item_problems(item.expect, runs.get(item.id), evidence.blocked)
        checks.append(_judged(item.id, problems, share, item.expect))
        if problems:
            advice.append(f"{item.id} (regression set {pinned.ref}): {quote(str(problems[0]))}")
    return criterion_result(criterion, checks, advice)


def _unrun(why: str) -> Shortfall:
    return Shortfall("run", "a run of the case", why, why)


def _item_problems(expect: Expectation, run: ItemRun | None, blocked: str) -> list[Shortfall]:
    if run is None:
        return [_unrun(blocked or "the item was not replayed")]
    if run.error:
        return [Shortfall("import", "the item's agent imports", run.error, run.error)]
    if run.divergence:
        return [
            Shortfall(
                run.left_at or "recording",
                "every call answered by its world or the recordings of its task",
                run.divergence,
                f"the replay left the item's recorded run: {run.divergence}",
            )
        ]
    return judge(expect, observed(run.outcome))


def judged_item(item: Item, run: ItemRun | None, share: Decimal = ZERO) -> CheckResult:
    """One item (or a saved case run as one) judged on its run, worth ``share``: degraded
    where the item cannot be judged, else passed or failed at its first point of
    divergence."""
    if gap := _item_gap(item):
        return _degraded(item.id, share, gap)
    return _judged(item.id, _item_problems(item.expect, run, ""), share, item.expect)


# -- what the rubric leaves open --------------------------------------------------------------


def contract_gaps(rubric: Rubric) -> list[str]:
    """Every check of ``rubric`` that will be degraded whatever the submission does, with
    why: said once before a batch starts, so an incomplete rubric is never a surprise."""
    gaps = []
    for criterion in rubric.criteria:
        if criterion.check == "expectations":
            gaps += [
                f"{criterion.id}/{case.id}: {_no_outcome(case)}"
                for case in rubric.cases
                if _expected(case) is None
            ]
        elif criterion.check == "regression":
            ref = criterion.params.get("set", "")
            pinned = rubric.sets.get(ref) if ref else None
            if pinned is None:
                why = _no_set(criterion) if not ref else _set_missing(ref)
                gaps.append(f"{criterion.id}: {why}")
            else:
                gaps += [
                    f"{criterion.id}/{item.id}: {_item_gap(item)}"
                    for item in pinned.items
                    if _item_gap(item)
                ]
    return gaps


BUILTIN_CHECKS: Mapping[str, Check] = {
    **CORE_CHECKS,
    "expectations": expectations,
    "regression": regression,
}
