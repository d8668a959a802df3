"""Shared fixtures: the walls a sandboxed child can run behind, and the fast loop's promise.

``make test-fast`` runs every test not marked ``slow``; a test that starts a sandboxed
child grades a real submission, so it must carry the mark, and fails here, saying so,
when it does not.
"""

from __future__ import annotations

import functools
import os
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.batch._zygote import Zygote
from grader.sandbox import INSTALL_HINT, Child, Wall, bubblewrap, wall_named


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


def _searchable(make: Callable[..., Path]) -> Callable[..., Path]:
    """``TempPathFactory.mktemp`` (which makes every ``tmp_path`` too), its folder and the
    folders above it up to pytest's own made searchable by uid 65534 (0711: passed
    through, not listed), as the grader's own scratch folders are: a root grader refuses
    to run children as root (no ``--allow-host-root`` here), and its children, uid 65534,
    pass through a test's scratch folder to their files. Under pytest-xdist a worker's
    base is one folder deeper (``pytest-of-root/pytest-N/popen-gw0``): the folder above
    ``pytest-N``, which pytest makes 0700, is made searchable too."""

    @functools.wraps(make)
    def searchable(self: pytest.TempPathFactory, *args: Any, **kwargs: Any) -> Path:
        path = make(self, *args, **kwargs)
        base = self.getbasetemp()
        top = base.parent.parent if base.name.startswith("popen-gw") else base.parent
        for folder in (path, *path.parents):
            if not folder.stat().st_mode & stat.S_IXOTH:
                folder.chmod(folder.stat().st_mode | 0o111)
            if folder == top:
                break
        return path

    return searchable


if os.geteuid() == 0:
    pytest.TempPathFactory.mktemp = _searchable(pytest.TempPathFactory.mktemp)  # type: ignore[method-assign]


@pytest.fixture(scope="session", autouse=True)
def _nested_pytest_temproot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A pytest this suite starts in a process (a starter's own tests, a fresh starter's
    ``make test``) keeps its temporary folders under this run's own, never in
    ``pytest-of-<user>``: pytest makes that folder 0700 again whenever a session starts, and
    under pytest-xdist another worker's test would meet it so mid-run, its children (uid
    65534 under a root grader) no longer let through to their files."""
    before = os.environ.get("PYTEST_DEBUG_TEMPROOT")
    os.environ["PYTEST_DEBUG_TEMPROOT"] = str(tmp_path_factory.mktemp("nested-pytest"))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTEST_DEBUG_TEMPROOT", None)
        else:
            os.environ["PYTEST_DEBUG_TEMPROOT"] = before


_running: list[pytest.Item] = []  # the test whose setup, call or teardown is running


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Remember the running test: a fixture of any scope sets up inside its protocol."""
    _running.append(item)
    try:
        yield
    finally:
        _running.pop()


def _refusing_unmarked(start: Callable[..., None]) -> Callable[..., None]:
    """``start`` (a sandboxed child's, or the batch's zygote's), failing the running test
    when it is not marked ``slow``: it grades a real submission, its fixtures included."""

    @functools.wraps(start)
    def guarded(*args: Any, **kwargs: Any) -> None:
        if _running and _running[-1].get_closest_marker("slow") is None:
            pytest.fail(
                f"{_running[-1].nodeid} starts a sandboxed child or a batch's workers "
                "(in the test or in a fixture it uses), so it grades a real submission: "
                "mark it @pytest.mark.slow (make test-fast leaves those out)",
                pytrace=False,
            )
        start(*args, **kwargs)

    return guarded


Child.__init__ = _refusing_unmarked(Child.__init__)  # type: ignore[method-assign]
Zygote.__init__ = _refusing_unmarked(Zygote.__init__)  # type: ignore[method-assign]


@pytest.fixture
def kit_lab_restored() -> Iterator[None]:
    """The kit's ``lab`` back in ``sys.modules`` after a test that imported a submission's own
    ``lab`` in process (``gradekit run``, ``record``): later tests import the kit's."""
    kept = {
        name: module
        for name, module in sys.modules.items()
        if name == "lab" or name.startswith("lab.")
    }
    yield
    for name in [n for n in sys.modules if n == "lab" or n.startswith("lab.")]:
        del sys.modules[name]
    sys.modules.update(kept)
