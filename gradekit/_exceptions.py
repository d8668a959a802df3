"""Every error gradekit raises, as one tree. Each message states the fix.

    GradekitError
    ├── UsageError                 misuse by the calling programmer
    ├── SecretLeak                 a credential was about to be written
    ├── CassetteError              cassettes, and tool fixtures (cassettes of tool calls)
    │   ├── CassetteMiss           a prompt that was never recorded
    │   ├── MissingFixtureError    a tool call that was never recorded
    │   ├── CassetteCorrupt        a file that is not a valid cassette
    │   │   ├── FixtureCorrupt     a file that is not a valid tool fixture
    │   │   └── IncidentCorrupt    a file that is not a valid recorded incident
    │   ├── IncidentDivergence     a replayed run left its recorded incident
    │   ├── CassetteCollision      one key, two different prompts
    │   └── CassetteLocked         another recorder holds the cassette or fixture
    └── ProviderError              talking to a live provider went wrong
        ├── ProviderConfigError    no provider, model or key configured
        ├── ProviderAuthError      401 / 403
        ├── ProviderRateLimited    429 after every retry
        ├── ProviderServerError    5xx after every retry
        ├── ProviderTimeout        the provider did not answer in time
        ├── ProviderConnectionError  nothing answered at the address
        └── ProviderResponseError  an answer without usable text

The grader adds its own branches under ``GradekitError``:

    GradekitError
    ├── UsageError                 (the kit's, above)
    │   └── DashboardUnavailable   `gradekit dashboard` without the gradekit[dashboard] extra
    ├── RubricError                a rubric that does not validate
    ├── ManifestError              a [tool.gradekit] table that does not validate
    ├── GradebookError             a gradebook or roster that cannot be read or merged
    ├── LedgerCorrupt              a grading ledger line that is not an event of its chain
    ├── ReviewError                a recording that cannot be reviewed (stale, diff)
    │   └── ChangeLogCorrupt       DATASET_CHANGES.md does not parse
    ├── MissingPackage             the agent imports a package the grader lacks: not graded
    └── SubmissionFileError        a submission file the grader will not read (link, size)
        └── MissingSubmissionFile  it is not there

The command line's exit code for each is in ``grader._exits`` and docs/formats.md.
"""

from __future__ import annotations

from typing import TypeVar

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


class UsageError(GradekitError):
    """The calling code used the API wrongly (a bad mode, a bad argument)."""


class SecretLeak(GradekitError):
    """A credential's value was found in something about to be written; nothing was written."""


class CassetteError(GradekitError):
    """Something is wrong with a cassette file or with what was asked of it."""


class CassetteMiss(CassetteError):
    """A prompt whose key is not in the cassette. Never answered by a live call.

    The message is built by the replay layer; the fields stay available to
    callers (the grader reports them) without parsing text.
    """

    def __init__(self, message: str, *, cassette: str, key: str, prompt: str) -> None:
        super().__init__(message)
        self.cassette = cassette
        self.key = key
        self.prompt = prompt


class CassetteCorrupt(CassetteError):
    """A cassette that cannot be read: bad JSON, unknown format version, wrong shape."""


class CassetteCollision(CassetteError):
    """Two different prompts share one key: never resolved by overwriting."""


class CassetteLocked(CassetteError):
    """Another process is recording into the same cassette right now."""


class ProviderError(GradekitError):
    """A live provider call failed; the message says what to change."""


class ProviderConfigError(ProviderError):
    """No usable provider configuration: a missing model, key or base URL."""


class ProviderAuthError(ProviderError):
    """The provider refused the credentials (HTTP 401 or 403)."""


class ProviderRateLimited(ProviderError):
    """The provider kept answering 429 after every retry."""


class ProviderServerError(ProviderError):
    """The provider kept failing with 5xx after every retry."""


class ProviderTimeout(ProviderError):
    """The provider did not answer within the timeout."""


class ProviderConnectionError(ProviderError):
    """Nothing usable answered at the configured address."""


class ProviderResponseError(ProviderError):
    """The provider answered, but not with text gradekit can use."""


class MissingFixtureError(CassetteError):
    """A tool call whose key is not in the case's fixture. Never answered by the real tool.

    The message is built by the tool layer; the fields stay available to
    callers (the grader reports them) without parsing text. ``arguments`` is
    the canonical JSON of the call's arguments (``args`` is Exception's own).
    """

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


class IncidentCorrupt(CassetteCorrupt):
    """An incident file gradekit cannot read; the message names the line and the fix."""


class IncidentDivergence(CassetteError):
    """A replayed run left its recorded incident: a changed input, an extra or a missing
    crossing. ``index`` is the recorded crossing where it happened, ``boundary`` its
    boundary; the message shows the recorded input against this run's."""

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
