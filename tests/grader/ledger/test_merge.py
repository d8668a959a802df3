"""``gradekit ledger merge`` on hand-built grades folders: the prefix kept once, shards fused
into the batch one machine writes, quoted seqs renumbered, and the same bytes whatever
the order the folders are given in. Each ledger is written by the ledger's own
``append_events``, each merge run through the real command line."""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.cli import main
from grader.ledger import (
    ARCHIVE,
    DRAW_KEY,
    LEDGER,
    append_events,
    plan_merge,
    read_ledger,
    verify_ledger,
)

RUBRIC = {"cases": {"refund-policy": "c" * 64}, "id": "bootcamp", "sha256": "r" * 64, "version": 1}


def _batch(
    folders: Sequence[str], *, shard: str = "", mode: str | None = "update", **extra: Any
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "event": "batch",
        "grader": "0.1.0",
        "rubric": RUBRIC,
        "counts": {"graded": len(folders)} if folders else {},
        "selection": sorted(folders),
        "unchanged": [],
    }
    if mode is not None:
        event["mode"] = mode
    if shard:
        event["shard"] = shard
    return event | extra


def _run(folder: str, total: str = "90.00") -> dict[str, Any]:
    return {
        "event": "run",
        "grader": "0.1.0",
        "key": hashlib.sha256(folder.encode()).hexdigest(),
        "report": hashlib.sha256(f"report {folder}".encode()).hexdigest(),
        "status": "graded",
        "student": folder,
        "submission": folder,
        "total": total,
    }


def _grading(folders: Sequence[str], **batch: Any) -> list[dict[str, Any]]:
    """A batch event and its runs, in the order append_grading writes them."""
    return [_batch(folders, **batch), *(_run(folder) for folder in sorted(folders))]


def _folder(root: Path, *appends: Sequence[Mapping[str, Any]]) -> Path:
    """A grades folder whose ledger is ``appends``, each one append."""
    root.mkdir(parents=True)
    for events in appends:
        append_events(root / LEDGER, events)
    return root


def _events(folder: Path) -> list[dict[str, Any]]:
    return [dict(event) for event in read_ledger(folder / LEDGER).events]


def _merge(out: Path, *folders: Path, extra: Sequence[str] = ()) -> int:
    return main(["ledger", "merge", *map(str, folders), "--out", str(out), *extra])


