"""reasonlog: a flight recorder for LLM agents.

The names below load on first use (PEP 562), so a command that needs one part of reasonlog (the CLI's
`reason save`, on an agent's critical path) does not pay for importing the rest.
"""
from __future__ import annotations

__version__ = "0.1.0"

_WHERE = {"ExchangeRecorder": ".capture", "Recorder": ".capture", "SessionRecorder": ".capture",
          "current_session": ".capture", "instrument_anthropic": ".capture", "instrument_openai": ".capture",
          "Usage": ".model", "Part": ".parts", "RecordError": ".wire.rules", "SessionFilter": ".store",
          "open_store": ".store", "annotate": ".store"}
__all__ = ["instrument_anthropic", "instrument_openai", "Recorder", "SessionRecorder", "ExchangeRecorder",
           "current_session", "Usage", "Part", "RecordError", "SessionFilter", "open_store",
           "annotate"]

# Neither `typing` nor `importlib` is imported to run: `reasonlog stats --json` answers in about the time the
# interpreter takes to start (cli/quick_stats.py), and `typing` alone is a fifth of that.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .capture import (
        ExchangeRecorder,
        Recorder,
        SessionRecorder,
        current_session,
        instrument_anthropic,
        instrument_openai,
    )
    from .model import Usage
    from .parts import Part
    from .store import SessionFilter, annotate, open_store
    from .wire.rules import RecordError


def __getattr__(name: str) -> Any:
    import importlib

    if name not in _WHERE:
        try:  # a subpackage, as `reasonlog.store` after `import reasonlog`
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise  # the submodule exists and something it imports is missing: say that
            raise AttributeError(f"module 'reasonlog' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(_WHERE[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
