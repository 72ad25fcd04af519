"""The timeline rebuilds every context, for every agent loop a generator can think of (issue 17).

A generated agent loop appends, repeats identical messages, slides its window, trims in the middle,
compacts with a summary, edits an earlier message, retries the same window, calls tools in parallel, forks
two calls from one prefix, and sends each reply back in one of the forms a reader calls the same. For every
call, the timeline entries its window points at are the messages it sent (as a reader reads them), replay gives
back the exact bytes, and the facts (added, trimmed, edited, compacted, reply not sent back) are the ones the
generator knows. The forms include those real agent CLIs send (issue 31): re-serialised tool-call arguments, ids,
signatures and metadata the client adds, Gemini's `model` for `assistant`. REASONLOG_TIMELINE_EXAMPLES sets the
number of loops (500 by default, which CI runs; 2,000 before the suite had to run in 15 minutes); the quick run
checks 25.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import anthropic.types as at
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reasonlog
from reasonlog.conversation import key_of, reader_form, reply_units, reply_variants
from reasonlog.model import jsonable
from reasonlog.store import open_store

EXAMPLES = int(os.environ.get("REASONLOG_TIMELINE_EXAMPLES", "500"))
OPS = ("append", "repeat", "slide", "trim", "compact", "edit", "retry", "tools", "fork")
REPLY_FORMS = ("same", "string", "nulls", "sdk", "no_thinking", "client")
# Replies real agent CLIs send back in another form (issue 31): Chat tool calls with their arguments re-serialised
# (Qwen Code, OpenCode, Cline), with or without their `reasoning_content`; Responses custom and function calls with
# the client's metadata added (Codex); Gemini function calls with an id and a signature the client made, under the
# role `model`, without the thought parts (Gemini CLI).
CLIENT_KINDS = ("chat_tools", "responses_tools", "gemini")


@dataclass
class Loop:
    """An agent's history as the generator builds it, and what it knows of each call."""

    history: list = field(default_factory=list)
    calls: list[dict] = field(default_factory=list)  # {"messages", "response", "facts"}
    counter: int = 0

    def fresh(self, role: str = "user") -> dict:
        self.counter += 1
        return {"role": role, "content": f"message {self.counter}"}


def _reply(n: int, kind: str) -> dict:
    if kind == "thinking":
        return {"role": "assistant", "content": [{"type": "thinking", "thinking": f"hmm {n}", "signature": "sig"},
                                                 {"type": "text", "text": f"reply {n}"}]}
    if kind == "tools":
        return {"role": "assistant", "content": [
            {"type": "tool_use", "id": f"t{n}a", "name": "get", "input": {"q": n}},
            {"type": "tool_use", "id": f"t{n}b", "name": "put", "input": {"q": n}}]}
    if kind == "responses":
        return {"role": "assistant", "content": [
            {"type": "reasoning", "id": f"rs_{n}", "summary": [{"type": "summary_text", "text": f"why {n}"}]},
            {"type": "message", "id": f"msg_{n}", "status": "completed", "role": "assistant",
             "content": [{"type": "output_text", "text": f"reply {n}", "annotations": []}]}]}
    if kind == "chat":
        return {"role": "assistant", "content": f"reply {n}", "refusal": None, "annotations": []}
    if kind == "chat_tools":
        return {"role": "assistant", "content": "", "reasoning_content": f"why {n}", "tool_calls": [
            {"id": f"call_{n}{x}", "type": "function", "function": {"name": "sh", "arguments": _spaced(n, x)}}
            for x in "ab"]}
    if kind == "responses_tools":
        return {"role": "assistant", "content": [
            {"type": "custom_tool_call", "id": f"ctc_{n}", "status": "completed", "call_id": f"call_{n}a",
             "name": "exec", "input": f"text(await tools.exec_command({{cmd: 'ls {n}'}}))"},
            {"type": "function_call", "id": f"fc_{n}", "status": "completed", "call_id": f"call_{n}b", "name": "sh",
             "arguments": _spaced(n, "b")}]}
    if kind == "gemini":
        return {"role": "assistant", "parts": [{"text": f"why {n}", "thought": True}, {"text": f"reply {n}"},
                                               {"functionCall": {"name": "sh", "args": {"command": f"ls {n}"}}}]}
    return {"role": "assistant", "content": [{"type": "text", "text": f"reply {n}"}]}


def _spaced(n: int, x: str) -> str:
    return json.dumps({"command": f"ls {n}{x}", "flags": [1, 2]})  # with spaces, as a stream gives them


def _compact(arguments: str) -> str:
    return json.dumps(json.loads(arguments), separators=(",", ":"))


