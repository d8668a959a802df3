"""Small submissions that each fail one thing, built at test time from the reference lab.

Cassettes must come from real recordings, so no bad submission is written by hand:
each is a copy of the reference lab (``lab/``, ``cassettes/``, ``cassettes-llm/``,
``fixtures/``, ``incidents/``, ``FAILURES.md``, ``pyproject.toml``, ``rubric/``) with ONE small
mutation, a text edit of the copy's ``lab/agent.py``, its pyproject, its FAILURES.md or its
cassettes.

``VARIANTS`` maps a variant's name (also its folder's name) to its mutation, the exact
set of criterion ids that must score less than the unmodified copy, and an extra
assertion on what the grader wrote (the check detail or finding that proves why).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

from grader.recordings import append_change, digest_file

__all__ = [
    "BASELINE",
    "CASES",
    "REFERENCE",
    "REFUND_DESK",
    "VARIANTS",
    "YES_PROVIDER",
    "Context",
    "Seen",
    "Variant",
    "gradekit_in_process",
    "make_submission",
    "record_in_process",
    "short_rubric",
]

REFERENCE = Path(__file__).resolve().parents[1]
# A student's clone: the kit's library (gradekit/) comes along, though the grader runs every
# agent on its own copy.
COPIED = (
    "lab",
    "gradekit",
    "cassettes",
    "cassettes-llm",
    "fixtures",
    "incidents",
    "FAILURES.md",
    "pyproject.toml",
    "rubric",
)
BASELINE = "baseline"  # the unmodified copy
CASES = ("refund-policy", "incident-summary", "sql-explain", "flaky-grade")  # rubric order
# A phrase of each case's task, for agents that misbehave on one case only.
IN_TASK = {
    "refund-policy": "refund",
    "incident-summary": "incident",
    "sql-explain": "SQL",
    "flaky-grade": "Wednesday",
}
WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta")
FORGED = "forged.txt"  # what writes_output tries to leave in the grader's output folder

# The failure-log template of docs/formats.md, "..." and all.
TEMPLATE_FAILURES = """\
# Failures
## Whitespace made a new prompt
- Symptom: ...
- Cause: ...
- Fix: ...            (or "Status: open")
## Boundaries
- What this lab cannot measure: ...
"""

Report = Mapping[str, Any]  # a parsed report.json


@dataclass(frozen=True, slots=True)
class Context:
    """The test session's side of the mutations: things outside the submission."""

    listener: socket.socket  # a real socket listening on loopback
    out: Path  # the grader's output folder
    secret: str  # the value of OPENAI_API_KEY in the grader's own environment
    marker: Path  # a file that a spawned process would create

    @property
    def port(self) -> int:
        """The listener's port."""
        port: int = self.listener.getsockname()[1]
        return port


@dataclass(frozen=True, slots=True)
class Seen:
    """What the grader wrote for one variant, for its extra assertion."""

    name: str
    report: Report
    reports: Mapping[str, Report]  # every submission's report, the baseline's included
    out: Path
    context: Context


Mutation = Callable[[Path, Context], None]
Extra = Callable[[Seen], None]


class Variant(NamedTuple):
    """One bad submission: how it is made, what it must lose, and why."""

    mutate: Mutation
    loses: frozenset[str]
    extra: Extra | None = None


# A provider that says yes to every refund, as SmolLM2 did in the reference's incident.
YES_PROVIDER = """
class _Yes:
    name = "yes:always"

    def complete(self, prompt):
        return "YES, the refund should be granted."


def provider():
    return _Yes()
"""
# A provider for recording an agent offline, as `--provider echo:provider` from a module
# echo.py in the submission: each answer quotes the head of its question after ``{said}``.
ECHO_PROVIDER = """
class _Echo:
    name = "echo:quote"

    def complete(self, prompt):
        return {said!r} + " ".join(prompt.split())[:{most}]


def provider():
    return _Echo()
"""


def echo_provider(said: str, most: int) -> str:
    """``ECHO_PROVIDER``'s source, answering ``said`` and the first ``most`` characters."""
    return ECHO_PROVIDER.format(said=said, most=most)


# A refund agent written from scratch, unlike the reference's in every line (a class, its own
# prompt, its own parsing), keeping the names the lab's cut-point test and manifest use.
REFUND_DESK = '''
"""Carol's refund desk: read the terms, ask the model in my own words, pay what the policy
says and never more."""
import re

from gradekit import Tools


def issue_refund(store, student, purchase_id, amount_cents):
    store.setdefault("paid", []).append((student, purchase_id, amount_cents))
    return {"student": student, "purchase_id": purchase_id, "amount_cents": amount_cents}


def follows_the_policy(terms, says_yes):
    return terms["refund_cents"] if says_yes else 0


class RefundDesk:
    QUESTION = ("{student} wants their money back: paid {paid} cents on {bought}, asked "
                "{day} days later. Windows: {windows}. Reply YES or NO first.")

    def __init__(self, provider, tools, guard):
        self.provider, self.tools, self.guard = provider, tools, guard

    def handle(self, task):
        who = re.search(r"[Ss]tudent (\\w+)", task).group(1).lower()
        when = re.search(r"\\d{4}-\\d{2}-\\d{2}", task).group(0)
        terms = self.tools.call("refund_terms", student=who, requested_on=when)
        windows = "; ".join(f"{w['share_percent']}% to day {w['up_to_day']}"
                            for w in terms["windows"])
        verdict = self.provider.complete(self.QUESTION.format(
            student=who, paid=terms["paid_cents"], bought=terms["purchased_on"],
            day=terms["day"], windows=windows))
        owed = self.guard(terms, verdict.strip().upper().startswith("YES"))
        if owed <= 0:
            return f"No money back for {who}: refused, day {terms['day']} is past every window."
        self.tools.call("issue_refund", student=who, purchase_id=terms["purchase_id"],
                        amount_cents=owed)
        return f"Sent {owed} cents back to {who}."


def run(provider, task, tools):
    return RefundDesk(provider, tools, follows_the_policy).handle(task)


TOOLS = Tools()
TOOLS.write("issue_refund", issue_refund)
'''


def short_rubric(folder: Path) -> Path:
    """The bootcamp rubric with short limits (5 s a case, 512 MB), on the instructor's side."""
    text = (REFERENCE / "rubric" / "bootcamp.toml").read_text("utf-8")
    for old, new in (
        ("timeout_s = 30\n", "timeout_s = 5\n"),
        ("memory_mb = 1024\n", "memory_mb = 512\n"),
    ):
        assert text.count(old) == 1
        text = text.replace(old, new)
    path = folder / "bootcamp-short.toml"
    path.write_text(text, encoding="utf-8")
    return path


