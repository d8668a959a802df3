"""gradekit's lab: the provider contract students build on.

Pin the contract, not the model: an agent talks to a ``Provider``; a
``Recorder`` fills a cassette from a live provider once; ``Replay`` serves it
offline forever and fails loudly on a prompt it never saw.
"""

from typing import TYPE_CHECKING

from lab._cassette import FORMAT, Cassette, Entry
from lab._exceptions import (
    CassetteCollision,
    CassetteCorrupt,
    CassetteError,
    CassetteLocked,
    CassetteMiss,
    FixtureCorrupt,
    GradekitError,
    MissingFixtureError,
    ProviderAuthError,
    ProviderConfigError,
    ProviderConnectionError,
    ProviderError,
    ProviderRateLimited,
    ProviderResponseError,
    ProviderServerError,
    ProviderTimeout,
    SecretLeak,
    UsageError,
)
from lab._fake import FakeProvider
from lab._keys import prompt_key
from lab._provider import Provider
from lab._recorder import Mode, Recorder
from lab._replay import Replay
from lab._tools import LiveToolbox, Toolbox, ToolRecorder, ToolReplay, Tools, tool_key
from lab._tracing import JsonlSink, Traced, TracedTools

if TYPE_CHECKING:
    from lab._live import PRESETS, Anthropic, OpenAICompatible, Preset, live_from_env

# The live adapters import httpx (about half of `import lab`). Replay, the grader's
# sandboxed children and `gradekit replay` never need them, so they load on first use.
_LIVE = frozenset({"PRESETS", "Anthropic", "OpenAICompatible", "Preset", "live_from_env"})


def __getattr__(name: str) -> object:
    if name in _LIVE:
        from lab import _live

        return getattr(_live, name)
    raise AttributeError(f"module 'lab' has no attribute {name!r}")

__all__ = [
    "FORMAT",
    "PRESETS",
    "Anthropic",
    "Cassette",
    "CassetteCollision",
    "CassetteCorrupt",
    "CassetteError",
    "CassetteLocked",
    "CassetteMiss",
    "Entry",
    "FakeProvider",
    "FixtureCorrupt",
    "GradekitError",
    "JsonlSink",
    "LiveToolbox",
    "MissingFixtureError",
    "Mode",
    "OpenAICompatible",
    "Preset",
    "Provider",
    "ProviderAuthError",
    "ProviderConfigError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderRateLimited",
    "ProviderResponseError",
    "ProviderServerError",
    "ProviderTimeout",
    "Recorder",
    "Replay",
    "SecretLeak",
    "ToolRecorder",
    "ToolReplay",
    "Toolbox",
    "Tools",
    "Traced",
    "TracedTools",
    "UsageError",
    "live_from_env",
    "prompt_key",
    "tool_key",
]
