"""A stand-in for the model providers on 127.0.0.1, for running the docs' code blocks as written: the Anthropic
Messages API, OpenAI Chat Completions and Responses, each answered with a recorded payload (streamed when asked)
from `shared/fixtures/real/`. Point a block's client at it with ANTHROPIC_BASE_URL and OPENAI_BASE_URL."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler

from local_http import LocalHTTPServer
from sdk_server import load_chunks, load_json, sse

ANSWERS = {  # the end of a request's path → (its recorded reply, its recorded stream, named SSE events, [DONE])
    "/messages": ("anthropic-messages/anthropic-tool-no-args.json", "anthropic-messages/anthropic-text.chunks.txt",
                  True, False),
    "/chat/completions": ("openai-chat/openai-text.json", "openai-chat/openai-text.chunks.txt", False, True),
    "/responses": ("openai-responses/parallel-tool-call-wrapper.1.json",
                   "openai-responses/openai-reasoning-encrypted-content.1.chunks.txt", True, False),
}


class DocsUpstream:
    """`with DocsUpstream() as up:` serves until the block ends; `up.requests` holds each (path, body) asked."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict]] = []
        self.httpd = LocalHTTPServer(("127.0.0.1", 0), _handler(self))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> DocsUpstream:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.stop()


def _reply(path: str, body: dict) -> tuple[int, bytes, str]:
    for end, (whole, stream, named, done) in ANSWERS.items():
        if path.split("?")[0].endswith(end):
            if body.get("stream"):
                return 200, sse(load_chunks(*stream.split("/")), named=named, done=done), "text/event-stream"
            return 200, json.dumps(load_json(*whole.split("/"))).encode(), "application/json"
    return 404, b'{"error": {"message": "not a provider endpoint"}}', "application/json"


def _handler(upstream: DocsUpstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            upstream.requests.append((self.path, body))
            status, data, kind = _reply(self.path, body)
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    return Handler
