"""The run's wall clock is the grader's choice: ``RunPlan.clock`` is where ``time.time()``,
``datetime.now()``, ``date.today()`` and the rest start, inside the sandboxed child
(``set_clock`` in ``grader/sandbox/_harness.py``), and from there it advances with real
time, while the monotonic clocks an agent times its calls with keep the machine's pace. A
sleep within the case's time limit costs no wall time: every clock jumps ahead by it
(``skip_sleeps``), so an SDK's retry back-off is not waited for.

Every test runs a real agent behind each wall and asserts on what the agent read, as its
answer says. No test asserts a duration: a reading of the run's clock is held between the
plan's clock and that clock plus the real time the whole run took, as the grader measured
it around the run (a bound that only a wrong clock breaks, however slow the machine).
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader import Limits
from grader.sandbox import CLOCK, HARNESS, RunPlan, Sandbox, Serving, Wall
from tests.submissions import agent_only

pytestmark = pytest.mark.slow

AGENT = '''
import _datetime, datetime, json, pickle, time


def run(provider, task):
    return json.dumps(globals()["do_" + task](), sort_keys=True)


def do_read():
    """Every way the agent may read the current time or date."""
    from datetime import date, datetime as imported  # taken after the clock was set
    return {
        "time": time.time(),
        "time_ns": time.time_ns(),
        "realtime": time.clock_gettime(time.CLOCK_REALTIME),
        "now": datetime.datetime.now().isoformat(),
        "now_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "utcnow": datetime.datetime.utcnow().isoformat(),
        "today": datetime.datetime.today().isoformat(),
        "date_today": datetime.date.today().isoformat(),
        "imported_now": imported.now().isoformat(),
        "imported_today": date.today().isoformat(),
        "strftime": time.strftime("%Y-%m-%d"),
        "localtime": time.strftime("%Y-%m-%d", time.localtime()),
        "gmtime": time.strftime("%Y-%m-%d", time.gmtime()),
        "localtime_year": time.localtime().tm_year,
        "ctime": time.ctime(),
        "asctime": time.asctime(),
    }


def do_kinds():
    """What the datetime classes and the time functions still are besides the clock."""
    now = datetime.datetime.now()
    parsed = datetime.datetime.fromisoformat("2020-01-01T00:00:00")
    made_in_c = _datetime.datetime(2020, 1, 1)  # the C module's own class, as before the clock
    return {
        "parsed_is_datetime": isinstance(parsed, datetime.datetime),
        "now_is_date": isinstance(now, datetime.date),
        "its_date_is_date": isinstance(now.date(), datetime.date),
        "real_is_datetime": isinstance(made_in_c, datetime.datetime),
        "real_class_is_subclass": issubclass(type(made_in_c), datetime.datetime),
        "date_is_not_datetime": isinstance(datetime.date(2020, 1, 1), datetime.datetime),
        "datetime_is_date_class": issubclass(datetime.datetime, datetime.date),
        "next_day": (parsed + datetime.timedelta(days=1)).isoformat(),
        "formatted": parsed.strftime("%d/%m/%Y"),
        "aware": datetime.datetime.now(datetime.timezone.utc).utcoffset().total_seconds(),
        "pickled": pickle.loads(pickle.dumps(now)) == now,
        "pickled_date": pickle.loads(pickle.dumps(now.date())) == now.date(),
        "class": repr(datetime.datetime),
        "epoch_localtime": time.localtime(0).tm_year,
        "epoch_strftime": time.strftime("%Y", time.gmtime(0)),
        "epoch_ctime": time.ctime(0),
        "epoch_fromtimestamp": datetime.datetime.fromtimestamp(0, datetime.timezone.utc).year,
        "monotonic": time.monotonic(),
    }


def do_advance():
    """Two reads of each clock around a short sleep."""
    def read():
        return (time.time(), time.time_ns(), datetime.datetime.now(), time.monotonic())

    first = read()
    time.sleep(0.05)
    second = read()
    return [b > a for a, b in zip(first, second)]


def real_ns():
    """The machine's time since boot: a clock the run does not move (its sleeps do not)."""
    return time.clock_gettime_ns(time.CLOCK_BOOTTIME)


def do_sleep():
    """Sleep three times, as an SDK backs off between retries; what each clock saw."""
    def read():
        return (time.time(), time.monotonic(), time.perf_counter(),
                datetime.datetime.now().timestamp(), real_ns() / 1e9)

    first = read()
    for _ in range(3):
        time.sleep(2.5)
    return [b - a for a, b in zip(first, read())]


