"""The grader's copy of a submission is counted before it is made (``grader.sandbox._bounds``):
past ``disk_mb`` of apparent size, ``submission_entries`` or ``submission_depth``, nothing is
copied and the grading says why. Real files in tmp folders; the attacks come first.

A red-team's 1.5 GB sparse file (0 bytes on disk) took 1.5 GB of ``/dev/shm``, where a
grading's scratch folder lives, and left a batch's honest classmates with no room.

It tests ``grader.sandbox._bounds`` on purpose (``Over`` and the names of its caps), with
the names every copy leaves out (``grader._model.IGNORED_NAMES``)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from grader._model import IGNORED_NAMES, Limits
from grader.rubric import parse_rubric
from grader.sandbox import LaidOut, SubmissionTooLarge, copy_submission
from grader.sandbox._bounds import DEPTH, ENTRIES, SIZE, Over, measure

REPO = Path(__file__).resolve().parents[3]
MIB = 1 << 20


def sparse(path: Path, size: int) -> Path:
    """A file of apparent ``size`` that holds no block on disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    os.truncate(path, size)
    return path


def held(folder: Path) -> tuple[list[str], int]:
    """Every entry under ``folder`` and the bytes they really take (blocks, not sizes)."""
    if not folder.exists():
        return [], 0
    names, used = [], 0
    for here, folders, files in os.walk(folder):
        for name in (*folders, *files):
            path = os.path.join(here, name)
            names.append(os.path.relpath(path, folder))
            used += os.lstat(path).st_blocks * 512
    return sorted(names), used


def lab(root: Path) -> Path:
    (root / "lab").mkdir(parents=True)
    (root / "lab" / "agent.py").write_text("def run(provider, task):\n    return task\n")
    return root


def lay_out(root: Path, scratch: Path, limits: Limits | None = None) -> Path:
    return LaidOut().source(root, scratch, ["lab"], limits or Limits())


def test_a_sparse_file_past_disk_mb_is_refused_and_nothing_is_copied(tmp_path: Path) -> None:
    root = lab(tmp_path / "mallory")
    big = sparse(root / "lab" / "big.bin", 256 * MIB)
    assert big.stat().st_blocks * 512 < MIB  # the attack: no room taken on the student's side
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with pytest.raises(SubmissionTooLarge) as refused:
        lay_out(root, scratch)
    assert str(refused.value) == (
        "the submission holds 256.00 MiB (its apparent size: sparse files counted in full, "
        "and a hard-linked file once for each of its names, as the grader's copy writes "
        "them), past its limit of 64 MiB (disk_mb = 64 in the rubric's [limits]): its "
        "largest file is lab/big.bin, 256.00 MiB; nothing was copied or run. Remove what "
        "the lab does not need from the submission (data, models, build outputs), or raise "
        "disk_mb if the lab needs that much"
    )
    assert refused.value.status == "ungradable" and refused.value.exit_code == 1
    assert held(scratch) == ([], 0)


def test_a_file_hard_linked_many_times_counts_once_for_each_name(tmp_path: Path) -> None:
    root = lab(tmp_path / "mallory")
    base = root / "data" / "base.bin"
    base.parent.mkdir()
    base.write_bytes(b"\1" * MIB)
    for number in range(79):
        os.link(base, root / "data" / f"link-{number:02d}.bin")
    assert base.stat().st_nlink == 80  # 1 MiB on disk, 80 MiB for a copy to write
    scratch = tmp_path / "scratch"
    with pytest.raises(
        SubmissionTooLarge,
        match=r"^the submission holds 80\.00 MiB .* its "
        r"largest file is data/base\.bin, 1\.00 MiB; nothing was copied",
    ):
        lay_out(root, scratch)
    assert held(scratch) == ([], 0)
    # Under the cap the same links are copied, each in full.
    copy = lay_out(root, tmp_path / "roomy", Limits(disk_mb=81))
    assert (copy / "data" / "link-78.bin").stat().st_nlink == 1
    assert held(tmp_path / "roomy")[1] >= 80 * MIB


