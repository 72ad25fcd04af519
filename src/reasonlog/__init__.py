"""reasonlog: a flight recorder for LLM agents."""
from .capture import (
                      ExchangeRecorder,
                      Recorder,
                      SessionRecorder,
                      current_session,
                      instrument_anthropic,
                      instrument_openai,
)
from .model import Usage
from .parts import Part, RecordError
from .store import SessionFilter, open_store

__all__ = ["instrument_anthropic", "instrument_openai", "Recorder", "SessionRecorder", "ExchangeRecorder",
           "current_session", "Usage", "Part", "RecordError", "SessionFilter", "open_store"]
__version__ = "0.1.0"
