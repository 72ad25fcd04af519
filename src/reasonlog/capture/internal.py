"""reasonlog's own errors inside capture: never raised into the recorded program, never hidden.

Adapters wrap their own code (not the SDK's, not the agent's) in `try` and call
`log_internal_error(recorder, where)` in the `except`. In production the error is logged once
per place and kind, with secrets masked, and counted as a rejected record (`reasonlog db status`,
`Recorder.stats()`); the program goes on. With `REASONLOG_RAISE_INTERNAL_ERRORS=1` (the test
suite sets it) the error is re-raised, so a bug in reasonlog fails the test that hit it.
The pattern is logfire's `log_internal_error`.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import traceback
from typing import TYPE_CHECKING

from ..redact import Redactor

if TYPE_CHECKING:
    from .recorder import Recorder

ENV = "REASONLOG_RAISE_INTERNAL_ERRORS"
log = logging.getLogger("reasonlog")
_logged: set[tuple[str, str]] = set()
_lock = threading.Lock()
_redactor: Redactor | None = None


class InternalError(Exception):
    """What is counted for an internal error: where it happened and what it was (its text masked)."""


def raise_internal_errors() -> bool:
    """Whether internal errors are re-raised (tests), read on each call so a test can set it."""
    return os.environ.get(ENV, "") not in ("", "0")


def log_internal_error(recorder: "Recorder | None", where: str) -> None:
    """Call in an `except` around reasonlog's own code: re-raise under tests, else log once and count."""
    exc = sys.exc_info()[1]
    if exc is None:
        return
    if raise_internal_errors():
        raise exc
    _log_once(where, exc)
    if recorder is not None:
        try:
            recorder.reject(InternalError(f"reasonlog internal error in {where}: {type(exc).__name__}"))
        except Exception:  # a strict recorder raises what it rejects; capture still must not
            pass


def _log_once(where: str, exc: BaseException) -> None:
    global _redactor
    key = (where, type(exc).__name__)
    with _lock:
        if key in _logged:
            return
        _logged.add(key)
        _redactor = _redactor or Redactor()
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    log.error("reasonlog internal error in %s (logged once; later ones are counted as rejected):\n%s",
              where, _redactor.text(text))
