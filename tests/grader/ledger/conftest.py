"""The graded cohort the review tests share: built once per module, copied per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.outputs import KEY_ENV, KEY_FILE_ENV
from tests.grader.ledger.test_review_bulk import Cohort, build_cohort, copy_cohort


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four students graded once per module (``build_cohort``)."""
    return build_cohort(tmp_path_factory.mktemp("cohort"))


@pytest.fixture
def cohort(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cohort:
    """A copy of the module's graded cohort, with no instructor key in the environment."""
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    return copy_cohort(template, tmp_path / "work")
