"""`reasonlog proxy` with the real SDKs pointed at it and a provider on 127.0.0.1 answering recorded payloads
(issue 22): requests reach the upstream unchanged and are stored exactly, answers reach the client byte for byte
(errors and rate limits too), usage is exact, and no credential reaches the database."""
from __future__ import annotations

import time

import anthropic
import httpx
import openai
import orjson
import pytest
from proxy_upstream import ANSWERS, GEMINI_BODY, Reply, Upstream, recorded_stream
from proxying import ANTHROPIC_KEY, GOOGLE_KEY, OPENAI_KEY, database_bytes, recording_proxy

import reasonlog
from reasonlog.store import SessionFilter
from reasonlog.wire.codec import canonical

HELLO = [{"role": "user", "content": "Hello, how are you?"}]


def calls_of(db) -> list[dict]:
    """Every recorded call, in the order recorded, with its request rebuilt and raw payload."""
    store = reasonlog.open_store(db, read_only=True)
    sessions = sorted(store.list_sessions(SessionFilter(limit=None)), key=lambda s: s["started_at"])
    ids = [c["id"] for s in sessions for c in store.get_session(s["id"])["calls"]]
    return sorted((store.get_call(i) for i in ids), key=lambda c: c["started_at"])


def anthropic_client(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key=ANTHROPIC_KEY, max_retries=0)


def test_anthropic_sdk_unstreamed_and_streamed(tmp_path):
    db = tmp_path / "r.db"
    with Upstream() as up, recording_proxy(db, up.url) as proxied:
        client = anthropic_client(proxied.url)
        plain = client.messages.with_raw_response.create(model="claude-opus-4-5", max_tokens=64, messages=HELLO)
        with client.messages.with_streaming_response.create(model="claude-opus-4-5", max_tokens=64,
                                                            messages=HELLO, stream=True) as streamed:
            streamed_bytes = b"".join(streamed.iter_bytes())
        assert plain.parse().content[0].text.startswith("Hello! I'm doing well")
    assert plain.http_response.content == ANSWERS["anthropic"][0]  # byte for byte
    assert streamed_bytes == ANSWERS["anthropic"][1]
    first, second = calls_of(db)
    for call, received in zip((first, second), up.received, strict=True):
        assert canonical(call["request"]) == canonical(orjson.loads(received.body))  # what was sent, exactly
        assert ANTHROPIC_KEY in " ".join(received.headers.values())  # the upstream got the key; the database must not
        assert received.headers["accept-encoding"] == "identity"
    assert first["raw"].encode() == ANSWERS["anthropic"][0]
    assert second["raw"].encode() == ANSWERS["anthropic"][1]
    assert (first["input_tokens"], first["output_tokens"], first["stop_reason"]) == (12, 29, "end_turn")
    assert (second["input_tokens"], second["output_tokens"], second["stop_reason"]) == (12, 30, "end_turn")
    assert second["response"] == {"role": "assistant", "content": [  # rebuilt from the stream's deltas
        {"type": "text", "text": "Hello! I'm doing well, thank you for asking. How are you doing today? Is there"
                                 " anything I can help you with?"}]}
    assert second["ttft_ms"] is not None and first["ttft_ms"] is None
    assert first["status"] == second["status"] == "ok"
    assert ANTHROPIC_KEY.encode() not in database_bytes(db)


def test_cache_tokens_of_a_stream_are_exact(tmp_path):
    db = tmp_path / "r.db"
    with Upstream() as up, recording_proxy(db, up.url) as proxied:
        body = recorded_stream("anthropic-messages", "anthropic-code-execution-20260120-prompt-cache.1.chunks.txt",
                               named=True)
        up.stream([body])
        with anthropic_client(proxied.url).messages.stream(model="claude-opus-4-5", max_tokens=64,
                                                          messages=HELLO) as stream:
            final = stream.get_final_message()
    (call,) = calls_of(db)
    # message_delta's counts are running totals that overwrite message_start's (the SDK's rule too)
    assert (call["input_tokens"], call["cache_read_tokens"], call["cache_write_tokens"], call["output_tokens"]) == \
        (6, 6289, 3337, 198)
    assert (final.usage.input_tokens, final.usage.cache_read_input_tokens, final.usage.cache_creation_input_tokens,
            final.usage.output_tokens) == (6, 6289, 3337, 198)


