"""Live adapters against a real HTTP server on loopback; never a real provider.

Sleeping is injected (``Sleeps`` records instead of waiting) and jitter comes
from ``HalfRandom``, so every backoff is an exact, assertable number.
"""

from __future__ import annotations

import inspect
import random
import socket
from collections.abc import Callable, Iterator
from typing import Any, Literal, cast

import httpx
import pytest

from gradekit import (
    PRESETS,
    Anthropic,
    OpenAICompatible,
    Preset,
    Provider,
    ProviderAuthError,
    ProviderConfigError,
    ProviderConnectionError,
    ProviderError,
    ProviderRateLimited,
    ProviderResponseError,
    ProviderServerError,
    ProviderTimeout,
    UsageError,
    live_from_env,
)
from tests.loopback import Loopback, answer, empty, error, no_text, raw, slow

Kind = Literal["openai", "anthropic"]
KINDS: list[Kind] = ["openai", "anthropic"]
KEY = "sk-test-SECRET-0123456789"
VENDOR_KEY = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


class Sleeps(list[float]):
    """An injected ``sleep`` that remembers what it was asked instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


class HalfRandom(random.Random):
    """Jitter pinned to the middle: ``uniform(0, c)`` is always ``c / 2``."""

    def random(self) -> float:
        return 0.5


@pytest.fixture
def server() -> Iterator[Loopback]:
    with Loopback() as loopback:
        yield loopback


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


def make(
    kind: Kind, server: Loopback | str, sleeps: Sleeps, **options: Any
) -> OpenAICompatible | Anthropic:
    """An adapter of ``kind`` aimed at ``server`` (or a URL), hermetic from os.environ."""
    options.setdefault("api_key", KEY)
    common: dict[str, Any] = {
        "model": "test-model",
        "env": {},
        "sleep": sleeps,
        "rng": HalfRandom(),
        **options,
    }
    if kind == "openai":
        url = server if isinstance(server, str) else server.openai_url
        return OpenAICompatible(base_url=url, **common)
    url = server if isinstance(server, str) else server.url
    return Anthropic(base_url=url, **common)


def closed_port_url() -> str:
    """A loopback URL where nothing listens: the port was just bound and released."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# ---- success and the exact request ------------------------------------------------


def test_openai_sends_exact_request_and_returns_content(server: Loopback, sleeps: Sleeps) -> None:
    server.script(answer("Refunds take ", "5 days."))
    text = make("openai", server, sleeps, max_tokens=64, temperature=0.2).complete("Refund?")
    assert text == "Refunds take 5 days."
    [sent] = server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.body == {
        "model": "test-model",
        "temperature": 0.2,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "Refund?"}],
    }
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["content-type"] == "application/json"
    assert "x-api-key" not in sent.headers
    assert sleeps == []


def test_openai_omits_max_tokens_unless_set(server: Loopback, sleeps: Sleeps) -> None:
    make("openai", server, sleeps).complete("hi")
    assert server.requests[0].body == {
        "model": "test-model",
        "temperature": 0.0,
        "messages": [{"role": "user", "content": "hi"}],
    }


def test_anthropic_sends_exact_request_and_joins_text_blocks(
    server: Loopback, sleeps: Sleeps
) -> None:
    server.script(answer("Refunds take ", "5 days.", thinking="policy says five"))
    text = make("anthropic", server, sleeps).complete("Refund?")
    assert text == "Refunds take 5 days."
    [sent] = server.requests
    assert sent.path == "/v1/messages"
    assert sent.body == {
        "model": "test-model",
        "max_tokens": 1024,
        "temperature": 0.0,
        "messages": [{"role": "user", "content": "Refund?"}],
    }
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers


@pytest.mark.parametrize("kind", KINDS)
def test_no_key_sends_no_auth_header(kind: Kind, server: Loopback, sleeps: Sleeps) -> None:
    assert make(kind, server, sleeps, api_key=None).complete("hi") == "Hello from loopback."
    headers = server.requests[0].headers
    assert "authorization" not in headers
    assert "x-api-key" not in headers


def test_trailing_slash_in_base_url_does_not_double(server: Loopback, sleeps: Sleeps) -> None:
    make("openai", server.openai_url + "/", sleeps).complete("hi")
    assert server.requests[0].path == "/v1/chat/completions"


