"""A live call's resent history (issue 34): the writer finds the ids of the messages the session's last call sent
unchanged from one serialisation of the whole list, and asks the content cache only for the rest
(store/resent.py `Resent.message_ids`). An agent may edit any message in place between two calls, so what is
stored must be exactly what finding each message's id alone stores; `resent.HISTORY_BYTES` (what the open sessions'
last histories may hold) set to 0 is that path, and the property below writes every story through both."""
from __future__ import annotations

import copy
import math
import uuid
from contextlib import contextmanager

import orjson
import pytest
from helpers import assert_stored_alike, two_stores
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reasonlog
from reasonlog.model import CallRecorded, SessionEnded, SessionStarted
from reasonlog.store import resent

# Every stored column of what a call's history becomes (the contents' ids are the stores' own sequence, which the
# two stores share when they store the same contents in the same order).
TABLES = {
    "calls": "SELECT * FROM calls ORDER BY id",
    "messages": "SELECT * FROM messages ORDER BY session_id, idx",
    "contents": "SELECT id, hash, kind, size, codec, dict_id, data FROM contents ORDER BY id",
    "sessions": "SELECT * FROM sessions ORDER BY id",
    "counters": "SELECT name, value FROM counters ORDER BY name",
}


@contextmanager
def one_by_one():
    """The path before issue 34's cut: no history kept, every message's id found by `id_of`."""
    kept = resent.HISTORY_BYTES
    resent.HISTORY_BYTES = 0
    try:
        yield
    finally:
        resent.HISTORY_BYTES = kept


def test_a_message_edited_in_place_between_calls_is_stored_as_edited(tmp_path):
    """Named case: the agent moves its `cache_control` marker to the newest message, editing the older one in
    place, as Claude Code does. Each call reads back as it was sent."""
    rec = reasonlog.Recorder(tmp_path / "r.db", writer="sync")
    first = {"role": "user", "content": [{"type": "text", "text": "read the file",
                                           "cache_control": {"type": "ephemeral"}}]}
    history = [first]
    with rec.session(agent="a") as s:
        one = s.call(messages=history, response={"role": "assistant", "content": "which one?"})
        history.append({"role": "assistant", "content": "which one?"})
        del first["content"][0]["cache_control"]  # in place: the same dict, resent
        history.append({"role": "user", "content": [{"type": "text", "text": "main.py",
                                                     "cache_control": {"type": "ephemeral"}}]})
        two = s.call(messages=history, response={"role": "assistant", "content": "done"})
        three = s.call(messages=history, response={"role": "assistant", "content": "done again"})
    rec.close()
    store = reasonlog.open_store(tmp_path / "r.db")
    try:
        sent = [store.get_call(c)["request"]["messages"] for c in (one, two, three)]
    finally:
        store.close()
    assert sent[0] == [{"role": "user", "content": [{"type": "text", "text": "read the file",
                                                      "cache_control": {"type": "ephemeral"}}]}]
    assert sent[1] == sent[2] == [
        {"role": "user", "content": [{"type": "text", "text": "read the file"}]},
        {"role": "assistant", "content": "which one?"},
        {"role": "user", "content": [{"type": "text", "text": "main.py", "cache_control": {"type": "ephemeral"}}]}]


