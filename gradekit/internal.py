"""The kit's surface for the grader and the benchmarks: what they use of the kit's insides.

Not for students, whose agents use the public ``gradekit`` package only. Nothing here
is promised beyond this repository: a name may change or go whenever the grader and
the benchmarks change with it. A name that is public in ``gradekit`` is imported from
there, never from here; a name the grader needs from a private ``gradekit._*`` module is
added here, and tests/kit/test_layers.py fails on a grader module that reaches past it.

What is here, by what it serves:

    reading and writing recordings   decode_cassette, encode_cassette, decode_fixture,
                                     Fixture, ToolCall, HTTP_CASSETTE, LAB_HTTP_CASSETTE,
                                     HttpRequest, KEPT_HEADERS
    the store's files                write_atomic, fsync_folder, journal_path, previous_path
    messages and checks              closest, divergence, miss_rows, replay_miss,
                                     credential_values, find_secret, in_chain
    the SDK clients' mixin           HttpClients
    commands a message prints        commands (``make record ARGS=...``, ``.venv/bin/gradekit``),
                                     recording_settings (the provider a recording names)
"""

from __future__ import annotations

from gradekit import _commands as commands
from gradekit._cassette import decode_cassette, encode_cassette
from gradekit._codec import closest, divergence
from gradekit._exceptions import in_chain
from gradekit._fixtures import Fixture, ToolCall, decode_fixture
from gradekit._http.cassette import HTTP_CASSETTE, KEPT_HEADERS, LAB_HTTP_CASSETTE, HttpRequest
from gradekit._http.client import HttpClients
from gradekit._http.miss import miss_rows
from gradekit._journal import previous_path
from gradekit._live import recording_settings
from gradekit._replay import miss as replay_miss
from gradekit._secrets import credential_values, find_secret
from gradekit._store import fsync_folder, journal_path, write_atomic

__all__ = [
    "HTTP_CASSETTE",
    "KEPT_HEADERS",
    "LAB_HTTP_CASSETTE",
    "Fixture",
    "HttpClients",
    "HttpRequest",
    "ToolCall",
    "closest",
    "commands",
    "credential_values",
    "decode_cassette",
    "decode_fixture",
    "divergence",
    "encode_cassette",
    "find_secret",
    "fsync_folder",
    "in_chain",
    "journal_path",
    "miss_rows",
    "previous_path",
    "recording_settings",
    "replay_miss",
    "write_atomic",
]
