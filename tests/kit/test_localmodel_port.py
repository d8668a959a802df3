"""``make local-model`` on a port of the user's choosing, and a model that cannot call tools
saying so (issue 44): every line it prints runs as printed.

It tests ``gradekit._localmodel``'s command and request parser on purpose."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from gradekit import live_from_env
from gradekit._localmodel.__main__ import RECORD, busy, record_line
from gradekit._localmodel._server import parse_request

REPO = Path(__file__).resolve().parents[2]


def _environment(line: str) -> tuple[dict[str, str], list[str]]:
    """The ``NAME=value`` words before a command line, and the command."""
    words = shlex.split(line)
    settings = dict(word.split("=", 1) for word in words if re.match(r"[A-Z_]+=", word))
    return settings, words[len(settings) :]


@pytest.mark.parametrize("port", [8080, 8093])
def test_the_record_line_reaches_the_server_on_its_port(port: int) -> None:
    line = record_line("127.0.0.1", port)
    settings, command = _environment(line)
    assert command == ["make", "record"]
    adapter = live_from_env(settings)
    assert f"base_url='http://127.0.0.1:{port}/v1'" in repr(adapter)
    assert (line == RECORD) == (port == 8080)


def test_a_busy_port_names_the_make_variable_that_moves_it() -> None:
    said = busy("127.0.0.1", 8080, "Address already in use")
    assert "`make local-model MODEL_PORT=8081`" in said
    assert f"`{record_line('127.0.0.1', 8081)}`" in said
    assert "GRADEKIT_BASE_URL=http://127.0.0.1:8081/v1" in said


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_passes_model_port_to_both_engines() -> None:
    for target in ("local-model-numpy", "local-model-llamacpp"):
        shown = subprocess.run(
            ["make", "-n", target, "MODEL_PORT=8093"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "--port 8093" in shown, target
    banner = subprocess.run(
        ["make", "-n", "local-model-llamacpp", "MODEL_PORT=8093"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert record_line("127.0.0.1", 8093) in banner


def test_a_request_offering_tools_is_answered_in_text_and_the_terminal_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    body = {
        "model": "smollm2",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "search_notes", "parameters": {}}}],
    }
    parse_request(json.dumps(body).encode())
    assert (
        "note: smollm2 cannot call tools; this request offered 1 (search_notes) and gets "
        "a text answer"
    ) in capsys.readouterr().err
    parse_request(json.dumps({k: v for k, v in body.items() if k != "tools"}).encode())
    assert capsys.readouterr().err == ""
