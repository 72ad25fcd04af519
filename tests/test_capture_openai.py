"""instrument_openai drives the real `openai` SDK against recorded payloads on 127.0.0.1."""
from __future__ import annotations

import asyncio
import gc
import json

import openai
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState
from sdk_server import FIXTURES, load_chunks, load_json, split_streams

import reasonlog
from reasonlog.capture.openai import instrument_openai
from reasonlog.parts import parts_of


@pytest.fixture
def db_target(db):
    """This suite runs on SQLite and on PostgreSQL."""
    return db

CHAT, RESPONSES = "openai-chat", "openai-responses"
ASK = {"model": "test-model", "messages": [{"role": "system", "content": "Be brief."},
                                           {"role": "user", "content": "Weather in San Francisco?"}]}
INPUT = [{"role": "user", "content": "What is 12 * 47.5?"}]
# Disjoint counters worked out by hand from each recording's usage (see SOURCES.md):
# (uncached input, cache read, output, of which reasoning)
CHAT_TOKENS = {
    "deepseek-tool-call.json": (19, 320, 92, 48),  # reasoning inside completion_tokens
    "xai-tool-call.json": (63, 244, 281, 255),  # reasoning beside completion_tokens: 307 + 26 + 255 = 588
    "groq-tool-call.json": (218, 0, 15, 0),
    "mistral-tool-call.json": (124, 0, 22, 0),
    "openai-text.json": (16, 0, 363, 0),
}
RESPONSE_FIXTURES = sorted(p.name for p in (FIXTURES / RESPONSES).glob("*.json") if "error" not in p.name)


def client_for(server, cls=openai.OpenAI):
    return cls(base_url=server.url + "/v1", api_key="test-key", max_retries=0)


def calls_of(rec, session_id) -> list[dict]:
    rec.flush()
    store = reasonlog.open_store(rec.db_path)
    return [store.get_call(c["id"]) for c in store.get_session(session_id)["calls"]]


def only_call(rec, session_id) -> dict:
    calls = calls_of(rec, session_id)
    assert len(calls) == 1
    return calls[0]


def tokens(call: dict) -> tuple:
    return call["input_tokens"], call["cache_read_tokens"], call["output_tokens"], call["reasoning_tokens"]


def tool_ids(message: dict) -> list:
    return [p.tool_use_id for p in parts_of(message) if p.kind == "tool_use"]


@pytest.mark.parametrize("name", sorted(CHAT_TOKENS))
def test_chat_create_records_every_fixture(server, rec, name):
    payload = load_json(CHAT, name)
    server.reply_json(payload)
    client = client_for(server)
    instrument_openai(client, rec)
    with rec.session() as s:
        completion = client.chat.completions.create(**ASK, temperature=0, extra_headers={"x-trace": "1"})
    call = only_call(rec, s.id)
    choice = payload["choices"][0]
    assert call["status"] == "ok" and call["provider"] == "openai"
    assert tokens(call) == CHAT_TOKENS[name]
    assert call["stop_reason"] == choice["finish_reason"]
    assert call["response"] == choice["message"]
    assert tool_ids(call["response"]) == [t["id"] for t in choice["message"].get("tool_calls") or ()]
    assert call["raw"]["usage"] == payload["usage"]  # the server's own counting stays inspectable
    assert call["request"] == server.requests[-1]["body"]
    assert call["request_id"] == completion._request_id and call["provider_message_id"] == payload["id"]


def chat_oracle(events: list[dict]):
    """The SDK's own accumulation of the same chunks: what `.stream()` users get as final completion."""
    state = ChatCompletionStreamState()
    for event in events:
        state.handle_chunk(openai.types.chat.ChatCompletionChunk.construct(**event))
    return state.get_final_completion()


@pytest.mark.parametrize("name,expected", [("deepseek-tool-call.chunks.txt", (19, 320, 83, 39)),
                                           ("openai-text.chunks.txt", (16, 0, 300, 0))])
