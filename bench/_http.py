"""HTTP cassettes: N recorded chat completions replayed through the openai SDK and bare httpx.

Three transports answer the same requests, side by side in one run:

- the floor, ``httpx.MockTransport`` returning one constant completion: no cassette at all;
- gradekit's ``CassetteTransport(path, mode="none")``;
- vcrpy matching on the body (the prompt is the body), ``record_mode="none"``.

Both cassettes are recorded for real, through the SDK with ``mode="once"`` and
``record_mode="once"``, from a chat-completions server on 127.0.0.1 started here. The server is
stopped before anything is replayed: a request that leaks past a cassette fails loudly instead
of being timed. A cassette serves each recording once, so every pass opens a fresh transport,
asks one untimed warm-up request (its first request pays any lazy load), then asks each of the
N requests once, in a fixed shuffled order, timing each call alone. Every answer is checked
after its clock stopped. gradekit and the floor take turns request by request, so a change in
the machine's load falls on both alike; vcrpy, a hundred times slower, is timed on requests
spread evenly over its cassette (its cost grows with the position of the recording it finds).
"""

from __future__ import annotations

import gc
import importlib
import importlib.metadata
import math
import random
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import openai
from openai.types.chat import ChatCompletion

from bench._chat import Chat, answer_text, chat, completion, serve_completions
from bench._plan import Plan
from bench._table import Row, Table, fmt_size, note_row, timed
from bench._timing import Stats, summarize
from gradekit import CassetteTransport

__all__ = [
    "FLOOR",
    "GRADEKIT",
    "ROUTES",
    "VCRPY",
    "Recorded",
    "Route",
    "Transport",
    "measure",
    "record",
    "transports",
]

Ask = Callable[[Chat], object]

FLOOR_LIMIT = 1.5  # gradekit's median within 1.5x of the floor's, at every N
VCRPY_SPEEDUP = 50.0  # vcrpy's median at least 50x gradekit's, at N = SPEEDUP_AT
SPEEDUP_AT = 1_000
_VCR_MATCH_ON = ["method", "scheme", "host", "port", "path", "query", "body"]
# One credential-shaped variable, fixed: the secret scan is paid as in real use, and the result
# does not depend on what this machine's environment holds.
_ENV = {"GRADEKIT_API_KEY": "bench-placeholder-not-a-key"}
_SHUFFLE_SEED = 13
_WARMUP = chat(0, tag="Warm-up")


# ---- routes: how a request is asked -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Route:
    """One way of asking: a client of a transport in, a function asking one request out."""

    name: str
    ask: Callable[[httpx.Client, str], Ask]
    content: Callable[[object], str]  # the answer's text, to check what was served


def _sdk_ask(client: httpx.Client, base_url: str) -> Ask:
    # openai 3.x is typed for httpx2.Client and accepts an httpx.Client at run time (its
    # "legacy httpx" branch), which is how students pass one. max_retries=0: a miss is
    # reported at once rather than after the SDK's back-off.
    legacy: Any = client
    sdk = openai.OpenAI(api_key="x", base_url=base_url, http_client=legacy, max_retries=0)

    def ask(request: Chat) -> object:
        return sdk.chat.completions.create(
            model=request["model"], messages=request["messages"], temperature=request["temperature"]
        )

    return ask


def _sdk_content(result: object) -> str:
    assert isinstance(result, ChatCompletion)
    return result.choices[0].message.content or ""


def _bare_ask(client: httpx.Client, base_url: str) -> Ask:
    url = f"{base_url}/chat/completions"

    def ask(request: Chat) -> object:
        return client.post(url, json=request, headers={"authorization": "Bearer x"})

    return ask


def _bare_content(result: object) -> str:
    assert isinstance(result, httpx.Response)
    text: str = result.raise_for_status().json()["choices"][0]["message"]["content"]
    return text


ROUTES = (Route("SDK", _sdk_ask, _sdk_content), Route("bare httpx", _bare_ask, _bare_content))


# ---- transports: what answers ------------------------------------------------------------------

Opener = Callable[[], AbstractContextManager[httpx.Client]]


@dataclass(frozen=True, slots=True)
class Transport:
    """One contestant: a name and how to open a client on a fresh transport for one pass."""

    name: str
    connect: Opener
    answers: Callable[[Chat], str]  # what it must serve for a request


@dataclass(frozen=True, slots=True)
class Recorded:
    """The cassettes recorded for one N, the URL their requests went to, how long each took."""

    size: int
    base_url: str
    gradekit: Path
    vcrpy: Path | None  # None when vcrpy is not installed
    gradekit_ns: int
    vcrpy_ns: int