def test_the_shared_prefix_is_kept_once_and_shards_fuse_into_one_batch(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = _grading(["ann", "bob"])
    review = {
        "event": "review",
        "student": "ann",
        "run": 1,
        "criterion": "tracing",
        "points": None,
        "by": "kim",
        "reason": "ok",
    }
    shards = [["cat", "fay"], ["dan", "gus"], ["eve"]]  # --shard K/3: every third name
    folders = [
        _folder(tmp_path / f"shard-{k}", before, [review], _grading(names, shard=f"{k}/3"))
        for k, names in enumerate(shards, 1)
    ]
    prefix = (folders[0] / LEDGER).read_bytes().splitlines(keepends=True)[:4]
    assert _merge(tmp_path / "grades", *folders) == 0
    assert "1 batch event(s) fused from shards" in capsys.readouterr().out

    merged = tmp_path / "grades" / LEDGER
    assert verify_ledger(merged)[0]
    assert merged.read_bytes().splitlines(keepends=True)[:4] == prefix  # byte for byte, once
    events = _events(tmp_path / "grades")
    batch, *runs, last = events[4:]
    everyone = ["cat", "dan", "eve", "fay", "gus"]
    assert {k: v for k, v in batch.items() if k not in ("seq", "prev")} == _batch(everyone) | {
        "counts": {"graded": 5}
    }
    assert "shard" not in batch
    assert [run["submission"] for run in runs] == everyone  # the order one machine writes
    lines = [(f / LEDGER).read_bytes().splitlines() for f in folders]
    heads = sorted((hashlib.sha256(own[-1]).hexdigest(), len(own)) for own in lines)
    assert last["event"] == "merge"
    assert [(s["head"], s["events"]) for s in last["sources"]] == heads


def test_the_fused_batch_sums_counts_and_keeps_only_what_one_machine_would_list(
    tmp_path: Path,
) -> None:
    one = _grading(["ann"], shard="1/2", kept=["bob", "old"], absent=["old"], interrupted=["cy"])
    one[0]["counts"] = {"graded": 1, "error": 2}
    two = _grading(["bob"], shard="2/2", kept=["ann", "old"], absent=["old"])
    two[0] |= {"counts": {"graded": 1, "ungradable": 1}, "unchanged": ["bob"]}
    folders = [_folder(tmp_path / "a", one), _folder(tmp_path / "b", two)]
    batch = plan_merge([f / LEDGER for f in folders]).events[0]
    assert batch == {
        "event": "batch",
        "grader": "0.1.0",
        "rubric": RUBRIC,
        "mode": "update",
        "counts": {"error": 2, "graded": 2, "ungradable": 1},
        "selection": ["ann", "bob"],
        "unchanged": ["bob"],
        "interrupted": ["cy"],
        "kept": ["old"],
        "absent": ["old"],
    }


def test_a_review_after_the_prefix_quotes_its_run_by_the_merged_seq(tmp_path: Path) -> None:
    # A's batch holds the larger digest, so B's goes first and every seq of A moves on.
    alone = [_grading(["ann"], mode="replace"), _grading(["bob", "cat"], mode="replace")]
    first, second = sorted(
        alone,
        key=lambda group: hashlib.sha256(
            b"".join(
                json.dumps(e, sort_keys=True, separators=(",", ":")).encode() + b"\n" for e in group
            )
        ).hexdigest(),
        reverse=True,
    )
    review = {
        "event": "review",
        "student": first[1]["student"],
        "run": 1,
        "criterion": "tracing",
        "points": "10.00",
        "by": "kim",
        "reason": "why",
    }
    promote = {"event": "promote", "set": "s", "run": 1, "review": len(first), "by": "kim"}
    a = _folder(tmp_path / "a", first, [review], [promote])
    b = _folder(tmp_path / "b", second)
    plan = plan_merge([a / LEDGER, b / LEDGER])
    events = plan.events
    assert [e["event"] for e in events] == [
        "batch",
        *["run"] * (len(second) - 1),
        "batch",
        *["run"] * (len(first) - 1),
        "review",
        "promote",
        "merge",
    ]
    run_seq = len(second) + 1  # A's run, after B's group and A's batch
    assert events[run_seq]["submission"] == first[1]["submission"]
    review_seq = len(second) + len(first)
    assert events[review_seq]["run"] == run_seq
    assert (events[review_seq + 1]["run"], events[review_seq + 1]["review"]) == (
        run_seq,
        review_seq,
    )
    assert plan.quoting  # ...and so the folders' merge refuses it (results.json quotes it)


def test_a_review_in_the_shared_prefix_keeps_its_seq_and_the_folders_merge(
    tmp_path: Path,
) -> None:
    review = {
        "event": "review",
        "student": "ann",
        "run": 1,
        "criterion": "tracing",
        "points": None,
        "by": "kim",
        "reason": "ok",
    }
    folders = [
        _folder(tmp_path / f"s{k}", _grading(["ann"]), [review], _grading([name], shard=f"{k}/2"))
        for k, name in ((1, "bob"), (2, "cat"))
    ]
    assert _merge(tmp_path / "grades", *folders) == 0
    assert _events(tmp_path / "grades")[2] == _events(folders[0])[2]


def test_a_review_after_the_prefix_is_refused_with_nothing_written(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    review = {
        "event": "review",
        "student": "ann",
        "run": 1,
        "criterion": "tracing",
        "points": None,
        "by": "kim",
        "reason": "ok",
    }
    a = _folder(tmp_path / "a", _grading(["ann"], shard="1/2"), [review])
    b = _folder(tmp_path / "b", _grading(["bob"], shard="2/2"))
    assert _merge(tmp_path / "grades", a, b) == 2
    error = capsys.readouterr().err
    assert f"{a / LEDGER}:3 review event comes after the history" in error
    assert "record it again in the merged folder" in error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


@settings(max_examples=40, deadline=None)
@given(
    names=st.lists(
        st.sampled_from(["ann", "bob", "cat", "dan", "eve", "fay", "gus", "hal"]),
        min_size=1,
        max_size=8,
        unique=True,
    ),
    count=st.integers(2, 4),
    shared=st.integers(0, 2),
    order=st.randoms(use_true_random=False),
    extras=st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["regrade", "note"])), max_size=3),
)
def test_any_order_of_the_folders_gives_the_same_bytes(
    names: list[str],
    count: int,
    shared: int,
    order: Any,
    extras: list[tuple[int, str]],
) -> None:
    cohort = sorted(names)
    history = [_grading(cohort[: shared + 1], mode="replace")] if shared else []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        folders = []
        for k in range(1, count + 1):
            appends = [*history, _grading(cohort[k - 1 :: count], shard=f"{k}/{count}")]
            for at, kind in extras:  # later work in some shards' folders: kept after it
                if at % count == k - 1:
                    appends.append(
                        _grading([cohort[k - 1]], total="99.00")
                        if kind == "regrade" and cohort[k - 1 :: count]
                        else [{"event": "note", "text": f"{kind} {at}"}]
                    )
            folders.append(_folder(root / f"shard-{k}", *appends))
        outputs = []
        for number in range(3):
            shuffled = list(folders)
            order.shuffle(shuffled)
            assert _merge(root / f"out-{number}", *shuffled) == 0
            outputs.append((root / f"out-{number}" / LEDGER).read_bytes())
        assert _merge(root / "reversed", *reversed(folders)) == 0
        outputs.append((root / "reversed" / LEDGER).read_bytes())
        assert len(set(outputs)) == 1
        assert verify_ledger(root / "out-0" / LEDGER)[0]
        assert plan_merge([f / LEDGER for f in folders]).fused == 1  # one batch of the shards
        merged = [_bare(e) for e in _events(root / "out-0")]
        for folder in folders:  # each folder's own order survives the merge
            own = [_bare(e) for e in _events(folder) if e["event"] == "note"]
            assert [e for e in merged if e in own] == own


