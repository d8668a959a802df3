"""Shared fixtures: the walls a sandboxed child can run behind, and the fast loop's promise.

``make test-fast`` runs every test not marked ``slow``; a test that starts a sandboxed
child grades a real submission, so it must carry the mark, and fails here, saying so,
when it does not.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from grader.sandbox import Wall, wall_named
from grader.sandbox._channel import Child
from grader.sandbox._isolation import INSTALL_HINT, bubblewrap


def require_namespaces() -> None:
    """Skip without a working bubblewrap, except in CI, which installs it: there, fail."""
    path, why = bubblewrap()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must test the namespaces wall, but {why}: {INSTALL_HINT}")
        pytest.skip(f"{why}: {INSTALL_HINT} to run this test")


@pytest.fixture(params=["process", "namespaces"])
def isolation(request: pytest.FixtureRequest) -> Wall:
    """Each wall in turn; the namespaces one needs bubblewrap."""
    if request.param == "namespaces":
        require_namespaces()
    return wall_named(request.param)


@pytest.fixture(autouse=True)
def _fast_tests_start_no_child(request: pytest.FixtureRequest,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """An unmarked test that starts a sandboxed child fails: it belongs to the slow set."""
    if request.node.get_closest_marker("slow") is not None:
        return

    def refuse(*args: object, **kwargs: object) -> None:
        pytest.fail(f"{request.node.nodeid} starts a sandboxed child, so it grades a real "
                    "submission: mark it @pytest.mark.slow (make test-fast leaves those out)",
                    pytrace=False)

    monkeypatch.setattr(Child, "__init__", refuse)


@pytest.fixture
def kit_lab_restored() -> Iterator[None]:
    """The kit's ``lab`` back in ``sys.modules`` after a test that imported a submission's own
    ``lab`` in process (``gradekit run``, ``record``): later tests import the kit's."""
    kept = {name: module for name, module in sys.modules.items()
            if name == "lab" or name.startswith("lab.")}
    yield
    for name in [n for n in sys.modules if n == "lab" or n.startswith("lab.")]:
        del sys.modules[name]
    sys.modules.update(kept)
