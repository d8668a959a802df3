"""Instructor signatures: a forger without the key is caught, the key reaches no child.

Each attack is what a student with the files (and gradekit's source) can do: edit the
points consistently, recompute the digest, move or drop the signature, sign with a key
of their own.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gradekit import UsageError
from grader import Limits
from grader.batch._batch import _worker_environment, grade_batch
from grader.ledger import DRAW_KEY, REPORT, RESULTS, draw_key, verify_file
from grader.outputs import (
    CONTEXT,
    KEY_ENV,
    KEY_FILE_ENV,
    canonical,
    load_key,
    render_gradescope,
    render_report_json,
    report_digest,
    sign,
    sign_file,
    signature_problem,
    signed_bytes,
)
from grader.rubric import load_rubric
from grader.sandbox import RunPlan, Sandbox, Serving, Wall
from tests.grader.outputs.test_report import sample
from tests.submissions import REFERENCE, make_submission

KEY = b"instructor-key-0123456789abcdef"
OTHER = b"student-guess-0123456789abcdef!"


def written(folder: Path, key: bytes | None = KEY) -> tuple[Path, Path]:
    """The sample's report.json and results.json in ``folder``, signed with ``key``."""
    folder.mkdir(parents=True, exist_ok=True)
    report, results = folder / REPORT, folder / RESULTS
    report.write_bytes(render_report_json(sample()))
    results.write_bytes(render_gradescope(sample(), report_digest(sample())))
    if key is not None:
        sign_file(report, "report", key)
        sign_file(results, "results", key)
    return report, results