def test_a_resent_null_turned_nan_in_place_rejects_the_call(tmp_path):
    """Named case: NaN has no JSON and serialises as `null`, so the history's bytes do not change when an agent
    writes NaN over a resent `None`; the call is still refused as NaN, not stored as null."""
    rec = reasonlog.Recorder(tmp_path / "r.db", writer="sync")
    block = {"type": "text", "text": "score", "score": None}
    history = [{"role": "user", "content": [block]}]
    with rec.session(agent="a") as s:
        s.call(messages=history, response={"role": "assistant", "content": "ok"})
        block["score"] = math.nan
        history.append({"role": "user", "content": "again"})
        s.call(messages=history, response={"role": "assistant", "content": "ok"})
        sid = s.id
    assert rec.stats()["rejected"] == 1
    rec.close()
    store = reasonlog.open_store(tmp_path / "r.db")
    try:
        assert len(store.get_session(sid)["calls"]) == 1
    finally:
        store.close()


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Two SQLite stores: the story written as it is, and one by one."""
    with two_stores(tmp_path_factory.mktemp("resent"), "kept.db", "alone.db") as stores:
        yield stores


TEXTS = ["hello", "the cart times out", "key sk-ant-api03-" + "x" * 40, "same again", "日本語"]

# Edits an agent makes to its history between calls, in place or not.
EDITS = ["cache_on", "cache_off", "text", "none", "nan", "copy", "reorder", "drop_last", "drop_first", "share"]


def _edit(what: str, history: list, other: list, pick: int, text: str) -> None:
    if not history:
        return
    m = history[pick % len(history)]
    block = m["content"][0] if isinstance(m["content"], list) and m["content"] else None
    if what == "cache_on" and block is not None:
        block["cache_control"] = {"type": "ephemeral"}
    elif what == "cache_off" and block is not None:
        block.pop("cache_control", None)
    elif what == "text" and block is not None:
        block["text"] = text
    elif what in ("none", "nan") and block is not None:
        block["score"] = None if what == "none" else math.nan
    elif what == "copy":  # a new object with the same content
        history[pick % len(history)] = copy.deepcopy(m)
    elif what == "reorder":  # the same content, its keys in another order
        history[pick % len(history)] = dict(reversed(list(m.items())))
    elif what == "drop_last":
        history.pop()
    elif what == "drop_first":
        history.pop(0)
    elif what == "share" and other:  # the other session's message object, resent here too
        history.append(other[pick % len(other)])


# Edits an agent makes to the system prompt and tool schemas it sends on every call, in place or not.
TOOL_EDITS = ["text", "none", "nan", "copy", "reorder", "swap", "drop_last", "add", "system_text", "system_string",
              "system_json"]


def _tool(name: str, text: str) -> dict:
    return {"name": name, "description": text,
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}


def _edit_tools(what: str, sent: dict, pick: int, text: str) -> None:
    tools, system = sent["tools"], sent["system"]
    if what == "add" or (not tools and not what.startswith("system_")):
        tools.append(_tool(f"t{pick}", text))
        return
    if what == "system_text":
        if isinstance(system, list):
            system[0]["text"] = text
        else:
            sent["system"] = [{"type": "text", "text": text}]
        return
    if what == "system_string":
        sent["system"] = text
        return
    if what == "system_json":  # a string prompt that is the JSON the writer kept of the last call's prompt
        sent["system"] = orjson.dumps([system]).decode()
        return
    i = pick % len(tools)
    if what == "text":
        tools[i]["description"] = text
    elif what in ("none", "nan"):
        tools[i]["input_schema"]["default"] = None if what == "none" else math.nan
    elif what == "copy":
        tools[i] = copy.deepcopy(tools[i])
    elif what == "reorder":
        tools[i] = dict(reversed(list(tools[i].items())))
    elif what == "swap":  # the same bytes, in another order
        tools.insert(0, tools.pop(i))
    elif what == "drop_last":
        tools.pop()


@st.composite
def stories(draw) -> list[list]:
    """Batches of the calls of one or two sessions that resend their history, system prompt and tools, edited
    between calls."""
    run = "r" + uuid.uuid4().hex[:10]
    sids = [f"{run}-s{i}" for i in range(draw(st.integers(1, 2)))]
    histories: dict[str, list] = {sid: [] for sid in sids}
    sent = {sid: {"system": [{"type": "text", "text": "you help"}], "tools": [_tool("read", "reads a file")]}
            for sid in sids}
    batches: list[list] = [[SessionStarted(session_id=sid, started_at="2026-01-01T10:00:00Z", run=run, agent="a")
                            for sid in sids]]
    for n in range(draw(st.integers(1, 12))):
        sid = draw(st.sampled_from(sids))
        history, other = histories[sid], histories[sids[-1 - sids.index(sid)]]
        for _ in range(draw(st.integers(0, 2))):
            _edit(draw(st.sampled_from(EDITS)), history, other, draw(st.integers(0, 20)), draw(st.sampled_from(TEXTS)))
        for _ in range(draw(st.integers(0, 2))):
            _edit_tools(draw(st.sampled_from(TOOL_EDITS)), sent[sid], draw(st.integers(0, 20)),
                        draw(st.sampled_from(TEXTS)))
        extras = {k: v for k, v in sent[sid].items() if draw(st.integers(0, 4))}  # mostly both, as agents send
        history.append({"role": "user", "content": draw(st.sampled_from(
            [draw(st.sampled_from(TEXTS)), [{"type": "text", "text": draw(st.sampled_from(TEXTS))}]]))})
        reply = {"role": "assistant", "content": [{"type": "text", "text": draw(st.sampled_from(TEXTS))}]}
        batches[-1].append(CallRecorded(call_id=f"{sid}-c{n}", session_id=sid, exchange_id=None,
                                        started_at=f"2026-01-01T10:{n:02d}:00Z", model="claude-haiku-4-5",
                                        request={"model": "claude-haiku-4-5", "messages": list(history),
                                                 **{k: list(v) if k == "tools" else v for k, v in extras.items()}},
                                        response=reply))
        if draw(st.booleans()):
            history.append(reply)
        if draw(st.integers(0, 5)) == 0:  # its recorder restarted: the writer forgets what it kept
            batches[-1].append(SessionEnded(session_id=sid, ended_at="2026-01-01T11:00:00Z", status="completed"))
            batches[-1].append(SessionStarted(session_id=sid, started_at="2026-01-01T11:00:00Z", run=run, agent="a"))
        if draw(st.booleans()):
            batches.append([])
    return batches


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(batches=stories())
def test_any_story_of_edits_in_place_stores_what_finding_each_message_alone_stores(pair, batches):
    """Both stores get each batch in turn, before the story goes on editing its objects (a batch holds the objects
    themselves, as a writer's queue does, so an edit before its write is what both write)."""
    assert_stored_alike(pair, batches, one_by_one, TABLES)