def test_the_size_cap_is_exact_and_just_past_it_reads_past_it(tmp_path: Path) -> None:
    root = tmp_path / "alice"
    sparse(root / "data.bin", MIB)
    assert (lay_out(root, tmp_path / "at", Limits(disk_mb=1)) / "data.bin").stat().st_size == MIB
    os.truncate(root / "data.bin", MIB + 1)
    with pytest.raises(
        SubmissionTooLarge,
        match=r"^the submission holds 1\.00 MiB "
        r"\(1,048,577 bytes\) \(its apparent size: .* past its limit of 1 MiB "
        r"\(disk_mb = 1 ",
    ):
        lay_out(root, tmp_path / "past", Limits(disk_mb=1))
    assert held(tmp_path / "past") == ([], 0)


def test_too_many_files_are_refused_naming_the_first_past_the_cap(tmp_path: Path) -> None:
    root = lab(tmp_path / "mallory")  # lab, lab/agent.py: 2 entries
    for number in range(18):
        (root / "lab" / f"gen-{number:02d}.txt").write_text("x")
    (root / ".git").mkdir()  # ignored: neither copied nor counted
    for number in range(50):
        (root / ".git" / f"object-{number}").write_text("x")
    limits = Limits(submission_entries=20)
    copy = lay_out(root, tmp_path / "at", limits)
    # The laid-out copy also holds the grader's bytecode (lab/__pycache__), not counted.
    assert len([name for name in held(copy)[0] if "__pycache__" not in name]) == 20
    (root / "lab" / "gen-18.txt").write_text("x")
    scratch = tmp_path / "past"
    with pytest.raises(SubmissionTooLarge) as refused:
        lay_out(root, scratch, limits)
    assert str(refused.value) == (
        "the submission holds more than 20 files, folders and links (ignored names such as "
        ".git, .venv and node_modules not counted), past its limit of 20 (submission_entries "
        "= 20 in the rubric's [limits]): the first past it, in the order the grader copies "
        "them, is lab/gen-18.txt; nothing was copied or run. Remove what the lab does not "
        "need from the submission (generated files, a copied library), or raise "
        "submission_entries if the lab needs that many"
    )
    assert held(scratch) == ([], 0)


def test_too_deep_is_refused_and_nothing_is_copied(tmp_path: Path) -> None:
    root = lab(tmp_path / "mallory")
    root.joinpath(*["d"] * 40).mkdir(parents=True)
    scratch = tmp_path / "scratch"
    with pytest.raises(SubmissionTooLarge) as refused:
        lay_out(root, scratch)
    assert str(refused.value) == (
        f"the submission nests {'/'.join(['d'] * 33)} 33 levels deep, past its limit of 32 "
        "(submission_depth = 32 in the rubric's [limits]); nothing was copied or run. Move "
        "it nearer the top or remove it, or raise submission_depth if the lab needs that "
        "depth"
    )
    assert held(scratch) == ([], 0)


def test_the_depth_cap_is_exact(tmp_path: Path) -> None:
    root = tmp_path / "alice"
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "a" / "b" / "c" / "d.txt").write_text("4 deep")
    (root / "a" / "b" / "c" / "e").mkdir()  # an empty folder 4 deep
    limits = Limits(submission_depth=4)
    assert (lay_out(root, tmp_path / "at", limits) / "a/b/c/d.txt").read_text() == "4 deep"
    (root / "a" / "b" / "c" / "e" / "f.txt").write_text("5 deep")
    with pytest.raises(
        SubmissionTooLarge,
        match=r"^the submission nests a/b/c/e/f\.txt 5 "
        r"levels deep, past its limit of 4 \(submission_depth = 4 ",
    ):
        lay_out(root, tmp_path / "past", limits)


