"""The line encoding of events: what spill files hold and what `POST /v1/ingest` takes (application/x-ndjson).

An event's JSON form (`model.Event.to_dict()`, the shapes of `wire.EVENTS`) as one line, such that what JSON
cannot hold comes back as it was: raw bytes as `{"$reasonlog.bytes": "<base64>"}`, integers past 64 bits as
`{"$reasonlog.int": "<digits>"}`, SDK objects as their JSON dump. No I/O here.
"""
from __future__ import annotations

import base64
from typing import Any

import orjson

_BYTES, _INT = "$reasonlog.bytes", "$reasonlog.int"
_TAGGED = b'"$reasonlog.'
_OPTS = orjson.OPT_NON_STR_KEYS


def jsonable(value: Any) -> Any:
    """orjson's `default`: SDK models (pydantic) as the SDKs put them on the wire.

    Requests may hold the SDK's own objects (an assistant reply appended to the history);
    turning them into JSON on the writer thread keeps that walk off the agent's thread.
    """
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        return dump(mode="json", exclude_unset=True, warnings=False)
    if isinstance(value, (set, frozenset)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def encode_line(data: Any) -> bytes:
    """One value as a JSON line (no newline) whose bytes and big integers come back from `decode_line`."""
    try:
        return orjson.dumps(data, default=_default, option=_OPTS)
    except TypeError:  # rare: a big integer somewhere; the slow walk only then
        return orjson.dumps(_tagged(data), default=_default, option=_OPTS)


def decode_line(line: bytes) -> Any:
    data = orjson.loads(line)
    return _untagged(data) if _TAGGED in line else data


def masked_line(line: bytes, redactor: Any) -> bytes:
    """An encoded line with every string of its value masked, one by one (never across the line's
    structure), raw bytes included (their base64 hides them from a search of the line)."""
    if _TAGGED not in line and not redactor.may_hold(line):
        return line
    data = decode_line(line)
    masked = redactor.value(data)
    return line if masked is data else encode_line(masked)


def _default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {_BYTES: base64.b64encode(bytes(value)).decode()}
    return jsonable(value)


def _tagged(value: Any) -> Any:
    """`value` with integers beyond 64 bits as tagged text: orjson refuses them before any `default`."""
    if isinstance(value, int) and not isinstance(value, bool) and not -2 ** 63 <= value < 2 ** 64:
        return {_INT: str(value)}
    if isinstance(value, dict):
        return {k: _tagged(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_tagged(v) for v in value]
    return value


def _untagged(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and _BYTES in value:
            return base64.b64decode(value[_BYTES])
        if len(value) == 1 and _INT in value:
            return int(value[_INT])
        return {k: _untagged(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_untagged(v) for v in value]
    return value
