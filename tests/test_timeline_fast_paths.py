"""The timeline's fast paths give what the general ones gave (issue 34: the import and the write spend a tenth of
their time making reader keys).

`reader_form` settles strings and numbers without a call per value; the general rule is kept here as the
reference it must equal, over generated messages built from the keys and values the rule treats specially.
"""
from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlog import providers
from reasonlog.conversation import key_of, reader_form
from reasonlog.providers import openai_responses

_TEXT_TYPES = frozenset({"text", "output_text", "input_text"})
_NOISE_KEYS = frozenset({"cache_control", "citations", "annotations", "logprobs"})


def reference_form(value: Any) -> Any:
    """`reader_form` as its general rule says it (the code before the fast path)."""
    if isinstance(value, list):
        return [reference_form(v) for v in value]
    return _reference(providers.reader_message(value))


def _reference(value: Any) -> Any:
    if isinstance(value, list):
        return [_reference(v) for v in value]
    if not isinstance(value, dict):
        return value
    kind = value.get("type")
    item = isinstance(kind, str) and kind in openai_responses.ITEM_TYPES
    out = {}
    for key, v in value.items():
        if key in _NOISE_KEYS or (item and key in ("id", "status")):
            continue
        if key == "content" and isinstance(v, str):
            v = [{"type": "text", "text": v}] if v else None
        v = _reference(v)
        if v is None or v == [] or v == {}:
            continue
        out[key] = "text" if key == "type" and isinstance(v, str) and v in _TEXT_TYPES else v
    if item and out.get("type") == "message":
        del out["type"]
    return out


class Text(str):
    """A string of another type (an SDK's enum, say): the general path takes it."""


KEYS = st.sampled_from(["type", "content", "text", "id", "status", "role", "input", "cache_control", "citations",
                        "parts", "tool_calls", "arguments", "name", "thinking"])
STRINGS = st.one_of(st.sampled_from(["", "text", "output_text", "input_text", "message", "function_call",
                                     "reasoning", "tool_use", "user", "assistant", '{"b": 1, "a": [null]}']),
                    st.text(max_size=5), st.builds(Text, st.sampled_from(["", "text", "input_text", "x"])))
LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False), STRINGS)
VALUES = st.recursive(LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(KEYS, inner, max_size=5),
                                                      st.tuples(inner)), max_leaves=25)


@settings(max_examples=400, deadline=None)
@given(st.one_of(VALUES, st.lists(st.dictionaries(KEYS, VALUES, max_size=5), max_size=3)))
def test_reader_form_equals_the_general_rule(value):
    assert reader_form(value) == reference_form(value)
    assert orjson.dumps(reader_form(value), option=orjson.OPT_SORT_KEYS) == \
        orjson.dumps(reference_form(value), option=orjson.OPT_SORT_KEYS)


def test_named_cases_of_reader_form():
    message = {"role": "user", "content": "hello", "cache_control": {"type": "ephemeral"}}
    assert reader_form(message) == {"role": "user", "content": [{"type": "text", "text": "hello"}]}
    item = {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": "hi", "annotations": []}]}
    assert reader_form(item) == {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}
    assert key_of(reader_form(item)) == key_of(reader_form({"role": "assistant", "content": "hi"}))
    assert reader_form({"role": "user", "content": "", "name": None, "x": [], "y": {}, "n": 0, "b": False}) == \
        {"role": "user", "n": 0, "b": False}
