"""vcrpy, the HTTP record/replay library, measured on the same 1 KB prompts.

Cassettes are recorded once through httpx against a real loopback server,
then played back with ``record_mode="none"``. The recording overhead is
measured separately with ``httpx.MockTransport`` as the live side, so no
network time has to be subtracted.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

from bench._data import prompt, prompts
from bench._loopback import ANSWER_BODY, serve_answers
from bench._plan import Plan
from bench._table import NO_TARGET, PeerRows, Row, fmt_size, timed
from bench._targets import LOAD_TARGET, RECORD_TARGET, REPLAY_TARGET
from bench._timing import Reps, Stats, per_call, repeated

__all__ = ["measure"]

# vcrpy's default matchers ignore the body; the prompt is the body, so it must be matched.
_MATCH_ON = ("method", "uri", "body")
_MOCK_URL = "http://mock.invalid/v1/complete"


def measure(plan: Plan, folder: Path) -> PeerRows:
    """Every vcrpy row, or 'not installed' rows when it cannot be imported."""
    try:
        vcr = importlib.import_module("vcr")
    except ImportError as exc:
        return PeerRows.not_installed("vcrpy", str(exc))
    name = f"vcrpy {importlib.metadata.version('vcrpy')}"
    rows = PeerRows(notes=[_NOTE.format(name=name, match_on=", ".join(_MATCH_ON))])
    _measure_loopback(vcr, name, plan, folder, rows)
    floor = _mock_floor(plan)
    rows.replay.append(timed(_REFERENCE, "—", floor, NO_TARGET))
    rows.record.append(_record_row(vcr, name, folder, plan, floor))
    return rows


_REFERENCE = "reference: httpx.Client.post via MockTransport, no vcrpy"
_NOTE = (
    "{name}: matched on {match_on}; playback and recording go through httpx, whose own cost is "
    "the reference row. vcrpy keeps new recordings in memory until the cassette closes, and "
    "checks each new request against every recorded one."
)


def _measure_loopback(vcr: ModuleType, name: str, plan: Plan, folder: Path, rows: PeerRows) -> None:
    """Record each size once from the loopback server, then play it back (and load it)."""
    with httpx.Client() as client, serve_answers() as url:
        for size in plan.vcr_sizes:
            path, setup_ns = _record_loopback(vcr, client, url, folder, size)
            rows.peers.append(_setup_row(name, size, setup_ns))
            stats = _playback(vcr, client, url, path, size, plan.vcr_samples)
            rows.replay.append(timed(f"{name} playback, hit", fmt_size(size), stats, REPLAY_TARGET))
            if size == plan.peer_load_size:
                rows.load.append(_load_row(vcr, name, path, size, plan))


def _cassette(vcr: ModuleType, path: Path, **options: Any) -> Any:
    """``use_cassette`` with the prompt-matching configuration."""
    return vcr.VCR(match_on=list(_MATCH_ON)).use_cassette(str(path), **options)


def _record_loopback(
    vcr: ModuleType, client: httpx.Client, url: str, folder: Path, size: int
) -> tuple[Path, int]:
    """Record ``size`` distinct prompts from the loopback server; return the file and time."""
    path = folder / f"vcr-{size}.yaml"
    began = time.perf_counter_ns()
    with _cassette(vcr, path, record_mode="once"):
        for text in prompts(size):
            client.post(url, content=text).raise_for_status()
    return path, time.perf_counter_ns() - began


def _setup_row(name: str, size: int, setup_ns: int) -> Row:
    """The one-time recording, for the peers table."""
    operation = f"{name}: record {fmt_size(size)} loopback requests (one-time setup)"
    return timed(operation, fmt_size(size), Stats(setup_ns, setup_ns, 1))


def _playback(
    vcr: ModuleType, client: httpx.Client, url: str, path: Path, size: int, samples: int
) -> Stats:
    """Per-call playback of the middle entry; fewer calls per batch for bigger cassettes."""
    text = prompt(size // 2)
    reps = Reps(samples=samples, inner=max(1, 100 // size), warmup=1)
    with _cassette(vcr, path, record_mode="none", allow_playback_repeats=True):
        if client.post(url, content=text).content != ANSWER_BODY:
            raise RuntimeError(f"{path}: vcrpy played back the wrong answer")
        return per_call(lambda t: client.post(url, content=t), [text] * reps.calls, reps)


def _load_row(vcr: ModuleType, name: str, path: Path, size: int, plan: Plan) -> Row:
    """Entering ``use_cassette``: read and deserialize the YAML, patch httpx."""

    def enter_and_leave() -> None:
        with _cassette(vcr, path, record_mode="none"):
            pass  # leaving an unchanged cassette writes nothing

    stats = repeated(enter_and_leave, plan.load_repeats)
    operation = f"{name} use_cassette enter + exit (YAML load, patching)"
    return timed(operation, fmt_size(size), stats, LOAD_TARGET)


def _mock_client() -> httpx.Client:
    """A client whose 'server' is a function: no sockets, so only client-side work is timed."""
    return httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200, json={})))


def _mock_floor(plan: Plan) -> Stats:
    """httpx's own cost per call, no vcrpy: what vcrpy's rows are built on."""
    reps = Reps(samples=plan.vcr_samples * 5, inner=20)
    texts = prompts(reps.calls, tag="floor")
    with _mock_client() as client:
        return per_call(lambda t: client.post(_MOCK_URL, content=t), texts, reps)


def _record_row(vcr: ModuleType, name: str, folder: Path, plan: Plan, floor: Stats) -> Row:
    """vcrpy recording new prompts into a fresh cassette, MockTransport as the live side."""
    reps = Reps(samples=plan.vcr_record_calls, inner=1, warmup=0)
    texts = prompts(reps.calls, tag="vcr-new")
    cassette = _cassette(vcr, folder / "vcr-recorded.yaml", record_mode="once")
    with _mock_client() as client, cassette:
        gross = per_call(lambda t: client.post(_MOCK_URL, content=t), texts, reps)
    operation = f"{name} record overhead per new request (minus the httpx reference)"
    return timed(operation, fmt_size(reps.calls), gross.minus(floor.median_ns), RECORD_TARGET)