FLOOR = "floor: httpx.MockTransport"
GRADEKIT = "gradekit CassetteTransport"
VCRPY = "vcrpy, body matched"
_FLOOR_REQUEST = chat(0)
_FLOOR_BODY = completion(_FLOOR_REQUEST)


def _constant(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, content=_FLOOR_BODY, headers={"content-type": "application/json"})


@contextmanager
def _floor_client() -> Iterator[httpx.Client]:
    with httpx.Client(transport=httpx.MockTransport(_constant)) as client:
        yield client


@contextmanager
def _gradekit_client(path: Path) -> Iterator[httpx.Client]:
    with httpx.Client(transport=CassetteTransport(path, mode="none", env=_ENV)) as client:
        yield client


@contextmanager
def _vcrpy_client(vcr: ModuleType, path: Path) -> Iterator[httpx.Client]:
    # vcrpy patches httpx.HTTPTransport itself: the client keeps its default transport.
    with _vcr_cassette(vcr, path, record_mode="none"), httpx.Client() as client:
        yield client


def _vcr_cassette(vcr: ModuleType, path: Path, **options: Any) -> AbstractContextManager[Any]:
    cassette: AbstractContextManager[Any] = vcr.VCR(match_on=_VCR_MATCH_ON).use_cassette(
        str(path), **options
    )
    return cassette


def transports(recorded: Recorded, vcr: ModuleType | None) -> list[Transport]:
    """The floor, gradekit and (when installed) vcrpy over ``recorded``'s cassettes."""
    found = [
        Transport(FLOOR, _floor_client, lambda request: answer_text(_FLOOR_REQUEST)),
        Transport(GRADEKIT, lambda: _gradekit_client(recorded.gradekit), answer_text),
    ]
    if vcr is not None and recorded.vcrpy is not None:
        vcrpy_path = recorded.vcrpy
        found.append(Transport(VCRPY, lambda: _vcrpy_client(vcr, vcrpy_path), answer_text))
    return found


# ---- recording --------------------------------------------------------------------------------


def record(folder: Path, size: int, base_url: str, vcr: ModuleType | None) -> Recorded:
    """Record the warm-up and ``size`` requests through the SDK, once per tool, from the server."""
    asked = [_WARMUP, *(chat(index) for index in range(size))]
    gradekit = folder / f"http-{size}.http.json"
    began = time.perf_counter_ns()
    transport = CassetteTransport(gradekit, mode="once", env=_ENV, case=f"bench-{size}")
    with httpx.Client(transport=transport) as client:  # closing the client folds the cassette
        _ask_all(_sdk_ask(client, base_url), asked)
    gradekit_ns = time.perf_counter_ns() - began
    if vcr is None:
        return Recorded(size, base_url, gradekit, None, gradekit_ns, 0)
    vcrpy = folder / f"http-{size}.vcr.yaml"
    began = time.perf_counter_ns()
    with _vcr_cassette(vcr, vcrpy, record_mode="once"), httpx.Client() as client:
        _ask_all(_sdk_ask(client, base_url), asked)
    return Recorded(size, base_url, gradekit, vcrpy, gradekit_ns, time.perf_counter_ns() - began)


def _ask_all(ask: Ask, requests: Sequence[Chat]) -> None:
    for request in requests:
        if _sdk_content(ask(request)) != answer_text(request):
            raise RuntimeError(f"recording: the server's answer to {answer_text(request)} is off")


# ---- timing -----------------------------------------------------------------------------------


def _pass(
    contestants: Sequence[Transport], route: Route, base_url: str, asked: Sequence[Chat]
) -> dict[str, list[float]]:
    """Open a fresh client on each transport and ask each the warm-up; then ask each of
    ``asked`` of every transport in turn (who goes first rotates), timing each call alone."""
    gc.collect()  # every pass starts from the same heap, not the last one's garbage
    times: dict[str, list[float]] = {transport.name: [] for transport in contestants}
    with ExitStack() as stack:
        asks = [
            route.ask(stack.enter_context(transport.connect()), base_url)
            for transport in contestants
        ]
        for ask in asks:
            ask(_WARMUP)
        for turn, request in enumerate(asked):
            for index in range(len(asks)):
                who = (turn + index) % len(asks)
                times[contestants[who].name].append(
                    _timed(contestants[who], route, asks[who], request)
                )
    return times


