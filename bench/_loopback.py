"""A real HTTP server on 127.0.0.1 that answers every POST, for recording vcrpy cassettes."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["ANSWER_BODY", "serve_answers"]

ANSWER_BODY = b'{"answer": "answer"}'


class _AnswerHandler(BaseHTTPRequestHandler):
    """Read the prompt, reply with the same small JSON answer."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(ANSWER_BODY)))
        self.end_headers()
        self.wfile.write(ANSWER_BODY)

    def log_message(self, format: str, *args: object) -> None:
        """Stay quiet: one line per request would bury the tables."""


@contextmanager
def serve_answers() -> Iterator[str]:
    """Run the server on a free loopback port for the block; yield the URL to POST to."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _AnswerHandler)
    thread = threading.Thread(target=server.serve_forever, name="bench-loopback", daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host!s}:{port}/v1/complete"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
