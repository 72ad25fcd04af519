"""instrument_anthropic drives the real `anthropic` SDK against recorded payloads on 127.0.0.1."""
from __future__ import annotations

import asyncio

import anthropic
import pytest
from sdk_server import FIXTURES, load_chunks, load_json

import reasonlog
from reasonlog.capture.anthropic import instrument_anthropic
from reasonlog.parts import parts_of


@pytest.fixture
def db_target(db):
    """This suite runs on SQLite and on PostgreSQL."""
    return db

FOLDER = "anthropic-messages"
JSON_FIXTURES = sorted(p.name for p in (FIXTURES / FOLDER).glob("*.json"))
STREAM_FIXTURES = sorted(p.name for p in (FIXTURES / FOLDER).glob("*.chunks.txt"))
ASK = {"model": "claude-test-model", "max_tokens": 1024, "messages": [{"role": "user", "content": "Hello"}]}


def client_for(server, cls=anthropic.Anthropic):
    return cls(base_url=server.url, api_key="test-key", max_retries=0)


def only_call(rec, session_id):
    rec.flush()
    store = reasonlog.open_store(rec.db_path)
    calls = store.get_session(session_id)["calls"]
    assert len(calls) == 1
    return store.get_call(calls[0]["id"])


def expected_tokens(usage: dict) -> dict:
    """The disjoint counters, read off the provider's usage by hand."""
    split = usage.get("cache_creation") or {}
    return {"input_tokens": usage["input_tokens"], "output_tokens": usage["output_tokens"],
            "cache_read_tokens": usage.get("cache_read_input_tokens") or 0,
            "cache_write_tokens": usage.get("cache_creation_input_tokens") or 0,
            "cache_write_1h_tokens": split.get("ephemeral_1h_input_tokens") or 0}


def assert_tokens(call: dict, usage: dict) -> None:
    assert {k: call[k] for k in expected_tokens(usage)} == expected_tokens(usage)


def tool_ids(content: list) -> list:
    return [p.tool_use_id for p in parts_of({"role": "assistant", "content": content}) if p.kind == "tool_use"]


@pytest.mark.parametrize("name", JSON_FIXTURES)
def test_create_records_every_fixture(server, rec, name):
    payload = load_json(FOLDER, name)
    server.reply_json(payload)
    client = client_for(server)
    instrument_anthropic(client, rec)
    with rec.session(agent="t") as s:
        message = client.messages.create(**ASK, system="Be brief.", extra_body={"temperature": 0.2},
                                         extra_headers={"x-trace": "1"}, timeout=30)
    call = only_call(rec, s.id)
    assert call["status"] == "ok" and call["provider"] == "anthropic"
    assert call["stop_reason"] == payload["stop_reason"]
    assert_tokens(call, payload["usage"])
    assert call["response"] == {"role": "assistant", "content": payload["content"]}
    assert tool_ids(call["response"]["content"]) == [b["id"] for b in payload["content"] if b["type"] == "tool_use"]
    assert call["provider_message_id"] == payload["id"] and call["model"] == payload["model"]
    assert call["request_id"] == message._request_id and call["request_id"].startswith("req_")
    assert call["request"] == server.requests[-1]["body"]  # exactly the body sent; no transport options
    assert call["raw"]["usage"] == payload["usage"]
    assert call["latency_ms"] > 0


@pytest.mark.parametrize("name", STREAM_FIXTURES)
def test_stream_and_its_final_message_give_the_same_usage(server, rec, name):
    events = load_chunks(FOLDER, name)
    server.reply_stream(events, named=True)
    server.reply_stream(events, named=True)
    client = client_for(server)
    instrument_anthropic(client, rec)
    with rec.session() as raw_session:
        seen = [e.type for e in client.messages.create(**ASK, stream=True)]
    with rec.session() as helper_session:
        with client.messages.stream(**ASK) as stream:
            final = stream.get_final_message()
    assert seen == [e["type"] for e in events if e["type"] != "ping"]  # the caller sees what the SDK yields
    from_create, from_helper = only_call(rec, raw_session.id), only_call(rec, helper_session.id)
    final_usage = final.usage.model_dump(exclude_none=True)
    for call in (from_create, from_helper):
        assert call["status"] == "ok"
        assert call["stop_reason"] == final.stop_reason
        assert_tokens(call, final_usage)
        assert call["response"]["content"] == [b.model_dump(mode="json", exclude_unset=True) for b in final.content]
        assert call["ttft_ms"] is not None and 0 < call["ttft_ms"] <= call["latency_ms"]
        assert call["request_id"].startswith("req_")
        assert call["request"]["stream"] is True
    assert from_create["response"] == from_helper["response"]


