"""A call's raw payload is stored as a skeleton: the response message (or its content) it repeats replaced by a
reference (store/content.py `raw_skeleton`), and filled back from the stored response when read. The skeleton skips
its strings, numbers, bools and nulls without comparing each with the response: the same skeleton as comparing
everything, for any payload and response."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlog.store.content import CONTENT_REF, RESPONSE_REF, fill_skeleton, raw_skeleton

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.floats(allow_nan=True), st.sampled_from(
    ["", "hi", "content", "assistant"]))
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(st.sampled_from(["content", "role", "id"]),
                                                                     inner, max_size=3)), max_leaves=12)
RESPONSES = st.one_of(
    st.none(), JSON,
    st.fixed_dictionaries({"role": st.just("assistant")}, optional={"content": JSON}))


def comparing_everything(raw, response, depth=3):
    """`raw_skeleton` as it was: every value compared with the response and its content."""
    if response is None or depth < 0:
        return raw
    if raw == response:
        return RESPONSE_REF
    if "content" in response and raw == response["content"] and raw:
        return CONTENT_REF
    if isinstance(raw, dict):
        return {k: comparing_everything(v, response, depth - 1) for k, v in raw.items()}
    if isinstance(raw, list):
        return [comparing_everything(v, response, depth - 1) for v in raw]
    return raw


def outcome(f, raw, response):
    try:
        return repr(f(raw, response))  # repr: NaN is not equal to itself
    except Exception as e:  # a response that is not a dict may fail both ways: the same way
        return type(e)


@settings(max_examples=1500, deadline=None)
@given(response=RESPONSES, parts=st.lists(st.one_of(JSON, st.just("response"), st.just("content")), max_size=5),
       nest=st.booleans())
def test_a_skeleton_is_the_one_comparing_every_value_gives(response, parts, nest):
    """Payloads holding the response, its content, equal copies of them and anything else, at any depth."""
    def part(p):
        if p == "response":
            return response
        if p == "content":
            return response.get("content") if isinstance(response, dict) else response
        return p
    raw: object = {"id": "msg_1", "type": "message", **{f"k{i}": part(p) for i, p in enumerate(parts)},
                   "usage": {"input_tokens": 3, "output_tokens": 1}}
    if nest:
        raw = {"body": raw, "items": [part(p) for p in parts]}
    assert outcome(raw_skeleton, raw, response) == outcome(comparing_everything, raw, response)
    for value in (parts, raw):
        assert outcome(raw_skeleton, value, response) == outcome(comparing_everything, value, response)


def test_an_anthropic_payload_keeps_its_ids_and_usage_and_refers_to_the_content():
    response = {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}
    raw = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
           "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn", "stop_sequence": None,
           "usage": {"input_tokens": 3, "output_tokens": 1}}
    skeleton = raw_skeleton(raw, response)
    assert skeleton == {**raw, "content": CONTENT_REF}
    assert fill_skeleton(skeleton, response) == raw


class Mapping(dict):
    """A dict of the caller's own type (plain_json passes one below the payload's top level as it is)."""


class Items(list):
    pass


SUBCLASSED = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(Items),
    st.dictionaries(st.sampled_from(["content", "role", "id"]), inner, max_size=3),
    st.dictionaries(st.sampled_from(["content", "role", "id"]), inner, max_size=3).map(Mapping)), max_leaves=12)


@settings(max_examples=1000, deadline=None)
@given(raw=SUBCLASSED, response=RESPONSES, depth=st.integers(-1, 4))
def test_a_skeleton_of_any_depth_and_container_types_is_the_one_comparing_every_value_gives(raw, response, depth):
    """Dicts and lists of other types, at any depth asked for: the same skeleton, the same types (a subclass is
    written as a plain dict or list, as it was), and the payload itself is never changed."""
    before = typed(raw)
    assert outcome(lambda r, s: typed(raw_skeleton(r, s, depth)), raw, response) == \
        outcome(lambda r, s: typed(comparing_everything(r, s, depth)), raw, response)
    assert typed(raw) == before


def typed(value):
    """`value` with the type of each container, as text (repr alone writes a dict's subclass as a dict)."""
    if isinstance(value, dict):
        return (type(value).__name__, [(k, typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return (type(value).__name__, [typed(v) for v in value])
    return repr(value)
