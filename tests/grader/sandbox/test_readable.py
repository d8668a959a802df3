"""The readable copy a root grader makes of an interpreter uid 65534 cannot reach.

Each test builds a small tree shaped like an interpreter's prefix in a private folder (as
``/root/.pyenv/versions/X`` is), copies it with ``readable_copy`` into a cache of the
test's own, and looks at what the copy holds, what it shares with the original, and when
a new copy is made.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from grader.sandbox import interpreter_parts, readable_copy

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="only a root grader makes readable copies (CI is root)"
)


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    """A private interpreter prefix: a binary, its shared library (and a link to it), a
    standard library with packages and a test suite, and a private file among them."""
    top = tmp_path / "home" / "prefix"
    for folder in (
        "bin",
        "lib/python3.11/json",
        "lib/python3.11/site-packages/big",
        "lib/python3.11/test",
        "include",
        "share",
    ):
        (top / folder).mkdir(parents=True)
    (top / "bin" / "python3.11").write_bytes(b"\x7fELF binary")
    (top / "bin" / "python3.11").chmod(0o755)
    (top / "bin" / "pip").write_text("#!/bin/sh\n")
    (top / "lib" / "libpython3.11.so.1.0").write_bytes(b"library")
    (top / "lib" / "libpython3.11.so").symlink_to("libpython3.11.so.1.0")
    (top / "lib" / "libother.so").write_bytes(b"other")
    (top / "lib" / "python3.11" / "os.py").write_text("# os\n")
    (top / "lib" / "python3.11" / "json" / "__init__.py").write_text("# json\n")
    (top / "lib" / "python3.11" / "alias").symlink_to("json")  # a link to a folder
    (top / "lib" / "python3.11" / "site-packages" / "big" / "x.py").write_text("# big\n")
    (top / "lib" / "python3.11" / "test" / "test_os.py").write_text("# test\n")
    (top / "lib" / "python3.11" / "secret.py").write_text("KEY = 1\n")
    (top / "lib" / "python3.11" / "secret.py").chmod(0o600)
    (tmp_path / "home").chmod(0o700)  # like /root: nobody else passes through
    return top


def _tree(top: Path) -> list[str]:
    return sorted(str(p.relative_to(top)) for p in top.rglob("*"))


def test_an_interpreter_s_copy_holds_what_a_child_needs_and_nothing_private(
    prefix: Path, tmp_path: Path
) -> None:
    copy = Path(
        readable_copy(
            str(prefix),
            interpreter_parts(str(prefix / "bin" / "python3.11"), "3.11"),
            cache=str(tmp_path / "cache"),
        )
    )

    assert _tree(copy) == [
        "bin",
        "bin/python3.11",
        "lib",
        "lib/libpython3.11.so",
        "lib/libpython3.11.so.1.0",
        "lib/python3.11",
        "lib/python3.11/alias",
        "lib/python3.11/json",
        "lib/python3.11/json/__init__.py",
        "lib/python3.11/os.py",
    ]
    assert os.readlink(copy / "lib" / "libpython3.11.so") == "libpython3.11.so.1.0"
    assert os.readlink(copy / "lib" / "python3.11" / "alias") == "json"  # a link, not walked
    # hard links: the same file, nothing copied, and it is root's still
    assert (
        os.stat(copy / "lib" / "python3.11" / "os.py").st_ino
        == os.stat(prefix / "lib" / "python3.11" / "os.py").st_ino
    )
    for path in (copy, *copy.rglob("*")):
        mode = path.lstat().st_mode
        if stat.S_ISDIR(mode):
            assert stat.S_IMODE(mode) == 0o755, path
        elif stat.S_ISREG(mode):
            assert mode & stat.S_IROTH and not mode & (stat.S_IWGRP | stat.S_IWOTH), path


def test_the_packages_the_grader_runs_from_are_kept_under_a_prefix(
    prefix: Path, tmp_path: Path
) -> None:
    """A grader without a virtual environment imports from the prefix's own site-packages."""
    copy = Path(
        readable_copy(
            str(prefix),
            interpreter_parts(
                str(prefix / "bin" / "python3.11"), "3.11", ("lib/python3.11/site-packages",)
            ),
            cache=str(tmp_path / "cache"),
        )
    )

    assert (copy / "lib" / "python3.11" / "site-packages" / "big" / "x.py").read_text() == "# big\n"
    assert not (copy / "lib" / "python3.11" / "test").exists()


def test_a_copy_is_made_once_and_anew_when_its_tree_changes(prefix: Path, tmp_path: Path) -> None:
    cache = str(tmp_path / "cache")
    first = readable_copy(str(prefix), cache=cache)
    assert readable_copy(str(prefix), cache=cache) == first

    (prefix / "lib" / "python3.11" / "new_module.py").write_text("# new\n")
    second = readable_copy(str(prefix), cache=cache)

    assert second != first
    assert (Path(second) / "lib" / "python3.11" / "new_module.py").exists()
    assert not (Path(first) / "lib" / "python3.11" / "new_module.py").exists()  # never changed
    assert sorted(os.listdir(cache)) == sorted(os.path.basename(c) for c in (first, second))


def test_graders_making_one_copy_at_once_each_get_a_whole_one(prefix: Path, tmp_path: Path) -> None:
    cache = str(tmp_path / "cache")
    made: list[str] = []
    threads = [
        threading.Thread(target=lambda: made.append(readable_copy(str(prefix), cache=cache)))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(made) == 4 and len(set(made)) == 1
    assert os.listdir(cache) == [os.path.basename(made[0])]  # no half-made copy left
    assert (Path(made[0]) / "lib" / "python3.11" / "os.py").read_text() == "# os\n"


def test_a_cache_another_user_could_write_is_refused(prefix: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o777)

    with pytest.raises(OSError, match="must be a folder of root's that only root can write"):
        readable_copy(str(prefix), cache=str(cache))


def test_a_refusal_under_tmpdir_says_to_change_tmpdir(monkeypatch: pytest.MonkeyPatch) -> None:
    """A student at 1 a.m. with TMPDIR in a private folder of root's: the grader's scratch
    follows it, and the fix is TMPDIR's, not the scratch folder's mode."""
    from grader.sandbox import host_root_refusal

    monkeypatch.setenv("TMPDIR", "/root/tmp/")
    said = host_root_refusal("/root/tmp/gradekit-kit-x/harness.pyc is not readable to uid 65534")
    assert said == (
        "submission code would run as root on the host: /root/tmp/gradekit-kit-x/harness.pyc "
        "is not readable to uid 65534. Set TMPDIR to a folder every user can pass through "
        "(mode 0711), or unset it, or grade as another user; to run the children as root "
        "anyway, allow it by name: pass --allow-host-root"
    )
    monkeypatch.setenv("TMPDIR", "/root/tmpx")  # another folder: not its fault
    assert "Make it readable and searchable by uid 65534, or grade" in host_root_refusal(
        "/root/tmp/gradekit-kit-x/harness.pyc is not readable to uid 65534"
    )
