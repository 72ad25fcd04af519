"""A pass run every `every_s` seconds on a daemon thread of the server, off the request and recording paths: the
background embedding and summaries are two. A pass's own errors are its to log; the next pass tries again."""
from __future__ import annotations

import threading


class Periodic:
    """Start with `start()`; `stop()` ends the thread after the pass under way. `passes` counts finished passes.
    A subclass gives `name` (the thread's) and `run_pass()`, which must not raise."""

    name = "reasonlog-periodic"

    def __init__(self, every_s: float) -> None:
        if every_s <= 0:
            raise ValueError(f"every_s: expected a positive number of seconds, got {every_s}")
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.passes = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def run_once(self) -> None:
        self.run_pass()
        self.passes += 1

    def run_pass(self) -> None:
        raise NotImplementedError

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.run_once()
            self._stop.wait(self.every_s)