def do_sleep_async():
    """Sleep three times in an event loop, as an async SDK client backs off."""
    import asyncio

    async def main():
        first, real = time.monotonic(), real_ns()
        for _ in range(3):
            await asyncio.sleep(2.5)
        return [time.monotonic() - first, (real_ns() - real) / 1e9]

    return asyncio.run(main())


def do_sleep_short():
    """Sleep 3 s in a 4 s limit: what the run's clock and the machine's saw."""
    first, real = time.monotonic(), real_ns()
    time.sleep(1.5)
    time.sleep(1.5)
    return [time.monotonic() - first, (real_ns() - real) / 1e9]


def do_sleep_past_the_limit():
    time.sleep(1)  # within the limit: skipped
    time.sleep(5)  # past it: a real sleep, and the case times out
    return "woke"
'''

LIMITS = Limits(timeout_s=20)
NO_ANSWERS = Serving(answer=lambda case, prompt: None)
EARLIER = 1_000_000_000  # 2001-09-09T01:46:40Z: a day that is neither CLOCK's nor today's


def day_of(clock: int) -> str:
    """The UTC day (the child's TZ) a clock that starts at ``clock`` reads during a run."""
    return datetime.datetime.fromtimestamp(clock, datetime.UTC).date().isoformat()


@pytest.fixture(scope="module")
def submission(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return agent_only(tmp_path_factory.mktemp("clock"), AGENT)


@pytest.fixture
def sandbox(submission: Path, tmp_path: Path, isolation: Wall) -> Iterator[Sandbox]:
    """One sandbox for the test's runs (behind namespaces, forked from one host)."""
    sandbox = Sandbox(submission, tmp_path / "scratch", LIMITS, isolation)
    try:
        yield sandbox
    finally:
        sandbox.close()


def said(sandbox: Sandbox, task: str, clock: int = CLOCK) -> tuple[Any, int, int]:
    """What the agent read in one run (its own folder) of ``task`` on ``clock``, and the
    grader's ``time.monotonic_ns()`` just before and just after the run."""
    before = time.monotonic_ns()
    result = sandbox.within(f"{task}-{clock}").run(
        "lab.agent:run", [(task, task)], RunPlan("provider-a", 0, NO_ANSWERS, clock=clock)
    )
    after = time.monotonic_ns()
    outcome = result.outcomes[task]
    assert outcome.status == "returned" and outcome.answer is not None, outcome
    return json.loads(outcome.answer), before, after


def test_every_reading_of_the_time_starts_at_the_plans_clock(sandbox: Sandbox) -> None:
    """Two runs of one sandbox, on two clocks: each reads its own clock's day, whichever
    way it asks, and not the machine's."""
    for clock in (CLOCK, EARLIER):
        read, before, after = said(sandbox, "read", clock)
        day, ran_ns = day_of(clock), after - before
        assert day != datetime.date.today().isoformat()
        dates = (
            "now",
            "now_utc",
            "utcnow",
            "today",
            "date_today",
            "imported_now",
            "imported_today",
            "strftime",
            "localtime",
            "gmtime",
        )
        assert {key: read[key][:10] for key in dates} == dict.fromkeys(dates, day)
        assert read["localtime_year"] == int(day[:4])
        shown = time.asctime(time.gmtime(clock))  # "Sun Sep  9 01:46:40 2001"
        for key in ("ctime", "asctime"):
            assert (read[key][:10], read[key][-4:]) == (shown[:10], shown[-4:]), key
        assert clock * 10**9 <= read["time_ns"] <= clock * 10**9 + ran_ns
        slack = 1e-3  # a float of some 2.5e9 seconds rounds to about a microsecond
        for key in ("time", "realtime"):
            assert clock <= read[key] <= clock + ran_ns / 1e9 + slack, key


def test_the_datetime_classes_stay_the_real_ones_and_time_with_an_argument_is_unchanged(
    sandbox: Sandbox,
) -> None:
    kinds, before, after = said(sandbox, "kinds")
    assert kinds == {
        "parsed_is_datetime": True,
        "now_is_date": True,
        "its_date_is_date": True,
        "real_is_datetime": True,
        "real_class_is_subclass": True,
        "date_is_not_datetime": False,
        "datetime_is_date_class": True,
        "next_day": "2020-01-02T00:00:00",
        "formatted": "01/01/2020",
        "aware": 0.0,
        "pickled": True,
        "pickled_date": True,
        "class": "<class 'datetime.datetime'>",
        "epoch_localtime": 1970,
        "epoch_strftime": "1970",
        "epoch_ctime": "Thu Jan  1 00:00:00 1970",
        "epoch_fromtimestamp": 1970,
        "monotonic": kinds["monotonic"],
    }
    # The monotonic clock is the machine's, which the grader reads too: not the run's.
    assert before / 1e9 <= kinds["monotonic"] <= after / 1e9


def test_the_clock_advances_with_real_time(sandbox: Sandbox) -> None:
    advanced, _, _ = said(sandbox, "advance")
    assert advanced == [True, True, True, True]  # time, time_ns, datetime.now, monotonic


@pytest.mark.parametrize(
    ("start", "untouched"),
    [
        (None, True),
        (True, True),
        ("2524608000", True),
        (2524608000.0, True),
        (2524608000, False),  # the control: an int does replace them
    ],
)
def test_a_start_that_is_not_an_int_leaves_the_clocks_alone(start: object, untouched: bool) -> None:
    """An older parent sends no clock: the harness, loaded alone, keeps the machine's."""
    script = (
        "import datetime, importlib.util, sys, time\n"
        "spec = importlib.util.spec_from_file_location('harness', sys.argv[1])\n"
        "harness = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(harness)\n"
        "real = (time.time, time.localtime, time.strftime, datetime.datetime, datetime.date)\n"
        f"harness.set_clock({start!r})\n"
        "now = (time.time, time.localtime, time.strftime, datetime.datetime, datetime.date)\n"
        "print(all(a is b for a, b in zip(real, now, strict=True)))\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", script, str(HARNESS)], capture_output=True, text=True, check=True
    )
    assert ran.stdout == f"{untouched}\n"


def test_a_sleep_within_the_case_limit_costs_no_wall_time(sandbox: Sandbox) -> None:
    """Three sleeps of 2.5 s, as an SDK's retry back-off: every clock of the run reads the
    7.5 s it asked for, the wall clock included, while the run as the grader measured it
    took less than that, so the sleeps were not waited for."""
    seen, before, after = said(sandbox, "sleep")
    wall, monotonic, perf_counter, now, real = seen
    for name, value in (
        ("time", wall),
        ("monotonic", monotonic),
        ("perf_counter", perf_counter),
        ("datetime.now", now),
    ):
        assert value >= 7.5, name
    assert real < 7.5 and (after - before) / 1e9 < 7.5
    (slept, real), before, after = said(sandbox, "sleep_async")
    assert slept >= 7.5 and real < 7.5 and (after - before) / 1e9 < 7.5


def test_a_sleep_past_the_limit_is_real_and_each_case_starts_a_fresh_budget(
    submission: Path, tmp_path: Path, isolation: Wall
) -> None:
    """Within a 4 s limit, two cases in one child each sleep 3 s, and neither waits: each
    case has its own budget. A sleep that would end past the limit is slept for real, so
    that case times out as it always did."""
    sandbox = Sandbox(submission, tmp_path / "scratch", Limits(timeout_s=4), isolation)
    try:
        result = sandbox.run(
            "lab.agent:run",
            [("first", "sleep_short"), ("again", "sleep_short"), ("past", "sleep_past_the_limit")],
            RunPlan("provider-a", 0, NO_ANSWERS),
        )
    finally:
        sandbox.close()
    for case in ("first", "again"):
        outcome = result.outcomes[case]
        assert outcome.status == "returned" and outcome.answer is not None, outcome
        slept, real = json.loads(outcome.answer)
        assert slept >= 3 and real < 3, case
    assert result.outcomes["past"].status == "timeout"


def test_a_module_of_the_submissions_own_named_asyncio_imports_as_it_is(
    tmp_path: Path, isolation: Wall
) -> None:
    """The harness patches asyncio's sleep as asyncio is imported; a submission's own
    ``asyncio`` (first on its path, as any module of its own) imports untouched."""
    root = agent_only(
        tmp_path / "own", "import asyncio\n\n\ndef run(provider, task):\n    return asyncio.WHO\n"
    )
    (root / "asyncio.py").write_text('WHO = "the submission\'s own asyncio"\n')
    sandbox = Sandbox(root, tmp_path / "scratch", LIMITS, isolation)
    try:
        result = sandbox.run(
            "lab.agent:run", [("own", "own")], RunPlan("provider-a", 0, NO_ANSWERS)
        )
    finally:
        sandbox.close()
    outcome = result.outcomes["own"]
    assert (outcome.status, outcome.answer) == ("returned", "the submission's own asyncio")
