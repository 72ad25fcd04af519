"""An HTTP server on 127.0.0.1 for the tests' upstreams that leaves nothing open when it stops.

`ThreadingHTTPServer.shutdown()` stops accepting, but a keep-alive connection's handler thread goes on waiting for the
client's next request, holding its socket; clients that are never closed keep theirs. Over a whole suite that was
hundreds of threads and descriptors. This server remembers the connections it accepted and shuts each one down when
it closes, so their handler threads end.
"""
from __future__ import annotations

import socket
import threading
from http.server import ThreadingHTTPServer


class LocalHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, handler) -> None:
        super().__init__(address, handler)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request(self, request, client_address) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def server_close(self) -> None:
        super().server_close()
        with self._open_lock:
            still_open, self._open = list(self._open), set()
        for conn in still_open:
            try:
                conn.shutdown(socket.SHUT_RDWR)  # the handler's read ends; it closes the socket itself
            except OSError:
                pass

    def stop(self) -> None:
        """Stop serving and end every connection (for servers run with serve_forever in a thread)."""
        self.shutdown()
        self.server_close()
