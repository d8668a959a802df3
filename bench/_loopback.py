"""A real HTTP server on 127.0.0.1 that answers every POST, for recording cassettes.

``serve(answer, path)`` runs one for a block: ``answer`` turns each request's body into
the JSON body sent back. ``serve_answers`` is the one vcrpy's section records from.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["ANSWER_BODY", "serve", "serve_answers"]

ANSWER_BODY = b'{"answer": "answer"}'
Answer = Callable[[bytes], bytes]  # a request's body -> the JSON body answered


def _handler(answer: Answer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        """Read the request, reply with ``answer``'s JSON."""

        def do_POST(self) -> None:
            body = answer(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Stay quiet: one line per request would bury the tables."""

    return Handler


@contextmanager
def serve(answer: Answer, path: str) -> Iterator[str]:
    """Run a server on a free loopback port for the block; yield its URL with ``path``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(answer))
    thread = threading.Thread(target=server.serve_forever, name="bench-loopback", daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host!s}:{port}{path}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def serve_answers() -> AbstractContextManager[str]:
    """A server that answers every POST with ``ANSWER_BODY``; yields the URL to POST to."""
    return serve(lambda body: ANSWER_BODY, "/v1/complete")