def test_stream_keeps_cache_split_from_message_start(server, rec):
    # message_start reports the 5m/1h split; message_delta's running totals leave it out.
    server.reply_stream(load_chunks(FOLDER, "anthropic-code-execution-20260120-prompt-cache.1.chunks.txt"),
                        named=True)
    client = client_for(server)
    instrument_anthropic(client, rec)
    with rec.session() as s:
        list(client.messages.create(**ASK, stream=True))
    call = only_call(rec, s.id)
    assert (call["input_tokens"], call["cache_read_tokens"], call["cache_write_tokens"]) == (6, 6289, 3337)
    assert call["raw"]["usage"]["cache_creation"] == {"ephemeral_5m_input_tokens": 3068,
                                                      "ephemeral_1h_input_tokens": 0}
    uses = [b for b in call["response"]["content"] if b["type"] == "server_tool_use"]
    assert uses[0]["input"]["command"].startswith("for n in $(seq 1 12)")


def test_abandoned_stream_is_recorded_as_partial(server, rec):
    server.reply_stream(load_chunks(FOLDER, "anthropic-clear-thinking.1.chunks.txt"), named=True)
    server.reply_stream(load_chunks(FOLDER, "anthropic-text.chunks.txt"), named=True)
    client = client_for(server)
    instrument_anthropic(client, rec)
    with rec.session() as thinking_session:
        with client.messages.create(**ASK, stream=True) as stream:
            for event in stream:
                if event.type == "content_block_delta" and event.delta.type == "thinking_delta":
                    break
    with rec.session() as text_session:
        with client.messages.stream(**ASK) as stream:
            next(iter(stream.text_stream))
    thinking = only_call(rec, thinking_session.id)
    assert thinking["status"] == "partial" and thinking["stop_reason"] is None
    assert thinking["response"]["content"] == [{"type": "thinking", "thinking": "The previous", "signature": ""}]
    text = only_call(rec, text_session.id)
    assert text["status"] == "partial"
    assert text["response"]["content"] == [{"type": "text", "text": "Hello"}]


def test_api_error_is_recorded_and_reraised_unchanged(server, rec):
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    server.reply_json(body, status=529)
    client = client_for(server)
    instrument_anthropic(client, rec)
    with rec.session() as s:
        with pytest.raises(anthropic.APIStatusError) as caught:
            client.messages.create(**ASK)
    assert caught.value.status_code == 529 and type(caught.value) is anthropic.OverloadedError
    call = only_call(rec, s.id)
    assert call["status"] == "error"
    assert call["error"]["status_code"] == 529 and call["error"]["body"] == body
    assert call["request_id"] == caught.value.request_id


def test_connection_error_is_recorded(rec):
    client = anthropic.Anthropic(base_url="http://127.0.0.1:9", api_key="k", max_retries=0)
    instrument_anthropic(client, rec)
    with rec.session() as s:
        with pytest.raises(anthropic.APIConnectionError):
            client.messages.create(**ASK)
    assert only_call(rec, s.id)["error"]["type"] == "APIConnectionError"


def test_instrumenting_twice_does_nothing_and_undo_restores(server, rec):
    client = client_for(server)
    plain_create = client.messages.create
    handle = instrument_anthropic(client, rec)
    assert instrument_anthropic(client, rec) is handle
    server.reply_json(load_json(FOLDER, "anthropic-text.json"))
    with rec.session() as s:
        client.messages.create(**ASK)
    only_call(rec, s.id)  # one call, recorded once
    handle.undo()
    assert client.messages.create == plain_create and "create" not in vars(client.messages)
    assert isinstance(anthropic.Anthropic(api_key="k").messages.create.__self__, type(client.messages))
    server.reply_json(load_json(FOLDER, "anthropic-text.json"))
    with rec.session() as after:
        client.messages.create(**ASK)
    rec.flush()
    assert reasonlog.open_store(rec.db_path).get_session(after.id)["calls"] == []


def test_only_the_instrumented_client_is_patched(server, rec):
    client, other = client_for(server), client_for(server)
    class_request = anthropic.Anthropic.request
    instrument_anthropic(client, rec)
    assert "request" in vars(client) and "request" not in vars(other)
    assert anthropic.Anthropic.request is class_request


def test_calls_without_a_session_land_in_one_session_per_client(server, rec):
    client = client_for(server)
    handle = instrument_anthropic(client, rec)
    for _ in range(2):
        server.reply_json(load_json(FOLDER, "anthropic-text.json"))
        client.messages.create(**ASK)
    handle.undo()
    rec.flush()
    sessions = reasonlog.open_store(rec.db_path).list_sessions(reasonlog.SessionFilter(agent="anthropic-client"))
    assert len(sessions) == 1
    session = reasonlog.open_store(rec.db_path).get_session(sessions[0]["id"])
    assert session["provider"] == "anthropic" and session["status"] == "completed"
    assert len(session["calls"]) == 2


