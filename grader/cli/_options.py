"""Options more than one command group shares, each defined once."""

from __future__ import annotations

import argparse
import tomllib
from collections.abc import Callable
from pathlib import Path

from gradekit import Provider, UsageError
from grader._expect import OUTCOMES, Told
from grader._specs import load_spec
from grader.rubric import KIT_RUBRIC, load_cases
from grader.sandbox import wall_requests
from grader.submission import ManifestError, load_manifest

__all__ = [
    "add_provider_options",
    "add_rubric_option",
    "add_wall_option",
    "lab_rubric",
    "live_provider",
    "resolve_rubric",
]

Lab = Callable[[argparse.Namespace], Path]  # where a command's lab is, from its arguments


def _here(args: argparse.Namespace) -> Path:
    return Path(".")


def add_rubric_option(
    parser: argparse.ArgumentParser, lab: Lab = _here, *, cwd_only: bool = False
) -> None:
    """``--rubric``, resolved the same way by every command (``resolve_rubric``): the file
    given, else the rubric the lab names (``rubric =`` in its ``[tool.gradekit]``), else
    the kit's. ``lab``: where the command's lab is: the folder it runs in for the
    instructor's commands (grade, gradescope build), the submission it works on for the
    student's (record, run, check). The grader never takes a rubric a graded submission
    names: a rubric's custom checks run in the grader's own process. ``cwd_only``: a
    command that runs none of the lab's code in this process (check) takes a named rubric
    with custom checks only from the folder it runs in."""
    parser.add_argument(
        "--rubric",
        type=Path,
        default=None,
        help="the rubric (default: the one the lab names in [tool.gradekit] "
        'rubric = "...", else the kit\'s rubric/bootcamp.toml; a rubric a '
        "graded submission names or ships is never read: its custom checks "
        "would run in this process)",
    )
    parser.set_defaults(rubric_lab=lab, rubric_trusts_cwd_only=cwd_only)


def resolve_rubric(args: argparse.Namespace) -> None:
    """Set ``args.rubric`` where the command line left it out (``add_rubric_option``)."""
    if "rubric_lab" in vars(args) and args.rubric is None:
        folder = args.rubric_lab(args)
        own = not args.rubric_trusts_cwd_only or folder.resolve() == Path.cwd().resolve()
        args.rubric = lab_rubric(folder, own=own)


def _custom_checks(rubric: Path) -> bool:
    """Whether a rubric names code of its own (a check's or a stretch goal's
    ``module:function``), read as TOML only."""
    try:
        document = tomllib.loads(rubric.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False  # loading it says what is wrong
    criteria = document.get("criterion", [])
    goals = document.get("stretch", [])  # [[stretch]]: its evidence is imported too
    return bool(goals) or (
        isinstance(criteria, list)
        and any(isinstance(c, dict) and ":" in str(c.get("check", "")) for c in criteria)
    )


def lab_rubric(folder: Path, *, own: bool = True) -> Path:
    """The rubric of the lab at ``folder``: the file its manifest names, else the kit's.
    ``own``: the folder is the one the command runs in, or the command runs the lab's code
    anyway (record, run); else a named rubric with custom checks is refused, since loading
    it imports them here (``check`` on someone else's folder).

    A lab whose recordings are all for cases the kit's rubric does not have, and which
    names no rubric, is refused with the fix: grading it on the kit's refund lab would
    lose every point without a word about why."""
    try:
        manifest = load_manifest(folder)
    except ManifestError:  # no lab here, or one the command itself will say is broken
        return KIT_RUBRIC
    pyproject = folder / "pyproject.toml"
    if manifest.rubric:
        named = folder / manifest.rubric
        if not named.is_file():
            raise UsageError(
                f"{pyproject}: rubric = {manifest.rubric!r} names no file: fix "
                "the path (relative to pyproject.toml), or pass --rubric FILE"
            )
        if not own and _custom_checks(named):
            raise UsageError(
                f"{pyproject} names the rubric {named}, whose custom checks or stretch goals "
                "would run in this process: check a lab from its own folder (cd there), or "
                "pass --rubric with the rubric you trust"
            )
        return named
    recorded = {
        path.name.partition(".")[0]
        for name in (manifest.cassettes, manifest.fixtures)
        for path in sorted((folder / name).glob("*.json"))[:256]
        if ".previous." not in path.name
    }
    kit = {case.id for case in load_cases(KIT_RUBRIC)}
    if recorded and not recorded & kit:
        shown = ", ".join(sorted(recorded)[:6])
        raise UsageError(
            f"{pyproject} names no rubric, and its recordings ({shown}) are for cases the "
            f"kit's own rubric does not have: name the lab's rubric in [tool.gradekit] "
            f'(rubric = "rubric/lab.toml"), or pass --rubric FILE'
        )
    return KIT_RUBRIC


def add_wall_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--wall",
        "--isolation",
        dest="wall",
        choices=wall_requests(),
        default="auto",
        help="the wall each child runs behind; auto: bubblewrap namespaces "
        "when they work here, else the process wall (default); namespaces: "
        "refuse to grade without them; process: the process wall only "
        "(--isolation: the same flag's earlier name)",
    )
    parser.add_argument(
        "--allow-host-root",
        action="store_true",
        help="as root, run submission code as root on the host where uid 65534 "
        "cannot run it (refused without this flag, saying why)",
    )


