"""A provider stand-in on 127.0.0.1 that answers the real SDKs with recorded payloads.

Each request gets the next queued reply (JSON body or SSE stream); with none queued it gets
`default`, which the benchmark uses to answer at once, forever.
"""
from __future__ import annotations

import collections
import json
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from local_http import LocalHTTPServer

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real"


def load_json(folder: str, name: str) -> dict:
    return json.loads((FIXTURES / folder / name).read_text())


def load_chunks(folder: str, name: str) -> list[dict]:
    """One payload per line; some recordings lack the newline between two payloads."""
    decoder, out = json.JSONDecoder(), []
    for line in (FIXTURES / folder / name).read_text().splitlines():
        pos, line = 0, line.strip()
        while pos < len(line):
            payload, pos = decoder.raw_decode(line, pos)
            out.append(payload)
    return out


def split_streams(events: list[dict], first_type: str) -> list[list[dict]]:
    """A recording of several streams in a row, cut where each one starts."""
    streams: list[list[dict]] = []
    for event in events:
        if event.get("type") == first_type or not streams:
            streams.append([])
        streams[-1].append(event)
    return streams


def sse(payloads: list[dict], *, named: bool, done: bool = False) -> bytes:
    """SSE text: `event:` lines carry each payload's `type` when `named` (Anthropic, Responses)."""
    lines = []
    for payload in payloads:
        if named:
            lines.append(f"event: {payload['type']}")
        lines.append("data: " + json.dumps(payload))
        lines.append("")
    if done:
        lines += ["data: [DONE]", ""]
    return ("\n".join(lines) + "\n").encode()


class Reply:
    def __init__(self, status: int, body: bytes, content_type: str):
        self.status, self.body, self.content_type = status, body, content_type


class FixtureServer:
    """Start with `with FixtureServer() as server:`; `server.url` is the base URL for the SDKs."""

    def __init__(self):
        self.replies: collections.deque[Reply] = collections.deque()
        self.requests: list[dict] = []
        self.default: Reply | None = None
        self.request_ids = iter(f"req_{n:06d}" for n in range(10**9))
        self._httpd = LocalHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def reply_json(self, body: dict, status: int = 200) -> None:
        self.replies.append(Reply(status, json.dumps(body).encode(), "application/json"))

    def reply_stream(self, payloads: list[dict], *, named: bool, done: bool = False) -> None:
        self.replies.append(Reply(200, sse(payloads, named=named, done=done), "text/event-stream"))

    def next_reply(self) -> Reply:
        if self.replies:
            return self.replies.popleft()
        return self.default or Reply(500, b'{"error": {"message": "no reply queued"}}', "application/json")

    def __enter__(self) -> "FixtureServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.stop()


def _handler(server: FixtureServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as against a real API
        disable_nagle_algorithm = True  # headers and body go out as two writes; no 40 ms delayed-ACK stall

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            server.requests.append({"path": self.path, "body": json.loads(body or b"null"),
                                    "headers": {k.lower(): v for k, v in self.headers.items()}})
            reply = server.next_reply()
            request_id = next(server.request_ids)
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            self.send_header("request-id", request_id)  # Anthropic's header
            self.send_header("x-request-id", request_id)  # OpenAI's header
            self.end_headers()
            self.wfile.write(reply.body)

        def log_message(self, *args) -> None:  # keep test output clean
            pass

    return Handler


def serve_default(fixture: str) -> None:
    """Answer every request with one recorded JSON payload; print the URL, serve until killed.

    The benchmark runs this in its own process so the server never shares a GIL with the client.
    """
    folder, name = fixture.split("/", 1)
    server = FixtureServer()
    server.default = Reply(200, json.dumps(load_json(folder, name)).encode(), "application/json")
    print(server.url, flush=True)
    server._httpd.serve_forever()


if __name__ == "__main__":
    import sys

    serve_default(sys.argv[1])
