"""The HTTP benchmark's transports serve what the live server sent: correctness only, no clock.

bench/_http.py times gradekit's CassetteTransport beside vcrpy and an httpx.MockTransport floor;
its numbers mean something only if all three hand the SDK and bare httpx the same completion.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from openai.types.chat import ChatCompletion

from bench._chat import chat, serve_completions
from bench._http import FLOOR, GRADEKIT, ROUTES, VCRPY, Recorded, Route, record, transports

_ASKED = [chat(index) for index in range(3)]
_VCR: ModuleType | None = (
    importlib.import_module("vcr") if importlib.util.find_spec("vcr") is not None else None
)

Bodies = dict[str, list[Any]]  # route name -> the body of each of _ASKED


def _body(result: object) -> Any:
    """The completion as JSON values, whichever route asked."""
    if isinstance(result, ChatCompletion):
        return result.model_dump(mode="json")
    assert isinstance(result, httpx.Response)
    return result.raise_for_status().json()


def _bodies(route: Route, client: httpx.Client, base_url: str) -> list[Any]:
    ask = route.ask(client, base_url)
    return [_body(ask(request)) for request in _ASKED]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Recorded, Bodies]:
    """Three requests recorded by both tools, and what the live server answered each route."""
    folder: Path = tmp_path_factory.mktemp("bench-http")
    with serve_completions() as base_url:
        cassettes = record(folder, len(_ASKED), base_url, _VCR)
        with httpx.Client() as client:
            live = {route.name: _bodies(route, client, base_url) for route in ROUTES}
    return cassettes, live  # the server is stopped: from here on only cassettes can answer


def _serve(recorded: Recorded, name: str, route: Route) -> list[Any]:
    found = {transport.name: transport for transport in transports(recorded, _VCR)}
    if name not in found:
        pytest.skip(f"{name} is not installed: `make bench` installs it")
    with found[name].connect() as client:
        return _bodies(route, client, recorded.base_url)


@pytest.mark.parametrize("route", ROUTES, ids=[route.name for route in ROUTES])
@pytest.mark.parametrize("name", [GRADEKIT, VCRPY])
def test_a_replay_serves_each_request_its_live_body(
    recorded: tuple[Recorded, Bodies], name: str, route: Route
) -> None:
    cassettes, live = recorded
    served = _serve(cassettes, name, route)
    assert served == live[route.name]
    assert len({str(body) for body in served}) == len(_ASKED)  # three distinct answers


@pytest.mark.parametrize("route", ROUTES, ids=[route.name for route in ROUTES])
def test_the_floor_serves_the_live_body_of_the_request_it_stands_for(
    recorded: tuple[Recorded, Bodies], route: Route
) -> None:
    cassettes, live = recorded
    assert _serve(cassettes, FLOOR, route) == [live[route.name][0]] * len(_ASKED)
