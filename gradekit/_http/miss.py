"""An HTTP cassette's miss: the closest recorded request and where the asked one parts from
it, as JSON paths (``messages[2].content: "a" != "b"``, ``temperature: 0.7 != 0.2``)."""

from __future__ import annotations

from gradekit._exceptions import CassetteMiss
from gradekit._http.cassette import (
    HTTP_CASSETTE,
    HttpCassette,
    HttpCassetteCodec,
    HttpRequest,
    clip,
    compact_json,
    place,
    slot,
)

__all__ = ["differences", "http_miss", "miss_rows"]


def differences(asked: object, recorded: object, path: str = "", limit: int = 5) -> list[str]:
    """The JSON paths where ``asked`` and ``recorded`` differ, first ``limit`` of them, each as
    ``messages[2].content: "a" != "b"`` (asked, then recorded)."""
    found: list[str] = []
    _walk(asked, recorded, path, found, limit)
    return found


def _walk(asked: object, recorded: object, path: str, found: list[str], limit: int) -> None:
    if len(found) >= limit:
        return
    if isinstance(asked, dict) and isinstance(recorded, dict):
        for name in sorted(asked.keys() | recorded.keys()):
            _walk(
                asked.get(name, _ABSENT),
                recorded.get(name, _ABSENT),
                f"{path}.{name}" if path else name,
                found,
                limit,
            )
    elif isinstance(asked, list) and isinstance(recorded, list):
        for index in range(max(len(asked), len(recorded))):
            _walk(
                asked[index] if index < len(asked) else _ABSENT,
                recorded[index] if index < len(recorded) else _ABSENT,
                f"{path}[{index}]",
                found,
                limit,
            )
    elif type(asked) is not type(recorded) or asked != recorded:
        found.append(f"{path or '(body)'}: {_value(asked)} != {_value(recorded)}")


_ABSENT = object()


def _value(value: object) -> str:
    return "(absent)" if value is _ABSENT else clip(compact_json(value))


def http_miss(
    cassette: HttpCassette,
    asked: HttpRequest,
    n: int,
    *,
    source: str,
    exists: bool,
    codec: HttpCassetteCodec = HTTP_CASSETTE,
) -> CassetteMiss:
    """The error for the ``n``th asking of ``asked``, which ``cassette`` does not hold: the
    closest recorded request (same method and path first) and where they part; the fix
    runs ``codec``'s record command (default: the pytest plugin's flag)."""
    rows = miss_rows(cassette, asked, n, exists=exists)
    message = codec.miss_message(source, rows, case=cassette.case)
    return CassetteMiss(
        message, cassette=source, key=asked.key, prompt=compact_json(asked.to_json())
    )


def miss_rows(
    cassette: HttpCassette, asked: HttpRequest, n: int, *, exists: bool
) -> list[tuple[str, str]]:
    """A miss's ``(label, value)`` rows: its slot, the request, and either how often it was
    recorded or the closest recorded request and where the asked one ``differs``."""
    key = asked.key
    rows = [("key", slot(key, n)), ("request", f"{asked.method} {asked.url}")]
    recorded = cassette.interactions.get(key, ())
    if recorded:
        rows.append(
            (
                "asked",
                f"{_times(n)}; recorded {_times(len(recorded))}. A request "
                "asked more often than recorded is a miss",
            )
        )
    else:
        rows += _closest_rows(cassette, asked, exists)
    return rows


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def _closest_rows(
    cassette: HttpCassette, asked: HttpRequest, exists: bool
) -> list[tuple[str, str]]:
    if not exists:
        return [("closest", HTTP_CASSETTE.absent)]
    candidates = [(key, recorded[0].request) for key, recorded in cassette.interactions.items()]
    if not candidates:
        return [("closest", "(the cassette has no recorded requests)")]
    path = place(asked.url)[1].partition("?")[0]

    def distance(item: tuple[str, HttpRequest]) -> tuple[int, int, int]:
        request = item[1]
        same_path = place(request.url)[1].partition("?")[0] == path
        return (
            request.method != asked.method,
            not same_path,
            len(_request_differences(asked, request, limit=50)),
        )

    key, best = min(candidates, key=distance)
    found = _request_differences(asked, best, limit=5)
    return [
        ("closest", f"{best.method} {best.url} (key {key})"),
        ("differs", "; ".join(found) + " (asked != recorded)"),
    ]


def _request_differences(asked: HttpRequest, recorded: HttpRequest, *, limit: int) -> list[str]:
    """Where two requests part: method, host and path by name, the body by its JSON paths."""
    mine, theirs = asked.material(), recorded.material()
    found = [
        f"{name}: {_value(mine[name])} != {_value(theirs[name])}"
        for name in ("method", "host", "path")
        if mine[name] != theirs[name]
    ]
    return found + differences(mine["body"], theirs["body"], limit=max(limit - len(found), 0))
