"""A scripted provider for tests: no network, no model, fully predictable."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from gradekit._exceptions import UsageError

__all__ = ["FakeProvider"]


class FakeProvider:
    """Answer from a script: a mapping of stripped prompt to answer, a list served in
    order, or a function of the prompt. Every prompt asked is kept in ``calls``.
    """

    def __init__(
        self,
        script: Mapping[str, str] | Iterable[str] | Callable[[str], str],
        *,
        name: str = "fake",
    ) -> None:
        self.name = name
        self.calls: list[str] = []
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
        self.calls.append(prompt)
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
