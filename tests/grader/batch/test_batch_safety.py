"""One submission cannot stop the batch, and who a submission is comes from the instructor.

Every batch here is a real ``python -m grader grade`` process with a TMPDIR of its
own: every worker and every sandboxed child works below it, so a process still
mentioning it once the batch is over is a leftover. Hostile agents are tiny
hand-written ones; the well-behaved submissions are real copies of the reference lab.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from grader import GradebookRow, load_rubric
from grader.batch._worker import (
    WorkerRequest,
    decode_request,
    decode_row,
    encode_request,
    encode_row,
)
from grader.cli import main
from grader.ledger import ARCHIVE, COPIES, DRAW_KEY, GRADEBOOK, LEDGER, OUTPUT, REPORT, read_ledger
from grader.sandbox import Wall
from grader.submission import identify
from tests.submissions import make_submission

REPO = Path(__file__).resolve().parents[3]
GUARD_S = 300  # a hang guard only: no time is asserted
ZYGOTE = "-m grader.batch "  # its command line: python -P -m grader.batch BATCH_PID


@dataclass(frozen=True, slots=True)
class Batch:
    """A finished ``gradekit grade`` process and the gradebook it left."""

    code: int
    stdout: str
    stderr: str
    rows: dict[str, dict[str, str]]  # gradebook rows by submission; {} without a gradebook

    def explain(self) -> str:
        return f"exit {self.code}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


def short_rubric(folder: Path, **limits: int) -> Path:
    """The bootcamp rubric on the instructor's side, with some ``[limits]`` changed."""
    text = (REPO / "rubric" / "bootcamp.toml").read_text("utf-8")
    for key, value in {"timeout_s": 5, **limits}.items():
        lines = [line for line in text.splitlines() if line.startswith(f"{key} = ")]
        assert len(lines) == 1, key
        text = text.replace(lines[0] + "\n", f"{key} = {value}\n")
    path = folder / "rubric.toml"
    path.write_text(text, encoding="utf-8")
    return path


def tiny_agent(root: Path, body: str, *, imports: str = "") -> Path:
    """A submission whose whole agent is ``body``, run once per case."""
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text('[tool.gradekit]\nagent = "agent:run"\n', "utf-8")
    source = f"{imports}\n\n\ndef run(provider, task, tools=None):\n{textwrap.indent(body, '    ')}"
    (root / "agent.py").write_text(source, encoding="utf-8")
    return root


HANGS = "while True:\n    time.sleep(1)\n"
# Switch the in-process wall off, as a determined student did: the hook's closure holds the
# set of threads it lets through. Behind the process wall alone, what follows then lands.
HOOK_OFF = """\
for obj in gc.get_objects():
    if getattr(obj, "__name__", "") == "guard" and getattr(obj, "__closure__", None):
        for cell in obj.__closure__:
            if isinstance(cell.cell_contents, set):
                cell.cell_contents.add(_thread.get_ident())
"""