# ---- retries ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_429_sleeps_retry_after_then_succeeds(kind: Kind, server: Loopback, sleeps: Sleeps) -> None:
    server.script(error(429, "slow down", retry_after="2"), answer("ok"))
    assert make(kind, server, sleeps).complete("hi") == "ok"
    assert sleeps == [2.0]
    assert len(server.requests) == 2


@pytest.mark.parametrize("kind", KINDS)
def test_every_retry_is_told_with_its_reason_and_wait(
    kind: Kind, server: Loopback, sleeps: Sleeps
) -> None:
    """Four seconds of silent backoff look like a hang: ``on_retry`` hears of each wait."""
    server.script(error(429, "slow down", retry_after="2"), error(503), answer("ok"))
    adapter = make(kind, server, sleeps)
    told: list[str] = []
    adapter.on_retry = told.append
    assert adapter.complete("hi") == "ok"
    assert told[0] == "HTTP 429 (rate limited): waiting 2.0s before attempt 2 of 5"
    assert told[1].startswith("HTTP 503: waiting ")
    assert told[1].endswith("s before attempt 3 of 5") and len(told) == len(sleeps) == 2


@pytest.mark.parametrize(
    ("retry_after", "slept"),
    [
        ("120", 7.0),  # capped at max_backoff
        ("Fri, 31 Dec 2100 23:59:59 GMT", 7.0),  # HTTP-date far ahead, capped
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),  # HTTP-date already past
        ("soon", 0.25),  # unreadable: ordinary jittered backoff, 0.5 * 0.5
    ],
)
def test_retry_after_forms(
    retry_after: str, slept: float, server: Loopback, sleeps: Sleeps
) -> None:
    server.script(error(503, retry_after=retry_after))
    make("openai", server, sleeps, max_backoff=7.0).complete("hi")
    assert sleeps == [slept]


@pytest.mark.parametrize("kind", KINDS)
def test_500_then_success(kind: Kind, server: Loopback, sleeps: Sleeps) -> None:
    server.script(error(500), answer("recovered"))
    assert make(kind, server, sleeps).complete("hi") == "recovered"
    assert sleeps == [0.25]
    assert len(server.requests) == 2


@pytest.mark.parametrize("kind", KINDS)
def test_503_exhausts_bounded_retries(kind: Kind, server: Loopback, sleeps: Sleeps) -> None:
    server.script(*[error(503, "overloaded")] * 10)
    with pytest.raises(ProviderServerError) as caught:
        make(kind, server, sleeps, max_retries=3).complete("hi")
    assert len(server.requests) == 4
    assert sleeps == [0.25, 0.5, 1.0]  # exponential, and no sleep after the last attempt
    message = str(caught.value)
    assert "503" in message
    assert "4 attempts" in message
    assert "`make record` resumes" in message


def test_backoff_is_capped(server: Loopback, sleeps: Sleeps) -> None:
    server.script(*[error(500)] * 4)
    make("openai", server, sleeps, max_retries=4, backoff=1.0, max_backoff=3.0).complete("hi")
    assert sleeps == [0.5, 1.0, 1.5, 1.5]


@pytest.mark.parametrize("kind", KINDS)
def test_429_exhausted_is_rate_limited(kind: Kind, server: Loopback, sleeps: Sleeps) -> None:
    server.script(*[error(429, retry_after="1")] * 3)
    with pytest.raises(ProviderRateLimited, match="wait and run again") as caught:
        make(kind, server, sleeps, max_retries=2).complete("hi")
    assert "429" in str(caught.value)
    assert sleeps == [1.0, 1.0]


@pytest.mark.parametrize("status", [400, 404, 422])
def test_other_4xx_is_not_retried(status: int, server: Loopback, sleeps: Sleeps) -> None:
    server.script(error(status, "The model `test-model` does not exist"))
    with pytest.raises(ProviderResponseError) as caught:
        make("openai", server, sleeps).complete("hi")
    message = str(caught.value)
    assert f"HTTP {status}" in message
    assert "does not exist" in message
    assert "GRADEKIT_MODEL" in message
    assert len(server.requests) == 1
    assert sleeps == []


