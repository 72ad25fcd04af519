"""A local server on 127.0.0.1 that answers OpenAI's `POST /v1/embeddings`: the network boundary of the HTTP embedder.

Its vectors are bags of words (each word adds 1 to one of `DIM` dimensions, by a stable hash), so texts sharing
words are near and the ranking is known in advance. It keeps every text it was asked to embed, can answer slowly,
refuse a key, or fail from a chosen request on."""
from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler

from local_http import LocalHTTPServer

DIM = 64


def bag_of_words(text: str) -> list[float]:
    vector = [0.0] * DIM
    vector[0] = 0.001  # never all zeros
    for word in re.findall(r"\w+", text.lower()):
        vector[int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big") % DIM] += 1.0
    return vector


class EmbeddingsServer:
    """`with EmbeddingsServer() as s:` serves at `s.url` (the base URL, ending in /v1)."""

    def __init__(self, key: str | None = None, delay_s: float = 0.0, fail_from: int | None = None):
        self.key, self.delay_s, self.fail_from = key, delay_s, fail_from
        self.requests: list[list[str]] = []
        self.answered = threading.Semaphore(0)
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if outer.key is not None and self.headers.get("Authorization") != f"Bearer {outer.key}":
                    return self._send(401, {"error": {"message": "Incorrect API key provided", "type": "auth"}})
                with outer._lock:
                    n = len(outer.requests)
                    outer.requests.append(list(body["input"]))
                if outer.fail_from is not None and n >= outer.fail_from:
                    return self._send(500, {"error": {"message": "the model server fell over\nline two"}})
                time.sleep(outer.delay_s)
                self._send(200, {"object": "list", "model": body["model"], "data": [
                    {"object": "embedding", "index": i, "embedding": bag_of_words(t)}
                    for i, t in enumerate(body["input"])]})
                outer.answered.release()

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = LocalHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def texts(self) -> list[str]:
        with self._lock:
            return [t for request in self.requests for t in request]

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.stop()
