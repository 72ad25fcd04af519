"""A model provider on 127.0.0.1 for the proxy's tests and benchmark: answers with recorded payloads, streams in
the chunks it is told to (with pauses between them), and keeps every request it received, bytes and headers.

Without a queued reply, a model call gets the recorded payload of its protocol: streamed when it asked for a
stream. `python tests/proxy_upstream.py` serves in its own process and prints its URL (the benchmark's upstream).
"""
from __future__ import annotations

import asyncio
import collections
import json
import socket
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sdk_server import FIXTURES, load_chunks, sse  # noqa: E402

# Gemini: no recorded generateContent payload is in shared/fixtures; these follow the documented
# GenerateContentResponse shape (candidates[].content.parts, usageMetadata), written by hand.
GEMINI_BODY = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Paris is the capital of France."}]},
                               "finishReason": "STOP", "index": 0}],
               "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 8, "totalTokenCount": 28,
                                 "cachedContentTokenCount": 4, "thoughtsTokenCount": 8},
               "modelVersion": "gemini-2.5-flash", "responseId": "resp-gemini-1"}
GEMINI_CHUNKS = [
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "Paris is "}]}, "index": 0}],
     "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12}, "modelVersion": "gemini-2.5-flash",
     "responseId": "resp-gemini-1"},
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "the capital of France."}]},
                     "finishReason": "STOP", "index": 0}],
     "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 8, "totalTokenCount": 28,
                       "cachedContentTokenCount": 4, "thoughtsTokenCount": 8},
     "modelVersion": "gemini-2.5-flash", "responseId": "resp-gemini-1"},
]


def fixture_bytes(folder: str, name: str) -> bytes:
    return (FIXTURES / folder / name).read_bytes()


def recorded_stream(folder: str, name: str, *, named: bool, done: bool = False) -> bytes:
    return sse(load_chunks(folder, name), named=named, done=done)


ANSWERS = {  # protocol: (unstreamed body, streamed body)
    "anthropic": (fixture_bytes("anthropic-messages", "anthropic-text.json"),
                  recorded_stream("anthropic-messages", "anthropic-text.chunks.txt", named=True)),
    "chat": (fixture_bytes("openai-chat", "openai-text.json"),
             recorded_stream("openai-chat", "openai-text.chunks.txt", named=False, done=True)),
    "responses": (fixture_bytes("openai-responses", "openai-reasoning-encrypted-content.1.json"),
                  recorded_stream("openai-responses", "openai-reasoning-encrypted-content.1.chunks.txt", named=True)),
    "gemini": (json.dumps(GEMINI_BODY).encode(), sse(GEMINI_CHUNKS, named=False)),
}


