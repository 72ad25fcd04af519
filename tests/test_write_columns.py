"""A call's JSON columns (its parameters, error, context facts; an exchange's input and result; a record's payload)
are written by `Applier.dumps` (store/writing.py): secrets masked string by string, NaN and infinities refused.
JSON it has found holding no null and nothing to mask is remembered with its text, so a session's parameters, sent
again call after call, are not scanned again: the same text, the same refusals and the same count of masked secrets
as serialising, checking and masking every value every time, whatever the values and their order."""
from __future__ import annotations

import orjson
import pytest
from helpers import SECRETS
from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlog.redact import Redactor
from reasonlog.store import writing
from reasonlog.store.contents import ContentWriter
from reasonlog.store.writing import Applier
from reasonlog.wire import NonFinite, check_finite, jsonable

KEY = b"test-key"
TEXTS = st.one_of(st.sampled_from(["", "claude-haiku-4-5", "null", "auto", "https://a:b@host/x", *SECRETS.values()]),
                  st.text(max_size=8))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True, allow_infinity=True),
                    TEXTS)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(TEXTS, inner, max_size=3)), max_leaves=10)


def dumps_as_it_was(redactor: Redactor, value):
    """`Applier.dumps` before it remembered plain JSON: serialised, checked for NaN, masked, every time."""
    if value is None:
        return None
    data = orjson.dumps(value, default=jsonable, option=orjson.OPT_NON_STR_KEYS)
    check_finite(data, value, "a value")
    return redactor.json(data, lambda v: orjson.dumps(v, option=orjson.OPT_NON_STR_KEYS)).decode()


def nan_for_none(value):
    if value is None:
        return float("nan")
    if isinstance(value, dict):
        return {k: nan_for_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [nan_for_none(v) for v in value]
    return value


def outcome(dumps, value):
    try:
        return dumps(value)
    except NonFinite as exc:
        return ("refused", str(exc))


@settings(max_examples=400, deadline=None)
@given(values=st.lists(VALUES, max_size=8), repeats=st.lists(st.integers(0, 7), max_size=8))
def test_json_columns_are_what_checking_and_masking_every_value_gives(values, repeats):
    """Values in any order, some again (as a session's parameters come again), then each with its nulls made NaN (the
    same JSON: orjson writes NaN as null): each the same text or refusal, and the same secrets counted, as the rule
    that scans every value."""
    sequence = values + [values[i] for i in repeats if i < len(values)]
    sequence += [nan_for_none(v) for v in sequence]
    applier, before = Applier(ContentWriter(None, Redactor(key=KEY))), Redactor(key=KEY)
    for value in sequence:
        assert outcome(applier.dumps, value) == outcome(lambda v: dumps_as_it_was(before, v), value)
        assert applier.redactor.masked == before.masked


def test_plain_json_is_remembered_up_to_its_bounds(monkeypatch):
    """What is remembered stays bounded: past `PLAIN_ENTRIES` the memory starts again, and longer JSON than
    `PLAIN_BYTES`, JSON with a null and JSON with a secret are never kept (each is scanned every time)."""
    monkeypatch.setattr(writing, "PLAIN_ENTRIES", 3)
    applier = Applier(ContentWriter(None, Redactor(key=KEY)))
    for n in range(7):
        assert applier.dumps({"max_tokens": n}) == f'{{"max_tokens":{n}}}'
        assert len(applier.plain) == n % 3 + 1
    applier.plain.clear()
    long = {"text": "x" * writing.PLAIN_BYTES}
    for value in (long, {"stop": None}, {"key": SECRETS["openai_key"]}):
        applier.dumps(value)
        applier.dumps(value)
    assert applier.plain == {}
    assert applier.redactor.masked == 2
    with pytest.raises(NonFinite):
        applier.dumps({"temperature": float("nan")})
