"""Server-sent events as the providers stream them: a body of `event:` / `data:` lines cut into events.

The proxy reads a stream's bytes whole once the client has them all (what it forwards is never parsed on
the way), so this works on a complete body; each event says where its bytes end, which is how the proxy
tells when the first token arrived.
"""
from __future__ import annotations

import re
from typing import NamedTuple

import orjson

_BOUNDARY = re.compile(rb"\r\n\r\n|\n\n|\r\r")


class Event(NamedTuple):
    """One event: its name (`event:`, or None), its data decoded as JSON (None when it is not JSON, such as
    OpenAI's `[DONE]`) and the offset just past its bytes in the body."""

    name: str | None
    data: object
    end: int


def parse_events(body: bytes) -> list[Event]:
    """The events of a whole SSE body; an event cut off at the end still counts."""
    events: list[Event] = []
    start = 0
    for match in _BOUNDARY.finditer(body):
        _add_event(events, body[start:match.start()], match.end())
        start = match.end()
    if body[start:].strip():
        _add_event(events, body[start:], len(body))
    return events


def _add_event(events: list[Event], block: bytes, end: int) -> None:
    name, data = None, []
    for line in block.splitlines():
        field, _, value = line.partition(b":")
        value = value[1:] if value.startswith(b" ") else value
        if field == b"event":
            name = value.decode("utf-8", "replace")
        elif field == b"data":
            data.append(value)
    if not data:
        return
    text = b"\n".join(data)
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        parsed = None
    events.append(Event(name, parsed, end))


def is_sse(body: bytes) -> bool:
    """Whether a response body is an event stream (what a recording replays with `text/event-stream`)."""
    head = body.lstrip()[:6]
    return head.startswith((b"event:", b"data:", b":", b"id:"))