def add_provider_options(parser: argparse.ArgumentParser) -> None:
    """The live provider's flags, as ``record`` and ``incident record`` take them."""
    parser.add_argument(
        "--provider",
        help="openai, anthropic, ollama, llamacpp, "
        "openai-compatible, or package.module:function returning any "
        "Provider (default: $GRADEKIT_PROVIDER)",
    )
    parser.add_argument("--model", help="model name (default: $GRADEKIT_MODEL)")
    parser.add_argument("--base-url", help="API base URL (default: $GRADEKIT_BASE_URL)")
    parser.add_argument(
        "--api-key",
        help="API key (default: $GRADEKIT_API_KEY or the "
        "vendor's variable); never written anywhere",
    )
    parser.add_argument("--label", help="provider label for people (default: adapter:model)")
    parser.add_argument(
        "--max-tokens",
        type=int,
        help="cap each answer (default: $GRADEKIT_MAX_TOKENS, or 256 for llamacpp)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="how long one answer "
        "may take (default: $GRADEKIT_TIMEOUT, or 60; 600 for llamacpp and "
        "ollama)",
    )


def live_provider(args: argparse.Namespace, root: Path, say: Callable[[str], None]) -> Provider:
    """``--provider package.module:function``'s provider (imported from ``root``), else the
    live adapter the flags and the environment configure, telling ``say`` of each retry."""
    if args.provider and ":" in args.provider:
        factory = load_spec(args.provider, folder=root, where="--provider", error=UsageError)
        if not callable(factory):
            raise UsageError(
                f"--provider {args.provider} must name a function that returns a Provider"
            )
        provider = factory()
        if not isinstance(provider, Provider):
            raise UsageError(
                f"--provider {args.provider} returned {type(provider).__name__}, "
                "which has no `name` and `complete(prompt)`: return a Provider"
            )
        return provider
    from gradekit import live_from_env  # httpx loads only for the command that needs it

    live = live_from_env(
        provider=args.provider,
        model=args.model,
        base_url=args.base_url,
        api_key=args.api_key,
        label=args.label,
        max_tokens=args.max_tokens,
        timeout=args.timeout,
    )
    live.on_retry = lambda line: say(f"    retry: {line}")
    return live


def add_expectation_options(parser: argparse.ArgumentParser, base: str) -> None:
    """The flags that give an expectation, laid over ``base`` (what they change, in words)."""
    group = parser.add_argument_group(
        "what a run must come to",
        f"laid over {base}: a value given replaces it, facts, actions and calls are added",
    )
    group.add_argument(
        "--goal",
        default="",
        metavar="TEXT",
        help="the business goal: what the run is for (required: without one it cannot pass)",
    )
    group.add_argument(
        "--outcome",
        choices=OUTCOMES,
        default="",
        help="answer: run() returns a str; raise: it raises (required when the base gives none)",
    )
    group.add_argument(
        "--decision",
        default="",
        metavar="FACT",
        help="the expected decision: a fact the answer must state",
    )
    group.add_argument(
        "--mention", action="append", default=[], metavar="FACT", help="a fact the answer must hold"
    )
    group.add_argument(
        "--never-mention",
        action="append",
        default=[],
        metavar="FACT",
        help="a fact the answer must not hold",
    )
    group.add_argument(
        "--missing",
        action="append",
        default=[],
        metavar="FACT",
        help="information the answer must name as missing",
    )
    group.add_argument(
        "--negation",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the answer must state a negation (no, not, cannot, ...)",
    )
    group.add_argument(
        "--intent",
        default="",
        metavar="TEXT",
        help="the intent the task expresses: kept and shown, never judged",
    )
    group.add_argument(
        "--forbid",
        action="append",
        default=[],
        metavar="TOOL",
        help="an action the run must never call",
    )
    group.add_argument(
        "--reply-template",
        default="",
        metavar="TEXT",
        help="the form the "
        "answer must follow: fixed words around {name} placeholders, e.g. "
        '"Decision: {decision}. Reason: {reason}."',
    )
    group.add_argument(
        "--require",
        action="append",
        default=[],
        metavar="'TOOL [ARGS]'",
        help="a call the run must make and the parent serve (the state it must "
        "leave), optionally with arguments it must carry, as a JSON object: "
        '\'create_ticket {"priority": "high"}\'',
    )
    group.add_argument(
        "--cite",
        action="append",
        default=[],
        metavar="'TOOL: FACT'",
        help="a fact the answer must state as a served result of TOOL in the "
        "same run returned it, e.g. 'web_search: 30 days'",
    )


def told_expectation(args: argparse.Namespace) -> Told:
    """The expectation ``add_expectation_options``' flags gave."""
    return Told(
        outcome=args.outcome,
        mentions=tuple(args.mention),
        never_mentions=tuple(args.never_mention),
        forbid=tuple(args.forbid),
        goal=args.goal,
        decision=args.decision,
        intent=args.intent,
        missing=tuple(args.missing),
        negation=args.negation,
        reply_template=args.reply_template,
        requires=tuple(args.require),
        cites=tuple(args.cite),
    )
