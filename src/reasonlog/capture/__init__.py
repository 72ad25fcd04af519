"""Capture: the recorder, its writers, and (later) the adapters that instrument SDKs."""
from .recorder import ExchangeRecorder, Recorder, SessionRecorder, current_session

__all__ = ["Recorder", "SessionRecorder", "ExchangeRecorder", "current_session"]