def test_openai_chat_and_responses_streamed_and_not(tmp_path):
    db = tmp_path / "r.db"
    with Upstream() as up, recording_proxy(db, up.url) as proxied:
        client = openai.OpenAI(base_url=proxied.url + "/v1", api_key=OPENAI_KEY, max_retries=0)
        chat = client.chat.completions.with_raw_response.create(model="gpt-4.1-nano", messages=HELLO)
        with client.chat.completions.with_streaming_response.create(
                model="gpt-4.1-nano", messages=HELLO, stream=True, stream_options={"include_usage": True}) as s:
            chat_stream = b"".join(s.iter_bytes())
        responses = client.responses.with_raw_response.create(model="gpt-5.1", input="Hi")
        with client.responses.with_streaming_response.create(model="gpt-5.1", input="Hi", stream=True) as s:
            responses_stream = b"".join(s.iter_bytes())
    assert (chat.http_response.content, chat_stream) == ANSWERS["chat"]
    assert (responses.http_response.content, responses_stream) == ANSWERS["responses"]
    chat_call, chat_streamed, resp_call, resp_streamed = calls_of(db)
    assert [c["provider"] for c in (chat_call, resp_call)] == ["openai", "openai"]
    assert (chat_call["input_tokens"], chat_call["output_tokens"]) == (16, 363)
    assert (chat_streamed["input_tokens"], chat_streamed["output_tokens"]) == (16, 300)
    assert (resp_call["input_tokens"], resp_call["output_tokens"], resp_call["reasoning_tokens"]) == (865, 163, 128)
    assert (resp_streamed["input_tokens"], resp_streamed["output_tokens"]) == (299, 12)
    assert resp_streamed["raw"].encode() == ANSWERS["responses"][1]
    for call, received in zip(calls_of(db), up.received, strict=True):
        assert canonical(call["request"]) == canonical(orjson.loads(received.body))
    assert OPENAI_KEY.encode() not in database_bytes(db)


def test_gemini_sdk_unstreamed_and_streamed(tmp_path):
    genai = pytest.importorskip("google.genai")
    db = tmp_path / "r.db"
    with Upstream() as up, recording_proxy(db, up.url) as proxied:
        client = genai.Client(api_key=GOOGLE_KEY, http_options={"base_url": proxied.url})
        plain = client.models.generate_content(model="gemini-2.5-flash", contents="Capital of France?")
        parts = [c.text for c in client.models.generate_content_stream(model="gemini-2.5-flash",
                                                                       contents="Capital of France?")]
    assert plain.text == "".join(parts) == "Paris is the capital of France."
    first, second = calls_of(db)
    assert (first["model"], first["provider"]) == ("gemini-2.5-flash", "google")
    for call in (first, second):
        assert (call["input_tokens"], call["cache_read_tokens"], call["output_tokens"],
                call["reasoning_tokens"]) == (8, 4, 16, 8)
        assert call["response"] == GEMINI_BODY["candidates"][0]["content"]
    assert second["raw"].encode() == ANSWERS["gemini"][1]
    assert canonical(first["request"]) == canonical(orjson.loads(up.received[0].body))
    assert GOOGLE_KEY.encode() not in database_bytes(db)