class Grader:
    """Runs ``gradekit grade`` in a real process whose TMPDIR is ``tmp``."""

    def __init__(self, base: Path) -> None:
        self.base, self.tmp, self.cwd = base, base / "tmp", base / "cwd"
        self.tmp.mkdir(parents=True)
        self.cwd.mkdir()
        self.out = base / "out"
        self.started: list[subprocess.Popen[str]] = []

    def start(self, *args: str | Path) -> subprocess.Popen[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GRADEKIT_")}
        env["TMPDIR"] = str(self.tmp)
        process = subprocess.Popen(
            [sys.executable, "-m", "grader", "grade", *map(str, args), "--out", str(self.out)],
            cwd=self.cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.started.append(process)
        return process

    def close(self) -> None:
        """After a failed test: end the batch and whatever it left (all started here)."""
        for process in self.started:
            if process.poll() is None:
                process.kill()
            process.communicate()
        for line in _mentioning(str(self.tmp)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(line.partition(":")[0]), signal.SIGKILL)

    def finish(self, process: subprocess.Popen[str]) -> Batch:
        stdout, stderr = process.communicate(timeout=GUARD_S)
        book = self.out / GRADEBOOK
        rows = (
            {row["submission"]: row for row in csv.DictReader(io.StringIO(book.read_text("utf-8")))}
            if book.exists()
            else {}
        )
        return Batch(process.returncode, stdout, stderr, rows)

    def grade(self, *args: str | Path) -> Batch:
        return self.finish(self.start(*args))

    def leftovers(self) -> list[str]:
        """Processes still working below this batch's TMPDIR, once the dying are gone."""
        found = _mentioning(str(self.tmp))
        deadline = time.monotonic() + 30  # SIGKILL is delivered, not awaited: let it land
        while found and time.monotonic() < deadline:
            time.sleep(0.1)
            found = _mentioning(str(self.tmp))
        return found


@pytest.fixture
def grader(tmp_path: Path) -> Iterator[Grader]:
    batch = Grader(tmp_path / "batch")
    yield batch
    batch.close()


def _mentioning(marker: str) -> list[str]:
    """Live processes whose folder, command line or environment mention ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            seen = [
                os.readlink(entry / "cwd"),
                (entry / "cmdline").read_bytes().decode("utf-8", "replace"),
                (entry / "environ").read_bytes().decode("utf-8", "replace"),
            ]
        except OSError:  # gone, or a zombie waiting for its parent
            continue
        if any(marker in text for text in seen):
            found.append(f"{entry.name}: {seen[1].replace(chr(0), ' ')}")
    return found


def _wait_for(what: str, found: Callable[[], object]) -> object:
    deadline = time.monotonic() + GUARD_S
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"never saw {what}")


def _processes() -> list[tuple[int, int, str]]:
    """(pid, parent pid, command line) of every live process; for a worker forked by the
    batch's zygote the command line is the zygote's, so its name comes first."""
    table = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text("utf-8", "replace")
            command = (
                (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            )
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        table.append((int(entry.name), parent, f"[{name}] {command}"))
    return table


def _runs_of(worker: int) -> list[int]:
    """The sandboxed runs of ``worker``: its children (each run in its own bubblewrap), or
    the processes in its runs' cgroups (runs forked by the batch's hosts, which are not its
    children), named ``gradekit-WORKER-N``."""
    found = []
    for pid, parent, _ in _processes():
        try:
            groups = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            continue
        if parent == worker or f"/gradekit-{worker}-" in groups:
            found.append(pid)
    return found


def _workers(batch: int, folder: str) -> list[int]:
    """The batch's workers for ``folder``: children of its zygote, named after the folder."""
    table = _processes()
    zygotes = {pid for pid, parent, command in table if parent == batch and ZYGOTE in command}
    return [
        pid
        for pid, parent, command in table
        if parent in zygotes and command.startswith(f"[gradekit {folder}] ")
    ]


def error_row_among_graded(batch: Batch, error: str, graded: Sequence[str]) -> dict[str, str]:
    """The one error row of a batch whose other submissions all scored 100."""
    assert batch.code == 1, batch.explain()
    assert "Traceback" not in batch.stderr
    assert "Warning" not in batch.stderr  # e.g. runpy's, for a zygote run as its own module
    graded_rows(batch, graded)
    row = batch.rows[error]
    assert row["status"] == "error", row
    return row


def alice_hanging_bob_carol(tmp_path: Path) -> Path:
    """Three submissions; bob's agent hangs in every case."""
    subs = tmp_path / "subs"
    make_submission(subs / "alice")
    tiny_agent(subs / "bob", HANGS, imports="import time")
    make_submission(subs / "carol")
    return subs


def mallory_between_two(tmp_path: Path, grader: Grader, attack: str) -> Batch:
    """Grade alice, mallory (the hook switched off, then ``attack``) and zoe, in that order,
    one at a time, behind the process wall."""
    subs = tmp_path / "subs"
    make_submission(subs / "alice")
    tiny_agent(
        subs / "mallory",
        HOOK_OFF + attack,
        imports="import _thread\nimport gc\nimport os\nimport signal\nimport time",
    )
    make_submission(subs / "zoe")
    return grader.grade(
        subs, "--jobs", "1", "--wall", "process", "--rubric", short_rubric(tmp_path)
    )


def caught_unprivileged(batch: Batch, name: str, graded: Sequence[str]) -> bool:
    """Whether the grader is root, so the agent ran as uid 65534, which signals no process
    of the grader's: then its attack reached nothing, and the hook it switched off was seen
    at each verdict (every case lost, each flagged), its classmates graded as ever."""
    if os.geteuid() != 0:
        return False
    assert batch.code == 0, batch.explain()
    graded_rows(batch, graded)
    row = batch.rows[name]
    assert (row["status"], row["total"]) == ("graded", "0.00"), row
    assert "the agent replaced the harness's code (audit hook)" in row["reason"], row
    assert batch.rows[name]["student"] == name
    return True


def graded_rows(batch: Batch, names: Sequence[str]) -> None:
    for name in names:
        assert batch.rows[name]["status"] == "graded", (name, batch.explain())
        assert batch.rows[name]["total"] == "100.00", (name, batch.rows[name])


@pytest.mark.slow
def test_an_agent_that_kills_its_parent_costs_its_own_row_and_nothing_else(
    tmp_path: Path, grader: Grader
) -> None:
    """The hostile student's attack: pidfd_send_signal(SIGKILL) at the process that started
    the agent. It used to be the grader itself: no gradebook, nobody after graded."""
    # The process wall: in a pid namespace the agent could not even see its parent.
    batch = mallory_between_two(
        tmp_path,
        grader,
        "signal.pidfd_send_signal(os.pidfd_open(os.getppid()), signal.SIGKILL)\nreturn 'done'\n",
    )
    if caught_unprivileged(batch, "mallory", ["alice", "zoe"]):
        assert grader.leftovers() == []
        return
    mallory = error_row_among_graded(batch, "mallory", ["alice", "zoe"])
    assert mallory["reason"].startswith("the grader's worker for it was killed by SIGKILL: ")
    assert mallory["student"] == "mallory"
    assert grader.leftovers() == []


KILL_THE_ZYGOTE = """\
stat = open(f"/proc/{os.getppid()}/stat").read()
os.kill(int(stat[stat.rindex(")") + 2 :].split()[1]), signal.SIGKILL)
time.sleep(30)
return 'done'
"""


@pytest.mark.slow
def test_an_agent_that_kills_the_process_that_starts_workers_costs_its_own_row(
    tmp_path: Path, grader: Grader
) -> None:
    """Behind the process wall the agent can reach its worker's parent, the zygote that
    forks every worker: the batch starts another and grades everyone after."""
    batch = mallory_between_two(tmp_path, grader, KILL_THE_ZYGOTE)
    if caught_unprivileged(batch, "mallory", ["alice", "zoe"]):
        assert grader.leftovers() == []
        return
    mallory = error_row_among_graded(batch, "mallory", ["alice", "zoe"])
    assert mallory["reason"].startswith(
        "the grader's worker for it was lost: the process that starts workers ended while it ran"
    )
    assert grader.leftovers() == []


@pytest.mark.slow
def test_a_worker_killed_mid_grading_is_an_error_row_and_leaves_no_process(
    tmp_path: Path, grader: Grader
) -> None:
    subs = alice_hanging_bob_carol(tmp_path)
    process = grader.start(subs, "--jobs", "2", "--rubric", short_rubric(tmp_path, timeout_s=60))

    def bobs_worker_running_his_agent() -> int | None:
        workers = _workers(process.pid, "bob")
        return workers[0] if workers and _runs_of(workers[0]) else None

    worker = _wait_for("bob's worker running his agent", bobs_worker_running_his_agent)
    assert isinstance(worker, int)
    os.kill(worker, signal.SIGKILL)
    # Bob's agent sleeps for a minute: its run ends because its worker did.
    _wait_for("bob's run to end with his worker", lambda: not _runs_of(worker))
    batch = grader.finish(process)
    bob = error_row_among_graded(batch, "bob", ["alice", "carol"])
    assert bob["reason"].startswith(
        "the grader's worker for it was killed by SIGKILL: nothing was scored; grade it again"
    )
    # Bob's agent was sleeping in a sandboxed child of the killed worker: it is gone too.
    assert grader.leftovers() == []


@pytest.mark.slow
def test_a_submission_over_its_budget_is_stopped_and_the_others_are_graded(
    tmp_path: Path, grader: Grader
) -> None:
    subs = alice_hanging_bob_carol(tmp_path)
    # Without the budget, bob would cost 60 s per sandboxed run, five runs.
    rubric = short_rubric(tmp_path, timeout_s=60, budget_s=10)
    batch = grader.grade(subs, "--jobs", "2", "--rubric", rubric)
    assert batch.code == 1, batch.explain()
    graded_rows(batch, ["alice", "carol"])
    bob = batch.rows["bob"]
    assert (bob["status"], bob["total"], bob["digest"]) == ("error", "", "")
    assert bob["reason"].startswith("the submission used its whole 10 s budget: ")
    assert "raise budget_s in the rubric's [limits]" in bob["reason"]
    assert "bob: NOT GRADED: the submission used its whole 10 s budget" in batch.stdout
    assert not (grader.out / "bob").exists()
    assert grader.leftovers() == []


@pytest.mark.slow
def test_ctrl_c_keeps_the_finished_rows_exits_130_and_leaves_no_process(
    tmp_path: Path, grader: Grader
) -> None:
    subs = tmp_path / "subs"
    make_submission(subs / "alice")  # graded first: one job, folder-name order
    tiny_agent(subs / "bob", HANGS, imports="import time")
    make_submission(subs / "carol")  # never started
    process = grader.start(subs, "--jobs", "1", "--rubric", short_rubric(tmp_path, timeout_s=60))
    book = grader.out / GRADEBOOK
    _wait_for(
        "alice's row in the gradebook",
        lambda: book.exists() and "\nalice," in book.read_text("utf-8"),
    )
    _wait_for("bob's worker", lambda: _workers(process.pid, "bob"))
    process.send_signal(signal.SIGINT)
    batch = grader.finish(process)
    assert batch.code == 130, batch.explain()
    assert "Traceback" not in batch.stderr
    assert list(batch.rows) == ["alice", "bob", "carol"]  # partial, and it says so
    graded_rows(batch, ["alice"])
    for name in ("bob", "carol"):
        assert (batch.rows[name]["status"], batch.rows[name]["total"]) == ("interrupted", "")
        assert "this gradebook is partial: grade it again" in batch.rows[name]["reason"]
    assert "bob: NOT GRADED: interrupted by Ctrl-C" in batch.stdout
    assert "carol: NOT GRADED: interrupted by Ctrl-C" in batch.stdout
    assert "interrupted: 2 submissions not graded" in batch.stderr
    # alice and carol are both the reference lab: a pair of copies, found before any
    # grading, whatever Ctrl-C then stops.
    assert sorted(p.name for p in grader.out.iterdir()) == sorted(
        [DRAW_KEY, "alice", ARCHIVE, GRADEBOOK, LEDGER, COPIES]
    )
    # The row that finished is a grade like any other: the ledger has it, and says the
    # batch was cut short before the others.
    events = read_ledger(grader.out / LEDGER).events
    assert [(e["event"], e.get("submission")) for e in events] == [
        ("batch", None),
        ("run", "alice"),
    ]
    assert (events[0]["selection"], events[0]["interrupted"]) == (["alice"], ["bob", "carol"])
    assert events[1]["report"] == batch.rows["alice"]["digest"]
    assert grader.leftovers() == []


GREEDY_CHECK = textwrap.dedent(
    '''
    from decimal import Decimal

    from grader import CheckResult, CriterionResult


    def greedy(evidence, rubric, criterion):
        """Full marks; for an agent that says BLOW UP, first a gigabyte it never touches."""
        if any("BLOW UP" in (o.answer or "") for o in evidence.primary.outcomes.values()):
            hog = bytearray(1 << 30)
            del hog
        weight = Decimal(criterion.weight).quantize(Decimal("0.01"))
        check = CheckResult("all", True, weight, weight, "fine")
        return CriterionResult(criterion.id, criterion.title, weight, weight, (check,))
    '''
)


@pytest.mark.slow
def test_a_worker_past_its_memory_is_an_error_row_and_the_others_are_graded(
    tmp_path: Path, grader: Grader
) -> None:
    """The instructor's custom check runs in the worker, so it can stand in for anything
    that makes grading one submission take memory."""
    subs = tmp_path / "subs"
    module = f"greedy_{uuid.uuid4().hex}"
    (tmp_path / f"{module}.py").write_text(GREEDY_CHECK, encoding="utf-8")
    rubric = short_rubric(tmp_path, grader_memory_mb=512)
    text = rubric.read_text("utf-8").replace('check = "stretch_goal"', f'check = "{module}:greedy"')
    rubric.write_text(text.replace("[criterion.points]\nevidence = 6\nwrite_up = 4\n", ""), "utf-8")
    make_submission(subs / "alice")
    tiny_agent(subs / "greedy", "return 'BLOW UP'\n")
    batch = grader.grade(subs, "--jobs", "2", "--rubric", rubric)
    assert batch.code == 1, batch.explain()
    graded_rows(batch, ["alice"])  # the custom check was imported in alice's worker too
    greedy = batch.rows["greedy"]
    assert greedy["status"] == "error", greedy
    assert greedy["reason"].startswith(
        "grading it took more memory than the grader's worker may use (grader_memory_mb = "
        "512): nothing was scored; raise grader_memory_mb"
    )
    assert "Traceback" not in batch.stderr


@pytest.mark.slow
def test_what_an_agent_prints_is_capped_in_output_txt(tmp_path: Path, grader: Grader) -> None:
    subs = tmp_path / "subs"
    # 300 KiB of two-byte characters per case: a cut through the middle of one must not
    # leave half a character behind.
    tiny_agent(subs / "chatty", "print('é' * (150 * 1024))\nreturn 'done'\n")
    batch = grader.grade(subs / "chatty", "--rubric", short_rubric(tmp_path, output_kb=1024))
    assert batch.rows["chatty"]["status"] == "graded", batch.explain()
    data = (grader.out / "chatty" / OUTPUT).read_bytes()
    assert len(data) <= 256 * 1024
    text = data.decode("utf-8")  # still UTF-8 after the cut
    assert text.startswith("== primary run: stdout ==\néé")
    cut = re.search(
        r"\n\[gradekit cut output\.txt here: it keeps the first 256 KiB of the "
        r"agent's (\d+) bytes of output\]\n\Z",
        text,
    )
    assert cut is not None, text[-300:]
    assert int(cut.group(1)) > 2 * 1024 * 1024  # three runs, each kept up to output_kb


# -- the worker's protocol: JSON both ways ----------------------------------------------------


def test_a_request_carries_the_rubric_exactly_as_the_batch_validated_it(tmp_path: Path) -> None:
    rubric = load_rubric(short_rubric(tmp_path, budget_s=7))
    review = {
        "event": "review",
        "student": "s-1",
        "report": "d" * 64,
        "criterion": "tracing",
        "automated": "20.00",
        "points": "1.00",
        "by": "kim",
        "reason": "ü",
        "seq": 4,
    }
    request = WorkerRequest(
        parent=1,
        root=tmp_path / "alice",
        folder="alice",
        student="s-1",
        out=tmp_path / "out",
        scratch=tmp_path / "scratch",
        label="provider-ü",
        isolation="namespaces",
        rubric=rubric,
        check_folders={"m:f": "/x"},
        reviews=(review,),
        derived=tmp_path / "derived",
    )
    data = encode_request(request)
    assert data.isascii() and json.loads(data)  # JSON, never pickle
    assert decode_request(data) == request
    with pytest.raises(ValueError, match="not a worker request"):
        decode_request(b'{"root": "/x"}')


def test_a_request_whose_rubric_the_toml_loader_would_refuse_is_refused(tmp_path: Path) -> None:
    document = json.loads(
        encode_request(
            WorkerRequest(
                parent=1,
                root=tmp_path,
                folder="alice",
                student="alice",
                out=tmp_path,
                scratch=tmp_path,
                label=None,
                isolation="process",
                rubric=load_rubric(short_rubric(tmp_path)),
                check_folders={},
            )
        )
    )
    document["rubric"]["tables"]["criterion"][0]["weight"] += 1  # the weights sum to 101
    with pytest.raises(
        ValueError,
        match=r"not a worker request \(RubricError: the rubric the "
        r"batch sent: weights must sum to 100, they sum to 101",
    ):
        decode_request(json.dumps(document).encode())


@pytest.mark.slow
def test_the_identities_the_command_line_computed_are_the_batch_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    computed: list[list[str]] = []

    def counted(folders: Sequence[Path], roster: Any) -> Any:
        computed.append([folder.name for folder in folders])
        return identify(folders, roster)

    def refused(folders: Sequence[Path], roster: Any) -> Any:
        raise AssertionError("grade_batch identified the folders again")

    monkeypatch.setattr("grader.batch._cohort.identify", counted)
    monkeypatch.setattr("grader.batch._batch.identify", refused)
    for name in ("mallory", "trudy"):  # not in the roster: no worker runs for either
        tiny_agent(tmp_path / "subs" / name, "return 'hello'\n")
    roster = tmp_path / "roster.csv"
    roster.write_text("folder,student_id,display_name\nalice,s-1,Alice\n", "utf-8")
    out = tmp_path / "out"
    assert (
        main(
            [
                "grade",
                str(tmp_path / "subs"),
                "--roster",
                str(roster),
                "--out",
                str(out),
                "--shard",
                "2/2",
                "--wall",
                "process",
                "--quiet",
            ]
        )
        == 1
    )
    assert computed == [["mallory", "trudy"]]  # once, over every shard's folders
    rows = list(csv.DictReader(io.StringIO((out / GRADEBOOK).read_text("utf-8"))))
    assert [(row["submission"], row["status"]) for row in rows] == [("trudy", "error")]
    assert "is not in the roster roster.csv" in rows[0]["reason"]


def test_a_row_comes_back_from_json_as_it_went_and_anything_else_is_refused() -> None:
    row = GradebookRow(
        submission="alice",
        student="=s-1",
        status="graded",
        total="1.00",
        max="100.00",
        criteria={"tracing": "1.00"},
        digest="d" * 64,
        reason="",
    )
    assert decode_row(encode_row(row)) == row
    for bad in (b"", b"[]", b'{"row": {"status": "done"}}', encode_row(row)[:-9]):
        with pytest.raises(ValueError, match="not a gradebook row"):
            decode_row(bad)


# -- identity ---------------------------------------------------------------------------------


def _manifest_says(root: Path, student: str) -> None:
    manifest = root / "pyproject.toml"
    text = manifest.read_text("utf-8")
    assert text.count('student = "gradekit-reference"') == 1
    manifest.write_text(
        text.replace('student = "gradekit-reference"', f'student = "{student}"'), "utf-8"
    )


@pytest.mark.slow
def test_a_manifest_naming_a_classmate_changes_nothing(tmp_path: Path, grader: Grader) -> None:
    subs = tmp_path / "subs"
    _manifest_says(make_submission(subs / "alice"), "carol")  # the classmate's name
    make_submission(subs / "carol")
    batch = grader.grade(subs, "--jobs", "2", "--rubric", short_rubric(tmp_path))
    assert batch.code == 0, batch.explain()
    assert {name: row["student"] for name, row in batch.rows.items()} == {
        "alice": "alice",
        "carol": "carol",
    }
    report = json.loads((grader.out / "alice" / REPORT).read_bytes())
    assert report["submission"] == "alice"


@pytest.mark.slow
def test_a_roster_names_each_row_and_flags_what_it_does_not_list(
    tmp_path: Path, grader: Grader
) -> None:
    subs = tmp_path / "subs"
    _manifest_says(make_submission(subs / "alice"), "s-0002")  # carol's id, in the roster
    make_submission(subs / "carol")
    tiny_agent(subs / "mallory", "return 'hello'\n")  # not in the roster
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "folder,student_id,display_name\nalice,s-0001,Alice Ames\n"
        'carol,s-0002,"Carol, C."\ndave,s-0004,Dave Dunn\n',
        "utf-8",
    )
    batch = grader.grade(
        subs, "--jobs", "2", "--roster", roster, "--rubric", short_rubric(tmp_path)
    )
    assert batch.code == 1, batch.explain()
    students = [row["student"] for row in batch.rows.values()]
    assert students == ["s-0001", "s-0002", ""]  # two rows never share a student
    graded_rows(batch, ["alice", "carol"])
    report = json.loads((grader.out / "alice" / REPORT).read_bytes())
    assert report["submission"] == "s-0001"
    mallory = batch.rows["mallory"]
    assert mallory["status"] == "error"
    assert mallory["reason"] == (
        "the folder 'mallory' is not in the roster roster.csv: add the line "
        "`mallory,STUDENT_ID,DISPLAY NAME` to it, or move the folder out of the batch, and "
        "grade it again"
    )
    assert not (grader.out / "mallory").exists()
    assert (
        "warning: 1 roster lines have no submission folder, so nothing is graded for "
        "them: dave (s-0004 Dave Dunn)"
    ) in batch.stderr


