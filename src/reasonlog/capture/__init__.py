"""Capture: the recorder, its writers, and the adapters that instrument SDKs and frameworks.

The names load on first use (PEP 562): importing one module of capture (the redactor, say) does not import
the recorder and every adapter."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_WHERE = {"Recorder": ".recorder", "SessionRecorder": ".recorder", "ExchangeRecorder": ".recorder",
          "current_session": ".recorder", "instrument_anthropic": ".anthropic", "instrument_openai": ".openai"}
__all__ = ["Recorder", "SessionRecorder", "ExchangeRecorder", "current_session", "instrument_anthropic",
           "instrument_openai"]

if TYPE_CHECKING:
    from .anthropic import instrument_anthropic
    from .openai import instrument_openai
    from .recorder import ExchangeRecorder, Recorder, SessionRecorder, current_session


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'reasonlog.capture' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name], __name__), name)
    globals()[name] = value
    return value
