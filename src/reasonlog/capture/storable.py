"""What strict mode checks at the call site: every value of an event in the JSON form the store writes.

The default mode keeps the agent's thread cheap: a record is serialised on the writer thread, and
what no JSON can hold (a lone surrogate, bytes inside a message, an integer past 64 bits, nesting
deeper than 255, a key that is neither text nor a number, NaN or an infinity) is rejected there and counted. A strict
recorder promises to raise bad input where it was given, so it pays for one serialisation of the
event on the caller's thread, with the options the store uses (see `store/contents.py`).
"""
from __future__ import annotations

import math
from dataclasses import fields

import orjson

from ..model import Event
from ..wire import NonFinite, check_finite, jsonable
from ..wire.rules import RecordError

# The store's options: sorted keys for contents, and keys that are numbers or booleans written as text.
_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def check_storable(event: Event) -> None:
    """Raise `RecordError` naming the first field of `event` that the store would reject."""
    for f in fields(event):
        value = getattr(event, f.name)
        if value is None or type(value) in (str, float, bool) and (type(value) is not str or value.isascii()) \
                and (type(value) is not float or math.isfinite(value)):
            continue
        if f.name == "raw" and isinstance(value, (bytes, bytearray, memoryview)):
            continue  # a raw payload may be any bytes: it is stored and exported as they are
        try:
            data = orjson.dumps(value, default=jsonable, option=_OPTIONS)
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            raise RecordError(f"{f.name}: cannot be stored as JSON ({_reason(exc)})") from None
        try:
            check_finite(data, value, f.name)  # orjson writes NaN as null: a value that was not sent
        except NonFinite as exc:
            raise RecordError(str(exc)) from None


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "..."