def test_two_folders_of_one_name_are_refused_before_anything_is_graded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "monday" / "alice", tmp_path / "tuesday" / "alice"
    for root in (first, second):
        tiny_agent(root, "return 'hello'\n")
    out = tmp_path / "out"
    assert main(["grade", str(first), str(second), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{first} and {second} both resolve to folder name 'alice'" in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("roster", "says"),
    [
        (
            "folder,student_id,display_name\nalice,s-1,A\nbob,s-1,B\n",
            "student id 's-1' is on lines 2 and 3; list each student id once",
        ),
        (
            "folder,student_id,display_name\nalice,s-1,A\nalice,s-2,B\n",
            "folder 'alice' is on lines 2 and 3; list each folder once",
        ),
        ("name,id\nalice,s-1\n", "line 1 must be the header folder,student_id,display_name"),
        (
            "folder,student_id,display_name\nalice,,A\n",
            "line 2 needs a folder name and a student id",
        ),
        ("folder,student_id,display_name\nalice,s-1\n", "line 2 has 2 cells, not 3"),
        ("folder,student_id,display_name\nx/alice,s-1,A\n", "must be a folder's name, not a path"),
    ],
)
def test_a_roster_that_cannot_name_students_exits_2_before_grading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], roster: str, says: str
) -> None:
    tiny_agent(tmp_path / "subs" / "alice", "return 'hello'\n")
    (tmp_path / "roster.csv").write_text(roster, encoding="utf-8")
    out = tmp_path / "out"
    code = main(
        [
            "grade",
            str(tmp_path / "subs"),
            "--roster",
            str(tmp_path / "roster.csv"),
            "--out",
            str(out),
        ]
    )
    assert code == 2
    assert says in capsys.readouterr().err
    assert not out.exists()


