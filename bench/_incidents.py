"""Six recorded incidents in the spirit of the Chronicle paper, and their cut-point tests.

Every incident has the same shape. The agent asks the model what the task wants (the
model answers with the action's arguments, as JSON), reads the state that matters
through a read-only tool, decides with its own guard, and, if the guard allows, performs
the action through a write tool. Three variants per incident:

- **buggy**: the guard as it was when the incident happened; it lets the unsafe action
  through;
- **guarded**: the fix; the guard blocks the unsafe request;
- **benign**: the fixed code on a safe request; the action legitimately runs.

The incident is recorded once, with the buggy code, on the unsafe task. Its cut-point
test replays it with the model and the read tool served from the record and the action
live (``Plan.of({action})``), under the code being tested, and asserts that the unsafe
action did not run. The benign test records the benign task and asserts the action ran.

The paper's all-stub baseline (``all_stub_test``) runs the same assertion with every
boundary, the action included, stubbed from the record the way a stub or cassette tool
serves it (``stub_replay``): by boundary name and call count, inputs unchecked, unused
recordings allowed, so it passes the fix. gradekit's own full replay is strict and
diverges on the fix; ``strict_full_replay_test`` keeps that as a separate measure.

Guards are small module-level functions of ``(state, request)``, written with
comparisons, ``and``/``or``/``not`` and constants, so the mutation study can rewrite
their source (``bench/_cutpoint.py``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gradekit import (
    Crossing,
    Envelope,
    FakeProvider,
    Incident,
    IncidentDivergence,
    IncidentRecorder,
    Plan,
    Provider,
    Replayed,
    Toolbox,
    Tools,
    prompt_key,
    read_incident,
    replay_incident,
    tool_key,
)

__all__ = [
    "CASES",
    "Agent",
    "Case",
    "Guard",
    "StubMissing",
    "StubRecordedError",
    "TestFailed",
    "all_stub_test",
    "cut_point_test",
    "executed",
    "live_run_acts",
    "passed",
    "record",
    "strict_full_replay_test",
    "stub_replay",
]

State = Mapping[str, Any]
Request = Mapping[str, Any]
Guard = Callable[[State, Request], bool]
Agent = Callable[[Provider, str, Toolbox], str]

PROMPT = (
    "Read the request and answer with the {action} arguments as one JSON object, "
    "nothing else.\nRequest: {task}"
)


class TestFailed(AssertionError):
    """A cut-point (or all-stub) test failed: the run did what the test forbids."""

    __test__ = False  # not a pytest test class, whatever its name says


# -- the guards: buggy (as recorded) and guarded (the fix), one pair per incident ----------------


def refund_buggy(state: State, request: Request) -> bool:
    # Compares the refund with what was paid, not with the policy's refund limit.
    return bool(request["amount"] <= state["paid"] and state["days_since_purchase"] < 30)


def refund_guarded(state: State, request: Request) -> bool:
    return bool(request["amount"] <= state["max_refund"] and state["days_since_purchase"] < 30)


def invoice_buggy(state: State, request: Request) -> bool:
    # Forgets that the vendor's bank details changed days ago (the classic invoice fraud).
    return bool(state["verified"] and request["amount"] <= state["approval_limit"])


def invoice_guarded(state: State, request: Request) -> bool:
    return bool(
        state["verified"]
        and request["amount"] <= state["approval_limit"]
        and state["bank_changed_days_ago"] >= 14
    )


def trade_buggy(state: State, request: Request) -> bool:
    # Checks the order size and the market, never the cash it costs.
    return bool(state["market_open"] and request["qty"] <= state["max_order_qty"])


def trade_guarded(state: State, request: Request) -> bool:
    return bool(
        state["market_open"]
        and request["qty"] <= state["max_order_qty"]
        and request["qty"] * state["price"] <= state["cash"]
    )


def email_buggy(state: State, request: Request) -> bool:
    # Honours opt-outs, but mails personal data outside the company.
    return bool(not state["opted_out"])


def email_guarded(state: State, request: Request) -> bool:
    return bool(not state["opted_out"] and (state["internal"] or state["pii_rows"] == 0))


def payout_buggy(state: State, request: Request) -> bool:
    # Skips the identity (KYC) check: a held-funds check only.
    return bool(not state["held"] and state["paid_today"] + request["amount"] <= 2000)


def payout_guarded(state: State, request: Request) -> bool:
    return bool(
        state["kyc_verified"]
        and not state["held"]
        and state["paid_today"] + request["amount"] <= 2000
    )


def deletion_buggy(state: State, request: Request) -> bool:
    # Checks the backup, ignores the legal hold.
    return bool(state["days_since_backup"] < 7)


def deletion_guarded(state: State, request: Request) -> bool:
    return bool(not state["legal_hold"] and state["days_since_backup"] < 7)


# -- the incidents ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Case:
    """One incident: its tools, its two tasks (what the model makes of each), its guards.

    ``key`` is the request field the read tool is asked about; ``states`` is what the
    read tool returns for each value of it.
    """

    name: str
    read: str
    action: str
    key: str
    states: Mapping[str, State]
    unsafe_task: str
    unsafe_request: Request
    benign_task: str
    benign_request: Request
    buggy: Guard
    guarded: Guard

    def task(self, *, benign: bool = False) -> str:
        """The recorded task (unsafe) or the benign one."""
        return self.benign_task if benign else self.unsafe_task

    def agent(self, guard: Guard) -> Agent:
        """The agent under test, deciding with ``guard``."""
        return _agent(self, guard)

    def model(self) -> FakeProvider:
        """The deterministic model the incidents are recorded with."""
        answers = {
            self.prompt(self.unsafe_task): _json(self.unsafe_request),
            self.prompt(self.benign_task): _json(self.benign_request),
        }
        return FakeProvider(answers, name=f"fake:{self.name}")

    def prompt(self, task: str) -> str:
        """The one prompt the agent asks about ``task`` (stripped, as FakeProvider keys are)."""
        return PROMPT.format(action=self.action, task=task)

    def tools(self, calls: list[str] | None = None) -> Tools:
        """The read tool and the action; each live call's tool name goes to ``calls``."""
        registry = Tools()
        states, seen = self.states, calls if calls is not None else []

        def read(**args: Any) -> dict[str, Any]:
            seen.append(self.read)
            return dict(states[args[self.key]])

        def act(store: dict[str, Any], **args: Any) -> dict[str, Any]:
            seen.append(self.action)
            done = store.setdefault("done", [])
            done.append(args)
            return {"ok": True, "reference": f"{self.name}-{len(done)}"}

        registry.read_only(self.read, read)
        registry.write(self.action, act)
        return registry


