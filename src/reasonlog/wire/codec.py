"""The line encoding of events: what spill files hold and what `POST /v1/ingest` takes (application/x-ndjson); and
canonical JSON with the hash that addresses a content (capture, the store, replay and the CLI agree on them).

An event's JSON form (`model.Event.to_dict()`, the shapes of `wire.EVENTS`) as one line, such that what JSON
cannot hold comes back as it was: raw bytes as `{"$reasonlog.bytes": "<base64>"}`, integers past 64 bits as
`{"$reasonlog.int": "<digits>"}`, SDK objects as their JSON dump. No I/O here.
"""
from __future__ import annotations

import base64
import hashlib
import math
from typing import Any

import orjson

_BYTES, _INT = "$reasonlog.bytes", "$reasonlog.int"
_TAGGED = b'"$reasonlog.'
_OPTS = orjson.OPT_NON_STR_KEYS
CANONICAL = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


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


def canonical(value: Any) -> bytes:
    """Canonical JSON: sorted keys, no whitespace, UTF-8. Equal values give equal bytes."""
    try:
        return orjson.dumps(value, default=jsonable, option=CANONICAL)
    except TypeError as exc:
        raise TypeError(f"not JSON-serialisable: {exc}") from None


def content_hash(data: bytes) -> bytes:
    """The 128-bit BLAKE2b digest that addresses a content."""
    return hashlib.blake2b(data, digest_size=16).digest()


def encode_line(data: Any) -> bytes:
    """One value as a JSON line (no newline) whose bytes and big integers come back from `decode_line`.

    A NaN or an infinity raises `NonFinite` (a ValueError): JSON has no form for them."""
    try:
        line = orjson.dumps(data, default=_default, option=_OPTS)
    except TypeError:  # rare: a big integer somewhere; the slow walk only then
        line = orjson.dumps(_tagged(data), default=_default, option=_OPTS)
    check_finite(line, data)
    return line


class NonFinite(ValueError):
    """A value holds NaN or an infinity, which JSON has no form for (orjson would write `null`: not what was sent).
    `path` says where, as `["key"][0]`; the message is `<path>: cannot be stored as JSON (nan has no JSON form)`."""

    def __init__(self, path: str, value: float):
        super().__init__(f"{path}: cannot be stored as JSON ({value!r} has no JSON form)")
        self.path, self.value = path, value


def check_finite(data: bytes, value: Any, name: str = "") -> None:
    """Raise `NonFinite` when `value`, whose JSON is `data`, holds NaN or an infinity; its path starts with `name`.

    orjson writes both as `null`, so JSON without a `null` holds neither and costs one substring scan; only
    JSON with one is walked. SDK objects are not walked: their JSON dump is what their SDK sends."""
    if b"null" in data:
        refuse_non_finite(value, name)


def refuse_non_finite(value: Any, name: str = "") -> None:
    """Raise `NonFinite` when `value` holds NaN or an infinity (a walk of it: call when its JSON holds `null`)."""
    found = _non_finite(value)
    if found is not None:
        raise NonFinite(name + found[0], found[1])


def _non_finite(value: Any) -> tuple[str, float] | None:
    if isinstance(value, float):
        return None if math.isfinite(value) else ("", value)
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        if isinstance(key, float) and not math.isfinite(key):  # a key, written as text: "NaN" would misname it
            return f"[{key!r}]", key
        found = _non_finite(item)
        if found is not None:
            return _step(key) + found[0], found[1]
    return None


def _step(key: Any) -> str:
    """One step of a path: `["name"]` for a key of text (as JSON spells it), `[0]` for an index or another key."""
    return f"[{orjson.dumps(key).decode()}]" if isinstance(key, str) else f"[{key!r}]"


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
