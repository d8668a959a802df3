"""The submission manifest: [tool.gradekit] in the submission's pyproject.toml."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader import ManifestError, load_manifest


def write(root: Path, table: str) -> Path:
    root.mkdir(exist_ok=True)
    (root / "pyproject.toml").write_text(f"[tool.gradekit]\n{table}\n", encoding="utf-8")
    return root


def test_defaults_and_declared_values(tmp_path: Path) -> None:
    manifest = load_manifest(write(tmp_path / "alice", 'agent = "lab.agent:run"'))
    assert (manifest.agent, manifest.cassettes, manifest.failures) == (
        "lab.agent:run",
        "cassettes",
        "FAILURES.md",
    )
    assert (manifest.stretch, manifest.student, manifest.replay) == (
        (),
        "alice",
        "gradekit:Replay",
    )  # the kit's: any lab's package imports it
    assert manifest.cassette("sql-explain") == tmp_path / "alice" / "cassettes" / "sql-explain.json"
    declared = load_manifest(
        write(
            tmp_path / "bob",
            'agent = "a:b"\nstudent = "Bob"\nstretch = ["two-providers"]\nsecond_cassettes = "c2"',
        )
    )
    assert (declared.student, declared.stretch, declared.second_cassettes) == (
        "Bob",
        ("two-providers",),
        "c2",
    )


@pytest.mark.parametrize(
    ("table", "fragment"),
    [
        ("", 'add [tool.gradekit] with agent = "package.module:function"'),
        ('agent = "a:b"\nagnet = "x"', "unknown [tool.gradekit] key(s) agnet"),
        ('agent = "a:b"\ncassettes = 3', "cassettes must be a string"),
        ('agent = "a:b"\nstretch = "two-providers"', "stretch must be a list of ids"),
        ('agent = "a:b"\nfailures = "/etc/passwd"', "must be a path inside the submission"),
        ('agent = "a:b"\ncassettes = "../bob/cassettes"', "must be a path inside"),
        ('agent = "a:b', "not valid TOML"),
    ],
)
def test_a_broken_manifest_says_what_to_fix(tmp_path: Path, table: str, fragment: str) -> None:
    with pytest.raises(ManifestError) as caught:
        load_manifest(write(tmp_path, table))
    assert fragment in str(caught.value)


def test_no_pyproject_at_all(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"needs a pyproject\.toml"):
        load_manifest(tmp_path)


def test_a_stretch_goal_claimed_twice_is_scored_once(tmp_path: Path) -> None:
    table = 'agent = "a:b"\nstretch = ["two-providers", "x", "two-providers", "x"]'
    assert load_manifest(write(tmp_path, table)).stretch == ("two-providers", "x")


def test_the_root_may_be_a_link_but_its_pyproject_may_not(tmp_path: Path) -> None:
    real = write(tmp_path / "real", 'agent = "a:b"')
    (tmp_path / "linked").symlink_to(real)  # the folder to grade is the grader's own choice
    assert load_manifest(tmp_path / "linked").agent == "a:b"
    bob = tmp_path / "bob"
    bob.mkdir()
    (bob / "pyproject.toml").symlink_to(real / "pyproject.toml")
    with pytest.raises(ManifestError, match=r"pyproject\.toml is a symlink: .* commit the file"):
        load_manifest(bob)