def test_chat_stream_gives_the_usage_of_its_final_message(server, rec, name, expected):
    events = load_chunks(CHAT, name)
    server.reply_stream(events, named=False, done=True)
    client = client_for(server)
    instrument_openai(client, rec)
    with rec.session() as s:
        chunks = list(client.chat.completions.create(**ASK, stream=True, stream_options={"include_usage": True}))
    assert len(chunks) == len(events)
    call = only_call(rec, s.id)
    final = json.loads(chat_oracle(events).model_dump_json())
    assert call["status"] == "ok" and call["stop_reason"] == final["choices"][0]["finish_reason"]
    assert tokens(call) == expected
    assert call["raw"]["usage"] == events[-1]["usage"]
    assert (final["usage"]["prompt_tokens"], final["usage"]["completion_tokens"]) == \
        (call["input_tokens"] + call["cache_read_tokens"], call["output_tokens"])
    message = final["choices"][0]["message"]
    assert call["response"]["content"] == message["content"]
    assert [(t["id"], t["function"]) for t in call["response"].get("tool_calls", [])] == \
        [(t["id"], {"name": t["function"]["name"], "arguments": t["function"]["arguments"]})
         for t in message.get("tool_calls") or ()]
    reasoning = "".join(e["choices"][0]["delta"].get("reasoning_content") or "" for e in events if e["choices"])
    assert call["response"].get("reasoning_content", "") == reasoning
    assert call["ttft_ms"] is not None and call["ttft_ms"] <= call["latency_ms"]


def test_abandoned_chat_stream_is_partial(server, rec):
    server.reply_stream(load_chunks(CHAT, "openai-text.chunks.txt"), named=False, done=True)
    client = client_for(server)
    instrument_openai(client, rec)
    with rec.session() as s:
        stream = client.chat.completions.create(**ASK, stream=True)
        pieces = [next(stream).choices[0].delta.content for _ in range(4)]
        stream.close()
    call = only_call(rec, s.id)
    assert call["status"] == "partial" and call["input_tokens"] is None
    assert call["response"]["content"] == "".join(pieces)


@pytest.mark.parametrize("name", RESPONSE_FIXTURES)
def test_responses_create_records_every_fixture(server, rec, name):
    payload = load_json(RESPONSES, name)
    server.reply_json(payload)
    client = client_for(server)
    instrument_openai(client, rec)
    with rec.session() as s:
        client.responses.create(model="test-model", input=INPUT, instructions="Be exact.")
    call = only_call(rec, s.id)
    usage = payload["usage"]
    cached = usage["input_tokens_details"]["cached_tokens"]
    assert tokens(call) == (usage["input_tokens"] - cached, cached, usage["output_tokens"],
                            usage["output_tokens_details"]["reasoning_tokens"])
    assert call["response"] == {"role": "assistant", "content": payload["output"]}
    calls = [o["call_id"] for o in payload["output"] if o["type"] == "function_call"]
    searches = [o["id"] for o in payload["output"] if o["type"] == "web_search_call"]  # the API's own tool steps
    assert tool_ids(call["response"]) == [o.get("call_id", o["id"]) for o in payload["output"]
                                          if o["type"] in ("function_call", "web_search_call")]
    assert len(searches) == (3 if "web-search" in name else 0)
    assert call["stop_reason"] == ("tool_calls" if calls else "completed")
    assert call["request"] == server.requests[-1]["body"] and call["request"]["input"] == INPUT


def test_responses_stream_matches_its_completed_event(server, rec):
    streams = split_streams(load_chunks(RESPONSES, "openai-reasoning-encrypted-content.1.chunks.txt"),
                            "response.created")
    assert len(streams) == 4  # a four-turn tool loop, recorded back to back
    client = client_for(server)
    instrument_openai(client, rec)
    history = list(INPUT)
    with rec.session() as s:
        for events in streams:
            server.reply_stream(events, named=True)
            for event in client.responses.create(model="test-model", input=history, stream=True):
                if event.type == "response.completed":
                    history += [item.model_dump(exclude_unset=True) for item in event.response.output]
            for item in history[-len(event.response.output):]:
                if item["type"] == "function_call":
                    history.append({"type": "function_call_output", "call_id": item["call_id"], "output": "ok"})
    calls = calls_of(rec, s.id)
    for call, events in zip(calls, streams, strict=False):
        completed = events[-1]["response"]
        assert call["status"] == "ok" and call["raw"]["usage"] == completed["usage"]
        assert call["output_tokens"] == completed["usage"]["output_tokens"]
        assert call["response"]["content"] == completed["output"]
        assert call["ttft_ms"] is not None
    ids = [tool_ids(c["response"]) for c in calls]
    assert all(i[0].startswith("call_") for i in ids[:3]) and ids[3] == []
    # the function_call_output items we sent back are part of the next call's recorded context
    sent = [p.tool_use_id for m in calls[1]["request"]["input"] for p in parts_of(m) if p.kind == "tool_result"]
    assert sent == ids[0]