def agent_only(root: Path, source: str) -> Path:
    """A submission of one module, ``lab/agent.py`` holding ``source``, and an empty
    manifest: what a sandbox test runs (``root`` is made)."""
    (root / "lab").mkdir(parents=True, exist_ok=True)
    (root / "lab" / "__init__.py").write_text("")
    (root / "lab" / "agent.py").write_text(source)
    (root / "pyproject.toml").write_text("")
    return root


def copy_from_reference(folder: Path, names: tuple[str, ...]) -> Path:
    """Copy the reference's files and folders ``names`` into ``folder`` (created)."""
    folder.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in names:
        source = REFERENCE / name
        if source.is_dir():
            shutil.copytree(source, folder / name, ignore=ignore)
        else:
            shutil.copy2(source, folder / name)
    return folder


def make_submission(folder: Path) -> Path:
    """Copy the reference lab into ``folder`` (created) and return it."""
    copy_from_reference(folder, COPIED)
    # The variants are judged against one stretch goal, two-providers, whose evidence (a
    # second sandboxed run over every case) a one-case flaw breaks; the other goals are
    # tested on their own (test_stretch.py, test_cut_point.py, test_reference_stretch.py).
    _replace(
        folder / "pyproject.toml",
        'stretch = ["rerecord-review", "tool-fixtures", "two-providers", "cut-point"]',
        'stretch = ["two-providers"]',
    )
    return folder


MAKE_STAMPS = (".requires", ".installed", ".installed-dev", ".installed-dashboard")  # in order


def gradekit_in_process(*argv: str, modules: tuple[str, ...] = ()) -> int:
    """``gradekit ARGV`` in this process. A command that imports a submission's ``lab`` (and
    ``modules``, a provider's) drops them afterwards, and what this process had loaded under
    those names is put back."""
    from grader.cli import main  # the grader, only when a test runs it

    names = ("lab", *modules)
    kept = {name: module for name, module in sys.modules.items() if name.partition(".")[0] in names}
    try:
        return main(list(argv))
    finally:
        for name in [name for name in sys.modules if name.partition(".")[0] in names]:
            sys.modules.pop(name)
        sys.modules.update(kept)


def record_in_process(root: Path, rubric: Path, provider: str, *flags: str) -> int:
    """``gradekit record --root ROOT --rubric RUBRIC --provider PROVIDER --quiet FLAGS`` in
    this process, as a student runs ``make record`` (``gradekit_in_process``)."""
    return gradekit_in_process(
        "record",
        "--root",
        str(root),
        "--rubric",
        str(rubric),
        "--provider",
        provider,
        "--quiet",
        *flags,
        modules=(provider.partition(":")[0].partition(".")[0],),
    )


def as_installed(root: Path) -> Path:
    """``root`` as the Makefile leaves a lab: the kit's Makefile, and a ``.venv/bin/gradekit``
    that runs this checkout's interpreter on ``root``'s own grader, with every stamp newer
    than pyproject.toml, so that make installs nothing. A command printed as
    ``make record ARGS='...'`` or ``.venv/bin/gradekit ...`` then runs there as printed."""
    if not (root / "Makefile").exists():
        shutil.copy2(REFERENCE / "Makefile", root / "Makefile")
    gradekit = root / ".venv" / "bin" / "gradekit"
    gradekit.parent.mkdir(parents=True, exist_ok=True)
    gradekit.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m grader "$@"\n', "utf-8")
    gradekit.chmod(0o755)
    past = time.time() - 600
    os.utime(root / "pyproject.toml", (past, past))
    for stamp in MAKE_STAMPS:
        (root / ".venv" / stamp).touch()
    return root


# -- text edits ----------------------------------------------------------------------------


def _replace(path: Path, old: str, new: str) -> None:
    """Replace the one occurrence of ``old``; anything else means the reference changed."""
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{path.name}: expected {old!r} exactly once"
    path.write_text(text.replace(old, new), encoding="utf-8")


_IMPORTS = "from __future__ import annotations\n"
_KIT_IMPORT = "from gradekit import Provider, Toolbox, Traced, TracedTools\n"
_CALLS = "    llm = Traced(provider)\n"
_START = (
    '    """Answer ``task`` with three or four traced provider calls, after looking things up\n'
    '    with the lab\'s read-only tools when it is given them."""\n'
)
_RETURN = "    return answer\n"
_FIRST = "    plan = llm.complete(PLAN.format(task=task, notes=notes)).strip()\n"
_NOTES = '    notes = _look_up(TracedTools(tools), task) if tools is not None else ""\n'


def _agent(root: Path, old: str, new: str, *, imports: str = "", append: str = "") -> None:
    agent = root / "lab" / "agent.py"
    _replace(agent, old, new)
    if imports:
        _replace(agent, _IMPORTS, _IMPORTS + "\n" + imports + "\n")
    if append:
        agent.write_text(
            agent.read_text("utf-8") + "\n\n" + textwrap.dedent(append), encoding="utf-8"
        )


def _on_case(root: Path, case: str, body: str, *, imports: str) -> None:
    """At the start of run(), only for ``case``: ``body`` (one level of indentation)."""
    code = f"    if {IN_TASK[case]!r} in task:\n" + textwrap.indent(textwrap.dedent(body), " " * 8)
    _agent(root, _START, _START + code, imports=imports)


def _wrap_run(root: Path, handler: str) -> None:
    """Rename run() to _run() and wrap it: ``handler`` is what happens to a miss."""
    _agent(
        root,
        "def run(provider: Provider, task: str, tools: Toolbox | None = None) -> str:\n",
        "def _run(provider: Provider, task: str, tools: Toolbox | None = None) -> str:\n",
        append="def run(provider, task, tools=None):\n"
        "    try:\n"
        "        return _run(provider, task, tools)\n"
        "    except (CassetteMiss, MissingFixtureError) as miss:\n"
        + textwrap.indent(handler, " " * 8)
        + "\n",
        imports="from lab import CassetteMiss, MissingFixtureError",
    )


# -- the mutations ---------------------------------------------------------------------------


def signs_with_label(root: Path, context: Context) -> None:
    """The answer names the model that wrote it: it depends on provider.name."""
    _agent(root, _RETURN, '    answer += f"\\n-- {provider.name}"\n' + _RETURN)


def special_cases_labels(root: Path, context: Context) -> None:
    """Swallows misses, except under the two labels the grader used to give every run."""
    _wrap_run(root, 'if provider.name in ("provider-a", "provider-b"):\n    raise\nreturn ""')


