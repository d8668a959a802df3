"""How big and how many: the full run and the quick (smoke) run."""

from __future__ import annotations

from dataclasses import dataclass

from bench._timing import Reps

__all__ = ["FULL", "QUICK", "Plan"]


@dataclass(frozen=True, slots=True)
class Plan:
    """Sizes and repetitions for one run."""

    name: str
    cassette_sizes: tuple[int, ...]  # entries in the cassettes Replay loads
    fast: Reps  # calls of a few microseconds: prompt_key, Replay hits
    record: Reps  # recording calls; also how many crossings the chronicle span holds
    load_budget_s: float  # a cassette load still running after this is stopped and reported
    load_repeats: int  # loads of a peer's cassette (gradekit loads run once, in a child)
    vcr_sizes: tuple[int, ...]  # vcrpy cassettes, recorded through a loopback server
    vcr_samples: int  # playback samples per vcrpy size (each call scans the cassette)
    vcr_record_calls: int  # new requests vcrpy records through MockTransport
    peer_load_size: int  # entries in the cassette every tool loads for the shared load row
    http_sizes: tuple[int, ...]  # distinct chat completions in each HTTP cassette
    http_samples: int  # timed requests per HTTP row, gradekit and floor (passes over N)
    http_min_passes: int  # passes over every request, however large N is
    http_vcrpy_calls: int  # timed vcrpy requests per HTTP row (each scans its cassette)


FULL = Plan(
    name="full",
    cassette_sizes=(10, 1_000, 100_000),
    fast=Reps(samples=200, inner=200),
    record=Reps(samples=100, inner=50),
    load_budget_s=15.0,
    load_repeats=5,
    vcr_sizes=(10, 1_000),
    vcr_samples=20,
    vcr_record_calls=200,
    peer_load_size=1_000,
    http_sizes=(10, 100, 1_000),
    http_samples=3_000,
    http_min_passes=3,
    http_vcrpy_calls=100,
)

QUICK = Plan(
    name="quick",
    cassette_sizes=(10, 1_000, 10_000),
    fast=Reps(samples=50, inner=100),
    record=Reps(samples=30, inner=20),
    load_budget_s=3.0,
    load_repeats=2,
    vcr_sizes=(10, 100),
    vcr_samples=8,
    vcr_record_calls=50,
    peer_load_size=100,
    http_sizes=(10, 100),
    http_samples=300,
    http_min_passes=1,
    http_vcrpy_calls=20,
)