@pytest.mark.parametrize("kind", KINDS)
def test_timeout_after_retries(kind: Kind, server: Loopback, sleeps: Sleeps) -> None:
    server.script(slow(30), slow(30))
    with pytest.raises(ProviderTimeout) as caught:
        make(kind, server, sleeps, timeout=0.2, max_retries=1).complete("hi")
    assert isinstance(caught.value.__cause__, httpx.TimeoutException)
    assert len(server.requests) == 2
    assert len(sleeps) == 1
    assert "GRADEKIT_TIMEOUT=SECONDS" in str(caught.value)


@pytest.mark.parametrize("kind", KINDS)
def test_connection_refused(kind: Kind, sleeps: Sleeps) -> None:
    with pytest.raises(ProviderConnectionError) as caught:
        make(kind, closed_port_url(), sleeps, max_retries=2).complete("hi")
    assert isinstance(caught.value.__cause__, httpx.ConnectError)
    assert len(sleeps) == 2
    message = str(caught.value)
    assert "GRADEKIT_BASE_URL" in message
    assert "make local-model" in message


# ---- refusals and unusable answers --------------------------------------------------


@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.parametrize("kind", KINDS)
def test_auth_error_names_variables_never_the_key(
    kind: Kind, status: int, server: Loopback, sleeps: Sleeps
) -> None:
    # The body echoes the key back, as real providers partly do: it must be redacted.
    server.script(error(status, "Incorrect API key provided: {key}"))
    adapter = make(kind, server, sleeps)
    with pytest.raises(ProviderAuthError) as caught:
        adapter.complete("hi")
    message = str(caught.value)
    assert KEY not in message
    assert "[redacted]" in message
    assert "GRADEKIT_API_KEY" in message
    assert VENDOR_KEY[kind] in message
    assert "--api-key" in message
    assert len(server.requests) == 1


def test_auth_error_without_key_says_none_was_sent(server: Loopback, sleeps: Sleeps) -> None:
    server.script(error(401, "missing key"))
    with pytest.raises(ProviderAuthError, match="no API key was sent"):
        make("openai", server, sleeps, api_key=None).complete("hi")


@pytest.mark.parametrize("kind", KINDS)
def test_malformed_json_shows_body(kind: Kind, server: Loopback, sleeps: Sleeps) -> None:
    server.script(raw(b'{"choices": [ <html>Bad Gateway</html>', content_type="text/html"))
    with pytest.raises(ProviderResponseError) as caught:
        make(kind, server, sleeps).complete("hi")
    message = str(caught.value)
    assert "<html>Bad Gateway</html>" in message
    assert "text/html" in message


def test_long_body_is_truncated_and_redacted(server: Loopback, sleeps: Sleeps) -> None:
    body = ("x" * 295 + KEY + "y" * 4000 + "TAIL").encode()
    server.script(raw(body))
    with pytest.raises(ProviderResponseError) as caught:
        make("openai", server, sleeps).complete("hi")
    message = str(caught.value)
    assert KEY not in message
    assert KEY[:5] not in message  # redaction ran before the cut, so no half key either
    assert "TAIL" not in message
    assert f"({len(body) - len(KEY) + len('[redacted]')} chars)" in message


@pytest.mark.parametrize("kind", KINDS)
def test_empty_choices_or_content(kind: Kind, server: Loopback, sleeps: Sleeps) -> None:
    server.script(empty())
    expected = "no choices" if kind == "openai" else "no content blocks"
    with pytest.raises(ProviderResponseError, match=expected) as caught:
        make(kind, server, sleeps).complete("hi")
    assert "loopback" in str(caught.value)  # the body's id is quoted back


@pytest.mark.parametrize("kind", KINDS)
def test_missing_text(kind: Kind, server: Loopback, sleeps: Sleeps) -> None:
    server.script(no_text())
    expected = "finish_reason: stop" if kind == "openai" else "stop_reason: tool_use"
    with pytest.raises(ProviderResponseError, match=expected):
        make(kind, server, sleeps).complete("hi")


@pytest.mark.parametrize("kind", KINDS)
def test_whitespace_only_answer_is_an_error(kind: Kind, server: Loopback, sleeps: Sleeps) -> None:
    server.script(answer(" \n "))
    with pytest.raises(ProviderResponseError, match="no text"):
        make(kind, server, sleeps).complete("hi")


