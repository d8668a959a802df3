"""gradekit: the provider contract students build on, and the kit that records and replays it.

Pin the contract, not the model: an agent talks to a ``Provider``; a
``Recorder`` fills a cassette from a live provider once; ``Replay`` serves it
offline forever and fails loudly on a prompt it never saw.
"""

from types import FunctionType
from typing import TYPE_CHECKING

from gradekit._cassette import FORMAT, Cassette, Entry
from gradekit._exceptions import (
    CassetteCollision,
    CassetteCorrupt,
    CassetteError,
    CassetteLocked,
    CassetteMiss,
    FixtureCorrupt,
    GradekitError,
    IncidentCorrupt,
    IncidentDivergence,
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
from gradekit._fake import FakeProvider
from gradekit._http.cassette import HttpCassette, request_key
from gradekit._http.transport import AsyncCassetteTransport, CassetteTransport
from gradekit._incident import (
    Crossing,
    Envelope,
    Incident,
    IncidentRecorder,
    IncidentReplay,
    Plan,
    Replayed,
    decode_incident,
    read_incident,
    replay_incident,
)
from gradekit._journal import Mode
from gradekit._keys import prompt_key
from gradekit._provider import Provider
from gradekit._recorder import Recorder
from gradekit._replay import Replay
from gradekit._toolbox import LiveToolbox, Toolbox, ToolRecorder, ToolReplay, Tools, tool_key
from gradekit._tracing import JsonlSink, Traced, TracedTools

if TYPE_CHECKING:
    from gradekit._live import PRESETS, Anthropic, OpenAICompatible, Preset, live_from_env

# The live adapters import httpx (about half of `import gradekit`). Replay, the grader's
# sandboxed children and `gradekit replay` never need them, so they load on first use.
# The cassette transports are not among them: they name httpx and httpx2 for the type checker
# only, and at run time use the library of the request they are given.
_LIVE = frozenset({"PRESETS", "Anthropic", "OpenAICompatible", "Preset", "live_from_env"})


def __getattr__(name: str) -> object:
    if name in _LIVE:
        from gradekit import _live

        value = getattr(_live, name)
        _public(value)
        return value
    raise AttributeError(f"module 'gradekit' has no attribute {name!r}")


__all__ = [
    "FORMAT",
    "PRESETS",
    "Anthropic",
    "AsyncCassetteTransport",
    "Cassette",
    "CassetteCollision",
    "CassetteCorrupt",
    "CassetteError",
    "CassetteLocked",
    "CassetteMiss",
    "CassetteTransport",
    "Crossing",
    "Entry",
    "Envelope",
    "FakeProvider",
    "FixtureCorrupt",
    "GradekitError",
    "HttpCassette",
    "Incident",
    "IncidentCorrupt",
    "IncidentDivergence",
    "IncidentRecorder",
    "IncidentReplay",
    "JsonlSink",
    "LiveToolbox",
    "MissingFixtureError",
    "Mode",
    "OpenAICompatible",
    "Plan",
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
    "Replayed",
    "SecretLeak",
    "ToolRecorder",
    "ToolReplay",
    "Toolbox",
    "Tools",
    "Traced",
    "TracedTools",
    "UsageError",
    "decode_incident",
    "live_from_env",
    "prompt_key",
    "read_incident",
    "replay_incident",
    "request_key",
    "tool_key",
]


def _public(value: object) -> None:
    """Report ``gradekit`` as the home of a public class or function (reprs, tracebacks)."""
    if isinstance(value, type | FunctionType):
        value.__module__ = "gradekit"


for _name in __all__:
    if _name not in _LIVE:
        _public(globals()[_name])