def rewrite(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Edit a file as a forger would: change it, recompute its digest, write it canonically."""
    document = json.loads(path.read_bytes())
    edit(document)
    if "digest" in document:
        body = {k: v for k, v in document.items() if k not in ("digest", "signature")}
        document["digest"] = hashlib.sha256(canonical(body)).hexdigest()
    path.write_bytes(canonical(document) + b"\n")


def consistent_raise(document: dict[str, Any]) -> None:
    """Full marks on the lost check, with the criterion and total raised to match."""
    document["criteria"][0]["checks"][3].update(points="7.50", passed=True)
    document["criteria"][0]["points"] = "30.00"
    document["total"] = "45.00"


# -- the key -------------------------------------------------------------------------------


def test_the_key_comes_from_the_flag_the_file_variable_or_the_variable(tmp_path: Path) -> None:
    key_file = tmp_path / "grading.key"
    key_file.write_bytes(KEY + b"\n")
    assert load_key(env={}) is None
    assert load_key(env={KEY_ENV: KEY.decode()}) == KEY
    assert load_key(env={KEY_FILE_ENV: str(key_file)}) == KEY  # its final newline dropped
    assert load_key(key_file, env={KEY_ENV: OTHER.decode()}) == KEY  # the flag wins
    with pytest.raises(UsageError, match="unset one of them"):
        load_key(env={KEY_ENV: OTHER.decode(), KEY_FILE_ENV: str(key_file)})
    with pytest.raises(UsageError, match="check the path, or make one with"):
        load_key(tmp_path / "missing.key", env={})


@pytest.mark.parametrize("short", ["", "fifteen-bytes!!"])
def test_a_short_key_is_a_usage_error_that_states_the_fix(short: str) -> None:
    with pytest.raises(UsageError) as caught:
        load_key(env={KEY_ENV: short})
    message = str(caught.value)
    assert f"{len(short)} bytes, fewer than 16" in message
    assert "secrets.token_hex(32)" in message and "to grade without signing" in message
    assert load_key(env={KEY_ENV: "sixteen-bytes!!!"}) == b"sixteen-bytes!!!"


def gradekit(
    *args: str | Path,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in (KEY_ENV, KEY_FILE_ENV)}
    return subprocess.run(
        [sys.executable, "-m", "grader", *map(str, args)],
        text=True,
        capture_output=True,
        env={**clean, **(env or {})},
        check=False,
    )


@pytest.mark.slow
def test_a_short_key_stops_grade_and_verify_with_exit_2(tmp_path: Path) -> None:
    report, _ = written(tmp_path / "alice")
    done = gradekit("report", "verify", report, env={KEY_ENV: "short"})
    assert done.returncode == 2 and "fewer than 16" in done.stderr
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / "pyproject.toml").write_text("", encoding="utf-8")
    done = gradekit("grade", tmp_path / "bob", "--out", tmp_path / "grades", env={KEY_ENV: "short"})
    assert done.returncode == 2 and "fewer than 16" in done.stderr
    assert not (tmp_path / "grades").exists()  # refused before anything was graded


# -- the signature -------------------------------------------------------------------------


def test_the_signature_is_an_hmac_of_the_context_and_the_canonical_document() -> None:
    document = json.loads(render_report_json(sample()))
    expected = hmac.new(KEY, CONTEXT["report"] + canonical(document), hashlib.sha256)
    assert sign("report", document, KEY) == "hmac-sha256:" + expected.hexdigest()
    document["signature"] = "anything"
    assert signed_bytes("report", document) == CONTEXT["report"] + canonical(
        {k: v for k, v in document.items() if k != "signature"}
    )


@pytest.mark.parametrize("name", [REPORT, RESULTS])
def test_signed_files_verify_with_the_key_and_say_so(tmp_path: Path, name: str) -> None:
    written(tmp_path)
    verdict = verify_file(tmp_path / name, KEY)
    assert verdict.ok, verdict.message
    assert verdict.message.endswith("signature valid")


@pytest.mark.parametrize("name", [REPORT, RESULTS])
def test_without_a_key_verify_says_the_signature_was_not_checked(tmp_path: Path, name: str) -> None:
    for key in (KEY, None):
        written(tmp_path / str(key), key)
        verdict = verify_file(tmp_path / str(key) / name, None)
        assert verdict.ok, verdict.message
        assert "signature not checked: no key" in verdict.message


def test_a_consistent_forgery_with_a_recomputed_digest_is_rejected_only_by_the_key(
    tmp_path: Path,
) -> None:
    report, _ = written(tmp_path)
    rewrite(report, consistent_raise)
    assert verify_file(report, None).ok  # digest and sums cannot tell: that is the point
    verdict = verify_file(report, KEY)
    assert not verdict.ok
    assert "the signature does not match: the file was edited after grading" in verdict.message


def test_a_forged_results_json_is_rejected_by_the_key(tmp_path: Path) -> None:
    report, results = written(tmp_path)
    rewrite(report, consistent_raise)

    def raise_results(document: dict[str, Any]) -> None:
        document["score"] = 45.0
        document["tests"][3].update(score=7.5, status="passed")
        document["extra_data"]["digest"] = json.loads(report.read_bytes())["digest"]

    rewrite(results, raise_results)
    assert verify_file(results, None).ok  # it agrees with the forged report next to it
    verdict = verify_file(results, KEY)
    assert not verdict.ok and "signature does not match" in verdict.message


def test_a_forger_signing_with_a_key_of_their_own_is_rejected(tmp_path: Path) -> None:
    report, results = written(tmp_path, OTHER)
    for path in (report, results):
        verdict = verify_file(path, KEY)
        assert not verdict.ok and "signed with another key" in verdict.message


@pytest.mark.parametrize("name", [REPORT, RESULTS])
def test_a_file_that_should_be_signed_but_is_not_is_rejected_with_the_key(
    tmp_path: Path, name: str
) -> None:
    written(tmp_path, None)
    verdict = verify_file(tmp_path / name, KEY)
    assert not verdict.ok
    assert "not signed, but a key was given" in verdict.message


def test_removing_a_signature_is_rejected_with_the_key(tmp_path: Path) -> None:
    report, results = written(tmp_path)
    rewrite(report, lambda d: d.pop("signature"))
    rewrite(results, lambda d: d["extra_data"].pop("signature"))
    for path in (report, results):
        assert verify_file(path, None).ok
        assert "not signed" in verify_file(path, KEY).message


def test_a_signature_moved_to_the_other_kind_of_file_is_rejected(tmp_path: Path) -> None:
    report, results = written(tmp_path)
    signature = json.loads(report.read_bytes())["signature"]
    rewrite(results, lambda d: d["extra_data"].update(signature=signature))
    assert not verify_file(results, KEY).ok
    document = json.loads(report.read_bytes())
    problem, _ = signature_problem("results", document, KEY)
    assert problem is not None  # a report's MAC is not a valid results MAC of the same bytes


def test_a_malformed_signature_fails_even_without_a_key(tmp_path: Path) -> None:
    report, _ = written(tmp_path)
    rewrite(report, lambda d: d.update(signature="hmac-sha256:nothex"))
    verdict = verify_file(report, None)
    assert not verdict.ok and "not hmac-sha256: and 64 hex digits" in verdict.message


def test_signatures_are_compared_in_constant_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report, _ = written(tmp_path)
    compared: list[tuple[str, str]] = []
    real = hmac.compare_digest

    def spy(a: str, b: str) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr("grader.outputs._signing.hmac.compare_digest", spy)
    assert verify_file(report, KEY).ok
    assert len(compared) == 1


def test_signing_leaves_the_digest_and_the_rest_of_the_bytes_alone(tmp_path: Path) -> None:
    unsigned, _ = written(tmp_path / "unsigned", None)
    signed, _ = written(tmp_path / "signed")
    plain = json.loads(unsigned.read_bytes())
    document = json.loads(signed.read_bytes())
    assert document.pop("signature").startswith("hmac-sha256:")
    assert document == plain and plain["digest"] == report_digest(sample())
    assert canonical(plain) + b"\n" == unsigned.read_bytes() == render_report_json(sample())


@pytest.mark.slow
def test_the_cli_verifies_with_a_key_file_and_exits_1_on_a_forgery(tmp_path: Path) -> None:
    key_file = tmp_path / "grading.key"
    key_file.write_bytes(KEY + b"\n")
    report, results = written(tmp_path / "alice")
    done = gradekit("report", "verify", "--key-file", key_file, report, results)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("signature valid") == 2
    rewrite(report, consistent_raise)
    done = gradekit("report", "verify", report, results, env={KEY_FILE_ENV: str(key_file)})
    assert done.returncode == 1
    assert f"FAIL {report}: the signature does not match" in done.stderr
    # results.json was not touched, but it no longer matches the report beside it
    assert f"FAIL {results}: extra_data.digest is" in done.stderr
    assert "they are from different gradings" in done.stderr
    done = gradekit("report", "verify", report)
    assert done.returncode == 0 and "signature not checked" in done.stdout


# -- the batch signs; the key reaches no worker and no sandboxed child ----------------------


@pytest.mark.slow
def test_grade_signs_both_files_and_the_digest_is_the_unsigned_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    submission = make_submission(tmp_path / "subs" / "alice")
    rubric = load_rubric(REFERENCE / "rubric" / "bootcamp.toml")
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    monkeypatch.delenv(KEY_ENV, raising=False)
    [plain] = grade_batch([submission], rubric, out=tmp_path / "plain", jobs=1)
    monkeypatch.setenv(KEY_ENV, KEY.decode())
    [signed] = grade_batch([submission], rubric, out=tmp_path / "signed", jobs=1)
    assert (plain.status, signed.status) == ("graded", "graded")
    assert plain.digest == signed.digest
    for name in (REPORT, RESULTS):
        assert verify_file(tmp_path / "signed" / "alice" / name, KEY).ok
        assert "not signed" in verify_file(tmp_path / "plain" / "alice" / name, KEY).message
    report = json.loads((tmp_path / "signed" / "alice" / REPORT).read_bytes())
    del report["signature"]
    assert canonical(report) + b"\n" == (tmp_path / "plain" / "alice" / REPORT).read_bytes()


@pytest.mark.slow
def test_grade_signs_with_a_key_file_given_on_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    monkeypatch.delenv(KEY_ENV, raising=False)
    make_submission(tmp_path / "subs" / "alice")
    key_file = tmp_path / "grading.key"
    key_file.write_bytes(KEY + b"\n")
    done = gradekit(
        "grade", tmp_path / "subs", "--out", tmp_path / "out", "--key-file", key_file, "--quiet"
    )
    assert done.returncode == 0, done.stderr
    for name in (REPORT, RESULTS):
        assert verify_file(tmp_path / "out" / "alice" / name, KEY).ok
    short = tmp_path / "short.key"
    short.write_bytes(b"too short")
    done = gradekit("grade", tmp_path / "subs", "--out", tmp_path / "out2", "--key-file", short)
    assert done.returncode == 2 and not (tmp_path / "out2").exists()


def test_workers_get_no_signing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY.decode())
    monkeypatch.setenv(KEY_FILE_ENV, "/somewhere/grading.key")
    environment = _worker_environment()
    assert KEY_ENV not in environment and KEY_FILE_ENV not in environment
    assert "PYTHONPATH" in environment


SNOOP = """
import os


def run(provider, task):
    return repr((os.environ.get("GRADEKIT_SIGNING_KEY"),
                 os.environ.get("GRADEKIT_SIGNING_KEY_FILE")))
"""


@pytest.mark.slow
def test_a_sandboxed_agent_cannot_read_the_signing_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolation: Wall
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY.decode())
    monkeypatch.setenv(KEY_FILE_ENV, str(tmp_path / "grading.key"))
    root = tmp_path / "snoop"
    (root / "lab").mkdir(parents=True)
    (root / "lab" / "__init__.py").write_text("", encoding="utf-8")
    (root / "lab" / "agent.py").write_text(SNOOP, encoding="utf-8")
    (root / "pyproject.toml").write_text("", encoding="utf-8")
    result = Sandbox(root, tmp_path / "scratch", Limits(timeout_s=20), isolation).run(
        "lab.agent:run",
        [("snoop", "what is the key?")],
        RunPlan("provider-a", 0, Serving(lambda case, prompt: None)),
    )
    outcome = result.outcomes["snoop"]
    assert outcome.status == "returned", outcome
    assert outcome.answer == repr((None, None))
    assert os.environ[KEY_ENV] == KEY.decode()  # it was set, here, all along


# -- the draw key: what a grading's labels and seeds are keyed with --------------------------


def test_a_draw_key_is_derived_from_the_signing_key_alike_in_every_grades_folder(
    tmp_path: Path,
) -> None:
    signing = KEY
    first, second = draw_key(tmp_path / "a", signing), draw_key(tmp_path / "b", signing)
    assert first == second == hmac.new(signing, b"gradekit-draw-key/1\n", hashlib.sha256).digest()
    assert first != signing and signing not in first
    assert draw_key(tmp_path / "a", b"another key of the instructor") != first
    assert not (tmp_path / "a").exists()  # nothing is kept when it can be derived


def test_without_a_signing_key_the_grades_folder_keeps_one_private_to_its_owner(
    tmp_path: Path,
) -> None:
    made = draw_key(tmp_path, None)
    kept = tmp_path / DRAW_KEY
    assert kept.stat().st_mode & 0o777 == 0o600
    assert kept.read_text("ascii") == made.hex() + "\n" and len(made) == 32
    assert draw_key(tmp_path, None) == made  # the next grading draws with the same key
    assert draw_key(tmp_path / "other", None) not in (made, b"")


@pytest.mark.parametrize("text", ["", "not hex at all\n", "ab" * 31 + "\n", "zz" * 32])
def test_a_kept_draw_key_that_is_not_one_is_a_usage_error_that_states_the_fix(
    tmp_path: Path, text: str
) -> None:
    (tmp_path / DRAW_KEY).write_text(text, "ascii")
    with pytest.raises(
        UsageError,
        match=r"is not a draw key .* restore it from a backup .* "
        r"or delete it and a new one is made",
    ):
        draw_key(tmp_path, None)
