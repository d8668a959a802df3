"""Live adapters over httpx: the only module that speaks HTTP or imports httpx.

OpenAI-compatible Chat Completions and Anthropic Messages share one retry loop
and one httpx-to-kit error mapping (``_map_httpx_error``); they differ only in
path, headers, body and where the text sits. ``live_from_env`` picks and builds one.
"""

from __future__ import annotations

import email.utils
import functools
import json
import math
import os
import random
import ssl
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC
from types import MappingProxyType
from typing import Final, Literal

import httpx

from gradekit._commands import RECORD
from gradekit._exceptions import (
    ProviderAuthError,
    ProviderConfigError,
    ProviderConnectionError,
    ProviderError,
    ProviderRateLimited,
    ProviderResponseError,
    ProviderServerError,
    ProviderTimeout,
    UsageError,
)

__all__ = [
    "PRESETS",
    "Anthropic",
    "OpenAICompatible",
    "Preset",
    "live_from_env",
    "recording_settings",
]

AdapterName = Literal["openai-compatible", "anthropic"]  # the two wire protocols there are

_SNIPPET_CHARS: Final = 300
_REDACTED: Final = "[redacted]"
_RESUME: Final = f"wait and run again; `{RECORD()}` resumes where it stopped"
_LOCAL: Final = "check GRADEKIT_BASE_URL / is the server running? try `make local-model`"
_ANTHROPIC_VERSION: Final = "2023-06-01"

# httpx raises from these four roots. Catching exactly them, not Exception,
# keeps a bug in our own code loud instead of dressing it up as a provider error.
_HTTPX_ROOTS: Final = (httpx.HTTPError, httpx.StreamError, httpx.InvalidURL, httpx.CookieConflict)

# First match wins, so a subclass must come before its base. The last row
# makes the mapping total: a class httpx adds later still becomes a kit error.
_HTTPX_MAP: Final[tuple[tuple[type[Exception], type[ProviderError], str], ...]] = (
    (
        httpx.TimeoutException,
        ProviderTimeout,
        f"{_RESUME}, or allow each answer longer: GRADEKIT_TIMEOUT=SECONDS",
    ),
    (httpx.ProxyError, ProviderConnectionError, "check HTTPS_PROXY / HTTP_PROXY"),
    (httpx.UnsupportedProtocol, ProviderConfigError, "GRADEKIT_BASE_URL needs http(s)://"),
    (httpx.LocalProtocolError, ProviderConfigError, "check GRADEKIT_BASE_URL and the key"),
    (httpx.TransportError, ProviderConnectionError, _LOCAL),
    (httpx.DecodingError, ProviderResponseError, "the server sent a body that does not decode"),
    (httpx.TooManyRedirects, ProviderResponseError, "set GRADEKIT_BASE_URL to the final URL"),
    (httpx.RequestError, ProviderConnectionError, _LOCAL),
    (httpx.InvalidURL, ProviderConfigError, "GRADEKIT_BASE_URL is not a valid URL"),
    (Exception, ProviderResponseError, "httpx failed in an unexpected way; please report it"),
)

# Only these are worth another attempt; the rest will fail the same way again.
_RETRYABLE_ERRORS: Final = (ProviderTimeout, ProviderConnectionError)


class _NoText(Exception):
    """An answer that parsed but holds no usable text; the argument says why."""


