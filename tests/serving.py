"""`reasonlog serve` and `reasonlog ui` run as a user runs them: a subprocess on a free 127.0.0.1 port."""
from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(*args: str, command: list[str] | None = None, env: dict | None = None) -> Iterator[str]:
    """`reasonlog ARGS --port P` running until the block ends; yields `http://127.0.0.1:P`, once /healthz answers."""
    port = free_port()
    cmd = [*(command or [sys.executable, "-m", "reasonlog"]), *args, "--port", str(port)]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while get(base + "/healthz")[0] != 200:
            if server.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the server did not answer: {server.communicate(timeout=10)}")
            time.sleep(0.1)
        yield base
    finally:
        server.terminate()
        _, err = server.communicate(timeout=10)
        assert "Traceback" not in err, err


def get(url: str) -> tuple[int, str]:
    """The status and body of a GET; (0, reason) when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)