def test_unknown_route_404_points_at_base_url(server: Loopback, sleeps: Sleeps) -> None:
    with pytest.raises(ProviderResponseError, match="end in /v1"):
        make("openai", server.url, sleeps).complete("hi")  # forgot the /v1
    assert server.requests[0].path == "/chat/completions"


# ---- every httpx exception becomes a kit error --------------------------------------


def httpx_exception_classes() -> list[type[Exception]]:
    """Every exception class httpx exports, found by walking ``httpx.__all__``."""
    exported = (getattr(httpx, name) for name in httpx.__all__)
    return [obj for obj in exported if inspect.isclass(obj) and issubclass(obj, Exception)]


def instantiate(cls: type[Exception], request: httpx.Request) -> Exception:
    """One instance of ``cls`` whose message carries the key, to prove it is redacted."""
    message = f"boom {KEY}"
    if issubclass(cls, httpx.HTTPStatusError):
        return cls(message, request=request, response=httpx.Response(500, request=request))
    if issubclass(cls, httpx.RequestError):
        return cls(message, request=request)
    if issubclass(cls, httpx.StreamError) and cls is not httpx.StreamError:
        # These build their own message and take no arguments.
        return cast(Callable[[], Exception], cls)()
    return cls(message)


def test_walk_finds_the_httpx_exception_tree() -> None:
    found = set(httpx_exception_classes())
    assert {
        httpx.HTTPError,
        httpx.ConnectError,
        httpx.ReadTimeout,
        httpx.StreamClosed,
        httpx.InvalidURL,
        httpx.CookieConflict,
    } <= found
    assert len(found) >= 25


@pytest.mark.parametrize("cls", httpx_exception_classes(), ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("kind", KINDS)
def test_every_httpx_exception_is_mapped(kind: Kind, cls: type[Exception], sleeps: Sleeps) -> None:
    raised: list[Exception] = []

    def handler(request: httpx.Request) -> httpx.Response:
        raised.append(instantiate(cls, request))
        raise raised[-1]

    transport = httpx.MockTransport(handler)
    adapter = make(kind, "http://provider.invalid", sleeps, transport=transport, max_retries=0)
    with pytest.raises(ProviderError) as caught:
        adapter.complete("hi")
    assert caught.value.__cause__ is raised[0]
    assert KEY not in str(caught.value)
    assert cls.__name__ in str(caught.value)


@pytest.mark.parametrize(
    ("cls", "expected", "retried"),
    [
        (httpx.ConnectTimeout, ProviderTimeout, True),
        (httpx.ReadTimeout, ProviderTimeout, True),
        (httpx.PoolTimeout, ProviderTimeout, True),
        (httpx.ConnectError, ProviderConnectionError, True),
        (httpx.RemoteProtocolError, ProviderConnectionError, True),
        (httpx.ProxyError, ProviderConnectionError, True),
        (httpx.UnsupportedProtocol, ProviderConfigError, False),
        (httpx.LocalProtocolError, ProviderConfigError, False),
        (httpx.DecodingError, ProviderResponseError, False),
        (httpx.InvalidURL, ProviderConfigError, False),
    ],
    ids=lambda value: getattr(value, "__name__", str(value)),
)
def test_httpx_exception_kinds_and_retries(
    cls: type[Exception], expected: type[ProviderError], retried: bool, sleeps: Sleeps
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise instantiate(cls, request)

    transport = httpx.MockTransport(handler)
    adapter = make("openai", "http://provider.invalid", sleeps, transport=transport, max_retries=2)
    with pytest.raises(expected):
        adapter.complete("hi")
    assert len(sleeps) == (2 if retried else 0)


def test_caller_transport_survives_calls(sleeps: Sleeps) -> None:
    # Each call closes its own client; a transport passed in must stay usable.
    transport = httpx.HTTPTransport()
    with Loopback() as loopback, transport:
        adapter = make("openai", loopback, sleeps, transport=transport)
        assert [adapter.complete("a"), adapter.complete("b")] == ["Hello from loopback."] * 2


# ---- construction, names, credentials -----------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_names(kind: Kind, sleeps: Sleeps) -> None:
    prefix = "openai-compatible" if kind == "openai" else "anthropic"
    assert make(kind, "http://x.invalid", sleeps).name == f"{prefix}:test-model"
    assert make(kind, "http://x.invalid", sleeps, label="provider-a").name == "provider-a"
    assert isinstance(make(kind, "http://x.invalid", sleeps), Provider)


@pytest.mark.parametrize("kind", KINDS)
def test_credentials_and_repr(kind: Kind, sleeps: Sleeps) -> None:
    vendor = {VENDOR_KEY[kind]: "from-vendor-var"}
    assert make(kind, "http://x.invalid", sleeps).credentials() == (KEY,)
    assert make(kind, "http://x.invalid", sleeps, api_key=None, env=vendor).credentials() == (
        "from-vendor-var",
    )
    assert make(kind, "http://x.invalid", sleeps, env=vendor).credentials() == (KEY,)
    assert make(kind, "http://x.invalid", sleeps, api_key=None).credentials() == ()
    assert make(kind, "http://x.invalid", sleeps, api_key=f" {KEY}\n").credentials() == (KEY,)
    assert KEY not in repr(make(kind, "http://x.invalid", sleeps))


def test_key_env_none_reads_no_variable(sleeps: Sleeps) -> None:
    adapter = make(
        "openai",
        "http://x.invalid",
        sleeps,
        api_key=None,
        key_env=None,
        env={"OPENAI_API_KEY": "must-not-be-used"},
    )
    assert adapter.credentials() == ()


def test_unsendable_key_is_a_config_error(sleeps: Sleeps) -> None:
    with pytest.raises(ProviderConfigError, match="cannot carry") as caught:
        make("openai", "http://x.invalid", sleeps, api_key="sk-“quoted”")
    assert "quoted" not in str(caught.value)


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"model": " "}, ProviderConfigError, "GRADEKIT_MODEL"),
        ({"base_url": "127.0.0.1:8080/v1"}, ProviderConfigError, "http:// or https://"),
        ({"max_retries": -1}, UsageError, "max_retries"),
    ],
)
def test_bad_settings_fail_at_construction(
    options: dict[str, Any], error: type[Exception], match: str
) -> None:
    settings: dict[str, Any] = {"model": "m", "base_url": "http://x.invalid", **options}
    with pytest.raises(error, match=match):
        OpenAICompatible(**settings)