def _client_resent(reply: dict) -> list:
    """The reply as a real client sends it back (see CLIENT_KINDS)."""
    if "tool_calls" in reply:
        return [{"role": "assistant", "content": None, "tool_calls": [
            {**c, "function": {**c["function"], "arguments": _compact(c["function"]["arguments"])}}
            for c in reply["tool_calls"]]}]
    if "parts" in reply:  # Gemini CLI leaves the thought parts out
        call = reply["parts"][2]["functionCall"]
        return [{"role": "model", "parts": [reply["parts"][1], {
            "functionCall": {"id": f"sh_{call['args']['command']}_0", **call},
            "thoughtSignature": "skip_thought_signature_validator"}]}]
    passthrough = {"internal_chat_message_metadata_passthrough": {"turn_id": "turn-1"}}
    return [{**{k: v for k, v in i.items() if k != "id"}, **passthrough,
             **({"arguments": _compact(i["arguments"])} if "arguments" in i else {})} for i in reply["content"]]


def _units(reply: dict) -> int:
    return len(reply_units(reply))


def _resent(reply: dict, form: str) -> tuple[list, int]:
    """The reply as the agent appends it to its history, in a form a reader calls the same; and how many of
    its units it leaves out."""
    content = reply.get("content")
    client = "tool_calls" in reply or "parts" in reply or (
        isinstance(content, list) and content[0].get("type") == "custom_tool_call")
    if client:  # sent back as the real client does, without the reasoning beside its content, or as it came
        if form == "client":
            return _client_resent(reply), 0
        if form == "no_thinking" and "reasoning_content" in reply:
            return [{k: v for k, v in reply.items() if k != "reasoning_content"}], 0
        return (list(reply["content"]) if _units(reply) > 1 else [reply]), 0
    if _units(reply) > 1:  # Responses output items: appended one by one, or only the message
        items = reply["content"]
        if form in ("string", "no_thinking"):
            text = items[1]["content"][0]["text"]
            return [{"role": "assistant", "content": text} if form == "string" else items[1]], 1
        if form == "nulls":
            return [{**i, "status": None} if i["type"] == "reasoning" else i for i in items], 0
        return list(items), 0
    if isinstance(reply["content"], str):
        if form in ("string", "sdk"):
            return [{"role": "assistant", "content": reply["content"]}], 0
        return [{"role": "assistant", "content": [{"type": "text", "text": reply["content"]}]}], 0
    return [_resent_blocks(reply, form)], 0


def _resent_blocks(reply: dict, form: str):
    blocks = reply["content"]
    if form == "string" and len(blocks) == 1 and blocks[0]["type"] == "text":
        return {"role": "assistant", "content": blocks[0]["text"]}
    if form == "nulls":
        return {"role": "assistant", "content": [{**b, "citations": None} if b["type"] == "text" else b
                                                 for b in blocks]}
    if form == "sdk":
        return {"role": "assistant", "content": [_sdk_block(b) for b in blocks]}
    if form == "no_thinking":
        kept = [b for b in blocks if b["type"] != "thinking"]
        return {"role": "assistant", "content": kept}
    return reply


def _sdk_block(b: dict):
    if b["type"] == "text":
        return at.TextBlock(type="text", text=b["text"])
    if b["type"] == "thinking":
        return at.ThinkingBlock(type="thinking", thinking=b["thinking"], signature=b["signature"])
    return at.ToolUseBlock(type="tool_use", id=b["id"], name=b["name"], input=b["input"])


def _facts(added=0, trimmed=0, edited=0, compacted=False, unsent=0) -> dict:
    return {"added": added, "trimmed": trimmed, "edited": edited, "compacted": compacted, "unsent": unsent}


@st.composite
def loops(draw) -> Loop:
    loop = Loop()
    loop.history = [loop.fresh()]
    context: list = []
    reply = None
    facts = _facts(added=1)
    for n in range(draw(st.integers(1, 9))):
        kind = draw(st.sampled_from(("text", "text", "thinking", "responses", "chat", *CLIENT_KINDS)))
        call: dict = {}
        if n:
            op = draw(st.sampled_from(OPS + (("chain",) if _units(reply) > 1 else ())))
            form = draw(st.sampled_from(REPLY_FORMS))
            if op == "chain":  # OpenAI Responses: only the new input, the rest held by the server
                new = loop.fresh()
                facts = _facts(added=1)
                loop.history = [*context, *reply["content"], new]
                call = {"sent": [new], "params": {"previous_response_id": f"resp_{n - 1}"}}
            else:
                facts, loop.history = _step(draw, loop, op, context, reply, form)
            kind = "tools" if op == "tools" else kind
        reply = _reply(n, kind)
        context = list(loop.history)
        loop.calls.append({"messages": context, "response": reply, "facts": facts, "ref": f"resp_{n}", **call})
    return loop