def _redact(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        text = text.replace(secret, _REDACTED)
    return text


def _snippet(text: str, secrets: tuple[str, ...]) -> str:
    # Redact before truncating: a cut through a key would leave its start visible.
    text = _redact(text, secrets)
    if len(text) > _SNIPPET_CHARS:
        return f"{text[:_SNIPPET_CHARS]!r}... ({len(text)} chars)"
    return repr(text)


def _map_httpx_error(exc: Exception, where: str, secrets: tuple[str, ...]) -> ProviderError:
    """Turn any httpx exception into the kit error that says what to do about it."""
    for httpx_type, kit_type, advice in _HTTPX_MAP:
        if isinstance(exc, httpx_type):
            detail = _snippet(str(exc), secrets)
            return kit_type(f"{where}: {type(exc).__name__} {detail} - {advice}")
    raise AssertionError("unreachable: the last row of _HTTPX_MAP matches every Exception")


def _retry_after_seconds(value: str, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP-date), or None."""
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:  # "-0000" dates parse naive; HTTP-dates are always GMT
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - now
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _clean_key(key: str | None) -> str | None:
    # An exported-but-empty variable means "no key"; a trailing newline from
    # `cat key.txt` would otherwise make httpx refuse the header.
    key = (key or "").strip()
    if key and not (key.isascii() and key.isprintable()):
        raise ProviderConfigError(
            "The API key has characters an HTTP header cannot carry (a smart quote? a control "
            "character?) - set GRADEKIT_API_KEY again or pass --api-key"
        )
    return key or None


def _key_advice(key_env: str | None) -> str:
    variables = f"GRADEKIT_API_KEY or {key_env}" if key_env else "GRADEKIT_API_KEY"
    return f"set {variables}, or pass --api-key"


@functools.cache
def _tls_context() -> ssl.SSLContext:
    # Loading the CA bundle costs ~50 ms; one per process, not one per prompt.
    return httpx.create_ssl_context()


class _Borrowed(httpx.BaseTransport):
    """A caller's transport lent to one call's client: the caller, not us, closes it."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self._inner.handle_request(request)


class _HTTPAdapter:
    """What both adapters share: settings, credentials, the retry loop, status handling.

    ``on_retry``, when set, is told of every retry before its wait, in one line such as
    ``"HTTP 429 (rate limited): waiting 1.2s before attempt 2 of 5"``: backoff that
    prints nothing looks like a hang.
    """

    name: str
    _path: str
    on_retry: Callable[[str], None] | None = None

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        api_key: str | None,
        label: str | None,
        key_env: str | None,
        env: Mapping[str, str] | None,
        timeout: float,
        max_retries: int,
        backoff: float,
        max_backoff: float,
        transport: httpx.BaseTransport | None,
        sleep: Callable[[float], None],
        rng: random.Random | None,
        kind: str,
    ) -> None:
        if not model.strip():
            raise ProviderConfigError("No model set - set GRADEKIT_MODEL or pass --model")
        if not base_url.startswith(("http://", "https://")):
            raise ProviderConfigError(
                f"Base URL {base_url!r} must start with http:// or https:// - "
                "set GRADEKIT_BASE_URL or pass --base-url"
            )
        if max_retries < 0:
            raise UsageError(f"max_retries must be 0 or more, not {max_retries}")
        source = os.environ if env is None else env
        self._key = _clean_key(api_key) or _clean_key(source.get(key_env or "", ""))
        self._model, self._base_url, self._key_env = model, base_url.rstrip("/"), key_env
        self._timeout, self._max_retries = timeout, max_retries
        self._backoff, self._max_backoff = backoff, max_backoff
        self._transport, self._sleep = transport, sleep
        self._rng = rng if rng is not None else random.Random()
        self.name = label or f"{kind}:{model}"

    def credentials(self) -> tuple[str, ...]:
        """The API key(s) this adapter sends, so a recorder can refuse to write them anywhere."""
        return (self._key,) if self._key else ()

    def __repr__(self) -> str:
        key = "set" if self._key else "none"
        return f"{type(self).__name__}(name={self.name!r}, base_url={self._base_url!r}, key={key})"

    def complete(self, prompt: str) -> str:
        """Send ``prompt`` as one user message and return the model's text answer."""
        response = self._post(self._body(prompt))
        data = self._json(response)
        try:
            return self._text(data)
        except _NoText as reason:
            raise ProviderResponseError(
                f"{self.name}: {reason} in the answer from {self._url} - it came back as "
                f"{self._snippet(response.text)}"
            ) from None

    @property
    def _url(self) -> str:
        return f"{self._base_url}{self._path}"

    def _snippet(self, text: str) -> str:
        return _snippet(text, self.credentials())

    # The three ways the wire protocols differ; each adapter fills them in.
    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _body(self, prompt: str) -> dict[str, object]:
        raise NotImplementedError

    def _text(self, data: object) -> str:
        raise NotImplementedError

    def _post(self, body: dict[str, object]) -> httpx.Response:
        # A client per call: nothing stays open between prompts, so no caller
        # has to remember to close an adapter. Retries share the connection pool.
        transport = _Borrowed(self._transport) if self._transport else None
        tls = _tls_context() if transport is None else True  # a transport brings its own TLS
        with httpx.Client(transport=transport, timeout=self._timeout, verify=tls) as client:
            attempt = 0
            while True:
                attempt += 1
                final = attempt > self._max_retries
                try:
                    response = client.post(self._url, json=body, headers=self._headers())
                except _HTTPX_ROOTS as exc:
                    error = _map_httpx_error(exc, self._where(attempt), self.credentials())
                    if final or not isinstance(error, _RETRYABLE_ERRORS):
                        raise error from exc
                    self._wait(type(error).__name__, attempt, None)
                    continue
                status = response.status_code
                if status != 429 and status < 500:
                    return self._checked(response)
                if final:
                    raise self._exhausted(response, attempt)
                reason = f"HTTP {status}" + (" (rate limited)" if status == 429 else "")
                self._wait(reason, attempt, response.headers.get("retry-after"))

    def _wait(self, reason: str, attempt: int, retry_after: str | None) -> None:
        delay = self._delay(attempt, retry_after)
        if self.on_retry is not None:
            self.on_retry(
                f"{reason}: waiting {delay:.1f}s before attempt {attempt + 1} of "
                f"{self._max_retries + 1}"
            )
        self._sleep(delay)

    def _where(self, attempt: int) -> str:
        tries = f"attempt {attempt} of {self._max_retries + 1}"
        return f"{self.name}: POST {self._url} ({tries}, timeout {self._timeout:g}s)"

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        hinted = _retry_after_seconds(retry_after, time.time()) if retry_after else None
        if hinted is not None:
            return min(hinted, self._max_backoff)
        # Full jitter: a class of students retrying together spreads out
        # instead of hitting the provider again in lockstep.
        ceiling = min(self._max_backoff, self._backoff * 2.0 ** min(attempt - 1, 32))
        return self._rng.uniform(0.0, ceiling)

    def _exhausted(self, response: httpx.Response, attempts: int) -> ProviderError:
        status, body = response.status_code, self._snippet(response.text)
        said = f"HTTP {status} from {self._url} on all {attempts} attempts: {body}"
        if status == 429:
            return ProviderRateLimited(f"{self.name}: rate limited, {said} - {_RESUME}")
        return ProviderServerError(f"{self.name}: server error, {said} - {_RESUME}")

    def _checked(self, response: httpx.Response) -> httpx.Response:
        status = response.status_code
        if response.is_success:
            return response
        said = f"{self.name}: HTTP {status} from {self._url}: {self._snippet(response.text)}"
        if status in (401, 403):
            sent = "the API key was refused" if self._key else "no API key was sent"
            raise ProviderAuthError(f"{said} - {sent}; {_key_advice(self._key_env)}")
        if status == 404:
            hint = "check GRADEKIT_BASE_URL (OpenAI-compatible URLs end in /v1, Anthropic's not)"
            raise ProviderResponseError(f"{said} - {hint} and GRADEKIT_MODEL")
        if response.is_redirect:
            where = response.headers.get("location", "?")
            raise ProviderResponseError(f"{said} - set GRADEKIT_BASE_URL to {where}")
        raise ProviderResponseError(f"{said} - check GRADEKIT_MODEL (unknown model?) or --model")

    def _json(self, response: httpx.Response) -> object:
        try:
            data: object = json.loads(response.content)
        except ValueError:
            kind = response.headers.get("content-type", "no content-type")
            raise ProviderResponseError(
                f"{self.name}: {self._url} answered with a body that is not JSON ({kind}): "
                f"{self._snippet(response.text)} - is GRADEKIT_BASE_URL the API's address?"
            ) from None
        return data