# ---- live_from_env ------------------------------------------------------------------


def test_presets() -> None:
    assert PRESETS["llamacpp"] == Preset(
        "openai-compatible",
        "http://127.0.0.1:8080/v1",
        None,
        False,
        "smollm2",
        max_tokens=96,
        timeout=600,
    )
    assert PRESETS["ollama"] == Preset(
        "openai-compatible", "http://127.0.0.1:11434/v1", None, False, None, timeout=600
    )
    assert PRESETS["openai"].key_env == "OPENAI_API_KEY"
    assert PRESETS["openai"].key_required
    assert PRESETS["anthropic"] == Preset(
        "anthropic", "https://api.anthropic.com", "ANTHROPIC_API_KEY", True, None
    )
    assert PRESETS["openai-compatible"].adapter == "openai-compatible"


def test_no_provider_explains_every_way_to_configure() -> None:
    with pytest.raises(ProviderConfigError) as caught:
        live_from_env({})
    message = str(caught.value)
    needed = [
        "GRADEKIT_PROVIDER",
        "GRADEKIT_MODEL",
        "GRADEKIT_BASE_URL",
        "GRADEKIT_API_KEY",
        "--provider",
        "--model",
        "--base-url",
        "--api-key",
        "make local-model",
        *PRESETS,
    ]
    assert [word for word in needed if word not in message] == []


def test_unknown_provider_lists_valid_ones() -> None:
    with pytest.raises(ProviderConfigError, match="'gpt'") as caught:
        live_from_env({"GRADEKIT_PROVIDER": "gpt"})
    assert all(name in str(caught.value) for name in PRESETS)


@pytest.mark.parametrize("provider", ["openai", "ollama", "anthropic"])
def test_no_model(provider: str) -> None:
    env = {"GRADEKIT_PROVIDER": provider, "GRADEKIT_MODEL": "  ", "GRADEKIT_API_KEY": "k"}
    with pytest.raises(ProviderConfigError, match="set GRADEKIT_MODEL or pass --model"):
        live_from_env(env)


