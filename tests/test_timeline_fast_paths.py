"""The timeline's fast paths give what the general ones gave (issue 34: the import and the write spend a tenth of
their time making reader keys).

`reader_form` settles strings and numbers without a call per value; the general rule is kept here as the
reference it must equal, over generated messages built from the keys and values the rule treats specially. A call
that resends the last call's context and reply is settled without `align` (`timeline.APPENDED`); any story of calls
stores what aligning every call stores.
"""
from __future__ import annotations

import copy
import uuid
from contextlib import contextmanager, nullcontext
from typing import Any

import orjson
import pytest
from helpers import assert_stored_alike, query_db, two_stores
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reasonlog
from reasonlog import providers
from reasonlog.conversation import key_of, reader_form
from reasonlog.model import CallRecorded, SessionStarted
from reasonlog.providers import openai_responses
from reasonlog.store import timeline
from reasonlog.store.content import decode_context, encode_context

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


JSON_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 63), 2 ** 64 - 1),
                       st.floats(allow_nan=False, allow_infinity=False), STRINGS)
JSON_VALUES = st.recursive(JSON_LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                                st.dictionaries(KEYS, inner, max_size=5)),
                           max_leaves=25)


@settings(max_examples=400, deadline=None)
@given(st.one_of(JSON_VALUES, st.dictionaries(KEYS, JSON_VALUES, max_size=5)))
def test_a_just_written_contents_reader_key_is_the_general_rules(value):
    """`Timeline.key` of a content just written takes its digest for its key when a reader reads it as it is: that is
    the general rule's key, because canonical JSON read and written again with sorted keys is itself."""
    from reasonlog.wire.codec import canonical, content_hash

    stored = canonical(value)
    assert orjson.dumps(orjson.loads(stored), option=orjson.OPT_SORT_KEYS) == stored
    line = timeline.Timeline(reasonlog.redact.Redactor(), {7: (stored, content_hash(stored))})
    assert line.key(7, None) == key_of(reader_form(orjson.loads(stored)))


def test_named_cases_of_reader_form():
    message = {"role": "user", "content": "hello", "cache_control": {"type": "ephemeral"}}
    assert reader_form(message) == {"role": "user", "content": [{"type": "text", "text": "hello"}]}
    item = {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": "hi", "annotations": []}]}
    assert reader_form(item) == {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}
    assert key_of(reader_form(item)) == key_of(reader_form({"role": "assistant", "content": "hi"}))
    assert reader_form({"role": "user", "content": "", "name": None, "x": [], "y": {}, "n": 0, "b": False}) == \
        {"role": "user", "n": 0, "b": False}


# ---------------------------------------------------------------------------------------------- the appended call

# Every stored column the timeline decides (the window of each call, the timeline's entries), and the rest of a call.
TABLES = {
    "calls": "SELECT * FROM calls ORDER BY id",
    "messages": "SELECT * FROM messages ORDER BY session_id, idx",
}
TEXTS = ["hello", "the cart times out", "same again", "日本語"]
# What an agent does to its history between calls.
MOVES = ["resend", "resend", "drop_reply", "no_thinking", "trim", "edit", "copy", "chain", "retry"]


@contextmanager
def aligned_every_call():
    """The general path: every call aligned with the one before by `align`, every message's key made when it is
    met."""
    timeline.APPENDED = timeline.LAZY = False
    try:
        yield
    finally:
        timeline.APPENDED = timeline.LAZY = True


@contextmanager
def starved():
    """The fast paths with next to no memory: a message waiting for its key keeps its JSON only until the next one
    comes, and the key cache holds one key, so a key needed later is read back from the store."""
    unkeyed, cached = timeline.UNKEYED_BYTES, timeline.KEY_CACHE_ENTRIES
    timeline.UNKEYED_BYTES, timeline.KEY_CACHE_ENTRIES = 0, 1
    try:
        yield
    finally:
        timeline.UNKEYED_BYTES, timeline.KEY_CACHE_ENTRIES = unkeyed, cached


@st.composite
def stories(draw) -> list[list]:
    """Batches of calls of one or two sessions, live or imported (`stable_history`: the same objects resent), whose
    histories are resent whole, trimmed, edited, retried, chained, with the reply sent back as it came or without
    its thinking, or not at all."""
    run = "r" + uuid.uuid4().hex[:10]
    stable = draw(st.booleans())
    sids = [f"{run}-s{i}" for i in range(draw(st.integers(1, 2)))]
    histories: dict[str, list] = {sid: [] for sid in sids}
    last: dict[str, tuple] = {}
    batches: list[list] = [[SessionStarted(session_id=sid, started_at="2026-01-01T10:00:00Z", run=run, agent="a")
                            for sid in sids]]
    for n in range(draw(st.integers(1, 14))):
        sid = draw(st.sampled_from(sids))
        history, params = histories[sid], {}
        move = draw(st.sampled_from(MOVES))
        reply, ref = last.get(sid, (None, None))
        if reply is not None and move in ("resend", "trim", "edit", "copy"):
            history.append(reply)
        elif reply is not None and move == "no_thinking":
            history.append({**reply, "content": reply["content"][1:]})
        elif move == "chain" and ref is not None:
            params = {"previous_response_id": ref}
        if move == "trim" and len(history) > 2:
            del history[:draw(st.integers(1, 2))]
        elif move == "edit" and history:
            history[draw(st.integers(0, len(history) - 1))] = {"role": "user", "content": draw(st.sampled_from(TEXTS))}
        elif move == "copy" and history:
            at = draw(st.integers(0, len(history) - 1))
            history[at] = copy.deepcopy(history[at])
        if move != "retry":
            history.append({"role": "user", "content": draw(st.sampled_from(
                [draw(st.sampled_from(TEXTS)), [{"type": "text", "text": draw(st.sampled_from(TEXTS))}]]))})
        thinking = {"type": "thinking", "thinking": f"hmm {n}", "signature": "s"}
        reply = {"role": "assistant", "content": [thinking, {"type": "text", "text": draw(st.sampled_from(TEXTS))}]}
        batches[-1].append(CallRecorded(
            call_id=f"{sid}-c{n}", session_id=sid, exchange_id=None, started_at=f"2026-01-01T10:{n:02d}:00Z",
            model="claude-haiku-4-5", request={"model": "claude-haiku-4-5", "messages": list(history), **params},
            response=reply if draw(st.integers(0, 6)) else None, provider_message_id=f"{sid}-m{n}",
            stable_history=stable))
        last[sid] = (batches[-1][-1].response, f"{sid}-m{n}")
        if draw(st.booleans()):
            batches.append([])
    return batches


MEMORY = {"kept": nullcontext, "starved": starved}


@pytest.fixture(scope="module", params=sorted(MEMORY))
def pair(request, tmp_path_factory):
    """Two stores, and the memory the fast one writes with: as it is, or `starved` (a key a placeholder stands for,
    needed after its message's JSON was forgotten, is read back from the store)."""
    with two_stores(tmp_path_factory.mktemp(request.param), "fast.db", "aligned.db") as stores:
        yield stores, MEMORY[request.param]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(batches=stories())
def test_any_story_stores_what_aligning_every_call_stores(pair, batches):
    stores, memory = pair
    with memory():
        assert_stored_alike(stores, batches, aligned_every_call, TABLES)


def test_a_resent_history_is_one_kept_run_then_the_new_messages(tmp_path):
    """Named case: the second call resends the first call's message and reply, then one new message."""
    rec = reasonlog.Recorder(tmp_path / "r.db", writer="sync")
    history = [{"role": "user", "content": "hello"}]
    with rec.session(agent="a") as s:
        s.call(messages=history, response={"role": "assistant", "content": "hi"})
        history += [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "bye"}]
        s.call(messages=history, response={"role": "assistant", "content": "bye"})
    rec.close()
    windows = [orjson.loads(w) for (w,) in query_db(tmp_path / "r.db", "SELECT window_json FROM calls ORDER BY idx")]
    assert [w["map"] for w in windows] == [[0], [[0, 2], 2]]
    assert [(w["added"], w["trimmed"], w["edited"], w["unsent"]) for w in windows] == [(1, 0, 0, 0), (1, 0, 0, 0)]


