"""The grades folder's home: a submission's outputs are the files it names, written once with
their reviews in, and signed once, only when both verify."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from grader import HumanReview
from grader.ledger import (
    CALLS,
    LEDGER,
    MARKDOWN,
    OUTPUT,
    OUTPUT_CAP,
    REPORT,
    RESULTS,
    capped,
    ledger_above,
    report_beside,
    sign_outputs,
    verify_file,
    write_submission,
)
from grader.outputs import (
    GradebookRow,
    calls_document,
    canonical,
    render_calls,
    render_gradescope,
    render_markdown,
    render_report_json,
    report_digest,
    verify_results,
)
from grader.scoring import Evidence
from tests.grader.outputs.test_report import sample

KEY = b"instructor-key-0123456789abcdef"
WALL = "process guard only"
# sample() scores 37.50 of 45.00; its first criterion is contract_stability, 22.50 of 30.00
REVIEW = HumanReview(
    criterion="contract_stability",
    automated=Decimal("22.50"),
    points=Decimal("25.00"),
    by="kim",
    reason="the label changed nothing",
    event=7,
)
NOTHING_RAN = Evidence(
    cases=(),
    label="x",
    primary=None,
    others=(),
    loud=(),
    probe=None,
    failures=None,
    stretch=(),
    second_set=None,
)


def written(out: Path) -> GradebookRow:
    """sample() graded into ``out/alice`` with REVIEW, and its gradebook row."""
    report = sample()
    digest = write_submission(out / "alice", report, NOTHING_RAN, isolation=WALL, reviews=(REVIEW,))
    assert digest == report_digest(report)
    return GradebookRow(
        submission="alice",
        student=report.submission,
        status="graded",
        total="37.50",
        max="45.00",
        criteria={},
        digest=digest,
        reason="",
    )


def test_a_submission_s_outputs_are_the_files_the_folder_names_with_the_reviews_in(
    tmp_path: Path,
) -> None:
    written(tmp_path)
    folder, report = tmp_path / "alice", sample()
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [REPORT, MARKDOWN, RESULTS, OUTPUT, CALLS]
    )
    assert (folder / REPORT).read_bytes() == render_report_json(report)  # never the review
    assert (folder / MARKDOWN).read_text("utf-8") == render_markdown(report, isolation=WALL)
    assert (folder / RESULTS).read_bytes() == render_gradescope(
        report, report_digest(report), isolation=WALL, reviews=(REVIEW,)
    )
    assert (folder / OUTPUT).read_bytes() == b"The agent printed nothing.\n"
    assert (folder / CALLS).read_bytes() == render_calls(calls_document(None, ()))
    results = json.loads((folder / RESULTS).read_bytes())
    assert results["extra_data"]["review"][0]["points"] == "25.00"
    ok, why = verify_results((folder / RESULTS).read_bytes(), (folder / REPORT).read_bytes())
    assert ok, why
    assert report_beside(folder / RESULTS) == folder / REPORT
    assert ledger_above(folder / RESULTS) == tmp_path / LEDGER


def test_signing_signs_both_files_once_they_verify_and_nothing_without_a_key(
    tmp_path: Path,
) -> None:
    row = written(tmp_path)
    folder = tmp_path / "alice"
    unsigned = {name: (folder / name).read_bytes() for name in (REPORT, RESULTS)}
    assert sign_outputs(row, tmp_path, None) == row
    assert {name: (folder / name).read_bytes() for name in unsigned} == unsigned
    assert sign_outputs(row, tmp_path, KEY) == row
    for name in (REPORT, RESULTS):
        verdict = verify_file(folder / name, KEY)
        assert verdict.ok and "signature valid" in verdict.message, verdict.message
        document = json.loads((folder / name).read_bytes())
        (document if name == REPORT else document["extra_data"]).pop("signature")
        assert canonical(document) + b"\n" == unsigned[name]  # the signature, nothing else


@pytest.mark.parametrize(
    ("name", "says"),
    [
        (
            RESULTS,
            "results.json does not verify before signing: score is 41.00 but the report's "
            "total is 37.50 and its reviews make it 40.00",
        ),
        (REPORT, "report.json does not verify before signing: digest mismatch"),
    ],
)
def test_an_output_that_does_not_verify_is_never_signed(
    tmp_path: Path, name: str, says: str
) -> None:
    row = written(tmp_path)
    path = tmp_path / "alice" / name
    document = json.loads(path.read_bytes())
    if name == RESULTS:
        document["score"] += 1  # the reviewed test raised, the sum kept
        document["tests"][0]["score"] += 1
    else:
        document["total"] = "99.00"
    path.write_bytes(canonical(document) + b"\n")
    edited = path.read_bytes()
    failed = sign_outputs(row, tmp_path, KEY)
    assert (failed.status, failed.digest) == ("error", "")
    assert says in failed.reason and "nothing was scored; grade it again" in failed.reason
    assert path.read_bytes() == edited


def test_output_txt_is_cut_at_its_cap_and_stays_utf8() -> None:
    assert capped("é" * 10) == ("é" * 10).encode()
    data = capped("é" * OUTPUT_CAP)
    assert len(data) <= OUTPUT_CAP
    assert data.decode("utf-8").endswith(
        f"[gradekit cut {OUTPUT} here: it keeps the first 256 KiB of the agent's "
        f"{2 * OUTPUT_CAP} bytes of output]\n"
    )