def label_in_prompt(root: Path, context: Context) -> None:
    _agent(
        root,
        _FIRST,
        "    plan = llm.complete(PLAN.format(task=task, notes=notes)"
        ' + f"\\nYou are {provider.name}.").strip()\n',
    )


def set_in_answer(root: Path, context: Context) -> None:
    words = "{" + ", ".join(repr(word) for word in WORDS) + "}"
    _agent(root, _RETURN, f'    return answer + "\\n\\nKeywords: " + " ".join({words})\n')


def never_calls_model(root: Path, context: Context) -> None:
    """A canned sentence, whatever the task: no provider call at all."""
    _agent(root, _START, _START + '    return "I could not find that in the course notes."\n')


_MISS = "            raise miss(self._cassette, prompt, source=self.source, exists=self._exists)\n"


def _own_module(root: Path, kit_module: str, old: str, new: str, *, home: str) -> None:
    """The student copies ``gradekit/<kit_module>`` into ``lab/`` as ``home``, edits it and
    uses it in place of the kit's (in ``lab/__init__.py``'s names, or the agent's import)."""
    own = root / "lab" / f"{home}.py"
    shutil.copy2(REFERENCE / "gradekit" / kit_module, own)
    _replace(own, old, new)


def replay_returns_empty(root: Path, context: Context) -> None:
    """The submission's own Replay answers '' for a prompt it does not hold."""
    _own_module(root, "_replay.py", _MISS, '            return ""\n', home="replay")
    _use_own_replay(root)


def replay_raises_key_error(root: Path, context: Context) -> None:
    """The submission's own Replay raises, but not CassetteMiss: a caller cannot tell."""
    _own_module(root, "_replay.py", _MISS, "            raise KeyError(prompt)\n", home="replay")
    _use_own_replay(root)


def _use_own_replay(root: Path) -> None:
    """``lab.Replay`` is the student's own, and the manifest names it (``replay =
    "lab:Replay"``; the default is the kit's, ``gradekit:Replay``)."""
    init = root / "lab" / "__init__.py"
    init.write_text(
        init.read_text("utf-8") + "\nfrom lab.replay import Replay  # noqa: E402\n",
        encoding="utf-8",
    )
    _replace(
        root / "pyproject.toml", "[tool.gradekit]\n", '[tool.gradekit]\nreplay = "lab:Replay"\n'
    )


_IMPORTED_OWN_KIT = '\nraise RuntimeError("the submission\'s own gradekit was imported")\n'


def edits_its_kit_copy(root: Path, context: Context) -> None:
    """Edits its clone's gradekit/ so that a miss answers '' and every trace record says ok,
    and so that reading a cassette with it fails: the grader reads recordings with its own
    gradekit and runs every agent on it, so none of this changes anything."""
    _replace(root / "gradekit" / "_replay.py", _MISS, '            return ""\n')
    _replace(
        root / "gradekit" / "_tracing.py",
        '"ok": error is None, "error": error',
        '"ok": True, "error": None',
    )
    cassette = root / "gradekit" / "_cassette.py"
    cassette.write_text(cassette.read_text("utf-8") + _IMPORTED_OWN_KIT, encoding="utf-8")


def replay_is_str(root: Path, context: Context) -> None:
    """The manifest names a "Replay" that is not one at all."""
    _replace(
        root / "pyproject.toml", "[tool.gradekit]\n", '[tool.gradekit]\nreplay = "builtins:str"\n'
    )


def traces_before_calls(root: Path, context: Context) -> None:
    """Writes each provider call's record first, latency 0 and ok true, then calls."""
    _agent(
        root,
        _CALLS,
        "    llm = _PreTraced(provider)\n",
        append="""\
        class _PreTraced:
            def __init__(self, provider):
                self._provider = provider

            def complete(self, prompt):
                import hashlib, os
                key = hashlib.sha256(prompt.strip().encode("utf-8")).hexdigest()[:16]
                record = {"key": key, "provider": self._provider.name, "latency_ms": 0,
                          "ok": True, "error": None}
                with open(os.environ["GRADEKIT_TRACE"], "a", encoding="utf-8") as trace:
                    trace.write(json.dumps(record) + "\\n")
                return self._provider.complete(prompt)
        """,
    )


def traces_ok_always(root: Path, context: Context) -> None:
    """The student's own tracing says ok, with no error, even on a call that failed."""
    _own_module(
        root,
        "_tracing.py",
        '"ok": error is None, "error": error',
        '"ok": True, "error": None',
        home="tracing",
    )
    _agent(
        root,
        _KIT_IMPORT,
        "from gradekit import Provider, Toolbox\nfrom lab.tracing import Traced, TracedTools\n",
    )


def second_set_copied(root: Path, context: Context) -> None:
    """The first set, copied as the second provider's."""
    shutil.rmtree(root / "cassettes-llm")
    shutil.copytree(root / "cassettes", root / "cassettes-llm")


def second_set_relabelled(root: Path, context: Context) -> None:
    """The first set, copied, each entry's provider renamed: the answers are the first's."""
    second_set_copied(root, context)
    for path in (root / "cassettes-llm").glob("*.json"):
        text = path.read_text("utf-8")
        path.write_text(
            text.replace(
                '"provider": "openai-compatible:smollm2"',
                '"provider": "anthropic:claude-3-5-haiku"',
            ),
            "utf-8",
        )


def change_log_names_readme(root: Path, context: Context) -> None:
    """Claims the re-record review with a hand-written log entry naming README.md."""
    _replace(
        root / "pyproject.toml", 'stretch = ["two-providers"]', 'stretch = ["rerecord-review"]'
    )
    readme = root / "README.md"
    readme.write_text("# My lab\n", encoding="utf-8")
    append_change(
        root / "DATASET_CHANGES.md",
        date="2026-11-29",
        case="refund-policy",
        kind="cassette",
        changed_keys=["0123456789abcdef"],
        reason="re-recorded",
        digests={"README.md": digest_file(readme)},
    )


def forges_outcome_via_main(root: Path, context: Context) -> None:
    """Swallows misses, and replaces the harness's outcome and escaped functions (through
    ``sys.modules["__main__"]``) so that a swallowed miss is reported as one that escaped."""
    swallow_miss(root, context)
    agent = root / "lab" / "agent.py"
    agent.write_text(
        agent.read_text("utf-8")
        + textwrap.dedent("""

        import sys as _sys

        _main = _sys.modules["__main__"]
        if hasattr(_main, "outcome"):
            _real_outcome = _main.outcome

            def _forged_outcome(call):
                described, error = _real_outcome(call)
                if described.get("answer") == "":
                    return {"exception": "CassetteMiss"}, RuntimeError("forged")
                return described, error

            _main.outcome = _forged_outcome
            _main.escaped = lambda exc, misses: True
        """),
        encoding="utf-8",
    )


