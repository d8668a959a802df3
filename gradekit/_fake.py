"""A scripted provider for tests: no network, no model, fully predictable."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from gradekit._exceptions import UsageError
from gradekit._http.client import HttpClients
from gradekit._keys import prompt_key

if TYPE_CHECKING:
    from gradekit._http.scripted import AsyncScriptedTransport, ScriptedTransport

__all__ = ["FakeProvider"]


class FakeProvider(HttpClients):
    """Answer from a script: a mapping of stripped prompt to answer, a list served in
    order, or a function of the prompt. Every prompt asked is kept in ``calls``, and the
    key its trace record gets in ``keys`` (``prompt_key``, or an SDK request's
    ``request_key``).

    Its HTTP side (``http_client()``, for the official SDKs) answers in the SDK's own
    protocol, never over the network: an OpenAI chat completion or Responses call, or an
    Anthropic message, whole or streamed, whose prompt is the text of the request's last
    message (``gradekit._http.scripted``).
    """

    def __init__(
        self,
        script: Mapping[str, str] | Iterable[str] | Callable[[str], str],
        *,
        name: str = "fake",
    ) -> None:
        self.name = name
        self.calls: list[str] = []
        self.keys: list[str] = []
        self._by_prompt: Mapping[str, str] | None = None
        self._function: Callable[[str], str] | None = None
        self._queue: list[str] = []
        if isinstance(script, Mapping):
            self._by_prompt = script
        elif callable(script):
            self._function = script
        else:
            self._queue = list(script)

    def complete(self, prompt: str) -> str:
        """Return the scripted answer to ``prompt``."""
        return self._scripted(prompt, prompt_key(prompt))

    def http_transport(self) -> ScriptedTransport:
        """The transport of this provider's SDK clients: each request answered from the
        script, in its protocol."""
        from gradekit._http.scripted import ScriptedTransport

        return ScriptedTransport(self._scripted)

    def async_http_transport(self) -> AsyncScriptedTransport:
        """``http_transport()`` for async clients."""
        from gradekit._http.scripted import AsyncScriptedTransport

        return AsyncScriptedTransport(self._scripted)

    def _scripted(self, prompt: str, key: str) -> str:
        self.calls.append(prompt)
        self.keys.append(key)
        if self._function is not None:
            return self._function(prompt)
        if self._by_prompt is not None:
            try:
                return self._by_prompt[prompt.strip()]
            except KeyError:
                raise UsageError(
                    f"FakeProvider {self.name!r} has no answer scripted for {prompt.strip()!r}; "
                    "add it to the mapping"
                ) from None
        if not self._queue:
            raise UsageError(
                f"FakeProvider {self.name!r} ran out of scripted answers after "
                f"{len(self.calls) - 1} calls; script more"
            )
        return self._queue.pop(0)
