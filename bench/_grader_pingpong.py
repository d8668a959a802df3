"""A floor for the sandbox's pipe: a bare JSON-lines ping-pong between two Python processes.

No harness, no audit hook, no prompt keys: the child writes a request line and
blocks for the answer line; the parent waits in a selector, as the grader does,
and answers. What the grader's piped call costs above this is its own work.
The lines are shaped like the grader's: a provider call by default (1 KB
prompt, 1 KB answer), or any request and reply given, such as a tool call's.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
from collections.abc import Mapping

from bench._data import prompt

__all__ = ["ping_pong"]

_CHILD = """
import json, os, sys, time
read_fd, write_fd, calls, loops = map(int, sys.argv[1:5])
request = json.loads(sys.stdin.readline())
pending = b""
for _ in range(loops):
    began = time.perf_counter_ns()
    for _ in range(calls):
        line = json.dumps(request) + "\\n"
        os.write(write_fd, line.encode("ascii"))
        while b"\\n" not in pending:
            pending += os.read(read_fd, 1 << 16)
        reply, _, pending = pending.partition(b"\\n")
        json.loads(reply)
    done = json.dumps({"op": "loop", "ns": time.perf_counter_ns() - began}) + "\\n"
    os.write(write_fd, done.encode("ascii"))
"""


def ping_pong(
    calls: int,
    loops: int,
    request: Mapping[str, object] | None = None,
    reply: Mapping[str, object] | None = None,
) -> list[float]:
    """Nanoseconds per round trip of each loop of ``calls`` round trips of ``request`` and
    ``reply`` (by default a provider call's: 1 KB prompt, 1 KB answer)."""
    if request is None:
        request = {"op": "complete", "case": "c", "prompt": prompt(0)}
    if reply is None:
        reply = {"response": prompt(1, tag="answer")}
    child_read, to_child = os.pipe()
    from_child, child_write = os.pipe()
    command = [
        sys.executable,
        "-c",
        _CHILD,
        str(child_read),
        str(child_write),
        str(calls),
        str(loops),
    ]
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, pass_fds=(child_read, child_write), text=True
    ) as child:
        os.close(child_read)
        os.close(child_write)
        assert child.stdin is not None
        child.stdin.write(json.dumps(request) + "\n")
        child.stdin.close()
        answer = (json.dumps(reply) + "\n").encode("ascii")
        per_call: list[float] = []
        pending = b""
        with selectors.DefaultSelector() as selector:
            selector.register(from_child, selectors.EVENT_READ)
            while len(per_call) < loops:
                selector.select(60)
                chunk = os.read(from_child, 1 << 16)
                if not chunk:
                    raise RuntimeError("the ping-pong child ended early")
                pending += chunk
                while b"\n" in pending:
                    line, _, pending = pending.partition(b"\n")
                    message = json.loads(line)
                    if message["op"] == "loop":
                        per_call.append(message["ns"] / calls)
                    else:
                        os.write(to_child, answer)
        os.close(to_child)
        os.close(from_child)
    return per_call