def forges_result_on_channel(root: Path, context: Context) -> None:
    """On a miss, writes a result saying the miss escaped straight on the grader's pipe,
    then leaves before the harness can say what really happened."""
    _wrap_run(
        root,
        "import json, os\n"
        'line = {"op": "result", "case": provider._case, "status": "raised", '
        '"exception": "CassetteMiss", "miss_escaped": True, '
        '"returned_type": None, "answer": None}\n'
        'os.write(provider._channel._write_fd, (json.dumps(line) + "\\n").encode())\n'
        "os._exit(0)",
    )


def swallow_miss(root: Path, context: Context) -> None:
    _wrap_run(root, 'return ""')


def miss_returns_none(root: Path, context: Context) -> None:
    _wrap_run(root, "return None")


def miss_wrapped_from_none(root: Path, context: Context) -> None:
    _wrap_run(root, 'raise RuntimeError(f"could not answer: {miss}") from None')


def untraced(root: Path, context: Context) -> None:
    _agent(root, _CALLS, "    llm = provider\n")
    _agent(root, _NOTES, '    notes = _look_up(tools, task) if tools is not None else ""\n')


def wrong_trace_keys(root: Path, context: Context) -> None:
    """A hand-made tracer that keys records by the full SHA-256 of the unstripped prompt."""
    _agent(
        root,
        _CALLS,
        "    llm = _MyTrace(provider)\n",
        imports="import hashlib\nimport json\nimport os\nimport time",
        append="""\
               class _MyTrace:
                   def __init__(self, provider):
                       self.provider = provider

                   def complete(self, prompt):
                       started = time.perf_counter()
                       answer = self.provider.complete(prompt)
                       record = {
                           "key": hashlib.sha256(prompt.encode("utf-8")).hexdigest(),
                           "provider": self.provider.name,
                           "latency_ms": (time.perf_counter() - started) * 1000,
                           "ok": True,
                           "error": None,
                       }
                       with open(os.environ["GRADEKIT_TRACE"], "a", encoding="utf-8") as f:
                           f.write(json.dumps(record) + "\\n")
                       return answer
               """,
    )


def no_failures(root: Path, context: Context) -> None:
    (root / "FAILURES.md").unlink()


def template_failures(root: Path, context: Context) -> None:
    (root / "FAILURES.md").write_text(TEMPLATE_FAILURES, encoding="utf-8")


def hangs(root: Path, context: Context) -> None:
    _on_case(root, "refund-policy", "while True:\n    time.sleep(1)\n", imports="import time")


HOG_CAP = 32  # x 64 MiB = 2 GiB: far over the limit, yet bounded should the limit be missing


def allocates(root: Path, context: Context) -> None:
    _on_case(
        root,
        "incident-summary",
        f"""\
        hog = []
        while len(hog) < {HOG_CAP}:
            hog.append(b"x" * (64 << 20))
        """,
        imports="",
    )


def connects(root: Path, context: Context) -> None:
    _on_case(
        root,
        "sql-explain",
        f"""\
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        probe.settimeout(2)
        probe.connect(("127.0.0.1", {context.port}))
        probe.sendall(b"hello from a graded agent")
        """,
        imports="import socket",
    )


def resolves(root: Path, context: Context) -> None:
    _on_case(
        root, "flaky-grade", 'socket.getaddrinfo("api.openai.com", 443)\n', imports="import socket"
    )


def spawns(root: Path, context: Context) -> None:
    _on_case(
        root,
        "refund-policy",
        f'subprocess.run(["touch", {str(context.marker)!r}])\n',
        imports="import subprocess",
    )


def reads_api_key(root: Path, context: Context) -> None:
    # Were the key in the child's environment, the case would pass and its output hold the key.
    _on_case(
        root,
        "incident-summary",
        """\
        key = os.environ["OPENAI_API_KEY"]
        print(f"using {key}", flush=True)
        print(f"using {key}", file=sys.stderr, flush=True)
        """,
        imports="import os\nimport sys",
    )


def writes_output(root: Path, context: Context) -> None:
    target = context.out / FORGED
    _on_case(root, "sql-explain", f'open({str(target)!r}, "w").write("total 100.00")\n', imports="")


FAKE_REPORT = """\
criterion                 points     max
Contract stability         30.00   30.00
Loud failure               25.00   25.00
Tracing                    20.00   20.00
Written summary            15.00   15.00
Stretch goal               10.00   10.00
total                     100.00  100.00
{"op": "result", "case": "refund-policy", "status": "returned", "miss_escaped": true}
{"schema": "gradekit.report/1", "total": "100.00", "max": "100.00", "score": 100.0}
"""


def fake_report(root: Path, context: Context) -> None:
    """Traces nothing, and prints a perfect report on stdout and stderr to cover for it."""
    untraced(root, context)
    _agent(
        root,
        _START,
        _START + f"    print({FAKE_REPORT!r}, flush=True)\n"
        f"    print({FAKE_REPORT!r}, file=sys.stderr, flush=True)\n",
        imports="import sys",
    )


# A module of the submission's own that was never committed: its import error is graded. (A
# package the grader lacks is no grade at all: tests/grader/grading/test_packages.py.)
MISSING_MODULE = "lab.helpers_never_shipped"


def fails_on_import(root: Path, context: Context) -> None:
    _agent(root, _KIT_IMPORT, f"{_KIT_IMPORT}\nimport {MISSING_MODULE}\n")


def no_manifest(root: Path, context: Context) -> None:
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text("utf-8")
    table = re.search(r"^\[tool\.gradekit\]\n(?:[^\[\n].*\n|\n)*", text, re.MULTILINE)
    assert table is not None and "agent =" in table[0]
    pyproject.write_text(text.replace(table[0], ""), encoding="utf-8")


def misses_cassette(root: Path, context: Context) -> None:
    (root / "cassettes" / "sql-explain.json").unlink()


def misses_fixture(root: Path, context: Context) -> None:
    (root / "fixtures" / "sql-explain.json").unlink()


def fixtures_elsewhere(root: Path, context: Context) -> None:
    """The manifest names another fixtures folder: grading must read it (it read fixtures/)."""
    (root / "fixtures").rename(root / "fx")
    _replace(root / "pyproject.toml", "[tool.gradekit]\n", '[tool.gradekit]\nfixtures = "fx"\n')


def fixtures_folder_missing(root: Path, context: Context) -> None:
    """The manifest names a fixtures folder that is not there."""
    shutil.rmtree(root / "fixtures")
    _replace(root / "pyproject.toml", "[tool.gradekit]\n", '[tool.gradekit]\nfixtures = "fx"\n')