def test_history_of_sdk_objects_is_stored_once(server, rec):
    server.reply_json(load_json(FOLDER, "anthropic-tool-no-args.json"))
    server.reply_json(load_json(FOLDER, "anthropic-text.json"))
    client = client_for(server)
    instrument_anthropic(client, rec)
    history = [{"role": "user", "content": "Update the issues"}]
    with rec.session() as s:
        first = client.messages.create(model="m", max_tokens=100, messages=history)
        history.append({"role": "assistant", "content": first.content})  # SDK objects, as agents do
        history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": first.content[1].id,
                                                     "content": "done"}]})
        client.messages.create(model="m", max_tokens=100, messages=history)
    rec.flush()
    roles = [m["role"] for m in reasonlog.open_store(rec.db_path).get_session(s.id)["messages"]]
    assert roles == ["user", "assistant", "user", "assistant"]  # the echoed assistant turn is not repeated


def test_async_client_create_stream_and_helper(server, rec):
    payload = load_json(FOLDER, "anthropic-json-tool.1.json")
    events = load_chunks(FOLDER, "anthropic-text.chunks.txt")
    server.reply_json(payload)
    server.reply_stream(events, named=True)
    server.reply_stream(events, named=True)
    client = client_for(server, anthropic.AsyncAnthropic)
    instrument_anthropic(client, rec)

    async def agent():
        with rec.session() as s:
            await client.messages.create(**ASK)
            async for _ in await client.messages.create(**ASK, stream=True):
                pass
            async with client.messages.stream(**ASK) as stream:
                text = await stream.get_final_text()
        return s, text

    s, text = asyncio.run(agent())
    rec.flush()
    store = reasonlog.open_store(rec.db_path)
    calls = [store.get_call(c["id"]) for c in store.get_session(s.id)["calls"]]
    assert [c["status"] for c in calls] == ["ok", "ok", "ok"]
    assert tool_ids(calls[0]["response"]["content"]) == ["toolu_01Q9ExVZnzZj7E2QQYHYtNUa"]
    assert calls[1]["output_tokens"] == calls[2]["output_tokens"] == 30
    assert calls[2]["response"]["content"] == [{"type": "text", "text": text}]


def test_a_response_handed_over_as_sdk_objects_is_searchable(server, rec):
    payload = load_json(FOLDER, "anthropic-text.json")
    server.reply_json(payload)
    client = client_for(server)
    instrument_anthropic(client, rec)
    with rec.session(agent="t") as s:
        client.messages.create(**ASK)
    rec.flush()
    text = next(b["text"] for b in payload["content"] if b["type"] == "text")
    phrase = " ".join(text.split()[:3])
    hits = reasonlog.open_store(rec.db_path).search(phrase, reasonlog.SessionFilter())
    assert [(h["session_id"], h["role"]) for h in hits] == [(s.id, "assistant")]


# ---------------------------------------------------------------------- every way of calling a client
# Each way gets one reply and must leave exactly one call whose request is the body the server got.
# anthropic-text.json: 12 in, 29 out, end_turn; anthropic-text.chunks.txt: 12 in, 30 out, end_turn.

def _final(stream):
    with stream as s:
        return s.get_final_message()


SYNC_WAYS = {
    "create": lambda c: c.messages.create(**ASK),
    "with_raw_response.create": lambda c: c.messages.with_raw_response.create(**ASK).parse(),
    "with_options(...).create": lambda c: c.with_options(timeout=20).messages.create(**ASK),
    "beta.messages.create": lambda c: c.beta.messages.create(**ASK),
    "copy of a copy": lambda c: c.with_options(timeout=20).copy(max_retries=0).messages.create(**ASK),
}
SYNC_STREAMS = {
    "create(stream=True)": lambda c: list(c.messages.create(**ASK, stream=True)),
    "with_raw_response.create(stream=True)": lambda c: list(c.messages.with_raw_response.create(
        **ASK, stream=True).parse()),
    "messages.stream": lambda c: _final(c.messages.stream(**ASK)),
    "beta.messages.stream": lambda c: _final(c.beta.messages.stream(**ASK)),
    "with_options(...).messages.stream": lambda c: _final(c.with_options(timeout=20).messages.stream(**ASK)),
}


async def _afinal(manager):
    async with manager as s:
        return await s.get_final_message()


async def _alist(stream):
    return [e async for e in stream]


async def _araw_stream(c):
    raw = await c.messages.with_raw_response.create(**ASK, stream=True)
    return await _alist(await raw.parse())