def test_abandoned_responses_stream_keeps_what_arrived(server, rec):
    events = split_streams(load_chunks(RESPONSES, "openai-reasoning-encrypted-content.1.chunks.txt"),
                           "response.created")[0]
    server.reply_stream(events, named=True)
    client = client_for(server)
    instrument_openai(client, rec)
    with rec.session() as s:
        with client.responses.create(model="test-model", input=INPUT, stream=True) as stream:
            for event in stream:
                if event.type == "response.function_call_arguments.delta":
                    break
    call = only_call(rec, s.id)
    assert call["status"] == "partial" and call["output_tokens"] is None
    kinds = [item.get("type") for item in call["response"]["content"]]
    assert "function_call" in kinds


def test_api_error_is_recorded_and_reraised_unchanged(server, rec):
    body = load_json(RESPONSES, "openai-error.1.json")
    server.reply_json(body, status=429)
    server.reply_json(body, status=429)
    client = client_for(server)
    instrument_openai(client, rec)
    with rec.session() as s:
        with pytest.raises(openai.RateLimitError) as chat_error:
            client.chat.completions.create(**ASK)
        with pytest.raises(openai.RateLimitError):
            client.responses.create(model="test-model", input=INPUT, stream=True)
    calls = calls_of(rec, s.id)
    assert [c["status"] for c in calls] == ["error", "error"]
    assert calls[0]["error"]["status_code"] == 429 and calls[0]["error"]["body"] == body["error"]
    assert calls[0]["request_id"] == chat_error.value.request_id
    assert calls[0]["request"]["messages"] == ASK["messages"]


def test_timeout_is_recorded(rec):
    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0)
    instrument_openai(client, rec)
    with rec.session() as s:
        with pytest.raises(openai.APIConnectionError):
            client.chat.completions.create(**ASK)
    assert only_call(rec, s.id)["error"]["type"] == "APIConnectionError"


def test_instrumenting_twice_does_nothing_and_undo_restores(server, rec):
    client = client_for(server)
    before = (client.chat.completions.create, client.responses.create)
    handle = instrument_openai(client, rec)
    assert instrument_openai(client) is handle
    server.reply_json(load_json(CHAT, "mistral-tool-call.json"))
    with rec.session() as s:
        client.chat.completions.create(**ASK)
    only_call(rec, s.id)
    handle.undo()
    assert (client.chat.completions.create, client.responses.create) == before
    assert "create" not in vars(client.chat.completions) and "create" not in vars(client.responses)


def test_calls_without_a_session_land_in_one_session_per_client(server, rec):
    client, other = client_for(server), client_for(server)
    instrument_openai(client, rec)
    instrument_openai(other, rec)
    for c in (client, client, other):
        server.reply_json(load_json(CHAT, "groq-tool-call.json"))
        c.chat.completions.create(**ASK)
    rec.flush()
    sessions = reasonlog.open_store(rec.db_path).list_sessions(reasonlog.SessionFilter(agent="openai-client"))
    assert sorted(len(reasonlog.open_store(rec.db_path).get_session(x["id"])["calls"]) for x in sessions) == [1, 2]


def test_async_client(server, rec):
    server.reply_json(load_json(CHAT, "xai-tool-call.json"))
    server.reply_stream(load_chunks(CHAT, "deepseek-tool-call.chunks.txt"), named=False, done=True)
    server.reply_json(load_json(RESPONSES, "parallel-tool-call-wrapper.1.json"))
    client = client_for(server, openai.AsyncOpenAI)
    instrument_openai(client, rec)

    async def agent():
        with rec.session() as s:
            await client.chat.completions.create(**ASK)
            async for _ in await client.chat.completions.create(**ASK, stream=True):
                pass
            await client.responses.create(model="test-model", input=INPUT)
        return s

    calls = calls_of(rec, asyncio.run(agent()).id)
    assert [tokens(c) for c in calls] == [(63, 244, 281, 255), (19, 320, 83, 39), (34, 0, 28, 0)]
    assert [tool_ids(c["response"]) for c in calls] == [["call_46427107"], ["call_00_ioIn7yN9p1ZOMNpDLwd4MgAF"],
                                                       ["call_parallel"]]


# ---------------------------------------------------------------------- every way of calling a client
# Each way gets one reply and must leave exactly one call whose request is the body the server got.
# kind -> (reply, (uncached input, cache read, output, reasoning), stop reason)
USAGE = {"include_usage": True}
KINDS = {
    "chat": (lambda s: s.reply_json(load_json(CHAT, "openai-text.json")), (16, 0, 363, 0), "stop"),
    "chat-stream": (lambda s: s.reply_stream(load_chunks(CHAT, "openai-text.chunks.txt"), named=False, done=True),
                    (16, 0, 300, 0), "stop"),
    "responses": (lambda s: s.reply_json(load_json(RESPONSES, "parallel-tool-call-wrapper.1.json")),
                  (34, 0, 28, 0), "tool_calls"),
    "responses-stream": (lambda s: s.reply_stream(split_streams(load_chunks(
        RESPONSES, "openai-reasoning-encrypted-content.1.chunks.txt"), "response.created")[0], named=True),
        (134, 0, 28, 0), "tool_calls"),
}


