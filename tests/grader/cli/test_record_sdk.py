"""`gradekit record` on an SDK lab, as the openai-sdk example records: the official ``openai``
SDK against the loopback server (tests/loopback.py), whose ``volatile`` answers carry a new
id, ``created``, ``system_fingerprint`` and request id on every call, as a real API's do.

A re-recording that gets the same answers changes nothing (not a byte, no change-log entry);
one changed answer is one changed key, logged as kind ``http`` in DATASET_CHANGES.md, which
the grader's ``rerecord-review`` evidence accepts; a change that cannot be logged is undone
and every case is still recorded. The summary names the ``.http.json`` files, the base URL
the SDK asked and the ``git add`` that commits what was written.
"""

from __future__ import annotations

import contextlib
import io
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from gradekit.internal import HTTP_CASSETTE
from grader.cli import main
from grader.grading._rerecording import _rerecording
from grader.recordings import read_changes
from grader.rubric import KIT_RUBRIC
from grader.submission import load_manifest
from tests.loopback import Loopback, answer
from tests.submissions import kept_modules

openai = pytest.importorskip("openai")

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "openai-sdk"
EXAMPLE_URL = "http://127.0.0.1:8080/v1"  # the example's BASE_URL constant
CASES = ("refund-policy", "sql-explain")
SAME = "Hello from loopback."  # the loopback's default answer
REASON = "asked again after upgrading the SDK"


@pytest.fixture(autouse=True)
def no_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    """An SDK lab needs no provider and no key: none is configured."""
    for name in (
        "GRADEKIT_PROVIDER",
        "GRADEKIT_MODEL",
        "GRADEKIT_BASE_URL",
        "GRADEKIT_API_KEY",
        "OPENAI_API_KEY",
        "GRADEKIT_DEBUG",
    ):
        monkeypatch.delenv(name, raising=False)


def example(root: Path, url: str) -> Path:
    """The openai-sdk example's agent and manifest, asking ``url`` instead of its server."""
    shutil.copytree(EXAMPLE / "lab", root / "lab", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(EXAMPLE / "pyproject.toml", root / "pyproject.toml")
    agent = root / "lab" / "agent.py"
    source = agent.read_text("utf-8")
    assert source.count(EXAMPLE_URL) == 1
    agent.write_text(source.replace(EXAMPLE_URL, url), "utf-8")
    return root


@dataclass(frozen=True)
class Said:
    code: int
    err: str

    @property
    def last(self) -> str:
        return self.err.rstrip("\n").rsplit("\n", 1)[-1]


def record(root: Path, *extra: str) -> Said:
    """``gradekit record --root ROOT --quiet`` on the two cases, in this process."""
    err = io.StringIO()
    argv = ["record", "--root", str(root), "--rubric", str(KIT_RUBRIC), "--quiet"]
    argv += [f"--case={case}" for case in CASES]
    with kept_modules(), contextlib.redirect_stderr(err), contextlib.redirect_stdout(err):
        code = main([*argv, *extra])
    return Said(code, err.getvalue())


def http_files(root: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted((root / "cassettes").iterdir())}


def test_the_volatile_loopback_gives_every_answer_a_new_id_time_and_request_id() -> None:
    with Loopback(volatile=True) as server:
        client = openai.OpenAI(base_url=server.openai_url, api_key="k", max_retries=0)
        raws = [
            client.chat.completions.with_raw_response.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )
            for _ in range(2)
        ]
    first, second = (raw.parse() for raw in raws)
    assert first.choices[0].message.content == second.choices[0].message.content == SAME
    assert first.id != second.id
    assert (first.created, first.system_fingerprint) != (second.created, second.system_fingerprint)
    assert raws[0].headers["x-request-id"] != raws[1].headers["x-request-id"]


def test_the_summary_names_the_http_cassettes_the_base_url_and_the_git_add(
    tmp_path: Path,
) -> None:
    with Loopback(volatile=True) as server:
        root = example(tmp_path / "sdk", server.openai_url)
        said = record(root)
    assert said.code == 0, said.err
    assert sorted(http_files(root)) == [f"{case}.http.json" for case in CASES]
    for number, case in enumerate(CASES, 1):
        assert (
            f"[{number}/2] {case}: 0 live, 0 from cassette, SDK requests 3 live, 0 from "
            "cassette, " in said.err
        )
        assert said.err.count(f"s -> {root}/cassettes/{case}.http.json\n") == 1
        assert f"cassettes/{case}.json" not in said.err  # never written: no complete() call
    assert "unconfigured" not in said.err
    assert "answers" not in said.last  # no complete() call: no provider to name
    assert said.last == (
        f"done: 6 SDK requests recorded live, 0 served from cassettes (base URL "
        f"{server.openai_url}). Commit cassettes/: git -C {root} add cassettes"
    )


def test_rerecording_the_same_answers_with_new_ids_keeps_every_byte_and_logs_nothing(
    tmp_path: Path,
) -> None:
    root = tmp_path / "sdk"
    with Loopback(volatile=True) as server:
        example(root, server.openai_url)
        assert record(root).code == 0
        before = http_files(root)
        said = record(root, "--rerecord", "--reason", REASON)
        assert len(server.requests) == 12  # every request asked again, answered anew
    assert said.code == 0, said.err
    assert said.err.count(": 0 added, 0 removed, 0 changed, 3 unchanged\n") == 2, said.err
    assert {
        name: data for name, data in http_files(root).items() if not name.endswith(".previous.json")
    } == before
    assert not (root / "DATASET_CHANGES.md").exists()
    assert said.last.endswith(f"Commit cassettes/: git -C {root} add cassettes")