@pytest.mark.parametrize("appended", [True, False])
def test_an_earlier_reply_a_reader_calls_the_same_as_the_new_one_is_not_edited(tmp_path, appended):
    """Named case: a reply of thinking and "OK" whose history holds an earlier "OK". The earlier one, resent as the
    last call sent it, stays itself: it is no form of the new reply sent back (before, the third call said it was
    edited into that reply)."""
    ok = {"role": "assistant", "content": [{"type": "text", "text": "OK"}]}
    thinking = {"type": "thinking", "thinking": "t", "signature": "s"}
    thought = {"role": "assistant", "content": [thinking, *ok["content"]]}
    history = [{"role": "user", "content": "a"}]
    rec = reasonlog.Recorder(tmp_path / "r.db", writer="sync")
    with aligned_every_call() if not appended else nullcontext(), rec.session(agent="a") as s:
        s.call(messages=list(history), response=ok)
        history += [ok, {"role": "user", "content": "b"}]
        s.call(messages=list(history), response=thought)
        history += [thought, {"role": "user", "content": "c"}]
        s.call(messages=list(history), response={"role": "assistant", "content": "done"})
    rec.close()
    windows = [orjson.loads(w) for (w,) in query_db(tmp_path / "r.db", "SELECT window_json FROM calls ORDER BY idx")]
    assert [w["map"] for w in windows] == [[0], [[0, 2], 2], [[0, 4], 4]]
    assert [(w["added"], w["trimmed"], w["edited"], w["unsent"]) for w in windows] == [(1, 0, 0, 0)] * 3


def reference_encoding(ids: list[int], previous: list[int] | None) -> list:
    """`encode_context` as its general rule says it (the code before its fast path): from each position, the longest
    run into `previous` (the first of the longest), or the id itself."""
    if not previous:
        return list(ids)
    out: list = []
    i = 0
    while i < len(ids):
        best_start, best_len = -1, 0
        for start in (p for p, cid in enumerate(previous) if cid == ids[i]):
            length = 0
            while i + length < len(ids) and start + length < len(previous) and \
                    ids[i + length] == previous[start + length]:
                length += 1
            if length > best_len:
                best_start, best_len = start, length
        out.append([best_start, best_start + best_len] if best_len >= 2 else ids[i])
        i += best_len if best_len >= 2 else 1
    return out


IDS = st.lists(st.integers(1, 6), max_size=8)


@settings(max_examples=400, deadline=None)
@given(previous=IDS, resent=st.booleans(), new=IDS)
def test_the_context_encoding_equals_the_general_rule(previous, resent, new):
    ids = (previous if resent else []) + new
    encoded = encode_context(ids, previous)
    assert encoded == reference_encoding(ids, previous)
    assert decode_context(encoded, previous) == ids