def _final_chat(manager):
    with manager as stream:
        return stream.get_final_completion()


def _final_response(manager):
    with manager as stream:
        return stream.get_final_response()


SYNC_WAYS = {
    "chat.completions.create": ("chat", lambda c: c.chat.completions.create(**ASK)),
    "chat.completions.with_raw_response.create": ("chat", lambda c: c.chat.completions.with_raw_response.create(
        **ASK).parse()),
    "with_options(...).chat.completions.create": ("chat", lambda c: c.with_options(timeout=20).chat.completions
                                                  .create(**ASK)),
    "chat.completions.parse": ("chat", lambda c: c.chat.completions.parse(**ASK)),
    "beta.chat.completions.parse": ("chat", lambda c: c.beta.chat.completions.parse(**ASK)),
    "chat.completions.create(stream=True)": ("chat-stream", lambda c: list(c.chat.completions.create(
        **ASK, stream=True, stream_options=USAGE))),
    "chat.completions.with_raw_response.create(stream=True)": ("chat-stream", lambda c: list(
        c.chat.completions.with_raw_response.create(**ASK, stream=True, stream_options=USAGE).parse())),
    "chat.completions.stream": ("chat-stream", lambda c: _final_chat(c.chat.completions.stream(
        **ASK, stream_options=USAGE))),
    "beta.chat.completions.stream": ("chat-stream", lambda c: _final_chat(c.beta.chat.completions.stream(
        **ASK, stream_options=USAGE))),
    "responses.create": ("responses", lambda c: c.responses.create(model="test-model", input=INPUT)),
    "responses.with_raw_response.create": ("responses", lambda c: c.responses.with_raw_response.create(
        model="test-model", input=INPUT).parse()),
    "responses.parse": ("responses", lambda c: c.responses.parse(model="test-model", input=INPUT)),
    "responses.create(stream=True)": ("responses-stream", lambda c: list(c.responses.create(
        model="test-model", input=INPUT, stream=True))),
    "responses.stream": ("responses-stream", lambda c: _final_response(c.responses.stream(
        model="test-model", input=INPUT))),
    "with_options(...).responses.stream": ("responses-stream", lambda c: _final_response(
        c.with_options(max_retries=0).responses.stream(model="test-model", input=INPUT))),
}


async def _alist(pending):
    return [e async for e in await pending]


async def _araw(pending):
    raw = await pending
    parsed = raw.parse()  # openai's async raw response parses synchronously (a coroutine in a later major)
    return [e async for e in parsed] if hasattr(parsed, "__aiter__") else parsed


async def _afinal_chat(manager):
    async with manager as stream:
        return await stream.get_final_completion()


async def _afinal_response(manager):
    async with manager as stream:
        return await stream.get_final_response()


ASYNC_WAYS = {
    "chat.completions.create": ("chat", lambda c: c.chat.completions.create(**ASK)),
    "chat.completions.with_raw_response.create": ("chat", lambda c: _araw(
        c.chat.completions.with_raw_response.create(**ASK))),
    "with_options(...).chat.completions.create": ("chat", lambda c: c.with_options(timeout=20).chat.completions
                                                  .create(**ASK)),
    "chat.completions.parse": ("chat", lambda c: c.chat.completions.parse(**ASK)),
    "beta.chat.completions.parse": ("chat", lambda c: c.beta.chat.completions.parse(**ASK)),
    "chat.completions.create(stream=True)": ("chat-stream", lambda c: _alist(c.chat.completions.create(
        **ASK, stream=True, stream_options=USAGE))),
    "chat.completions.with_raw_response.create(stream=True)": ("chat-stream", lambda c: _araw(
        c.chat.completions.with_raw_response.create(**ASK, stream=True, stream_options=USAGE))),
    "chat.completions.stream": ("chat-stream", lambda c: _afinal_chat(c.chat.completions.stream(
        **ASK, stream_options=USAGE))),
    "beta.chat.completions.stream": ("chat-stream", lambda c: _afinal_chat(c.beta.chat.completions.stream(
        **ASK, stream_options=USAGE))),
    "responses.create": ("responses", lambda c: c.responses.create(model="test-model", input=INPUT)),
    "responses.parse": ("responses", lambda c: c.responses.parse(model="test-model", input=INPUT)),
    "responses.create(stream=True)": ("responses-stream", lambda c: _alist(c.responses.create(
        model="test-model", input=INPUT, stream=True))),
    "responses.stream": ("responses-stream", lambda c: _afinal_response(c.responses.stream(
        model="test-model", input=INPUT))),
}