def _field(data: object, name: str) -> object:
    return data.get(name) if isinstance(data, dict) else None


class OpenAICompatible(_HTTPAdapter):
    """A provider speaking OpenAI Chat Completions: OpenAI, Ollama, vLLM, llama.cpp, Groq, ...

    The key comes from ``api_key``, else from ``env[key_env]`` (``env`` defaults
    to ``os.environ``); with no key, no ``Authorization`` header is sent, which
    is what local servers expect. A transport passed in stays the caller's to close.
    """

    _path = "/chat/completions"

    def __init__(
        self,
        *,
        model: str,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        label: str | None = None,
        key_env: str | None = "OPENAI_API_KEY",
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(
            model=model,
            base_url=base_url,
            api_key=api_key,
            label=label,
            key_env=key_env,
            env=env,
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
            max_backoff=max_backoff,
            transport=transport,
            sleep=sleep,
            rng=rng,
            kind="openai-compatible",
        )
        self._temperature, self._max_tokens = temperature, max_tokens

    def _headers(self) -> dict[str, str]:
        headers = {"accept": "application/json", "user-agent": "gradekit"}
        if self._key:
            headers["authorization"] = f"Bearer {self._key}"
        return headers

    def _body(self, prompt: str) -> dict[str, object]:
        body: dict[str, object] = {
            "model": self._model,
            "temperature": self._temperature,
            "messages": [{"role": "user", "content": prompt}],
        }
        if self._max_tokens is not None:
            body["max_tokens"] = self._max_tokens
        return body

    def _text(self, data: object) -> str:
        choices = _field(data, "choices")
        if not isinstance(choices, list) or not choices:
            raise _NoText("no choices")
        content = _field(_field(choices[0], "message"), "content")
        if not isinstance(content, str) or not content.strip():
            finish = _field(choices[0], "finish_reason")
            raise _NoText(f"no text in choices[0].message.content (finish_reason: {finish})")
        return content


class Anthropic(_HTTPAdapter):
    """A provider speaking the Anthropic Messages API.

    The answer is the text of every ``text`` content block, joined; other
    blocks (thinking, tool use) are skipped. ``max_tokens`` is required by the API.
    """

    _path = "/v1/messages"

    def __init__(
        self,
        *,
        model: str,
        base_url: str = "https://api.anthropic.com",
        api_key: str | None = None,
        label: str | None = None,
        key_env: str | None = "ANTHROPIC_API_KEY",
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(
            model=model,
            base_url=base_url,
            api_key=api_key,
            label=label,
            key_env=key_env,
            env=env,
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
            max_backoff=max_backoff,
            transport=transport,
            sleep=sleep,
            rng=rng,
            kind="anthropic",
        )
        self._temperature, self._max_tokens = temperature, max_tokens

    def _headers(self) -> dict[str, str]:
        headers = {
            "accept": "application/json",
            "user-agent": "gradekit",
            "anthropic-version": _ANTHROPIC_VERSION,
        }
        if self._key:
            headers["x-api-key"] = self._key
        return headers

    def _body(self, prompt: str) -> dict[str, object]:
        return {
            "model": self._model,
            "max_tokens": self._max_tokens,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": self._temperature,
        }

    def _text(self, data: object) -> str:
        blocks = _field(data, "content")
        if not isinstance(blocks, list) or not blocks:
            raise _NoText("no content blocks")
        texts = [_field(block, "text") for block in blocks if _field(block, "type") == "text"]
        text = "".join(part for part in texts if isinstance(part, str))
        if not text.strip():
            raise _NoText(f"no text block (stop_reason: {_field(data, 'stop_reason')})")
        return text


@dataclass(frozen=True)
class Preset:
    """Defaults for one ``GRADEKIT_PROVIDER`` value.

    ``base_url`` None means the user must give one; ``key_env`` names the
    vendor's usual key variable, read after ``GRADEKIT_API_KEY``.
    """

    adapter: AdapterName
    base_url: str | None
    key_env: str | None
    key_required: bool
    model: str | None = None
    max_tokens: int | None = None
    timeout: float = 60.0  # seconds an answer may take


PRESETS: Final[Mapping[str, Preset]] = MappingProxyType(
    {
        "anthropic": Preset("anthropic", "https://api.anthropic.com", "ANTHROPIC_API_KEY", True),
        # A small local model can ramble to the end of its context: cap each answer. 96 tokens
        # keep the hand-out's eleven answers within about two minutes on the numpy engine
        # (about ten tokens a second on a laptop's CPU), and a whole answer is most often
        # shorter; GRADEKIT_MAX_TOKENS raises it. A busy machine may take minutes for one
        # answer: wait that long.
        "llamacpp": Preset(
            "openai-compatible",
            "http://127.0.0.1:8080/v1",
            None,
            False,
            "smollm2",
            max_tokens=96,
            timeout=600.0,
        ),
        "ollama": Preset(
            "openai-compatible", "http://127.0.0.1:11434/v1", None, False, timeout=600.0
        ),
        "openai": Preset("openai-compatible", "https://api.openai.com/v1", "OPENAI_API_KEY", True),
        # The generic adapter has no vendor: it never sends an OpenAI key to a third-party host.
        "openai-compatible": Preset("openai-compatible", None, None, False),
    }
)
"""Every accepted ``GRADEKIT_PROVIDER`` value: the vendor presets and the two adapter names."""

_HOW_TO_CONFIGURE: Final = f"""No provider configured. Set environment variables or pass flags:
  GRADEKIT_PROVIDER / --provider   one of: {", ".join(sorted(PRESETS))}
  GRADEKIT_MODEL    / --model      e.g. gpt-4o-mini, claude-3-5-haiku-latest, llama3.2
  GRADEKIT_BASE_URL / --base-url   for ollama, vLLM, OpenRouter, Groq, ...
  GRADEKIT_API_KEY  / --api-key    or OPENAI_API_KEY / ANTHROPIC_API_KEY
Free and local: run `make local-model` (SmolLM2-135M, no key), then GRADEKIT_PROVIDER=llamacpp"""


def recording_settings(providers: Iterable[str]) -> dict[str, str] | None:
    """The ``GRADEKIT_*`` settings under which ``record`` asks again the provider that most
    of ``providers`` (recordings' ``provider`` fields, ``adapter:model``) name, ties broken
    by name; None when they cannot be told from the name: an OpenAI-compatible server whose
    base URL the name does not hold (OpenAI's own, Ollama's, one of the user's), or none.

    ``anthropic:M`` is the anthropic preset with model M; ``openai-compatible:M`` is the
    one preset with a fixed base URL whose default model is M (``llamacpp``, SmolLM2).
    """
    counted = Counter(name for name in providers if name)
    if not counted:
        return None
    adapter, _, model = min(counted, key=lambda name: (-counted[name], name)).partition(":")
    if adapter == "anthropic" and model:
        return {"GRADEKIT_PROVIDER": "anthropic", "GRADEKIT_MODEL": model}
    named = [
        name
        for name, preset in PRESETS.items()
        if preset.adapter == adapter and preset.model == model and preset.base_url is not None
    ]
    return {"GRADEKIT_PROVIDER": named[0]} if len(named) == 1 else None


def _pick(explicit: str | None, env: Mapping[str, str], variable: str | None) -> str | None:
    # Empty counts as unset: `export GRADEKIT_MODEL=` should not mean "model ''".
    if explicit and explicit.strip():
        return explicit.strip()
    return (env.get(variable, "").strip() or None) if variable else None


def live_from_env(
    env: Mapping[str, str] | None = None,
    *,
    provider: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    label: str | None = None,
    max_tokens: int | None = None,
    timeout: float | None = None,
    max_retries: int = 4,
    transport: httpx.BaseTransport | None = None,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
) -> OpenAICompatible | Anthropic:
    """Build the live adapter that arguments, ``GRADEKIT_*`` variables and presets describe.

    Explicit arguments win over ``GRADEKIT_PROVIDER``, ``GRADEKIT_MODEL``,
    ``GRADEKIT_BASE_URL``, ``GRADEKIT_API_KEY``, ``GRADEKIT_MAX_TOKENS`` and
    ``GRADEKIT_TIMEOUT``, which win over the vendor's key variable and the preset's
    defaults (an answer may take 60 seconds, 600 from a local model). ``env`` defaults
    to ``os.environ``.
    """
    source = os.environ if env is None else env
    name = _pick(provider, source, "GRADEKIT_PROVIDER")
    if name is None:
        raise ProviderConfigError(_HOW_TO_CONFIGURE)
    preset = PRESETS.get(name.lower())
    if preset is None:
        raise ProviderConfigError(
            f"Unknown provider {name!r} - set GRADEKIT_PROVIDER or --provider to one of: "
            f"{', '.join(sorted(PRESETS))}"
        )
    chosen_model = _pick(model, source, "GRADEKIT_MODEL") or preset.model
    if chosen_model is None:
        raise ProviderConfigError(f"No model set for {name} - set GRADEKIT_MODEL or pass --model")
    url = _pick(base_url, source, "GRADEKIT_BASE_URL") or preset.base_url
    if url is None:
        raise ProviderConfigError(f"No base URL for {name} - set GRADEKIT_BASE_URL or --base-url")
    key = _pick(api_key, source, "GRADEKIT_API_KEY") or _pick(None, source, preset.key_env)
    if key is None and preset.key_required:
        raise ProviderConfigError(f"No key found - {_key_advice(preset.key_env)}")
    limit = _max_tokens(max_tokens, source) or preset.max_tokens
    options = {} if limit is None else {"max_tokens": limit}
    adapter = Anthropic if preset.adapter == "anthropic" else OpenAICompatible
    return adapter(
        model=chosen_model,
        base_url=url,
        api_key=key,
        label=label,
        key_env=preset.key_env,
        env=source,
        timeout=_timeout(timeout, source, preset),
        max_retries=max_retries,
        transport=transport,
        sleep=sleep,
        rng=rng,
        **options,
    )


def _timeout(explicit: float | None, env: Mapping[str, str], preset: Preset) -> float:
    if explicit is not None:
        return explicit
    raw = _pick(None, env, "GRADEKIT_TIMEOUT")
    if raw is None:
        return preset.timeout
    try:
        seconds = float(raw)
    except ValueError:
        seconds = 0.0
    if not seconds > 0 or seconds == float("inf"):
        raise ProviderConfigError(
            f"GRADEKIT_TIMEOUT={raw!r} is not a number of seconds above 0 - fix or unset it"
        )
    return seconds


def _max_tokens(explicit: int | None, env: Mapping[str, str]) -> int | None:
    if explicit is not None:
        return explicit
    raw = _pick(None, env, "GRADEKIT_MAX_TOKENS")
    if raw is None:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ProviderConfigError(
            f"GRADEKIT_MAX_TOKENS={raw!r} is not a positive whole number - fix or unset it"
        )
    return int(raw)
