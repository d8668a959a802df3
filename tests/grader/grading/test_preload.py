"""The rubric's packages a submission imports are imported by its runs' hosts, once.

An SDK agent's every run imported the SDK anew (openai: about 450 ms of CPU, a grading
makes 15 runs); its hosts now import it before they fork. What the scan finds moves no
grade: the same submission grades to the same bytes with the hosts importing it or not.

It patches ``grader.sandbox._host`` on purpose: a host's start and ``hosts_unavailable`` are
the module's own.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import grader.grading._grade
import grader.sandbox._host
from grader import Limits
from grader.grading import grade_submission
from grader.grading._preload import imported_names, imported_packages, shipped_packages
from grader.outputs import render_report_json
from grader.rubric import load_rubric
from grader.sandbox import NamespacesWall, RunPlan, Sandbox, Serving
from grader.submission import load_manifest
from tests.conftest import require_namespaces
from tests.submissions import REFERENCE

SDK_EXAMPLE = REFERENCE / "examples" / "openai-sdk"
PACKAGES = {"openai": "openai>=1", "anthropic": "anthropic>=0.40"}
MANIFEST = """\
[project]
name = "lab"
version = "0.1.0"

[tool.gradekit]
agent = "{agent}"
replay = "{replay}"
tools = "{tools}"
"""


def _lab(
    root: Path,
    files: dict[str, str],
    *,
    agent: str = "lab.agent:run",
    replay: str = "gradekit:Replay",
    tools: str = "",
) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, "utf-8")
    (root / "pyproject.toml").write_text(
        MANIFEST.format(agent=agent, replay=replay, tools=tools), "utf-8"
    )
    return root


def test_the_names_of_every_import_statement_and_none_of_a_relative_one() -> None:
    source = (
        "import os, openai.types as t\nfrom anthropic import Anthropic\n"
        "    import httpx  # inside a function\nfrom . import tools\n"
        "from .client import openai\nimport (x)\n# import commented\n"
        "text = 'import quoted'\n"
    )
    assert imported_names(source) == {"os", "openai", "anthropic", "httpx", "x"}


def test_only_the_rubrics_packages_the_agents_replays_and_tools_packages_import(
    tmp_path: Path,
) -> None:
    root = _lab(
        tmp_path / "lab",
        {
            "lab/__init__.py": "",
            "lab/agent.py": "from lab.deep.client import ask\n",
            "lab/deep/__init__.py": "",
            "lab/deep/client.py": "import openai\nimport numpy\n",
            "mine/replay.py": "from anthropic import Anthropic\n",
            "elsewhere/unused.py": "import anthropic\n",
            "tools.py": "import openai\n",
        },
        replay="mine.replay:Replay",
        tools="tools:TOOLS",
    )
    manifest = load_manifest(root)
    assert imported_packages(root, manifest, PACKAGES) == ("anthropic", "openai")
    assert imported_packages(root, manifest, {}) == ()
    # Without the Replay's package, only the agent's (tools.py, a module beside the
    # manifest, imports openai too); a package outside them is never read.
    solo = _lab(
        tmp_path / "solo",
        {"lab/__init__.py": "", "lab/agent.py": "import os\n", "elsewhere/x.py": "import openai\n"},
    )
    assert imported_packages(solo, load_manifest(solo), PACKAGES) == ()


def test_a_link_or_a_fifo_in_the_agents_package_is_never_followed_or_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("import openai\n", "utf-8")
    root = _lab(tmp_path / "lab", {"lab/__init__.py": "", "lab/agent.py": "import os\n"})
    (root / "lab" / "linked.py").symlink_to(outside / "secret.py")
    (root / "lab" / "folder").symlink_to(outside)
    os.mkfifo(root / "lab" / "pipe.py")  # read, it would hang the grading
    assert imported_packages(root, load_manifest(root), PACKAGES) == ()


@pytest.mark.slow
def test_an_sdk_agent_grades_to_the_same_bytes_whether_its_hosts_import_the_sdk_or_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped openai SDK example, graded twice under one draw key: its hosts import
    openai before they fork (five hosts, each told to), then none does; the reports are
    the same bytes."""
    require_namespaces()
    pytest.importorskip("openai")
    monkeypatch.setattr(grader.sandbox._host, "_unavailable", [])
    root = tmp_path / "sdk"
    shutil.copytree(SDK_EXAMPLE, root)
    rubric = load_rubric(REFERENCE / "rubric" / "bootcamp.toml")
    assert imported_packages(root, load_manifest(root), rubric.packages) == ("openai",)
    told: list[tuple[str, ...]] = []
    init = grader.sandbox._host.Host.__init__

    def started(host: grader.sandbox._host.Host, *args: Any, **kwargs: Any) -> None:
        told.append(tuple(kwargs.get("preload", ())))
        init(host, *args, **kwargs)

    monkeypatch.setattr(grader.sandbox._host.Host, "__init__", started)
    key = b"k" * 32
    preloaded = grade_submission(
        root,
        rubric,
        submission="sdk",
        scratch=tmp_path / "one",
        wall=NamespacesWall(),
        draw_key=key,
    )
    if grader.sandbox._host.hosts_unavailable():
        pytest.skip(f"no host here: {grader.sandbox._host.hosts_unavailable()}")
    assert told and set(told) == {("openai",)}, told
    told.clear()
    monkeypatch.setattr(grader.grading._grade, "imported_packages", lambda *args: ())
    plain = grade_submission(
        root,
        rubric,
        submission="sdk",
        scratch=tmp_path / "two",
        wall=NamespacesWall(),
        draw_key=key,
    )
    assert told and set(told) == {()}, told
    assert render_report_json(preloaded.report) == render_report_json(plain.report)
    assert preloaded.children == plain.children