def _timed(transport: Transport, route: Route, ask: Ask, request: Chat) -> float:
    """One call's nanoseconds; what it served is checked once the clock has stopped."""
    began = time.perf_counter_ns()
    result = ask(request)
    elapsed = float(time.perf_counter_ns() - began)
    if route.content(result) != transport.answers(request):
        raise RuntimeError(
            f"{transport.name} via {route.name} served the wrong answer "
            f"to {answer_text(request)}: {route.content(result)!r}"
        )
    return elapsed


def _orders(size: int, passes: int) -> list[list[Chat]]:
    """``passes`` passes over all ``size`` requests, each in its own fixed shuffled order."""
    requests = [chat(index) for index in range(size)]
    shuffler = random.Random(_SHUFFLE_SEED)
    return [shuffler.sample(requests, len(requests)) for _ in range(passes)]


def _spread(size: int, calls: int) -> list[list[Chat]]:
    """About ``calls`` requests over passes, each pass evenly spread over the cassette."""
    per_pass = min(size, calls)
    picked = [chat(position * size // per_pass) for position in range(per_pass)]
    random.Random(_SHUFFLE_SEED).shuffle(picked)
    return [picked] * max(1, calls // per_pass)


@dataclass(frozen=True, slots=True)
class _Sizing:
    passes: int  # passes over every request, for gradekit and the floor
    vcrpy_calls: int  # timed vcrpy calls in all


def _sizing(plan: Plan, size: int) -> _Sizing:
    return _Sizing(
        max(plan.http_min_passes, math.ceil(plan.http_samples / size)), plan.http_vcrpy_calls
    )


def _times(
    recorded: Recorded, route: Route, found: Sequence[Transport], sizing: _Sizing
) -> dict[str, Stats]:
    """Per-request stats of every transport over one route.

    gradekit and the floor take turns request by request. vcrpy has its own passes: it
    patches httpx's transports, MockTransport among them, for as long as its cassette is open.
    """
    samples: dict[str, list[float]] = {transport.name: [] for transport in found}
    turns = [transport for transport in found if transport.name != VCRPY]
    for asked in _orders(recorded.size, sizing.passes):
        for name, values in _pass(turns, route, recorded.base_url, asked).items():
            samples[name] += values
    for vcrpy in (transport for transport in found if transport.name == VCRPY):
        for asked in _spread(recorded.size, sizing.vcrpy_calls):
            samples[VCRPY] += _pass([vcrpy], route, recorded.base_url, asked)[VCRPY]
    return {name: summarize(values) for name, values in samples.items()}


# ---- rows -------------------------------------------------------------------------------------


def _ratio_row(
    operation: str,
    size: str,
    top: Stats,
    bottom: Stats,
    target: tuple[str, Callable[[float], bool]] | None,
) -> Row:
    ratio = top.median_ns / bottom.median_ns
    label, meets = target if target is not None else ("—", None)
    verdict = "—" if meets is None else ("meets" if meets(ratio) else "misses")
    return Row(
        operation, size, f"{ratio:.2f}x", f"{top.p90_ns / bottom.p90_ns:.2f}x", label, verdict
    )


def _group(route: Route, size: int, stats: Mapping[str, Stats], vcr_name: str) -> list[Row]:
    """One route at one N: the three transports, then the two ratios of their medians."""
    label = f"N = {fmt_size(size)}"
    names = {FLOOR: FLOOR, GRADEKIT: GRADEKIT, VCRPY: f"{vcr_name}, body matched"}
    rows = [timed(f"{route.name}: {names[name]}", label, value) for name, value in stats.items()]
    floor, gradekit = stats[FLOOR], stats[GRADEKIT]
    within = (f"≤ {FLOOR_LIMIT:g}x", lambda ratio: ratio <= FLOOR_LIMIT)
    rows.append(_ratio_row(f"{route.name}: gradekit / floor", label, gradekit, floor, within))
    if VCRPY in stats:
        faster = (f"≥ {VCRPY_SPEEDUP:g}x", lambda ratio: ratio >= VCRPY_SPEEDUP)
        rows.append(
            _ratio_row(
                f"{route.name}: vcrpy / gradekit",
                label,
                stats[VCRPY],
                gradekit,
                faster if size == SPEEDUP_AT else None,
            )
        )
    return rows


def _setup_rows(recorded: Recorded, vcr_name: str) -> list[Row]:
    size, n = fmt_size(recorded.size + 1), recorded.size + 1
    rows = [
        _once(
            f"gradekit: record {n} requests, SDK + live loopback (mode='once')",
            size,
            recorded.gradekit_ns,
        )
    ]
    if recorded.vcrpy is not None:
        rows.append(
            _once(
                f"{vcr_name}: record {n} requests, SDK + live loopback (record_mode='once')",
                size,
                recorded.vcrpy_ns,
            )
        )
    return rows


def _once(operation: str, size: str, ns: int) -> Row:
    return timed(operation, size, Stats(ns, ns, 1))


def _load_rows(
    recorded: Recorded, found: Sequence[Transport], repeats: int, vcr_name: str
) -> list[Row]:
    """Opening each cassette and serving its first request, then closing it, at the largest N."""
    rows: list[Row] = []
    size = fmt_size(recorded.size)
    for transport in found:
        if transport.name == FLOOR:
            continue
        opened, closed = _open_close(transport, recorded.base_url, repeats)
        name = GRADEKIT + "(path)" if transport.name == GRADEKIT else vcr_name + " use_cassette"
        rows.append(timed(f"{name}: open + first replay (cassette load)", size, opened))
        rows.append(timed(f"{name}: close after replay", size, closed))
    return rows


def _open_close(transport: Transport, base_url: str, repeats: int) -> tuple[Stats, Stats]:
    opens: list[float] = []
    closes: list[float] = []
    for _ in range(repeats):
        gc.collect()
        began = time.perf_counter_ns()
        with transport.connect() as client:
            _bare_ask(client, base_url)(_WARMUP)
            served = time.perf_counter_ns()
        closes.append(float(time.perf_counter_ns() - served))
        opens.append(float(served - began))
    return summarize(opens), summarize(closes)


# ---- the section ------------------------------------------------------------------------------


def measure(plan: Plan, folder: Path) -> Table:
    """Record the cassettes of every N, stop the server, time each route and transport."""
    vcr = _import_vcr()
    vcr_name = f"vcrpy {importlib.metadata.version('vcrpy')}" if vcr is not None else "vcrpy"
    with serve_completions() as base_url:
        recorded = []
        for size in plan.http_sizes:
            _progress(f"HTTP: record {fmt_size(size)} chat completions, gradekit then vcrpy")
            recorded.append(record(folder, size, base_url, vcr))
    rows: list[Row] = [] if vcr is not None else [note_row("vcrpy: not installed")]
    for item in recorded:
        found = transports(item, vcr)
        sizing = _sizing(plan, item.size)
        for route in ROUTES:
            _progress(f"HTTP: replay N = {fmt_size(item.size)} via {route.name}")
            stats = _times(item, route, found, sizing)
            rows += _group(route, item.size, stats, vcr_name)
    rows += _setup_rows(recorded[-1], vcr_name)
    rows += _load_rows(recorded[-1], transports(recorded[-1], vcr), plan.load_repeats, vcr_name)
    return Table(_TITLE, rows, _notes(plan, vcr_name))


_TITLE = "9. HTTP cassettes: a recorded chat completion replayed, per request"


def _notes(plan: Plan, vcr_name: str) -> list[str]:
    at = f"N = {fmt_size(SPEEDUP_AT)}"
    unchecked = "" if SPEEDUP_AT in plan.http_sizes else f" (this run stops short of {at})"
    return [
        f"Targets: gradekit within {FLOOR_LIMIT:g}x of the floor at every N; at least "
        f"{VCRPY_SPEEDUP:g}x faster than vcrpy at {at}{unchecked}. The ratio rows divide the "
        "medians (median column) and the p90s (p90 column).",
        "Each request is timed alone; gradekit and the floor ask every request of the cassette "
        f"in each pass (at least {plan.http_min_passes} passes, about {plan.http_samples} "
        f"requests per row); {vcr_name} is timed on about {plan.http_vcrpy_calls} requests "
        "spread evenly over its cassette.",
        "SDK: openai.OpenAI(http_client=httpx.Client(transport=...)).chat.completions.create; "
        "bare httpx: httpx.Client.post of the same JSON. Requests: 640 bytes of JSON (a system "
        "prompt and a question); answers: a 480-byte completion.",
        f"{vcr_name} matches on {', '.join(_VCR_MATCH_ON)} and patches httpx.HTTPTransport; "
        "gradekit's cassette is the one its own mode='once' wrote, read by a fresh "
        "CassetteTransport in every pass.",
    ]


def _progress(what: str) -> None:
    """Progress goes to stderr so that stdout is only the tables."""
    print(f"bench: {what}...", file=sys.stderr, flush=True)


def _import_vcr() -> ModuleType | None:
    try:
        return importlib.import_module("vcr")
    except ImportError:
        return None