def test_one_changed_answer_is_one_changed_key_logged_as_http_and_the_grader_accepts_it(
    tmp_path: Path,
) -> None:
    root = tmp_path / "sdk"
    verdict = "YES, it names the refund windows."  # the self-check's answer: asked last
    with Loopback(volatile=True) as server:
        example(root, server.openai_url)
        assert record(root).code == 0
        server.script(answer(SAME), answer(SAME), answer(verdict))
        said = record(root, "--rerecord", "--reason", REASON)
    assert said.code == 0, said.err
    changed = root / "cassettes" / "refund-policy.http.json"
    assert (
        f"http diff {root}/cassettes/refund-policy.http.previous.json -> {changed}: "
        "0 added, 0 removed, 1 changed, 2 unchanged" in said.err
    )
    assert (
        f"-> {root}/cassettes/sql-explain.http.json: 0 added, 0 removed, 0 changed, "
        "3 unchanged" in said.err
    )
    assert f'\n    +          "content": "{verdict}",\n' in said.err  # the answer's diff...
    assert "chatcmpl-" not in said.err and "x-request-id" not in said.err  # ...not the ids
    [change] = read_changes(root / "DATASET_CHANGES.md")
    cassette = HTTP_CASSETTE.decode(changed.read_bytes(), source=str(changed))
    [slot] = [name for name, i in cassette.slots().items() if verdict in str(i.response.content)]
    assert (change.case, change.kind, change.reason) == ("refund-policy", "http", REASON)
    assert change.changed_keys == (slot,)
    assert list(change.digests) == ["cassettes/refund-policy.http.json"]
    problem, basis = _rerecording(root, load_manifest(root))
    assert problem is None
    assert "cassettes/refund-policy.http.json as logged" in basis and slot.split("#")[0] in basis
    assert said.last.endswith(
        f"Commit cassettes/ and DATASET_CHANGES.md: git -C {root} add cassettes DATASET_CHANGES.md"
    )
    # The printed command works as printed in a clone (the kit's .gitignore): it stages what
    # was written, and not the copies kept for review.
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    shutil.copy(REPO / ".gitignore", root / ".gitignore")
    assert len(list(root.glob("cassettes/*.previous.json"))) == 2
    command = said.last.split(": ", 2)[-1]
    subprocess.run(shlex.split(command), check=True)
    staged = subprocess.run(
        ["git", "-C", str(root), "diff", "--cached", "--name-only"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert staged == [
        "DATASET_CHANGES.md",
        "cassettes/refund-policy.http.json",
        "cassettes/sql-explain.http.json",
    ]


def test_a_change_that_cannot_be_logged_is_undone_and_every_case_is_still_recorded(
    tmp_path: Path,
) -> None:
    root = tmp_path / "sdk"
    with Loopback(volatile=True) as server:
        example(root, server.openai_url)
        assert record(root).code == 0
        before = http_files(root)
        (root / "DATASET_CHANGES.md").mkdir()  # the log cannot be read or written
        server.script(*[answer("Another answer.")] * 6)  # every case's answers change
        said = record(root, "--rerecord", "--reason", REASON)
        assert len(server.requests) == 12  # both cases were asked again
    assert said.code == 2, said.err
    assert http_files(root) == before  # each file is back as it was, no .previous left
    assert not list(root.rglob("*.previous.json"))
    assert said.err.count(" is back as it was before this run\n") == 2
    assert said.last.startswith(
        "UsageError: could not log the re-recording of refund-policy, sql-explain in "
    )
    assert said.last.endswith("fix the change log and run the same command again.")
    done = said.err.rstrip("\n").split("\n")[-2]
    assert done.startswith("done: 6 SDK requests recorded live") and "DATASET_CHANGES" not in done


def test_the_last_line_names_fixtures_when_the_agent_used_tools(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tmp_path / "tools"
    (root / "lab").mkdir(parents=True)
    (root / "lab" / "__init__.py").write_text("", "utf-8")
    (root / "lab" / "tools.py").write_text(
        "from gradekit import Tools\n\nTOOLS = Tools()\n"
        "TOOLS.read_only('count', lambda text: len(text.split()))\n",
        "utf-8",
    )
    (root / "lab" / "agent.py").write_text(
        "def run(provider, task, tools):\n"
        "    return provider.complete(f\"{task} ({tools.call('count', text=task)} words)\")\n",
        "utf-8",
    )
    (root / "pyproject.toml").write_text(
        '[tool.gradekit]\nagent = "lab.agent:run"\ntools = "lab.tools:TOOLS"\n', "utf-8"
    )
    with Loopback() as server:
        monkeypatch.setenv("GRADEKIT_PROVIDER", "openai-compatible")
        monkeypatch.setenv("GRADEKIT_MODEL", "tiny")
        monkeypatch.setenv("GRADEKIT_BASE_URL", server.openai_url)
        said = record(root)
    assert said.code == 0, said.err
    assert (
        f"-> {root}/cassettes/refund-policy.json, {root}/fixtures/refund-policy.json\n" in said.err
    )
    assert said.last == (
        "done: 2 answers recorded live from openai-compatible:tiny, 0 served from cassettes. "
        f"Commit cassettes/ and fixtures/: git -C {root} add cassettes fixtures"
    )
