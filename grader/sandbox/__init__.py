"""grader/sandbox."""

from __future__ import annotations

from grader.sandbox._cutpoint import cut_point_problem, run_cut_point_test
from grader.sandbox._isolation import (
    REQUESTS,
    Isolation,
    bubblewrap,
    choose_isolation,
    describe_isolation,
    interpreter,
    package_folders,
)
from grader.sandbox._probe import probe_replay
from grader.sandbox._sandbox import ToolAnswer, run_cases

__all__ = [
    "REQUESTS",
    "Isolation",
    "ToolAnswer",
    "bubblewrap",
    "choose_isolation",
    "cut_point_problem",
    "describe_isolation",
    "interpreter",
    "package_folders",
    "probe_replay",
    "run_cases",
    "run_cut_point_test",
]
