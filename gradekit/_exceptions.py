"""Every error gradekit raises, as one tree, each with its exit code. Each message states
the fix.

    GradekitError                    1  the base: an error the kit raises on purpose
    ├── UsageError                   2  misuse by the calling programmer
    ├── SecretLeak                   2  a credential was about to be written
    ├── CassetteError                1  cassettes, and tool fixtures (cassettes of tool calls)
    │   ├── CassetteMiss             3  a prompt that was never recorded
    │   ├── MissingFixtureError      3  a tool call that was never recorded
    │   ├── CassetteCorrupt          2  a file that is not a valid cassette
    │   │   ├── FixtureCorrupt       2  a file that is not a valid tool fixture
    │   │   └── IncidentCorrupt      2  a file that is not a valid recorded incident
    │   ├── IncidentDivergence       3  a replayed run left its recorded incident
    │   ├── CassetteCollision        2  one key, two different prompts
    │   └── CassetteLocked           2  another recorder holds the cassette or fixture
    └── ProviderError                4  talking to a live provider went wrong
        ├── ProviderConfigError      2  no provider, model or key configured
        ├── ProviderAuthError        4  401 / 403
        ├── ProviderRateLimited      4  429 after every retry
        ├── ProviderServerError      4  5xx after every retry
        ├── ProviderTimeout          4  the provider did not answer in time
        ├── ProviderConnectionError  4  nothing answered at the address
        └── ProviderResponseError    4  an answer without usable text

The exit code (``exit_code`` on each class) is what the ``gradekit`` command line exits
with when the error reaches it: 1 failed, 2 usage or configuration, 3 a recording miss,
4 the live provider. The command line's table of them is ``grader._exits``, written out in
docs/formats.md.
"""

from __future__ import annotations

from typing import ClassVar, TypeVar

__all__ = [
    "CassetteCollision",
    "CassetteCorrupt",
    "CassetteError",
    "CassetteLocked",
    "CassetteMiss",
    "FixtureCorrupt",
    "GradekitError",
    "IncidentCorrupt",
    "IncidentDivergence",
    "MissingFixtureError",
    "ProviderAuthError",
    "ProviderConfigError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderRateLimited",
    "ProviderResponseError",
    "ProviderServerError",
    "ProviderTimeout",
    "SecretLeak",
    "UsageError",
]


class GradekitError(Exception):
    """Base class of every error gradekit raises on purpose."""

    exit_code: ClassVar[int] = 1  # the command line's code for it: see the tree


class UsageError(GradekitError):
    """The calling code used the API wrongly (a bad mode, a bad argument)."""

    exit_code = 2


class SecretLeak(GradekitError):
    """A credential's value was found in something about to be written; nothing was written."""

    exit_code = 2


class CassetteError(GradekitError):
    """Something is wrong with a cassette file or with what was asked of it."""

    exit_code = 1


class CassetteMiss(CassetteError):
    """A prompt whose key is not in the cassette. Never answered by a live call.

    The message is built by the replay layer; the fields stay available to
    callers (the grader reports them) without parsing text.
    """

    exit_code = 3

    def __init__(self, message: str, *, cassette: str, key: str, prompt: str) -> None:
        super().__init__(message)
        self.cassette = cassette
        self.key = key
        self.prompt = prompt


class CassetteCorrupt(CassetteError):
    """A cassette that cannot be read: bad JSON, unknown format version, wrong shape."""

    exit_code = 2


class CassetteCollision(CassetteError):
    """Two different prompts share one key: never resolved by overwriting."""

    exit_code = 2


class CassetteLocked(CassetteError):
    """Another process is recording into the same cassette right now."""

    exit_code = 2


class ProviderError(GradekitError):
    """A live provider call failed; the message says what to change."""

    exit_code = 4


class ProviderConfigError(ProviderError):
    """No usable provider configuration: a missing model, key or base URL."""

    exit_code = 2


class ProviderAuthError(ProviderError):
    """The provider refused the credentials (HTTP 401 or 403)."""

    exit_code = 4


class ProviderRateLimited(ProviderError):
    """The provider kept answering 429 after every retry."""

    exit_code = 4


class ProviderServerError(ProviderError):
    """The provider kept failing with 5xx after every retry."""

    exit_code = 4


class ProviderTimeout(ProviderError):
    """The provider did not answer within the timeout."""

    exit_code = 4


class ProviderConnectionError(ProviderError):
    """Nothing usable answered at the configured address."""

    exit_code = 4


class ProviderResponseError(ProviderError):
    """The provider answered, but not with text gradekit can use."""

    exit_code = 4


class MissingFixtureError(CassetteError):
    """A tool call whose key is not in the case's fixture. Never answered by the real tool.

    The message is built by the tool layer; the fields stay available to
    callers (the grader reports them) without parsing text. ``arguments`` is
    the canonical JSON of the call's arguments (``args`` is Exception's own).
    """

    exit_code = 3

    def __init__(
        self, message: str, *, fixture: str, case: str, tool: str, arguments: str, key: str
    ) -> None:
        super().__init__(message)
        self.fixture = fixture
        self.case = case
        self.tool = tool
        self.arguments = arguments
        self.key = key


class FixtureCorrupt(CassetteCorrupt):
    """A tool fixture that cannot be read: bad JSON, unknown format, a key with two answers."""

    exit_code = 2


class IncidentCorrupt(CassetteCorrupt):
    """An incident file gradekit cannot read; the message names the line and the fix."""

    exit_code = 2


class IncidentDivergence(CassetteError):
    """A replayed run left its recorded incident: a changed input, an extra or a missing
    crossing. ``index`` is the recorded crossing where it happened, ``boundary`` its
    boundary; the message shows the recorded input against this run's."""

    exit_code = 3

    def __init__(self, message: str, *, index: int, boundary: str) -> None:
        super().__init__(message)
        self.index, self.boundary = index, boundary


E = TypeVar("E", bound=BaseException)


def in_chain(exc: BaseException, kind: type[E]) -> E | None:
    """The first ``kind`` in ``exc``'s chain of causes and contexts: an SDK wraps what its
    transport raised (``openai.APIConnectionError`` from a ``CassetteMiss``)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
