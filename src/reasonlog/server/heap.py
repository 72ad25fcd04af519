"""The server process's long-lived objects kept out of the cyclic collector's full passes.

A served process holds some 170,000 objects that live as long as it does: the modules of FastAPI, pydantic,
Jinja and the store, compiled templates, the price table, and with `--mirror` chdb's. CPython's collector walks
every one of them in each full (oldest-generation) pass, and the requests' own garbage triggers such a pass every
few dozen dashboard pages: 90-100 ms of CPU inside whichever request was running, the p95 of `/usage` at 5 M
messages (docs/performance.md, issue 36). `gc.freeze()` moves what is alive into a generation the collector never
walks. The process freezes once its start-up is done, and again after a request whose answer imported modules
(the routes import what they need on first use), each time after a full collection so that no garbage is frozen.
What a request makes and drops is collected as before.

Only `reasonlog serve` and `reasonlog ui` ask for it (`create_app(settle_heap=True)`): a process that builds apps
and drops them (the tests) must not keep them frozen, and the app's shutdown unfreezes.
"""
from __future__ import annotations

import gc
import sys
from typing import Any


def settle() -> None:
    """Collect fully, then freeze what is left alive."""
    gc.collect()
    gc.freeze()


def release() -> None:
    """Give the frozen objects back to the collector (the app shuts down)."""
    gc.unfreeze()


class Settling:
    """ASGI middleware: after a request during which modules were imported, settle the heap again."""

    def __init__(self, app: Any):
        self.app, self.modules = app, len(sys.modules)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)
        if scope["type"] == "http" and len(sys.modules) != self.modules:
            self.modules = len(sys.modules)
            settle()