def _fixture_missed(seen: Seen) -> None:
    """The case without a fixture misses its first tool call: it never ran, so it earns
    neither loud failure nor tracing, and says to record it."""
    unrecorded = "asked 1 tool call(s) the fixtures do not hold"
    _only_case_lost(seen, "sql-explain", unrecorded, never_ran(f"{unrecorded}; record them first"))


# -- what the report must say ---------------------------------------------------------------


def criterion(report: Report, criterion_id: str) -> Mapping[str, Any]:
    """The criterion ``criterion_id`` of a report."""
    found = [c for c in report["criteria"] if c["id"] == criterion_id]
    assert len(found) == 1, criterion_id
    result: Mapping[str, Any] = found[0]
    return result


def details(report: Report, criterion_id: str) -> dict[str, str]:
    """Check id -> detail, for one criterion."""
    return {c["id"]: c["detail"] for c in criterion(report, criterion_id)["checks"]}


def lost(report: Report, criterion_id: str) -> set[str]:
    """The ids of the checks of a criterion that did not earn all their points."""
    return {
        c["id"]
        for c in criterion(report, criterion_id)["checks"]
        if not c["passed"] or c["points"] != c["max"]
    }


# What the grader advises for a recording the submission lacks (sql-explain's cassette).
_RECORD_IT = (
    "if `git status` lists it, commit it (`git add cassettes/sql-explain.json`); "
    "otherwise record it with `make record ARGS='--case sql-explain'` and commit it"
)


def _findings(*expected: str) -> Extra:
    def check(seen: Seen) -> None:
        assert seen.report["findings"] == list(expected)

    return check


def _all(*extras: Extra) -> Extra:
    def check(seen: Seen) -> None:
        for extra in extras:
            extra(seen)

    return check


def _advised(criterion_id: str, *advice: str) -> Extra:
    """The criterion's advice is exactly these lines: the cause the evidence names, per case."""

    def check(seen: Seen) -> None:
        assert list(criterion(seen.report, criterion_id)["advice"]) == list(advice)

    return check


def _every_case(advice: str) -> tuple[str, ...]:
    return tuple(f"{case}: {advice}" for case in CASES)


def never_ran(why: str, *, primary: bool = True) -> tuple[str, str]:
    """The loud-failure and tracing details of a case whose primary run shows nothing to
    probe or trace: no points for what never ran."""
    run = "its primary run " if primary else ""
    return f"not probed: {run}{why}", f"not checked: {run}{why}"


def _only_case_lost(seen: Seen, case: str, stability: str, loud_tracing: tuple[str, str]) -> None:
    """``case`` alone lost stability, loud failure and tracing, for these reasons."""
    for criterion_id, detail in zip(
        ("contract_stability", "loud_failure", "tracing"), (stability, *loud_tracing), strict=True
    ):
        assert lost(seen.report, criterion_id) == {case}, criterion_id
        assert _says(details(seen.report, criterion_id)[case], detail), criterion_id


def _says(detail: str, expected: str) -> bool:
    """``detail`` is ``expected``, or ``expected`` and then, after ": ", the message of what
    run() raised (``raised PermissionError: gradekit's sandbox refused ...``)."""
    return detail == expected or (detail.startswith(expected + ": ") and "raised " in expected)


LABEL_ALONE = (
    "the answer changes with the provider's name alone: never read provider.name "
    "in the agent, and never put it in a prompt or an answer"
)
SEED_ALONE = (
    "the answer changes with the hash seed alone: iterate over sets and dict keys in "
    "sorted order (sorted(...)) before joining them into text"
)


def _cases_say(criterion_id: str, detail: str) -> Extra:
    """Every case's check of ``criterion_id`` has this detail."""

    def check(seen: Seen) -> None:
        shown = {k: v for k, v in details(seen.report, criterion_id).items() if k in CASES}
        assert shown == dict.fromkeys(CASES, detail)

    return check


def _one_case(case: str, contract: str, primary: str, stretch: str, *findings: str) -> Extra:
    """One case lost in the per-case criteria (its primary run ``primary``: no loud failure
    or tracing for what never ran) and the second-set evidence; nothing else."""

    def check(seen: Seen) -> None:
        _only_case_lost(seen, case, contract, never_ran(primary))
        assert lost(seen.report, "stretch_goal") == {"two-providers: evidence"}
        assert _says(details(seen.report, "stretch_goal")["two-providers: evidence"], stretch)
        assert seen.report["findings"] == list(findings)

    return check


def _set_order_depends_on_the_seed(seen: Seen) -> None:
    """The premise of set_in_answer: the join's order differs under the two hash seeds."""
    code = f"print(' '.join({set(WORDS)!r}))"
    orders = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(orders) == 2


# The reference's probes: each case makes three provider calls (so three are withheld in
# turn) and one tool call is withheld, so four withheld calls to trace.
WITHHELD = "{} of 4 withheld calls traced with ok false and their error"


def _traced_none(seen: Seen) -> None:
    for case, detail in details(seen.report, "tracing").items():
        assert re.fullmatch(
            r"0 of [4-6] calls traced correctly; not traced right: (tool "
            r"call \d \(\w+\): no trace record names its key, )*provider "
            r"call 1 \('.+'\): no trace record names its key, .+; " + WITHHELD.format(0),
            detail,
        ), (case, detail)


def _feedback_names_each_untraced_call(seen: Seen) -> None:
    """What the student reads names the untraced calls as the dashboard does: report.md's
    line for each case and Gradescope's test of it, by position and the head of the prompt."""
    named = "provider call 1 ('You are a teaching assistant in an agent-engineering"
    markdown = (seen.out / seen.name / "report.md").read_text("utf-8")
    results = json.loads((seen.out / seen.name / "results.json").read_text("utf-8"))
    tests = {t["name"]: t["output"] for t in results["tests"] if t["tags"] == ["tracing"]}
    section = markdown.split(f"## {criterion(seen.report, 'tracing')['title']}", 1)[1]
    for case in details(seen.report, "tracing"):
        line = next(line for line in section.splitlines() if line.startswith(f"- {case} ("))
        assert named in line and "no trace record names its key" in line, line
        output = next(o for name, o in tests.items() if name.endswith(f": {case}"))
        assert named in output and "provider call 2 ('" in output, output