@pytest.mark.parametrize("is_async,name", [*((False, n) for n in SYNC_WAYS), *((True, n) for n in ASYNC_WAYS)])
def test_every_way_of_calling_is_recorded(server, rec, is_async, name):
    kind, way = (ASYNC_WAYS if is_async else SYNC_WAYS)[name]
    reply, expected_tokens, stop = KINDS[kind]
    reply(server)
    client = client_for(server, openai.AsyncOpenAI if is_async else openai.OpenAI)
    instrument_openai(client, rec)
    with rec.session() as s:
        asyncio.run(way(client)) if is_async else way(client)
    call = only_call(rec, s.id)
    assert call["status"] == "ok" and call["provider"] == "openai"
    assert call["request"] == server.requests[-1]["body"]  # replays exactly what was sent
    assert (tokens(call), call["stop_reason"]) == (expected_tokens, stop)
    assert call["request_id"] == "req_000000"
    if kind.startswith("chat"):
        assert call["response"]["role"] == "assistant" and call["response"]["content"].startswith("**Holiday Name:**")
    else:
        assert [item["type"] for item in call["response"]["content"]][-1] == "function_call"


def test_other_endpoints_are_not_recorded(server, rec):
    server.reply_json({"object": "list", "data": []})
    client = client_for(server)
    instrument_openai(client, rec)
    with rec.session() as s:
        client.chat.completions.update("chatcmpl-1", metadata={"k": "v"})
    assert calls_of(rec, s.id) == []


def _hostile_usage_stream() -> list[dict]:
    """A recorded stream whose usage counts its prompt in words, not a number: the one value of a stream our folding
    cannot take (any other shape is taken, tests/test_proxy_streams.py)."""
    events = load_chunks(CHAT, "deepseek-tool-call.chunks.txt")
    for event in events:
        if event.get("usage"):
            event["usage"]["prompt_tokens"] = "many"
            return events
    raise AssertionError("the fixture has no usage")


def test_internal_error_is_counted_not_raised_in_default_mode(server, db_target, monkeypatch):
    monkeypatch.delenv("REASONLOG_RAISE_INTERNAL_ERRORS")
    events = _hostile_usage_stream()
    server.reply_stream(events, named=False, done=True)
    rec = reasonlog.Recorder(db_target, writer="sync")
    client = client_for(server)
    instrument_openai(client, rec)
    with rec.session() as s:
        chunks = list(client.chat.completions.create(**ASK, stream=True, stream_options={"include_usage": True}))
    assert len(chunks) == len(events)  # the program saw every chunk
    call = only_call(rec, s.id)  # the call stands, with its request; what could not be read of its answer is
    assert call["status"] == "ok" and call["request"]["messages"] == ASK["messages"]  # counted, not guessed
    assert tokens(call) == (None, None, None, None) and rec.stats()["rejected"] == 1
    rec.close()


def test_internal_error_is_raised_under_the_test_switch(server, rec):
    server.reply_stream(_hostile_usage_stream(), named=False, done=True)
    client = client_for(server)
    instrument_openai(client, rec)
    with rec.session():
        with pytest.raises(TypeError):
            list(client.chat.completions.create(**ASK, stream=True))


def test_a_stream_dropped_unread_is_recorded_in_the_session_it_was_sent_from(server, rec):
    """Collected later, while another session is current (another task, request or test), it stays where it was
    sent: it used to land in whichever session was current when the garbage collector reached it."""
    server.reply_stream(load_chunks(CHAT, "deepseek-tool-call.chunks.txt"), named=False, done=True)
    client = client_for(server)
    instrument_openai(client, rec)
    with rec.session() as sent_from:
        stream = client.chat.completions.create(**ASK, stream=True)
        next(iter(stream))
        with rec.session() as other:
            del stream
            gc.collect()
            other.call(messages=[{"role": "user", "content": "hi"}], response={"role": "assistant", "content": "x"})
    assert [c["status"] for c in calls_of(rec, sent_from.id)] == ["partial"]
    assert [c["status"] for c in calls_of(rec, other.id)] == ["ok"]