def _bare(event: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k not in ("seq", "prev")}


def test_a_missing_shard_is_refused_unless_partial_keeps_the_shards_apart(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folders = [
        _folder(tmp_path / f"s{k}", _grading([name], shard=f"{k}/3"))
        for k, name in ((1, "ann"), (3, "cat"))
    ]
    assert _merge(tmp_path / "grades", *folders) == 2
    error = capsys.readouterr().err
    assert "shard(s) 2 of 3 are missing" in error and "--partial" in error
    assert not (tmp_path / "grades").exists()

    assert _merge(tmp_path / "grades", *folders, extra=["--partial"]) == 0
    shards = [e.get("shard") for e in _events(tmp_path / "grades") if e["event"] == "batch"]
    assert sorted(map(str, shards)) == ["1/3", "3/3"]  # each as its shard wrote it


def test_a_shard_graded_twice_or_a_folder_in_two_shards_is_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a = _folder(tmp_path / "a", _grading(["ann"], shard="1/2"))
    again = _folder(tmp_path / "again", _grading(["ann", "bob"], shard="1/2"))
    assert _merge(tmp_path / "grades", a, again) == 2
    assert "ann was graded in two of the folders merged" in capsys.readouterr().err
    b = _folder(tmp_path / "b", _grading(["cat"], shard="1/2"))
    c = _folder(tmp_path / "c", _grading(["dan"], shard="2/2"))
    assert _merge(tmp_path / "grades", b, c, a) == 2
    assert "shard 1/2 was graded twice" in capsys.readouterr().err
    assert not (tmp_path / "grades").exists()


def test_a_broken_chain_is_refused_naming_it_with_nothing_written(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a = _folder(tmp_path / "a", _grading(["ann"], shard="1/2"))
    b = _folder(tmp_path / "b", _grading(["bob", "cat"], shard="2/2"))
    text = (b / LEDGER).read_text("utf-8")
    (b / LEDGER).write_text(text.replace('"total":"90.00"', '"total":"99.00"', 1), "utf-8")
    assert _merge(tmp_path / "grades", a, b) == 2
    error = capsys.readouterr().err
    assert f"{b / LEDGER}:3: the chain breaks here" in error
    assert not (tmp_path / "grades").exists()


def test_older_batches_without_mode_stay_as_written_and_an_extension_is_no_merge(
    tmp_path: Path,
) -> None:
    old = _grading(["ann"], mode=None)
    a = _folder(tmp_path / "a", old)
    longer = _folder(tmp_path / "longer", old, _grading(["bob"], mode=None))
    assert _merge(tmp_path / "grades", longer, a) == 0
    # Nothing to merge: the result is the longer ledger, byte for byte, with no merge event.
    assert (tmp_path / "grades" / LEDGER).read_bytes() == (longer / LEDGER).read_bytes()
    b = _folder(tmp_path / "b", _grading(["cat"], mode=None))
    assert _merge(tmp_path / "both", a, b) == 0
    merged = _events(tmp_path / "both")
    assert [e["event"] for e in merged] == ["batch", "run", "batch", "run", "merge"]
    assert all("mode" not in e for e in merged)


def test_copies_must_agree_and_out_must_be_new(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a = _folder(tmp_path / "a", _grading(["ann"], shard="1/2"))
    b = _folder(tmp_path / "b", _grading(["bob"], shard="2/2"))
    for folder, name in ((a, "ann"), (b, "bob")):
        (folder / name).mkdir()
        (folder / name / "report.md").write_text(f"# {name}\n", "utf-8")
        (folder / ARCHIVE).mkdir()
        (folder / ARCHIVE / f"{'d' * 64}.json").write_text(f'{{"{name}":1}}', "utf-8")
    assert _merge(tmp_path / "grades", a, b) == 2
    error = capsys.readouterr().err
    assert f"{a / ARCHIVE / ('d' * 64 + '.json')} and {b / ARCHIVE}" in error
    assert not (tmp_path / "grades").exists()

    (b / ARCHIVE / f"{'d' * 64}.json").write_text('{"ann":1}', "utf-8")  # one report: fine
    (a / DRAW_KEY).write_text("1" * 64 + "\n", "ascii")
    (b / DRAW_KEY).write_text("2" * 64 + "\n", "ascii")
    assert _merge(tmp_path / "grades", a, b) == 2
    assert "GRADEKIT_SIGNING_KEY" in capsys.readouterr().err

    (b / DRAW_KEY).write_text("1" * 64 + "\n", "ascii")
    assert _merge(tmp_path / "grades", a, b) == 0
    out = tmp_path / "grades"
    assert (out / "ann" / "report.md").read_text("utf-8") == "# ann\n"
    assert (out / "bob" / "report.md").read_text("utf-8") == "# bob\n"
    assert (out / DRAW_KEY).stat().st_mode & 0o777 == 0o600  # a secret stays its owner's
    assert _merge(tmp_path / "grades", a, b) == 2  # never over a grades folder
    assert "already exists and is not an empty folder" in capsys.readouterr().err
    assert _merge(a / "inside", a, b) == 2
    assert "overlap" in capsys.readouterr().err


def test_a_folder_graded_by_one_shard_wins_over_the_stale_copies_of_the_others(
    tmp_path: Path,
) -> None:
    history = _grading(["ann", "bob"], mode="replace")
    a = _folder(tmp_path / "a", history, _grading(["ann"], shard="1/2", kept=["bob"]))
    b = _folder(tmp_path / "b", history, _grading(["bob"], shard="2/2", kept=["ann"]))
    for folder in (a, b):
        for name in ("ann", "bob"):
            (folder / name).mkdir()
            (folder / name / "report.md").write_text("old\n", "utf-8")
    (a / "ann" / "report.md").write_text("ann new\n", "utf-8")
    (b / "bob" / "report.md").write_text("bob new\n", "utf-8")
    assert _merge(tmp_path / "grades", b, a) == 0
    assert (tmp_path / "grades" / "ann" / "report.md").read_text("utf-8") == "ann new\n"
    assert (tmp_path / "grades" / "bob" / "report.md").read_text("utf-8") == "bob new\n"
    batch = _events(tmp_path / "grades")[3]
    assert batch["selection"] == ["ann", "bob"] and "kept" not in batch
