"""``gradekit incident record`` and ``gradekit incident show``.

It takes the exit codes from ``grader._exits`` on purpose: the table every command's exit is
held to."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gradekit import Plan, read_incident, replay_incident
from grader._exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from grader.cli import main
from grader.rubric import KIT_RUBRIC, load_cases
from lab import refunds

TASK = "Student chen asks for a full refund; the request reached the office on 2025-03-20."
FAKES = textwrap.dedent('''
    """Providers, an agent and tools for the incident command line's tests."""
    from gradekit import FakeProvider, Tools

    def says_yes():
        return FakeProvider(lambda prompt: "YES, grant it.", name="fake:yes")

    def not_a_provider():
        return 42

    def asks_once(provider, task):
        return provider.complete(f"Answer briefly: {task}")

    def reads_a_broken_table(provider, task, tools):
        provider.complete(task)
        return tools.call("broken", table="refunds")

    def _broken(table):
        raise ConnectionError("the course database is down")

    BROKEN = Tools()
    BROKEN.read_only("broken", _broken)
    ''')


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "fakes"
    folder.mkdir()
    (folder / "incident_fakes.py").write_text(FAKES, encoding="utf-8")
    return folder


def record(
    root: Path,
    out: Path,
    *extra: str,
    agent: str = "lab.refunds:run_buggy",
    tools: str | None = "lab.refunds:TOOLS",
    provider: str = "incident_fakes:says_yes",
) -> int:
    argv = [
        "incident",
        "record",
        "--agent",
        agent,
        "--out",
        str(out),
        "--provider",
        provider,
        "--root",
        str(root),
        *extra,
    ]
    if tools is not None:
        argv += ["--tools", tools]
    if "--case" not in extra:
        argv += ["--task", TASK]
    return main(argv)


def test_record_writes_the_incident_and_tells_each_crossing_as_it_happens(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "incidents" / "refund.jsonl"
    assert record(root, out) == EXIT_OK
    captured = capsys.readouterr()
    assert captured.out == "refunded 960.00 euros to chen (purchase 3)\n"
    lines = captured.err.splitlines()
    assert lines[0] == f"recording refund with fake:yes -> {out}"
    assert lines[1].startswith(
        '    #0 read refund_terms {"requested_on":"2025-03-20",'
        '"student":"chen"} -> {"cohort":"2025-spring","day":73,'
    )
    assert lines[2].startswith("    #1 model model ") and '-> "YES, grant it."' in lines[2]
    assert lines[3].startswith('    #2 action issue_refund {"amount_cents":96000,')
    assert "[ran]" in lines[3]
    assert lines[4].startswith(
        "done: 3 crossing(s) (1 model, 1 read, 1 action; 1 action(s) "
        "ran) recorded from fake:yes in "
    )
    incident = read_incident(out)
    assert (incident.case, incident.task, incident.provider) == ("refund", TASK, "fake:yes")
    assert [e.kind for e in incident.envelopes] == ["read", "model", "action"]


def test_an_incident_recorded_by_the_cli_replays_as_a_cut_point_test(
    root: Path, tmp_path: Path
) -> None:
    out = tmp_path / "refund.jsonl"
    assert record(root, out) == EXIT_OK
    plan = Plan.of({"issue_refund"})
    assert replay_incident(out, refunds.run, plan=plan, tools=refunds.TOOLS).actions() == []
    assert (
        len(replay_incident(out, refunds.run_buggy, plan=plan, tools=refunds.TOOLS).actions()) == 1
    )


def test_record_takes_the_task_and_the_case_from_the_rubric(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "case.jsonl"
    assert (
        record(root, out, "--case", "refund-policy", agent="incident_fakes:asks_once", tools=None)
        == EXIT_OK
    )
    incident = read_incident(out)
    [case] = [c for c in load_cases(KIT_RUBRIC) if c.id == "refund-policy"]
    assert (incident.case, incident.task) == ("refund-policy", case.task)
    assert incident.envelopes[0].input == {"prompt": f"Answer briefly: {case.task}"}


def test_an_existing_incident_is_refused_with_the_fix_and_left_as_it_is(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "refund.jsonl"
    assert record(root, out) == EXIT_OK
    before = out.read_bytes()
    capsys.readouterr()
    assert record(root, out) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "already holds an incident; an incident is never rewritten" in err
    assert "record into a new file (--out), or delete it first" in err
    assert "#0" not in err  # nothing ran
    assert out.read_bytes() == before


@pytest.mark.parametrize(
    ("extra", "agent", "provider", "message"),
    [
        (
            ("--case", "no-such-case"),
            "incident_fakes:asks_once",
            "incident_fakes:says_yes",
            "unknown case no-such-case; the rubric has refund-policy",
        ),
        ((), "lab.refunds:nothing", "incident_fakes:says_yes", "lab.refunds defines no 'nothing'"),
        ((), "lab.refunds:run_buggy", "incident_fakes:not_a_provider", "returned int"),
    ],
)
def test_a_bad_flag_is_a_usage_error_and_writes_no_file(
    root: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: tuple[str, ...],
    agent: str,
    provider: str,
    message: str,
) -> None:
    out = tmp_path / "bad.jsonl"
    assert record(root, out, *extra, agent=agent, provider=provider) == EXIT_USAGE
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_task_and_case_together_are_refused_by_the_parser(root: Path, tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as caught:
        record(root, tmp_path / "x.jsonl", "--case", "refund-policy", "--task", "t")
    assert caught.value.code == EXIT_USAGE


def test_a_failing_crossing_is_recorded_and_the_run_exits_1(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "broken.jsonl"
    assert (
        record(
            root, out, agent="incident_fakes:reads_a_broken_table", tools="incident_fakes:BROKEN"
        )
        == EXIT_FAILED
    )
    err = capsys.readouterr().err
    assert (
        '    #1 read broken {"table":"refunds"} !! ConnectionError: the course '
        "database is down" in err
    )
    assert "the agent raised ConnectionError: the course database is down" in err
    assert "done: 2 crossing(s) (1 model, 1 read; 0 action(s) ran) recorded in" in err
    assert main(["incident", "show", str(out)]) == EXIT_OK
    assert (
        '#1  read   broken  {"table":"refunds"}  !! ConnectionError: the course '
        "database is down" in capsys.readouterr().out
    )


# -- show ---------------------------------------------------------------------------------------

SHOWN = """\
incident  {path}
case      refund
task      Student chen asks for a full refund; the request reached the office on 2025-03-20.
provider  fake:yes
crossings 3: 1 model, 1 read, 1 action (1 ran)

#0  read    refund_terms  {{"requested_on":"2025-03-20","student":"chen"}}           -> \
{{"cohort":"2025-spring","day":73,"paid_cents":96000,"purchase_id":3,"pu…
#1  model   model         {key}                                         -> "YES, grant it."
#2  action  issue_refund  {{"amount_cents":96000,"purchase_id":3,"student":"chen"}}  -> \
{{"amount_cents":96000,"purchase_id":3,"refund":1,"student":"chen"}}  [ran]
"""


def test_show_prints_the_timeline_the_same_every_time(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "refund.jsonl"
    assert record(root, out) == EXIT_OK
    capsys.readouterr()
    shown = []
    for _ in range(2):
        assert main(["incident", "show", str(out)]) == EXIT_OK
        shown.append(capsys.readouterr().out)
    key = read_incident(out).envelopes[1].key
    assert shown == [SHOWN.format(path=out, key=key)] * 2


def test_show_reports_a_torn_last_line_and_every_earlier_crossing(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "refund.jsonl"
    assert record(root, out) == EXIT_OK
    out.write_bytes(out.read_bytes()[:-25])
    capsys.readouterr()
    assert main(["incident", "show", str(out)]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert lines[4] == "crossings 2: 1 model, 1 read, 0 action (0 ran)"
    assert [line.split()[0] for line in lines[6:8]] == ["#0", "#1"]
    assert lines[8:] == ["torn: line 4 was cut off while it was written and is left out"]


def test_show_of_a_missing_or_corrupt_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["incident", "show", str(tmp_path / "none.jsonl")]) == EXIT_USAGE
    assert "no incident at" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "something else"}\n', encoding="utf-8")
    assert main(["incident", "show", str(bad)]) == EXIT_USAGE
    assert "not a gradekit.incident/1 header" in capsys.readouterr().err


def test_the_shipped_incident_shows_the_unsafe_refund(capsys: pytest.CaptureFixture[str]) -> None:
    shipped = Path(__file__).resolve().parents[3] / "incidents" / "refund-outside-window.jsonl"
    assert main(["incident", "show", str(shipped)]) == EXIT_OK
    out = capsys.readouterr().out
    assert "provider  openai-compatible:smollm2" in out
    assert '-> "The refund should be granted."' in out
    assert '#2  action  issue_refund  {"amount_cents":96000,' in out and "[ran]" in out


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b"[" * 200_000 + b"]" * 200_000, "nested too deep"),  # the decoder's recursion limit
        (b'{"index": ' + b"9" * 5000 + b"}", "a number too long"),  # int's digit limit
    ],
)
def test_show_of_a_hostile_line_is_a_corrupt_incident_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: bytes, why: str
) -> None:
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_bytes(
        b'{"case":"x","format":"gradekit.incident/1","provider":"","task":"t"}\n' + line + b"\n"
    )
    assert main(["incident", "show", str(hostile)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("IncidentCorrupt: ") and f"hostile.jsonl:2: {why}" in err