def _traced_wrong_keys(seen: Seen) -> None:
    """A record per provider call, each with a wrong key: none is paired with its call, and
    each is left over (the tool calls' records stay right, and the tool probe's miss)."""
    for case, detail in details(seen.report, "tracing").items():
        match = re.fullmatch(
            r"([12]) of ([4-6]) calls traced correctly; not traced right: "
            r"provider call 1 \('.+'\): no trace record names its key, .+; "
            r"([3-4]) record\(s\) name no call the grader answered; " + WITHHELD.format(1),
            detail,
        )
        assert match, (case, detail)
        assert int(match[2]) - int(match[1]) == int(match[3]), (case, detail)


def _traced_early(seen: Seen) -> None:
    """Every provider call's record was there before its answer: only tool calls count."""
    for case, detail in details(seen.report, "tracing").items():
        match = re.fullmatch(
            r"([12]) of ([4-6]) calls traced correctly; not traced right: "
            r"provider call 1 \('.+'\): its only record was written before "
            r"the grader answered it, .+; ([3-4]) record\(s\) name no call "
            r"the grader answered; \3 record\(s\) written before the grader "
            r"answered their call; " + WITHHELD.format(1),
            detail,
        )
        assert match, (case, detail)
        assert int(match[1]) + int(match[3]) == int(match[2]), (case, detail)


def _stretch_evidence(pattern: str, goal: str = "two-providers") -> Extra:
    """Only the stretch goal's evidence is lost, for a reason matching ``pattern``."""

    def check(seen: Seen) -> None:
        assert lost(seen.report, "stretch_goal") == {f"{goal}: evidence"}
        detail = details(seen.report, "stretch_goal")[f"{goal}: evidence"]
        assert re.fullmatch(pattern, detail), detail
        assert criterion(seen.report, "stretch_goal")["points"] == "4.00"

    return check


def _flagged(pattern: str, *scanned: str) -> Extra:
    """One finding per case, each flagging the submission for review, matching ``pattern``,
    and the tamper scan's flags of its source, one per phrase in ``scanned``, in order."""

    def check(seen: Seen) -> None:
        source = re.compile(r"flagged for review: lab/agent\.py:[0-9]+: (.*)")
        findings = [f for f in seen.report["findings"] if not source.fullmatch(f)]
        assert len(findings) == len(CASES), findings
        for finding in findings:
            assert re.fullmatch("flagged for review: " + pattern, finding), finding
        flags = [m[1] for f in seen.report["findings"] if (m := source.fullmatch(f))]
        assert flags == list(scanned), flags

    return check


def _cases_match(criterion_id: str, pattern: str) -> Extra:
    """Every case's check of ``criterion_id`` has a detail matching ``pattern``."""

    def check(seen: Seen) -> None:
        for case in CASES:
            detail = details(seen.report, criterion_id)[case]
            assert re.fullmatch(pattern, detail), (case, detail)

    return check


def _cassette_missed(seen: Seen) -> None:
    """Only the case without a cassette lost: it never ran, so it earns neither loud
    failure nor tracing, and the detail says to record it."""
    unrecorded = "asked 1 prompt(s) the cassette does not hold"
    _only_case_lost(seen, "sql-explain", unrecorded, never_ran(f"{unrecorded}; record them first"))


def _fake_changes_nothing(seen: Seen) -> None:
    """Printing a perfect report earns exactly what tracing nothing earns."""
    fake, honest = seen.report, seen.reports["untraced"]
    assert fake["criteria"] == honest["criteria"]
    assert fake["findings"] == honest["findings"] == []
    assert fake["total"] == honest["total"] == "80.00"


def _listener_never_reached(seen: Seen) -> None:
    """No connection waits on the listener, yet one from outside the sandbox gets through."""
    listener = seen.context.listener
    listener.setblocking(False)
    try:
        try:
            stray, _ = listener.accept()
        except BlockingIOError:
            pass
        else:
            stray.close()
            raise AssertionError("the sandboxed agent connected to the loopback listener")
        with socket.create_connection(("127.0.0.1", seen.context.port), timeout=2):
            listener.settimeout(2)
            accepted, _ = listener.accept()
            accepted.close()
    finally:
        listener.setblocking(True)


def _marker_absent(seen: Seen) -> None:
    assert not seen.context.marker.exists()
    touched = seen.context.marker.with_name("touch-works")
    subprocess.run(["touch", str(touched)], check=True)  # outside the sandbox it would have
    assert touched.exists()


def _secret_nowhere(seen: Seen) -> None:
    secret = seen.context.secret.encode()
    files = [path for path in seen.out.rglob("*") if path.is_file()]
    assert len(files) > 3 * len(seen.reports)
    assert [path for path in files if secret in path.read_bytes()] == []


def _nothing_forged(seen: Seen) -> None:
    assert not (seen.context.out / FORGED).exists()
    assert not list(seen.out.rglob(FORGED))


def _blocked(why: str) -> Extra:
    """No run happened: every case lost with ``why``."""

    def check(seen: Seen) -> None:
        said = (why, *never_ran(why, primary=False))
        for criterion_id, detail in zip(
            ("contract_stability", "loud_failure", "tracing"), said, strict=True
        ):
            assert criterion(seen.report, criterion_id)["checks"]
            for case in CASES:
                assert details(seen.report, criterion_id)[case] == detail, criterion_id
            assert lost(seen.report, criterion_id) >= set(CASES)

    return check


def _own_replay(detail: str) -> Extra:
    """Only the own-Replay probe is lost, for this reason; the cases keep their points."""

    def check(seen: Seen) -> None:
        assert lost(seen.report, "loud_failure") == {"own_replay"}
        assert details(seen.report, "loud_failure")["own_replay"] == detail
        assert criterion(seen.report, "loud_failure")["points"] == "20.00"
        assert seen.report["findings"] == []

    return check


def _points(criterion_id: str, points: str) -> Extra:
    def check(seen: Seen) -> None:
        assert criterion(seen.report, criterion_id)["points"] == points

    return check


def _submission(name: str) -> Extra:
    def check(seen: Seen) -> None:
        assert seen.report["submission"] == name

    return check


PER_CASE = frozenset({"contract_stability", "loud_failure", "tracing", "stretch_goal"})
TIMED_OUT = "timed out (did not finish within 5 s)"
# The reference's first provider call, withheld in the first probe: its prompt's head.
FIRST_CALL = r"call 1 of 3 \('You are a teaching assistant in an agent-engineering bootca…'\): "
SWALLOWED = FIRST_CALL + r"run\(\) returned {} after the miss: a miss must raise"
NO_CHAIN = FIRST_CALL + (
    r"run\(\) raised {}, which hides the miss \(it is not in that "
    r"exception's chain\): re-raise it, or `raise \.\.\. from miss`"
)
NO_REPLAY = "case {} on the second cassette set: raised {}"
CHANGED = "the answer changed with the provider label or the hash seed"
NOT_CREDITED = (
    "not credited: no case of the agent ran on its recordings, so nothing showed "
    "that a miss is loud"
)
REPLACED = "crashed (broke the grader's protocol: the harness's code was replaced)"
FORGED_VERDICT = "crashed (broke the grader's protocol: a forged verdict)"
NEVER_CALLED = "never asked the provider: the answer did not come from the recordings"
# The import failure, and where: the line fails_on_import adds after the kit's import.
_IMPORT_LINE = (REFERENCE / "lab" / "agent.py").read_text("utf-8").splitlines().index(
    _KIT_IMPORT.strip()
) + 3
IMPORT = (
    f"ModuleNotFoundError: No module named '{MISSING_MODULE}' (lab/agent.py, line {_IMPORT_LINE})"
)