def test_rate_limits_and_server_errors_pass_through_and_are_recorded_as_failed(tmp_path):
    db = tmp_path / "r.db"
    limited = b'{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded"}}'
    broken = b'{"type":"error","error":{"type":"api_error","message":"Internal server error"}}'
    with Upstream() as up, recording_proxy(db, up.url) as proxied:
        up.replies.extend([Reply(429, [limited], headers={"retry-after": "7"}), Reply(500, [broken])])
        client = anthropic_client(proxied.url)
        with pytest.raises(anthropic.RateLimitError) as rate:
            client.messages.create(model="claude-opus-4-5", max_tokens=8, messages=HELLO)
        with pytest.raises(anthropic.InternalServerError) as server:
            client.messages.create(model="claude-opus-4-5", max_tokens=8, messages=HELLO)
    assert (rate.value.response.content, rate.value.response.headers["retry-after"]) == (limited, "7")
    assert (server.value.response.status_code, server.value.response.content) == (500, broken)
    first, second = calls_of(db)
    assert (first["status"], first["error"]["status_code"], first["error"]["message"]) == \
        ("error", 429, "Number of requests has exceeded")
    assert (second["status"], second["error"]["status_code"]) == ("error", 500)


def test_other_paths_are_forwarded_but_not_recorded(tmp_path):
    db = tmp_path / "r.db"
    with Upstream() as up, recording_proxy(db, up.url) as proxied:
        models = openai.OpenAI(base_url=proxied.url + "/v1", api_key=OPENAI_KEY).models.list()
        got = httpx.get(proxied.url + "/v1/models?limit=3", headers={"authorization": "Bearer " + OPENAI_KEY})
    assert [m.id for m in models.data] == ["a-model"]
    assert got.status_code == 200 and up.received[-1].path == "/v1/models?limit=3"
    assert proxied.recording.count == 0
    assert OPENAI_KEY.encode() not in database_bytes(db)


def test_a_stream_reaches_the_client_as_it_arrives(tmp_path):
    db = tmp_path / "r.db"
    chunks = [b'data: {"type":"message_start"}\n\n', b"data: second\n\n", b"data: third\n\n"]
    with Upstream() as up, recording_proxy(db, up.url) as proxied:
        up.stream(chunks, pause=0.4)
        arrived = []
        start = time.perf_counter()
        with httpx.stream("POST", proxied.url + "/v1/messages", content=b'{"stream": true}') as response:
            for chunk in response.iter_raw():
                arrived.append((time.perf_counter() - start, chunk))
    assert b"".join(c for _, c in arrived) == b"".join(chunks)
    assert arrived[0][1] == chunks[0] and arrived[0][0] < 0.3  # not held back until the stream ended
    assert arrived[-1][0] > 0.75
    (call,) = calls_of(db)  # a `message_start` without its message is still a call recorded, bytes and all
    assert call["raw"] == b"".join(chunks).decode()


def test_an_answer_the_protocol_cannot_hold_is_recorded_whole_with_an_error_that_says_why(tmp_path):
    db = tmp_path / "r.db"
    chunks = [b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
              b'"role":"assistant","content":[],"usage":{"input_tokens":3}}}\n\n',
              b'event: message_delta\ndata: {"type":"message_delta","delta":{},"usage":{"output_tokens":"many"}}\n\n']
    with Upstream() as up, recording_proxy(db, up.url) as proxied:
        up.stream(chunks)
        with httpx.stream("POST", proxied.url + "/v1/messages", content=b'{"stream": true}') as response:
            got = b"".join(response.iter_raw())
    assert got == b"".join(chunks)
    (call,) = calls_of(db)
    assert call["raw"] == got.decode() and call["status"] == "error"
    assert call["error"]["type"] == "unreadable_answer"
    assert call["error"]["message"].startswith("the anthropic answer could not be read: TypeError")


def test_an_unreachable_upstream_is_a_502_in_the_provider_shape_and_a_failed_call(tmp_path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    db = tmp_path / "r.db"
    with recording_proxy(db, dead) as proxied:
        with pytest.raises(anthropic.InternalServerError) as failed:
            anthropic_client(proxied.url).messages.create(model="m", max_tokens=8, messages=HELLO)
    assert failed.value.status_code == 502 and "could not reach" in failed.value.message
    (call,) = calls_of(db)
    assert call["status"] == "error" and call["error"]["type"] == "upstream_unreachable"
