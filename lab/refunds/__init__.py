"""The reference lab's refund agent: the incident of ``incidents/refund-outside-window.jsonl``.

A student asks for a refund of a bootcamp seat. The agent reads the purchase and the
refund policy from the course database (``refund_terms``, read-only), asks the model
whether to grant the refund, and lets its guard decide; if the guard allows, it
issues the refund (``issue_refund``, a write tool: an action).

Two guards, one agent:

- ``run_buggy`` (the guard the incident was recorded with) trusts the model's yes and
  refunds the full amount paid, whatever the policy says: it reads the policy and never
  looks at it. SmolLM2 said the refund should be granted to a request on day 73, and
  the refund was issued.
- ``run`` (the fix) refunds only what the policy gives (``refund_cents``): nothing
  outside the refund windows, whatever the model says.

The tools live in a registry of their own (``TOOLS``), not the graded agent's
(``lab.tools:TOOLS``): the graded agent never gets a write tool. And the agent lives in a
package of its own, not in ``lab/*.py``: those are the students' files, and the graded
agent's ``search_repo`` reads them (its answers are quoted by the recorded fixtures).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import Any

from gradekit import Provider, Toolbox, Tools
from lab.tools import ToolError, query_db

__all__ = [
    "PROMPT",
    "TOOLS",
    "follows_the_policy",
    "issue_refund",
    "model_grants",
    "refund_terms",
    "run",
    "run_buggy",
    "trusts_the_model",
]

PROMPT = (
    "A student asks for a refund of a bootcamp seat.\n"
    "Refund policy: {policy}.\n"
    "The student bought the seat on {purchased_on} for {paid} euros and asked on "
    "{requested_on}: day {day} after the purchase.\n"
    "Should the refund be granted? Answer YES or NO, then one sentence why."
)

_HANDLE = re.compile(r"[a-z]+")
_STUDENT = re.compile(r"\bstudent\s+([a-z]+)\b", re.IGNORECASE)
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_WORD = re.compile(r"[a-z']+")
_NO = frozenset({"no", "not", "deny", "denied", "reject", "rejected", "refuse", "refused",
                 "cannot", "can't", "shouldn't", "won't", "ineligible"})
_YES = frozenset({"yes", "grant", "granted", "approve", "approved", "eligible"})

# A guard: given the policy's terms and whether the model said yes, the amount to
# refund in cents (0: no refund).
Guard = Callable[[dict[str, Any], bool], int]


# -- the tools -------------------------------------------------------------------------------


def refund_terms(student: str, requested_on: str) -> dict[str, Any]:
    """What the policy gives ``student`` for a request that reached the course office on
    ``requested_on``: the purchase, the day of the request counted from it, and the share
    and amount of ``refund_windows`` (the policy of docs/refund-policy.md), read from the
    course database."""
    if not isinstance(student, str) or not _HANDLE.fullmatch(student):
        raise ToolError(f"refund_terms needs a student handle such as 'chen', not {student!r}")
    try:
        asked = dt.date.fromisoformat(requested_on)
    except (TypeError, ValueError):
        raise ToolError(f"refund_terms needs the request date as YYYY-MM-DD, not "
                        f"{requested_on!r}") from None
    day = f"CAST(julianday('{asked.isoformat()}') - julianday(p.purchased_on) AS INTEGER)"
    rows = query_db(
        f"SELECT p.id AS purchase_id, p.cohort, p.purchased_on, p.amount_cents AS paid_cents, "
        f"{day} AS day, COALESCE((SELECT w.share_percent FROM refund_windows w "
        f"WHERE w.up_to_day >= {day} ORDER BY w.up_to_day LIMIT 1), 0) AS share_percent "
        f"FROM purchases p WHERE p.student = '{student}' ORDER BY p.id DESC LIMIT 1")
    if not rows:
        raise ToolError(f"refund_terms: no purchase by {student!r} in the course database")
    terms: dict[str, Any] = dict(rows[0])
    if int(terms["day"]) < 0:
        raise ToolError(f"refund_terms: {requested_on} is before the purchase on "
                        f"{terms['purchased_on']}")
    windows = query_db("SELECT up_to_day, share_percent FROM refund_windows ORDER BY up_to_day")
    terms.update(student=student, requested_on=asked.isoformat(),
                 refund_cents=int(terms["paid_cents"]) * int(terms["share_percent"]) // 100,
                 windows=windows)
    return terms


def issue_refund(store: dict[str, Any], student: str, purchase_id: int,
                 amount_cents: int) -> dict[str, Any]:
    """Pay ``amount_cents`` back to ``student`` for ``purchase_id``: the action. The
    refunds issued in a run are in ``store["refunds"]``."""
    if isinstance(amount_cents, bool) or not isinstance(amount_cents, int) or amount_cents <= 0:
        raise ToolError(f"issue_refund needs a positive amount in cents, not {amount_cents!r}")
    refunds: list[dict[str, Any]] = store.setdefault("refunds", [])
    refund = {"refund": len(refunds) + 1, "student": student, "purchase_id": purchase_id,
              "amount_cents": amount_cents}
    refunds.append(refund)
    return refund


def _registry() -> Tools:
    tools = Tools()
    tools.read_only("refund_terms", refund_terms)
    tools.write("issue_refund", issue_refund)
    return tools


TOOLS = _registry()
"""The refund agent's tools: ``--tools lab.refunds:TOOLS``."""


