"""The live side of the HTTP benchmark: chat-completion requests and a server on loopback.

The server answers each request with an OpenAI-shaped completion that names the question it
answers, so a transport serving the wrong recording is caught, not timed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

from bench._loopback import serve

__all__ = ["MODEL", "Chat", "answer_text", "chat", "completion", "serve_completions"]

Chat = Mapping[str, Any]  # the keyword arguments of chat.completions.create, as sent

MODEL = "gpt-4o-mini"
_SYSTEM = "You are a teaching assistant. Grade the student's answer against the rubric. " * 6
_CREATED = 1767225600  # fixed: the recorded bodies are identical run to run


def chat(index: int, tag: str = "Question") -> Chat:
    """The ``index``-th distinct request (640 bytes of JSON): a system prompt and a question."""
    question = f"{tag} {index:05d}: is the refund policy applied correctly in this answer?"
    return {
        "model": MODEL,
        "messages": [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": question}],
        "temperature": 0,
    }


def answer_text(request: Chat) -> str:
    """What the server answers ``request``: it names the question, so a mix-up shows."""
    question: str = request["messages"][-1]["content"]
    return "Answer to " + question.split(":", 1)[0]


def completion(request: Chat) -> bytes:
    """The server's OpenAI-shaped body for ``request``, indented as the real API sends it."""
    text = answer_text(request)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    body = {
        "id": f"chatcmpl-{digest}",
        "object": "chat.completion",
        "created": _CREATED,
        "model": request["model"],
        "system_fingerprint": "fp_bench",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "logprobs": None,
                "message": {"role": "assistant", "content": text, "refusal": None},
            }
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 4, "total_tokens": 124},
    }
    return json.dumps(body, indent=2).encode()


def serve_completions() -> AbstractContextManager[str]:
    """The chat server on a free loopback port for the block; yields the SDK's ``base_url``."""
    return serve(lambda body: completion(json.loads(body)), "/v1")