def halves(text: str) -> list[str]:
    return [text[:len(text) // 2], text[len(text) // 2:]] if text else []


def anthropic_events(body: dict) -> list[dict]:
    """The Messages events that stream `body`: each block started empty, then its deltas."""
    head = {**body, "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {**body["usage"], "output_tokens": 1}}
    events = [{"type": "message_start", "message": head}]
    for i, block in enumerate(body["content"]):
        kind = block["type"]
        empty = {"text": {"text": ""}, "thinking": {"thinking": "", "signature": ""}}.get(kind, {"input": {}})
        events.append({"type": "content_block_start", "index": i, "content_block": {**block, **empty}})
        if kind == "text":
            events += [{"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": t}}
                       for t in halves(block["text"])]
        elif kind == "thinking":
            events += [{"type": "content_block_delta", "index": i, "delta": {"type": "thinking_delta", "thinking": t}}
                       for t in halves(block["thinking"])]
            events.append({"type": "content_block_delta", "index": i,
                           "delta": {"type": "signature_delta", "signature": block["signature"]}})
        else:
            events += [{"type": "content_block_delta", "index": i,
                        "delta": {"type": "input_json_delta", "partial_json": t}}
                       for t in halves(json.dumps(block["input"]))]
        events.append({"type": "content_block_stop", "index": i})
    events.append({"type": "message_delta", "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
                   "usage": {"output_tokens": body["usage"]["output_tokens"]}})
    return [*events, {"type": "message_stop"}]


def responses_events(body: dict) -> list[dict]:
    """The Responses events that stream `body`: created, each item added and done (a message's text as one
    delta), completed."""
    events = [{"type": "response.created", "response": {**body, "status": "in_progress", "output": []}}]
    for i, item in enumerate(body["output"]):
        events.append({"type": "response.output_item.added", "output_index": i,
                       "item": {**item, "content": []} if item["type"] == "message" else item})
        for j, part in enumerate(item.get("content") or () if item["type"] == "message" else ()):
            where = {"item_id": item["id"], "output_index": i, "content_index": j}
            events += [{"type": "response.content_part.added", **where, "part": {**part, "text": ""}},
                       {"type": "response.output_text.delta", **where, "delta": part["text"]},
                       {"type": "response.output_text.done", **where, "text": part["text"]},
                       {"type": "response.content_part.done", **where, "part": part}]
        events.append({"type": "response.output_item.done", "output_index": i, "item": item})
    events.append({"type": "response.completed", "response": body})
    return [{**e, "sequence_number": n} for n, e in enumerate(events)]


def protocol_of(path: str) -> str | None:
    bare = path.split("?")[0]
    for suffix, name in (("/messages", "anthropic"), ("/chat/completions", "chat"), ("/responses", "responses"),
                         ("Content", "gemini")):
        if bare.endswith(suffix):
            return name
    return None


@dataclass
class Reply:
    status: int
    chunks: list[bytes]
    content_type: str = "application/json"
    pause: float = 0.0  # seconds between chunks
    headers: dict = field(default_factory=dict)


@dataclass
class Received:
    method: str
    path: str
    headers: dict
    body: bytes


class Upstream:
    """`with Upstream() as up:`; `up.url` is its base URL; `up.replies` a queue of `Reply`s for the next requests."""

    def __init__(self, port: int = 0):
        self.replies: collections.deque[Reply] = collections.deque()
        self.received: list[Received] = []
        self.port = port
        self.answers = dict(ANSWERS)  # protocol: (unstreamed, streamed), what a request gets without a queued reply
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()

    def answer(self, body: bytes, status: int = 200, content_type: str = "application/json", **kw) -> None:
        self.replies.append(Reply(status, [body], content_type, **kw))

    def stream(self, chunks: list[bytes], pause: float = 0.0) -> None:
        self.replies.append(Reply(200, chunks, "text/event-stream", pause))

    def default_reply(self, path: str, body: bytes) -> Reply:
        protocol = protocol_of(path)
        if protocol is None:
            return Reply(200, [b'{"object": "list", "data": [{"id": "a-model", "object": "model"}]}'])
        plain, streamed = self.answers[protocol]
        wants_stream = b'"stream":true' in body.replace(b" ", b"") or "streamGenerateContent" in path
        return Reply(200, [streamed], "text/event-stream") if wants_stream else Reply(200, [plain])

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.received.append(Received(request.method, request.path_qs, headers, body))
        reply = self.replies.popleft() if self.replies else self.default_reply(request.path_qs, body)
        response = web.StreamResponse(status=reply.status, headers={"Content-Type": reply.content_type,
                                                                    "request-id": f"req_{len(self.received)}",
                                                                    **reply.headers})
        if len(reply.chunks) == 1:
            response.content_length = len(reply.chunks[0])
        await response.prepare(request)
        for i, chunk in enumerate(reply.chunks):
            if i and reply.pause:
                await asyncio.sleep(reply.pause)
            await response.write(chunk)
        await response.write_eof()
        return response

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        self._loop.run_until_complete(self._runner.setup())
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        self._loop.run_until_complete(web.SockSite(self._runner, sock).start())
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self._runner.cleanup())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "Upstream":
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


if __name__ == "__main__":
    upstream = Upstream(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    upstream.__enter__()
    print(upstream.url, flush=True)
    threading.Event().wait()