def _json(value: Request) -> str:
    return json.dumps(dict(value), sort_keys=True)


def _agent(case: Case, guard: Guard) -> Agent:
    def run(provider: Provider, task: str, tools: Toolbox) -> str:
        request = json.loads(provider.complete(case.prompt(task)))
        state = tools.call(case.read, **{case.key: request[case.key]})
        if not guard(state, request):
            return f"refused: {case.action} {request[case.key]}"
        result = tools.call(case.action, **request)
        return f"done: {result['reference']}"

    return run


CASES: tuple[Case, ...] = (
    Case(
        "refund",
        "order_policy",
        "issue_refund",
        "order",
        {
            "o-881": {"paid": 150, "max_refund": 100, "days_since_purchase": 12},
            "o-882": {"paid": 90, "max_refund": 100, "days_since_purchase": 3},
        },
        "Customer c-17 wants 120 back on order o-881.",
        {"order": "o-881", "amount": 120},
        "Customer c-18 wants 80 back on order o-882.",
        {"order": "o-882", "amount": 80},
        refund_buggy,
        refund_guarded,
    ),
    Case(
        "invoice",
        "vendor_record",
        "pay_invoice",
        "vendor",
        {
            "v-acme": {"verified": True, "approval_limit": 5000, "bank_changed_days_ago": 2},
            "v-globex": {"verified": True, "approval_limit": 5000, "bank_changed_days_ago": 400},
        },
        "Pay invoice INV-204 from v-acme, 4200, to their new account.",
        {"vendor": "v-acme", "invoice": "INV-204", "amount": 4200},
        "Pay invoice INV-310 from v-globex, 1200.",
        {"vendor": "v-globex", "invoice": "INV-310", "amount": 1200},
        invoice_buggy,
        invoice_guarded,
    ),
    Case(
        "trade",
        "account_state",
        "place_order",
        "account",
        {
            "a-3": {"market_open": True, "max_order_qty": 1000, "price": 50, "cash": 20000},
            "a-4": {"market_open": True, "max_order_qty": 1000, "price": 50, "cash": 20000},
        },
        "Buy 500 ACME for account a-3.",
        {"account": "a-3", "symbol": "ACME", "qty": 500},
        "Buy 100 ACME for account a-4.",
        {"account": "a-4", "symbol": "ACME", "qty": 100},
        trade_buggy,
        trade_guarded,
    ),
    Case(
        "email",
        "recipient_policy",
        "send_email",
        "to",
        {
            "partner@external.example": {"opted_out": False, "internal": False, "pii_rows": 340},
            "finance@corp.example": {"opted_out": False, "internal": True, "pii_rows": 340},
        },
        "Send the customer export to partner@external.example.",
        {"to": "partner@external.example", "document": "customer-export.csv"},
        "Send the customer export to finance@corp.example.",
        {"to": "finance@corp.example", "document": "customer-export.csv"},
        email_buggy,
        email_guarded,
    ),
    Case(
        "payout",
        "seller_account",
        "send_payout",
        "seller",
        {
            "s-9": {"kyc_verified": False, "held": False, "paid_today": 0},
            "s-10": {"kyc_verified": True, "held": False, "paid_today": 500},
        },
        "Pay out 1500 to seller s-9 now.",
        {"seller": "s-9", "amount": 1500},
        "Pay out 700 to seller s-10.",
        {"seller": "s-10", "amount": 700},
        payout_buggy,
        payout_guarded,
    ),
    Case(
        "deletion",
        "workspace_state",
        "delete_workspace",
        "workspace",
        {
            "w-7": {"legal_hold": True, "days_since_backup": 1},
            "w-8": {"legal_hold": False, "days_since_backup": 1},
        },
        "Delete workspace w-7 for user u-42.",
        {"workspace": "w-7", "user": "u-42"},
        "Delete workspace w-8 for user u-43.",
        {"workspace": "w-8", "user": "u-43"},
        deletion_buggy,
        deletion_guarded,
    ),
)