async def _araw(c):
    return await (await c.messages.with_raw_response.create(**ASK)).parse()


ASYNC_WAYS = {
    "create": lambda c: c.messages.create(**ASK),
    "with_raw_response.create": _araw,
    "with_options(...).create": lambda c: c.with_options(timeout=20).messages.create(**ASK),
    "beta.messages.create": lambda c: c.beta.messages.create(**ASK),
}
ASYNC_STREAMS = {
    "create(stream=True)": lambda c: _alist_of(c.messages.create(**ASK, stream=True)),
    "with_raw_response.create(stream=True)": _araw_stream,
    "messages.stream": lambda c: _afinal(c.messages.stream(**ASK)),
    "beta.messages.stream": lambda c: _afinal(c.beta.messages.stream(**ASK)),
    "with_options(...).messages.stream": lambda c: _afinal(c.with_options(timeout=20).messages.stream(**ASK)),
}


async def _alist_of(pending):
    return await _alist(await pending)


def _run_way(server, rec, way, is_async: bool, streamed: bool):
    if streamed:
        server.reply_stream(load_chunks(FOLDER, "anthropic-text.chunks.txt"), named=True)
    else:
        server.reply_json(load_json(FOLDER, "anthropic-text.json"))
    client = client_for(server, anthropic.AsyncAnthropic if is_async else anthropic.Anthropic)
    instrument_anthropic(client, rec)
    with rec.session(agent="ways") as s:
        asyncio.run(way(client)) if is_async else way(client)
    return only_call(rec, s.id)


@pytest.mark.parametrize("is_async,name,streamed", [
    *((False, n, False) for n in SYNC_WAYS), *((False, n, True) for n in SYNC_STREAMS),
    *((True, n, False) for n in ASYNC_WAYS), *((True, n, True) for n in ASYNC_STREAMS)])
def test_every_way_of_calling_is_recorded(server, rec, is_async, name, streamed):
    ways = (ASYNC_STREAMS if streamed else ASYNC_WAYS) if is_async else (SYNC_STREAMS if streamed else SYNC_WAYS)
    call = _run_way(server, rec, ways[name], is_async, streamed)
    assert call["status"] == "ok" and call["provider"] == "anthropic"
    assert call["request"] == server.requests[-1]["body"]  # replays exactly what was sent
    assert (call["input_tokens"], call["output_tokens"], call["stop_reason"]) == (12, 30 if streamed else 29,
                                                                                  "end_turn")
    assert call["model"] == "claude-sonnet-4-5-20250929"
    assert call["request_id"] == "req_000000"
    text = call["response"]["content"][0]["text"]
    assert call["response"]["role"] == "assistant" and text.startswith("Hello")


def test_calls_do_not_reach_the_recorder_for_other_endpoints(server, rec):
    server.reply_json({"input_tokens": 12})
    client = client_for(server)
    instrument_anthropic(client, rec)
    with rec.session() as s:
        assert client.messages.count_tokens(**{k: v for k, v in ASK.items() if k != "max_tokens"}).input_tokens == 12
    rec.flush()
    assert reasonlog.open_store(rec.db_path).get_session(s.id)["calls"] == []


def test_copies_stop_recording_on_undo(server, rec):
    client = client_for(server)
    handle = instrument_anthropic(client, rec)
    copy = client.with_options(timeout=20)
    handle.undo()
    server.reply_json(load_json(FOLDER, "anthropic-text.json"))
    with rec.session() as s:
        copy.messages.create(**ASK)
    rec.flush()
    assert reasonlog.open_store(rec.db_path).get_session(s.id)["calls"] == []


def test_automatic_session_shows_the_model_of_its_first_call(server, rec):
    client = client_for(server)
    handle = instrument_anthropic(client, rec)
    server.reply_json(load_json(FOLDER, "anthropic-text.json"))
    client.messages.create(**ASK)
    handle.undo()
    rec.flush()
    sessions = reasonlog.open_store(rec.db_path).list_sessions(reasonlog.SessionFilter(agent="anthropic-client"))
    assert [s["model"] for s in sessions] == ["claude-sonnet-4-5-20250929"]  # as the call records it


def test_with_streaming_response_is_recorded_when_parsed(server, rec):
    server.reply_json(load_json(FOLDER, "anthropic-text.json"))
    client = client_for(server)
    instrument_anthropic(client, rec)
    with rec.session() as s:
        with client.messages.with_streaming_response.create(**ASK) as response:
            message = response.parse()
    call = only_call(rec, s.id)
    assert (call["status"], call["output_tokens"], call["provider_message_id"]) == ("ok", 29, message.id)
    assert call["request"] == server.requests[-1]["body"]