# -- the guards ------------------------------------------------------------------------------


def trusts_the_model(terms: dict[str, Any], model_says_yes: bool) -> int:
    """The bug: the model's yes refunds the full amount paid; the policy is never checked."""
    return int(terms["paid_cents"]) if model_says_yes else 0


def follows_the_policy(terms: dict[str, Any], model_says_yes: bool) -> int:
    """The fix: never more than the policy gives, and nothing outside its windows."""
    # BEGIN SOLUTION
    return int(terms["refund_cents"]) if model_says_yes else 0
    # STUB
    # raise NotImplementedError(
    #     "write the fixed guard: the amount in cents the policy's terms allow (0: no refund)")
    # END SOLUTION


# -- the agent -------------------------------------------------------------------------------


def run(provider: Provider, task: str, tools: Toolbox) -> str:
    """Decide a refund request with the fixed guard."""
    return _decide(follows_the_policy, provider, task, tools)


def run_buggy(provider: Provider, task: str, tools: Toolbox) -> str:
    """Decide a refund request with the guard the incident was recorded with."""
    return _decide(trusts_the_model, provider, task, tools)


def _decide(guard: Guard, provider: Provider, task: str, tools: Toolbox) -> str:
    student, requested_on = _request(task)
    terms = tools.call("refund_terms", student=student, requested_on=requested_on)
    answer = provider.complete(PROMPT.format(
        policy=_policy(terms["windows"]), purchased_on=terms["purchased_on"],
        paid=_euros(terms["paid_cents"]), requested_on=terms["requested_on"], day=terms["day"]))
    amount = guard(terms, model_grants(answer))
    if amount <= 0:
        return (f"refused: {student}'s request reached us on day {terms['day']} after the "
                f"purchase; the policy gives {terms['share_percent']}%")
    tools.call("issue_refund", student=student, purchase_id=terms["purchase_id"],
               amount_cents=amount)
    return f"refunded {_euros(amount)} euros to {student} (purchase {terms['purchase_id']})"


def _request(task: str) -> tuple[str, str]:
    """The student's handle and the request's date, as the task states them."""
    student, date = _STUDENT.search(task), _DATE.search(task)
    if student is None or date is None:
        raise ValueError("a refund task names the student and the date the request reached "
                         f"the course office, e.g. 'Student chen ... on 2025-03-20'; got {task!r}")
    return student.group(1).lower(), date.group()


def model_grants(answer: str) -> bool:
    """Whether the model's answer grants the refund: its first decisive word, yes-like or
    no-like, in any case; an answer with neither grants nothing."""
    for word in _WORD.findall(answer.lower()):
        if word in _NO:
            return False
        if word in _YES:
            return True
    return False


def _policy(windows: list[dict[str, Any]]) -> str:
    parts = [("a full refund" if w["share_percent"] == 100 else f"{w['share_percent']}%")
             + f" up to day {w['up_to_day']} after the purchase"
             for w in windows]
    return ", ".join(parts) + f", nothing after day {windows[-1]['up_to_day']}"


def _euros(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"