# -- recording and the tests ------------------------------------------------------------------


def record(case: Case, path: Path, *, benign: bool = False, guard: Guard | None = None) -> Path:
    """Record ``case`` into ``path``: the unsafe task with the buggy code (the incident), or
    the benign task with the fixed code."""
    chosen = guard or (case.guarded if benign else case.buggy)
    task, model = case.task(benign=benign), case.model()
    with IncidentRecorder(path, case=case.name, task=task, provider=model.name) as recorder:
        case.agent(chosen)(recorder.provider(model), task, recorder.toolbox(case.tools()))
    return path


def executed(replayed: Replayed, action: str) -> list[Crossing]:
    """The ``action`` crossings this run executed: live ones. A served crossing is the
    record's answer, handed back without running anything."""
    return [crossing for crossing in replayed.actions(action) if crossing.live]


def cut_point_test(
    case: Case, guard: Guard, incident: Path, *, benign: bool = False, plan: Plan | None = None
) -> Replayed:
    """The regression test: replay ``incident`` under ``guard``, model and read tool served,
    the action live; ``TestFailed`` if the unsafe action ran (or the benign one did not).

    Under the action-live plan every action crossing is live, so ``executed`` is exactly
    ``replayed.actions(case.action)``; ``plan`` exists for the strict full replay only.
    """
    chosen = Plan.of({case.action}) if plan is None else plan
    replayed = replay_incident(incident, case.agent(guard), plan=chosen, tools=case.tools())
    return _asserted(case, replayed, benign=benign)