def test_a_batchs_hosts_import_what_any_of_its_submissions_imports(tmp_path: Path) -> None:
    from grader.grading import cohort_packages

    first = _lab(tmp_path / "a", {"lab/__init__.py": "", "lab/agent.py": "import openai\n"})
    second = _lab(
        tmp_path / "b", {"lab/__init__.py": "", "lab/agent.py": "from anthropic import Anthropic\n"}
    )
    plain = _lab(tmp_path / "c", {"lab/__init__.py": "", "lab/agent.py": "import json\n"})
    broken = tmp_path / "d"
    broken.mkdir()
    (broken / "pyproject.toml").write_text("[tool.gradekit\n", "utf-8")  # not TOML
    assert cohort_packages([plain, broken, first, second], PACKAGES) == ("anthropic", "openai")
    assert cohort_packages([plain, broken], PACKAGES) == ()
    assert cohort_packages([first], {}) == ()


def test_a_grading_forks_from_the_batchs_hosts_only_where_they_imported_all_it_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch's hosts serve a grading whose packages they imported; a grading that
    would import one they did not (a submission the batch's scan could not read) starts
    hosts of its own, which do."""
    host = grader.sandbox._host
    root = (tmp_path / "batch").resolve()
    monkeypatch.setattr(host, "_shared", {(7, None, False): object()})
    monkeypatch.setattr(host, "_shared_root", [root])
    monkeypatch.setattr(host, "_shared_preload", {"openai"})
    hosts = host.Hosts()
    hosts.scratch = root / "worker-1"
    for preload, shares in (
        ((), True),
        (("openai",), True),
        (("anthropic",), False),
        (("anthropic", "openai"), False),
    ):
        hosts.preload = preload
        assert hosts._shares((7, None, False)) is shares, preload
    assert not hosts._shares((8, None, False))  # no batch host for that seed
    hosts.preload, hosts.shipped = (), frozenset({"openai"})  # a folder openai/ of its own
    assert not hosts._shares((7, None, False))


SHADOW = {
    "lab/__init__.py": "",
    "lab/agent.py": "import openai\n\n\ndef run(provider, task):\n"
    "    return getattr(openai, 'WHOSE', 'the installed SDK')\n",
    "openai/__init__.py": "WHOSE = 'its own'\n",
}


@pytest.mark.slow
def test_a_submission_shipping_its_own_package_of_that_name_never_gets_the_installed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A submission with a folder ``openai/`` of its own imports that one in every run, as
    behind the process wall: graded alone, its hosts never import the installed SDK (even
    told to), and in a batch whose hosts did (a classmate imports it) its runs fork from
    hosts of its own."""
    require_namespaces()
    pytest.importorskip("openai")
    from grader.sandbox import share_hosts

    monkeypatch.setattr(grader.sandbox._host, "_unavailable", [])
    root = _lab(tmp_path / "shadow", SHADOW)
    assert shipped_packages(root, PACKAGES) == {"openai"}
    assert imported_packages(root, load_manifest(root), PACKAGES) == ()
    batch = (tmp_path / "batch").resolve()
    batch.mkdir(mode=0o711)

    def answer(scratch: Path, told: tuple[str, ...]) -> str | None:
        sandbox = Sandbox(root, scratch, Limits(timeout_s=20), NamespacesWall())
        try:
            sandbox.ahead([5], told, shipped_packages(root, PACKAGES))
            result = sandbox.within("run").run(
                "lab.agent:run", [("c", "t")], RunPlan("provider-a", 5, Serving(lambda c, p: p))
            )
        finally:
            sandbox.close()
        return result.outcomes["c"].answer

    alone = answer(tmp_path / "alone", ("openai",))
    saved = (
        dict(grader.sandbox._host._shared),
        list(grader.sandbox._host._shared_root),
        set(grader.sandbox._host._shared_preload),
    )
    grader.sandbox._host._shared.clear()
    try:
        share_hosts(batch, [5], ["openai"])
        if grader.sandbox._host.hosts_unavailable():
            pytest.skip(f"no host here: {grader.sandbox._host.hosts_unavailable()}")
        in_batch = answer(batch / "worker", ())
    finally:
        grader.sandbox._host.end_shared()
        grader.sandbox._host._shared.update(saved[0])
        grader.sandbox._host._shared_root[:] = saved[1]
        grader.sandbox._host._shared_preload.clear()
        grader.sandbox._host._shared_preload.update(saved[2])
    assert (alone, in_batch) == ("its own", "its own")