@pytest.mark.parametrize(
    ("provider", "variable"), [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")]
)
def test_missing_required_key(provider: str, variable: str) -> None:
    expected = f"No key found - set GRADEKIT_API_KEY or {variable}, or pass --api-key"
    with pytest.raises(ProviderConfigError) as caught:
        live_from_env({"GRADEKIT_PROVIDER": provider, "GRADEKIT_MODEL": "m"})
    assert str(caught.value) == expected


def test_generic_adapter_needs_a_base_url() -> None:
    with pytest.raises(ProviderConfigError, match="GRADEKIT_BASE_URL or --base-url"):
        live_from_env(
            {"GRADEKIT_PROVIDER": "openai-compatible", "GRADEKIT_MODEL": "m", "OPENAI_API_KEY": "k"}
        )


def test_keyless_preset_needs_no_key() -> None:
    adapter = live_from_env({"GRADEKIT_PROVIDER": "llamacpp", "OPENAI_API_KEY": "vendor"})
    assert isinstance(adapter, OpenAICompatible)
    assert adapter.name == "openai-compatible:smollm2"
    assert adapter.credentials() == ()  # a local server is never sent an OpenAI key


def test_env_wins_over_vendor_variable_and_preset(server: Loopback, sleeps: Sleeps) -> None:
    env = {
        "GRADEKIT_PROVIDER": "OpenAI",
        "GRADEKIT_MODEL": "env-model",
        "GRADEKIT_BASE_URL": server.openai_url,
        "GRADEKIT_API_KEY": "env-key",
        "OPENAI_API_KEY": "vendor-key",
    }
    adapter = live_from_env(env, sleep=sleeps)
    adapter.complete("hi")
    [sent] = server.requests
    assert sent.body["model"] == "env-model"
    assert sent.headers["authorization"] == "Bearer env-key"


def test_vendor_variable_used_when_no_gradekit_key(server: Loopback) -> None:
    env = {
        "GRADEKIT_PROVIDER": "anthropic",
        "GRADEKIT_MODEL": "claude",
        "GRADEKIT_BASE_URL": server.url,
        "ANTHROPIC_API_KEY": "vendor-key",
        "GRADEKIT_API_KEY": "",
    }
    adapter = live_from_env(env)
    assert isinstance(adapter, Anthropic)
    assert adapter.complete("hi") == "Hello from loopback."
    assert server.requests[0].headers["x-api-key"] == "vendor-key"


def test_arguments_win_over_env(server: Loopback, sleeps: Sleeps) -> None:
    env = {
        "GRADEKIT_PROVIDER": "unknown",
        "GRADEKIT_MODEL": "env-model",
        "GRADEKIT_BASE_URL": closed_port_url(),
        "GRADEKIT_API_KEY": "env-key",
    }
    adapter = live_from_env(
        env,
        provider="anthropic",
        model="arg-model",
        base_url=server.url,
        api_key="arg-key",
        label="provider-b",
        sleep=sleeps,
        max_retries=0,
    )
    assert adapter.name == "provider-b"
    assert adapter.complete("hi") == "Hello from loopback."
    [sent] = server.requests
    assert sent.body["model"] == "arg-model"
    assert sent.headers["x-api-key"] == "arg-key"


def test_max_tokens_from_preset_env_and_argument(server: Loopback) -> None:
    env = {"GRADEKIT_PROVIDER": "llamacpp", "GRADEKIT_BASE_URL": server.openai_url}
    live_from_env(env).complete("preset")
    live_from_env({**env, "GRADEKIT_MAX_TOKENS": "64"}).complete("env")
    live_from_env({**env, "GRADEKIT_MAX_TOKENS": "64"}, max_tokens=8).complete("argument")
    live_from_env({**env, "GRADEKIT_PROVIDER": "ollama", "GRADEKIT_MODEL": "m"}).complete("none")
    sent = [request.body.get("max_tokens") for request in server.requests]
    assert sent == [PRESETS["llamacpp"].max_tokens, 64, 8, None] == [96, 64, 8, None]


def test_timeout_from_preset_env_and_argument(server: Loopback, sleeps: Sleeps) -> None:
    """A local model gets minutes per answer (its preset's 600 s); GRADEKIT_TIMEOUT, then
    the argument, win. The timeout is real: a slow answer past it times out."""
    env = {"GRADEKIT_PROVIDER": "llamacpp", "GRADEKIT_BASE_URL": server.openai_url}
    cloud = {**env, "GRADEKIT_PROVIDER": "openai-compatible", "GRADEKIT_MODEL": "m"}
    server.script(slow(0.6, "late"), slow(0.6, "late"))
    assert live_from_env(env, sleep=sleeps, max_retries=0).complete("preset") == "late"
    with pytest.raises(ProviderTimeout, match=r"timeout 0\.3s"):
        live_from_env({**env, "GRADEKIT_TIMEOUT": "0.3"}, sleep=sleeps, max_retries=0).complete(
            "env"
        )
    server.script(slow(0.6, "late"))
    with pytest.raises(ProviderTimeout, match=r"timeout 0\.2s"):
        live_from_env(
            {**cloud, "GRADEKIT_TIMEOUT": "600"}, timeout=0.2, sleep=sleeps, max_retries=0
        ).complete("argument")
    # which default each gets (waiting it out would take minutes): the adapter's own field
    chosen = [live_from_env(e)._timeout for e in (env, cloud, {**cloud, "GRADEKIT_TIMEOUT": "90"})]
    assert chosen == [600, 60, 90]


@pytest.mark.parametrize("value", ["soon", "0", "-1", "inf", "nan"])
def test_bad_timeout_is_a_config_error(value: str) -> None:
    with pytest.raises(ProviderConfigError, match=r"GRADEKIT_TIMEOUT=.* - fix or unset it"):
        live_from_env({"GRADEKIT_PROVIDER": "llamacpp", "GRADEKIT_TIMEOUT": value})


@pytest.mark.parametrize("value", ["lots", "0", "-5"])
def test_bad_max_tokens_is_a_config_error(value: str) -> None:
    with pytest.raises(ProviderConfigError, match="GRADEKIT_MAX_TOKENS"):
        live_from_env({"GRADEKIT_PROVIDER": "llamacpp", "GRADEKIT_MAX_TOKENS": value})


def test_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADEKIT_PROVIDER", "ollama")
    monkeypatch.setenv("GRADEKIT_MODEL", "llama3.2")
    assert live_from_env().name == "openai-compatible:llama3.2"


# ---- the double is honest: the official SDKs read the same bytes --------------------


def test_openai_sdk_parses_the_double(server: Loopback, sleeps: Sleeps) -> None:
    import openai

    server.script(answer("Same ", "answer."), answer("Same ", "answer."))
    ours = make("openai", server, sleeps).complete("hi")
    with openai.OpenAI(base_url=server.openai_url, api_key="test-key", max_retries=0) as client:
        theirs = client.chat.completions.create(
            model="test-model", messages=[{"role": "user", "content": "hi"}]
        )
    assert theirs.choices[0].message.content == ours == "Same answer."
    assert theirs.choices[0].finish_reason == "stop"
    assert theirs.usage is not None
    assert theirs.usage.total_tokens == 3


def test_anthropic_sdk_parses_the_double(server: Loopback, sleeps: Sleeps) -> None:
    import anthropic

    reply = answer("Same ", "answer.", thinking="hm")
    server.script(reply, reply)
    ours = make("anthropic", server, sleeps).complete("hi")
    with anthropic.Anthropic(base_url=server.url, api_key="test-key", max_retries=0) as client:
        message = client.messages.create(
            model="test-model", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        )
    theirs = "".join(block.text for block in message.content if block.type == "text")
    assert theirs == ours == "Same answer."
    assert message.stop_reason == "end_turn"


def test_sdks_parse_the_double_errors(server: Loopback) -> None:
    import anthropic
    import openai

    server.script(error(401, "bad key"), error(429, "slow down", retry_after="1"))
    messages: list[Any] = [{"role": "user", "content": "x"}]
    with (
        openai.OpenAI(base_url=server.openai_url, api_key="k", max_retries=0) as gpt,
        pytest.raises(openai.AuthenticationError, match="bad key"),
    ):
        gpt.chat.completions.create(model="m", messages=messages)
    with (
        anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0) as claude,
        pytest.raises(anthropic.RateLimitError, match="slow down"),
    ):
        claude.messages.create(model="m", max_tokens=8, messages=messages)