def _asserted(case: Case, replayed: Replayed, *, benign: bool = False) -> Replayed:
    """The test's assertion on a run: no unsafe action executed (or the benign one did)."""
    ran = executed(replayed, case.action)
    if replayed.error is not None:
        raise TestFailed(f"{case.name}: the agent raised {replayed.error!r}")
    if benign and not (len(ran) == 1 and ran[0].ran):
        raise TestFailed(f"{case.name}: the benign {case.action} did not run: {ran}")
    if not benign and ran:
        raise TestFailed(f"{case.name}: the unsafe action ran: {case.action} {dict(ran[0].input)}")
    return replayed


def all_stub_test(case: Case, guard: Guard, incident: Path) -> Replayed:
    """The paper's baseline: the same test and assertion with every boundary, the action
    included, stubbed from the record (``stub_replay``). The action is never executed,
    so the assertion only sees the stub: it passes the fix, and every mutant too."""
    return _asserted(case, stub_replay(incident, case.agent(guard)))


def strict_full_replay_test(case: Case, guard: Guard, incident: Path) -> Replayed:
    """The same test under gradekit's strict full replay (the default ``Plan``): every
    boundary served and checked against the record. A run that skips the recorded
    action, as the fix does, diverges, so this fails the fix."""
    try:
        return cut_point_test(case, guard, incident, plan=Plan())
    except IncidentDivergence as exc:
        raise TestFailed(f"{case.name}: diverged from the record: {exc}") from exc


# -- the all-stub baseline: every boundary stubbed, as a stub or cassette tool does -------------


class StubMissing(LookupError):
    """A boundary the record never crossed: a stub has no answer for it."""


class StubRecordedError(RuntimeError):
    """A crossing that failed when recorded: its stub raises the recorded error."""


@dataclass(slots=True)
class _Stubs:
    """Each boundary answers its n-th call with its n-th recorded crossing (the last one
    again past the end), whatever the input; recordings never asked for are allowed. An
    action is answered from the record and never executed: nothing runs live."""

    recorded: Mapping[str, list[Envelope]]
    name: str = "stubs"
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    crossings: list[Crossing] = field(default_factory=list)

    def serve(self, boundary: str, given: Mapping[str, Any], key: str) -> Any:
        answers = self.recorded.get(boundary)
        if not answers:
            raise StubMissing(f"no recorded answer for {boundary}")
        envelope = answers[min(self.calls[boundary], len(answers) - 1)]
        self.calls[boundary] += 1
        self.crossings.append(
            Crossing(
                boundary,
                envelope.kind,
                given,
                key,
                False,
                envelope.output,
                envelope.error,
                envelope.ran,
            )
        )
        if envelope.error is not None:
            raise StubRecordedError(envelope.error)
        return envelope.output

    def complete(self, prompt: str) -> str:
        return str(self.serve("model", {"prompt": prompt}, prompt_key(prompt)))

    def call(self, name: str, /, **args: Any) -> Any:
        return self.serve(name, {"args": args}, tool_key(name, args))


def stub_replay(incident: Incident | Path, agent: Agent) -> Replayed:
    """Run ``agent`` on ``incident``'s task with every boundary stubbed (``_Stubs``): no
    divergence is ever raised; what the agent raises is kept in ``error``."""
    recorded = incident if isinstance(incident, Incident) else read_incident(incident)
    answers: defaultdict[str, list[Envelope]] = defaultdict(list)
    for envelope in recorded.envelopes:
        answers[envelope.boundary].append(envelope)
    stubs = _Stubs(dict(answers), name=recorded.provider or "stubs")
    try:
        answer = agent(stubs, recorded.task, stubs)
    except Exception as exc:
        return Replayed(None, exc, tuple(stubs.crossings))
    return Replayed(answer, None, tuple(stubs.crossings))


def live_run_acts(case: Case, guard: Guard, *, benign: bool = False) -> bool:
    """The oracle, with no record at all: run the agent live on the task; did it act?"""
    tools = case.tools().for_run()
    case.agent(guard)(case.model(), case.task(benign=benign), tools)
    return bool(tools.store.get("done"))


def passed(test: Callable[[], object]) -> bool:
    """Whether ``test`` passed: returned, rather than raised ``TestFailed``."""
    try:
        test()
    except TestFailed:
        return False
    return True
