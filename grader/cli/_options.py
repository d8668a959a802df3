"""Options more than one command group shares, each defined once."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from gradekit import Provider, UsageError
from grader._expect import OUTCOMES, Told
from grader._specs import load_spec
from grader.rubric import KIT_RUBRIC
from grader.sandbox import isolation_requests

__all__ = ["add_isolation_option", "add_provider_options", "add_rubric_option", "live_provider"]


def add_rubric_option(parser: argparse.ArgumentParser) -> None:
    """``--rubric``, resolved the same way by record, run, check and grade: the file given,
    else the kit's rubric. Never one found inside a submission: what a student records
    and runs is what the grader grades, and a rubric's custom checks run in the grader."""
    parser.add_argument("--rubric", type=Path, default=KIT_RUBRIC,
                        help="the rubric (default: the kit's rubric/bootcamp.toml; a rubric "
                        "inside a submission is never read on its own: its custom checks "
                        "would run in this process)")


def add_isolation_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--isolation", choices=isolation_requests(), default="auto",
                        help="auto: bubblewrap namespaces when they work here, else the process "
                        "guard (default); namespaces: refuse to grade without them; process: "
                        "the guard only")
    parser.add_argument("--allow-host-root", action="store_true",
                        help="as root, run submission code as root on the host where uid 65534 "
                        "cannot run it (refused without this flag, saying why)")


def add_provider_options(parser: argparse.ArgumentParser) -> None:
    """The live provider's flags, as ``record`` and ``incident record`` take them."""
    parser.add_argument("--provider", help="openai, anthropic, ollama, llamacpp, "
                        "openai-compatible, or package.module:function returning any "
                        "Provider (default: $GRADEKIT_PROVIDER)")
    parser.add_argument("--model", help="model name (default: $GRADEKIT_MODEL)")
    parser.add_argument("--base-url", help="API base URL (default: $GRADEKIT_BASE_URL)")
    parser.add_argument("--api-key", help="API key (default: $GRADEKIT_API_KEY or the "
                        "vendor's variable); never written anywhere")
    parser.add_argument("--label", help="provider label for people (default: adapter:model)")
    parser.add_argument("--max-tokens", type=int, help="cap each answer (default: "
                        "$GRADEKIT_MAX_TOKENS, or 256 for llamacpp)")
    parser.add_argument("--timeout", type=float, metavar="SECONDS", help="how long one answer "
                        "may take (default: $GRADEKIT_TIMEOUT, or 60; 600 for llamacpp and "
                        "ollama)")


def live_provider(args: argparse.Namespace, root: Path, say: Callable[[str], None]) -> Provider:
    """``--provider package.module:function``'s provider (imported from ``root``), else the
    live adapter the flags and the environment configure, telling ``say`` of each retry."""
    if args.provider and ":" in args.provider:
        factory = load_spec(args.provider, folder=root, where="--provider", error=UsageError)
        if not callable(factory):
            raise UsageError(f"--provider {args.provider} must name a function that returns "
                             "a Provider")
        provider = factory()
        if not isinstance(provider, Provider):
            raise UsageError(f"--provider {args.provider} returned {type(provider).__name__}, "
                             "which has no `name` and `complete(prompt)`: return a Provider")
        return provider
    from gradekit import live_from_env  # httpx loads only for the command that needs it

    live = live_from_env(provider=args.provider, model=args.model, base_url=args.base_url,
                         api_key=args.api_key, label=args.label, max_tokens=args.max_tokens,
                         timeout=args.timeout)
    live.on_retry = lambda line: say(f"    retry: {line}")
    return live


def add_expectation_options(parser: argparse.ArgumentParser, base: str) -> None:
    """The flags that give an expectation, laid over ``base`` (what they change, in words)."""
    group = parser.add_argument_group("what a run must come to", f"laid over {base}: a value "
                                      "given replaces it, facts and actions are added")
    group.add_argument("--goal", default="", metavar="TEXT", help="the business goal: what "
                       "the run is for (required: without one it cannot pass)")
    group.add_argument("--outcome", choices=OUTCOMES, default="", help="answer: run() returns "
                       "a str; raise: it raises (required when the base gives none)")
    group.add_argument("--decision", default="", metavar="FACT", help="the expected "
                       "decision: a fact the answer must state")
    group.add_argument("--mention", action="append", default=[], metavar="FACT",
                       help="a fact the answer must hold")
    group.add_argument("--never-mention", action="append", default=[], metavar="FACT",
                       help="a fact the answer must not hold")
    group.add_argument("--missing", action="append", default=[], metavar="FACT",
                       help="information the answer must name as missing")
    group.add_argument("--negation", action=argparse.BooleanOptionalAction, default=None,
                       help="the answer must state a negation (no, not, cannot, ...)")
    group.add_argument("--intent", default="", metavar="TEXT", help="the intent the task "
                       "expresses: kept and shown, never judged")
    group.add_argument("--forbid", action="append", default=[], metavar="TOOL",
                       help="an action the run must never call")


def told_expectation(args: argparse.Namespace) -> Told:
    """The expectation ``add_expectation_options``' flags gave."""
    return Told(outcome=args.outcome, mentions=tuple(args.mention),
                never_mentions=tuple(args.never_mention), forbid=tuple(args.forbid),
                goal=args.goal, decision=args.decision, intent=args.intent,
                missing=tuple(args.missing), negation=args.negation)
