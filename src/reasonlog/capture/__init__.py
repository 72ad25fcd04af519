"""Capture: the recorder, its writers, and the adapters that instrument SDKs and frameworks."""
from .anthropic import instrument_anthropic
from .openai import instrument_openai
from .recorder import ExchangeRecorder, Recorder, SessionRecorder, current_session

__all__ = ["Recorder", "SessionRecorder", "ExchangeRecorder", "current_session", "instrument_anthropic",
           "instrument_openai"]