def _step(draw, loop: Loop, op: str, context: list, reply: dict, form: str) -> tuple[dict, list]:
    """The next history after `context` and its `reply`, and the facts the next call must report."""
    resent, unsent = _resent(reply, form)
    grown = [*context, *resent]
    n = len(context)
    if op == "retry":
        return _facts(unsent=_units(reply)), list(context)
    if op == "fork":
        return _facts(trimmed=1, unsent=_units(reply), added=1), [*context[:-1], loop.fresh()]
    if op == "repeat":
        return _facts(added=1, unsent=unsent), [*grown, {"role": "user", "content": "continue"}]
    if op == "tools":
        results = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "1"},
                                               {"type": "tool_result", "tool_use_id": "y", "content": "2"}]}
        return _facts(added=1, unsent=unsent), [*grown, results]
    if op == "slide" and n >= 2:
        k = draw(st.integers(1, n - 1))
        return _facts(added=1, trimmed=k, unsent=unsent), [*grown[k:], loop.fresh()]
    if op == "trim" and n >= 3:
        i = draw(st.integers(1, n - 2))
        return _facts(added=1, trimmed=1, unsent=unsent), [*grown[:i], *grown[i + 1:], loop.fresh()]
    if op == "compact" and n >= 3:
        k = draw(st.integers(2, n - 1))
        summary = {"role": "user", "content": f"summary {loop.fresh()['content']}"}
        return _facts(added=2, trimmed=k, compacted=True, unsent=unsent), [summary, *grown[k:], loop.fresh()]
    if op == "edit" and n >= 1:
        i = draw(st.integers(0, n - 1))
        edited = {"role": "user", "content": f"edited {loop.fresh()['content']}"}
        return _facts(added=1, edited=1, unsent=unsent), [*grown[:i], edited, *grown[i + 1:], loop.fresh()]
    return _facts(added=1, unsent=unsent), [*grown, loop.fresh()]


def _story(loop: Loop) -> str:
    """The loop as lines, for a failure's message."""
    def brief(m):
        text = orjson.dumps(m, default=jsonable).decode()
        return text[:60]
    return "\n".join(f"call {n}: {c['facts']}\n  " + "\n  ".join(map(brief, c["messages"]))
                     for n, c in enumerate(loop.calls))


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """Two recorders on one file (the second continues sessions the first began, as a later process does)
    and a store to read it."""
    path = tmp_path_factory.mktemp("timeline") / "loops.db"
    first, second = reasonlog.Recorder(path, strict=True), reasonlog.Recorder(path, strict=True)
    store = open_store(path)
    yield first, second, store
    first.close()
    second.close()
    store.close()


def _key(value) -> bytes:
    return key_of(reader_form(orjson.loads(orjson.dumps(value, default=jsonable))))


def _unit(entries: dict[int, object], slot):
    if isinstance(slot, int):
        return entries[slot]
    return reply_units(entries[slot[0]])[slot[1]]


def _same(entry, sent) -> bool:
    """Does the timeline entry read as the message sent (a reply may come back without its thinking)?"""
    form = reader_form(orjson.loads(orjson.dumps(entry, default=jsonable)))
    return _key(sent) in {key_of(form), *map(key_of, reply_variants(form))}


def rebuilds_every_context(recording, loop: Loop, data) -> None:
    """The property: `loop` recorded by two processes in turn reads back as the generator sent and knows it."""
    first, second, store = recording
    split = data.draw(st.integers(1, len(loop.calls)), label="calls before another process goes on")
    ids = []
    s = first.session(agent="loop", model="m")
    for n, c in enumerate(loop.calls):
        if n == split:
            first.flush()
            s = second.session(id=s.id, agent="loop", model="m")
        ids.append(s.call(messages=c.get("sent", c["messages"]), response=c["response"], system="be brief",
                          params=c.get("params"), provider_message_id=c["ref"]))
    s.end()
    first.flush()
    second.flush()
    session = store.get_session(s.id)
    entries = {m["idx"]: m["content"] for m in session["messages"]}
    shown = 0
    for call, row, call_id in zip(loop.calls, session["calls"], ids, strict=True):
        recorded = store.get_call(call_id)
        sent = recorded["request"]["messages"]
        assert orjson.dumps(sent, default=jsonable, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
            call.get("sent", call["messages"]), default=jsonable, option=orjson.OPT_SORT_KEYS)  # replay: exact
        slots = recorded["window_slots"]
        assert len(slots) == len(call["messages"])
        assert all(_same(_unit(entries, slot), m) for slot, m in zip(slots, call["messages"], strict=True))
        facts = {k: row["window"][k] for k in ("added", "trimmed", "edited", "compacted", "unsent")}
        assert row["window"]["held"] == len(call["messages"]) - len(call.get("sent", call["messages"]))
        assert facts == call["facts"], _story(loop)
        shown += facts["added"] + facts["edited"] + 1  # each new message once, and the reply
    assert len(session["messages"]) == shown
    asked = data.draw(st.permutations(ids), label="the calls asked for at once, in this order")
    asked += asked[:1]  # one asked twice
    assert store.call_details(asked) == [store.get_call(call_id) for call_id in asked]  # one pass, the same answers


@pytest.mark.slow
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(loop=loops(), data=st.data())
def test_the_timeline_rebuilds_every_context_and_knows_what_changed(recording, loop: Loop, data):
    rebuilds_every_context(recording, loop, data)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(loop=loops(), data=st.data())
def test_a_few_loops_rebuild_every_context(recording, loop: Loop, data):
    """The same property over 25 loops, for the quick run (`-m "not slow"`); the whole run checks EXAMPLES."""
    rebuilds_every_context(recording, loop, data)