def _refused(case: str, error: str, finding: str) -> Extra:
    """``_one_case`` for a case the sandbox refused: its one finding is ``finding`` and the
    place in the agent that made the call (the exact line: tests/grader/sandbox)."""
    one_case = _one_case(case, f"raised {error}", f"raised {error}", NO_REPLAY.format(case, error))

    def check(seen: Seen) -> None:
        (said,) = seen.report["findings"]
        assert re.fullmatch(re.escape(finding) + r" \(lab/agent\.py:[0-9]+\)", said), said
        one_case(replace(seen, report={**seen.report, "findings": []}))

    return check


VARIANTS: dict[str, Variant] = {
    "special_cases_labels": Variant(
        special_cases_labels,
        frozenset({"loud_failure"}),
        _all(
            _cases_match("loud_failure", SWALLOWED.format("''")),
            _points("loud_failure", "5.00"),
            _findings(),
        ),
    ),
    "signs_with_label": Variant(
        signs_with_label,
        frozenset({"contract_stability"}),
        _all(
            _cases_say("contract_stability", CHANGED),
            _findings(),
            _advised("contract_stability", *_every_case(LABEL_ALONE)),
        ),
    ),
    "label_in_prompt": Variant(
        # Every prompt misses, so no case ran: nothing to probe or trace either.
        label_in_prompt,
        PER_CASE,
        _all(
            _cases_say("contract_stability", "asked 1 prompt(s) the cassette does not hold"),
            _cases_say(
                "loud_failure",
                never_ran("asked 1 prompt(s) the cassette does not hold; record them first")[0],
            ),
            _points("loud_failure", "0.00"),
            _points("tracing", "0.00"),
            _points("stretch_goal", "4.00"),
            _findings(),
            _advised(
                "contract_stability",
                *_every_case(
                    "a prompt holds the provider's name, so no recording can ever match it: "
                    "never put provider.name in a prompt"
                ),
            ),
        ),
    ),
    "set_in_answer": Variant(
        set_in_answer,
        frozenset({"contract_stability"}),
        _all(
            _set_order_depends_on_the_seed,
            _cases_say("contract_stability", CHANGED),
            _findings(),
            _advised("contract_stability", *_every_case(SEED_ALONE)),
        ),
    ),
    "never_calls_model": Variant(
        never_calls_model,
        PER_CASE,
        _all(
            _cases_say("contract_stability", NEVER_CALLED),
            _cases_say("loud_failure", never_ran("never asked the provider")[0]),
            _cases_say("tracing", never_ran("never asked the provider")[1]),
            _points("contract_stability", "0.00"),
            _points("loud_failure", "0.00"),
            _points("tracing", "0.00"),
            _points("stretch_goal", "4.00"),
            _findings(),
        ),
    ),
    "edits_its_kit_copy": Variant(edits_its_kit_copy, frozenset(), _findings()),
    "replay_returns_empty": Variant(
        replay_returns_empty,
        frozenset({"loud_failure"}),
        _own_replay("your Replay answered an unrecorded prompt instead of raising"),
    ),
    "replay_raises_key_error": Variant(
        replay_raises_key_error,
        frozenset({"loud_failure"}),
        _own_replay("your Replay raised KeyError on an unrecorded prompt, not CassetteMiss"),
    ),
    "replay_is_str": Variant(
        replay_is_str,
        frozenset({"loud_failure"}),
        _own_replay(
            "your Replay did not answer a recorded prompt asked with extra outer "
            "whitespace: a recorded prompt with extra outer whitespace raised "
            "AttributeError"
        ),
    ),
    "traces_before_calls": Variant(
        traces_before_calls,
        frozenset({"tracing"}),
        _all(_traced_early, _findings()),
    ),
    "traces_ok_always": Variant(
        traces_ok_always,
        frozenset({"tracing"}),
        _all(
            _cases_match("tracing", r"([4-6]) of \1 calls traced correctly; " + WITHHELD.format(0)),
            _findings(),
        ),
    ),
    "second_set_copied": Variant(
        second_set_copied,
        frozenset({"stretch_goal"}),
        _all(
            _stretch_evidence(
                r"cassettes-llm/[a-z-]+\.json entry [0-9a-f]{16} names "
                r"openai-compatible:smollm2, which is not a second provider: "
                r"record the set with `make record ARGS='--provider PROVIDER "
                r"--cassettes cassettes-llm'`, PROVIDER another provider than "
                r"the first set's"
            ),
            _findings(),
        ),
    ),
    "second_set_relabelled": Variant(
        second_set_relabelled,
        frozenset({"stretch_goal"}),
        _all(
            _stretch_evidence(
                "every answer in cassettes-llm/ is the first set's: record the "
                "set from the second provider instead of copying it"
            ),
            _findings(),
        ),
    ),
    "change_log_names_readme": Variant(
        change_log_names_readme,
        frozenset({"stretch_goal"}),
        _all(
            _stretch_evidence(
                r"no DATASET_CHANGES\.md entry names only recordings \(\.json files in cassettes/, "
                r"cassettes-llm/, fixtures/\): log the re-recording with `make record "
                r'ARGS=\'--rerecord --reason "why the answers changed"\'`',
                goal="rerecord-review",
            ),
            _findings(),
        ),
    ),
    "forges_outcome_via_main": Variant(
        # No primary run finished with a verdict to trust: nothing ran, so nothing is traced.
        forges_outcome_via_main,
        PER_CASE,
        _all(
            _cases_say("contract_stability", REPLACED),
            _cases_say("loud_failure", never_ran(REPLACED)[0]),
            _cases_say("tracing", never_ran(REPLACED)[1]),
            _flagged(
                r"case [a-z-]+: the agent replaced the harness's code "
                r"\(escaped, outcome\)",
                "reaches the harness's own module (__main__)",
            ),
        ),
    ),
    "forges_result_on_channel": Variant(
        forges_result_on_channel,
        frozenset({"loud_failure"}),
        _all(
            _cases_match("loud_failure", FIRST_CALL + re.escape(f"the probe run {FORGED_VERDICT}")),
            _points("loud_failure", "5.00"),
            _flagged(
                r"a result message \(case [a-z-]+\) that the harness did not send: "
                r"written on the grader's channel by the agent",
                "writes to a file descriptor it did not open (os.write)",
                "ends the process at once (os._exit)",
            ),
        ),
    ),
    "swallow_miss": Variant(
        swallow_miss,
        frozenset({"loud_failure"}),
        _all(
            _cases_match("loud_failure", SWALLOWED.format("''")),
            _points("loud_failure", "5.00"),
            _findings(),
        ),
    ),
    "miss_returns_none": Variant(
        miss_returns_none,
        frozenset({"loud_failure"}),
        _all(
            _cases_match("loud_failure", SWALLOWED.format("None")),
            _points("loud_failure", "5.00"),
            _findings(),
        ),
    ),
    "miss_wrapped_from_none": Variant(
        miss_wrapped_from_none,
        frozenset({"loud_failure"}),
        _all(
            _cases_match("loud_failure", NO_CHAIN.format("RuntimeError")),
            _points("loud_failure", "5.00"),
            _findings(),
        ),
    ),
    "untraced": Variant(
        untraced,
        frozenset({"tracing"}),
        _all(
            _traced_none,
            _points("tracing", "0.00"),
            _findings(),
            _feedback_names_each_untraced_call,
        ),
    ),
    "wrong_trace_keys": Variant(
        wrong_trace_keys,
        frozenset({"tracing"}),
        _all(_traced_wrong_keys, _findings()),
    ),
    "no_failures": Variant(
        no_failures,
        frozenset({"written_summary", "stretch_goal"}),
        _all(
            _points("written_summary", "0.00"),
            _points("stretch_goal", "6.00"),
            _findings(
                "FAILURES.md is missing: write the failure log (its format: docs/formats.md)"
            ),
        ),
    ),
    "template_failures": Variant(
        template_failures,
        frozenset({"written_summary", "stretch_goal"}),
        _all(_points("written_summary", "0.00"), _points("stretch_goal", "6.00"), _findings()),
    ),
    "hangs": Variant(
        hangs,
        PER_CASE,
        _one_case(
            "refund-policy",
            TIMED_OUT,
            TIMED_OUT,
            f"case refund-policy on the second cassette set: {TIMED_OUT}",
        ),
    ),
    "allocates": Variant(
        allocates,
        PER_CASE,
        _one_case(
            "incident-summary",
            "raised MemoryError",
            "raised MemoryError",
            NO_REPLAY.format("incident-summary", "MemoryError"),
        ),
    ),
    "connects": Variant(
        connects,
        PER_CASE,
        _all(
            _refused(
                "sql-explain",
                "PermissionError",
                "sandbox refused socket.__new__ in case sql-explain: open a network socket",
            ),
            _listener_never_reached,
        ),
    ),
    "resolves": Variant(
        resolves,
        PER_CASE,
        _refused(
            "flaky-grade",
            "PermissionError",
            "sandbox refused socket.getaddrinfo in case flaky-grade: resolve a host name",
        ),
    ),
    "spawns": Variant(
        spawns,
        PER_CASE,
        _all(
            _refused(
                "refund-policy",
                "PermissionError",
                "sandbox refused subprocess.Popen in case refund-policy: start a process",
            ),
            _marker_absent,
        ),
    ),
    "reads_api_key": Variant(
        reads_api_key,
        PER_CASE,
        _all(
            _one_case(
                "incident-summary",
                "raised KeyError",
                "raised KeyError",
                NO_REPLAY.format("incident-summary", "KeyError"),
            ),
            _secret_nowhere,
        ),
    ),
    "writes_output": Variant(
        writes_output,
        PER_CASE,
        _all(
            _refused(
                "sql-explain",
                "PermissionError",
                "sandbox refused open in case sql-explain: write a file outside the submission",
            ),
            _nothing_forged,
        ),
    ),
    "fake_report": Variant(fake_report, frozenset({"tracing"}), _fake_changes_nothing),
    "fails_on_import": Variant(
        fails_on_import,
        PER_CASE,
        _all(
            _blocked(f"the agent could not be imported: {IMPORT}"),
            _points("loud_failure", "0.00"),
            _points("stretch_goal", "4.00"),
            _findings(f"the agent failed to import: {IMPORT}"),
            _advised(
                "contract_stability",
                *_every_case(f"fix this first: the agent could not be imported: {IMPORT}"),
            ),
        ),
    ),
    "no_manifest": Variant(
        no_manifest,
        PER_CASE,
        _all(
            _blocked("no usable [tool.gradekit] manifest"),
            _submission("no_manifest"),
            _points("loud_failure", "0.00"),
            _points("stretch_goal", "0.00"),
            _findings(
                "manifest: pyproject.toml: add [tool.gradekit] with "
                'agent = "package.module:function"'
            ),
        ),
    ),
    "misses_cassette": Variant(
        misses_cassette,
        frozenset({"contract_stability", "loud_failure", "tracing"}),
        _all(
            _cassette_missed,
            _findings(f"cassettes/sql-explain.json is missing: {_RECORD_IT}"),
            _advised(
                "contract_stability",
                f"sql-explain: cassettes/sql-explain.json is missing: {_RECORD_IT}",
            ),
        ),
    ),
    "misses_fixture": Variant(
        misses_fixture,
        PER_CASE,
        _all(
            _fixture_missed,
            _points("stretch_goal", "4.00"),
            _findings(
                f"fixtures/sql-explain.json is missing: "
                f"{_RECORD_IT.replace('cassettes/', 'fixtures/')}"
            ),
        ),
    ),
    "fixtures_elsewhere": Variant(fixtures_elsewhere, frozenset(), _findings()),
    "fixtures_folder_missing": Variant(
        fixtures_folder_missing,
        PER_CASE,
        _findings(
            "the folder fx/ named in [tool.gradekit] does not exist: record into it "
            "with `make record` and commit it, or fix the name"
        ),
    ),
}


@contextlib.contextmanager
def kept_modules() -> Iterator[None]:
    """Every lab brings its own ``lab``: a test that imports one in this process puts the
    process's own ``lab`` modules back afterwards."""

    def ours() -> dict[str, ModuleType]:
        return {
            name: module
            for name, module in sys.modules.items()
            if name == "lab" or name.startswith("lab.")
        }

    before = ours()
    try:
        yield
    finally:
        for name in ours():
            del sys.modules[name]
        sys.modules.update(before)