def test_a_clash_is_refused_by_every_shard_even_when_it_holds_one_of_the_two(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "monday" / "alice", tmp_path / "tuesday" / "alice"
    for root in (first, second):
        tiny_agent(root, "return 'hello'\n")
    for shard in ("1/2", "2/2"):
        out = tmp_path / f"out-{shard[0]}"
        assert main(["grade", str(first), str(second), "--shard", shard, "--out", str(out)]) == 2
        assert "both resolve to folder name 'alice'" in capsys.readouterr().err
        assert not out.exists()


@pytest.mark.slow
def test_nothing_a_submission_started_outlives_a_killed_batch(
    tmp_path: Path, grader: Grader, isolation: Wall
) -> None:
    """kill -9 of the batch itself (no sweep runs): the worker dies with the batch, the
    sandboxed child with the worker (a parent-death signal, or bubblewrap's pid namespace)."""
    subs = tmp_path / "subs"
    tiny_agent(subs / "bob", HANGS, imports="import time")
    process = grader.start(
        subs, "--wall", isolation.name, "--rubric", short_rubric(tmp_path, timeout_s=60)
    )
    _wait_for("bob's agent running", lambda: _working_below(grader.tmp, child_only=True))

    process.kill()
    process.wait()

    deadline = time.monotonic() + 30  # SIGKILL is delivered, not awaited: let it land
    while _working_below(grader.tmp) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _working_below(grader.tmp) == []


def _working_below(folder: Path, *, child_only: bool = False) -> list[int]:
    """Processes whose command line or working folder lies below ``folder``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if child_only and b"_harness.py" not in command:
            continue
        if str(folder).encode() in command or cwd.startswith(str(folder)):
            found.append(int(entry.name))
    return found
