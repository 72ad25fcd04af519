"""What every protocol module returns, and the small readers they share."""
from __future__ import annotations

from typing import Any, NamedTuple

from ..model import Usage


class Unwrapped(NamedTuple):
    """A response body taken apart: the message an agent appends to its history, and the call's facts."""

    message: dict
    usage: Usage | None
    stop_reason: Any
    id: Any


def dump(value: Any) -> Any:
    """A stream event's part as plain JSON: a dict as it came (the caller owns it), an SDK object dumped as the
    SDKs put it on the wire."""
    if isinstance(value, dict) or value is None:
        return value
    model_dump = getattr(value, "model_dump", None)
    return None if model_dump is None else model_dump(mode="json", exclude_unset=True, warnings=False)
