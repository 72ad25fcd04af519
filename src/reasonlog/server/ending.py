"""How `reasonlog serve` ends in bounded time when told to stop (SIGTERM, Ctrl-C).

uvicorn stops taking connections, gives the requests under way `--shutdown-grace` seconds (its
`timeout_graceful_shutdown`), then cancels them. A request waiting for its body or its client is
cancelled at once; one at work in a thread (a long search, a write waiting for a lock) cannot be, and
Python would wait for it at exit, minutes if need be. So the app's shutdown arms a timer that ends the
process `EXIT_WITHIN_S` later if it has not ended by itself. Nothing accepted is lost: a batch is
committed before it is answered, and a transaction cut short is rolled back by the database (its client
got no answer, so it sends the batch again).
"""
from __future__ import annotations

import logging
import os
import sys
import threading

log = logging.getLogger("reasonlog")
EXIT_WITHIN_S = 2.0  # then what the app's own shutdown (stores closed, summaries stopped) gets


def exit_within(seconds: float) -> None:
    """End the process `seconds` from now unless it has ended by then."""
    timer = threading.Timer(seconds, _exit_now, (seconds,))
    timer.daemon = True  # it must not itself keep the process alive
    timer.start()


def _exit_now(seconds: float) -> None:
    log.warning("reasonlog serve: a request was still at work %.0f s after the shutdown; ending it", seconds)
    sys.stderr.flush()
    os._exit(0)
