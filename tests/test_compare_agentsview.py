"""benchmarks/compare_agentsview.py's figures over HTTP: each side asked once before the requests it keeps, then the
two in turns, who goes first swapped every turn (a page that asks two addresses asks both, in order, each time)."""
from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from compare_agentsview import Server, in_turns  # noqa: E402


def _logging_server(seen: list[str]) -> http.server.ThreadingHTTPServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_each_side_is_warmed_once_then_asked_in_turns():
    seen: list[str] = []
    server = _logging_server(seen)
    try:
        here = Server(server.server_address[1], os.getpid())
        ours, theirs = in_turns((here.viewer("/ours"), here.viewer("/theirs", "/theirs/messages")), 4)
    finally:
        server.shutdown()
    a, b = ["/ours"], ["/theirs", "/theirs/messages"]
    assert seen == a + b + (a + b) + (b + a) + (a + b) + (b + a)
    assert len(ours) == len(theirs) == 4
    assert all(wall > 0 and cpu >= 0 for wall, cpu in ours + theirs)


def test_servers_only_without_a_home_says_what_it_needs():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "compare_agentsview.py"), "--servers-only"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == ("compare_agentsview.py: error: --servers-only needs --home, the folder a"
                                            " run without it imported into")