def test_the_walk_counts_exactly_what_copy_submission_copies(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    sparse(outside / "huge.bin", 1 << 30)
    for number in range(30):
        (outside / f"file-{number}").write_text("x")
    root = lab(tmp_path / "alice")
    (root / "lab" / "notes.md").write_text("n" * 1000)
    (root / "lab" / "__pycache__").mkdir()
    (root / "lab" / "__pycache__" / "agent.cpython-311.pyc").write_bytes(b"p" * 5000)
    (root / "stale.pyc").write_bytes(b"p" * 5000)
    sparse(root / ".git" / "objects" / "pack.bin", 1 << 30)
    sparse(root / "node_modules" / "dep" / "index.js", 1 << 30)
    sparse(root / "build" / "out.bin", 1 << 30)
    (root / "a.txt").write_text("h" * 500)
    os.link(root / "a.txt", root / "b.txt")
    (root / "empty").mkdir()
    (root / "huge-link").symlink_to(outside / "huge.bin")  # kept a link: its target's length
    (root / "folder-link").symlink_to(outside)  # never followed
    (root / "dangling").symlink_to("nowhere")
    os.mkfifo(root / "pipe")  # left out
    copy = tmp_path / "copy"
    copy_submission(str(root), str(copy), IGNORED_NAMES)

    copied = [
        Path(here, name) for here, folders, files in os.walk(copy) for name in (*folders, *files)
    ]
    entries = len(copied)
    size = sum(p.lstat().st_size for p in copied if not stat.S_ISDIR(p.lstat().st_mode))
    depth = max(len(p.relative_to(copy).parts) for p in copied)
    assert sorted(str(p.relative_to(copy)) for p in copied) == [
        "a.txt",
        "b.txt",
        "dangling",
        "empty",
        "folder-link",
        "huge-link",
        "lab",
        "lab/agent.py",
        "lab/notes.md",
    ]
    assert (
        size
        == 500
        + 500
        + len("nowhere")
        + len(str(outside))
        + len(str(outside / "huge.bin"))
        + (root / "lab" / "agent.py").stat().st_size
        + 1000
    )

    def walked(**caps: int) -> Over | None:
        return measure(
            str(root), IGNORED_NAMES, **{"size": 1 << 40, "entries": 1 << 20, "depth": 64, **caps}
        )

    assert walked(size=size, entries=entries, depth=depth) is None
    assert walked(size=size - 1) == Over(SIZE, size, size - 1, "lab/notes.md", 1000)
    over_entries = walked(entries=entries - 1)
    assert over_entries is not None and (over_entries.what, over_entries.found) == (
        ENTRIES,
        entries,
    )
    assert walked(depth=depth - 1) == Over(DEPTH, depth, depth - 1, "lab/agent.py")


def test_a_refusal_reads_the_same_wherever_the_submission_lies(tmp_path: Path) -> None:
    """Sizes and paths inside the submission only, and the copy's own order (names sorted),
    not the order a file system lists a folder in."""
    reasons = []
    for place, names in (("here", range(30)), ("there", reversed(range(30)))):
        root = tmp_path / place / "deep" / "mallory"
        root.mkdir(parents=True)
        for number in names:
            (root / f"f-{number:02d}").write_text("x" * number)
        with pytest.raises(SubmissionTooLarge) as refused:
            lay_out(root, tmp_path / place / "scratch", Limits(submission_entries=25))
        reasons.append(str(refused.value))
        assert str(tmp_path) not in reasons[-1] and "f-25" in reasons[-1]
    assert reasons[0] == reasons[1]


def test_the_hand_out_passes_every_cap_with_room() -> None:
    """This checkout is what a student clones (about 480 entries, 4 MB): a quarter of each
    default cap holds it."""
    limits = Limits()
    assert (
        measure(
            str(REPO),
            IGNORED_NAMES,
            size=(limits.disk_mb << 20) // 4,
            entries=limits.submission_entries // 4,
            depth=limits.submission_depth // 4,
        )
        is None
    )


def test_the_caps_are_limits_a_rubric_may_set_and_every_rubric_stays_valid() -> None:
    shipped = (REPO / "rubric" / "bootcamp.toml").read_bytes()
    assert "submission_entries" not in shipped.decode()
    limits = parse_rubric(shipped, source="bootcamp.toml").limits
    assert (limits.submission_entries, limits.submission_depth) == (10000, 32)
    raised = parse_rubric(
        shipped.replace(
            b"[limits]\n", b"[limits]\nsubmission_entries = 50000\nsubmission_depth = 64\n"
        ),
        source="raised.toml",
    ).limits
    assert (raised.submission_entries, raised.submission_depth) == (50000, 64)
