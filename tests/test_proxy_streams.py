"""For any chunking of a streamed answer, the client gets the upstream's bytes unchanged and the recording
rebuilds the response the same call returns unstreamed (issue 22). The streams are made from recorded
unstreamed payloads, event by event as the providers stream them."""
from __future__ import annotations

import json
import time

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proxy_upstream import GEMINI_BODY, GEMINI_CHUNKS, Upstream, anthropic_events, halves
from proxying import recording_proxy
from sdk_server import load_json, sse

import reasonlog
from reasonlog import providers

ANTHROPIC = [load_json("anthropic-messages", name) for name in
             ("anthropic-text.json", "anthropic-tool-no-args.json", "anthropic-clear-thinking.1.json",
              "anthropic-json-tool.1.json")]
CHAT = [load_json("openai-chat", name) for name in ("openai-text.json", "deepseek-tool-call.json")]


def chat_chunks(body: dict) -> list[dict]:
    """The chat.completion.chunk payloads that stream `body`, usage in a last chunk without choices."""
    head = {k: body[k] for k in ("id", "created", "model") if k in body} | {"object": "chat.completion.chunk"}
    message = body["choices"][0]["message"]
    first = {"role": "assistant", "content": "" if isinstance(message.get("content"), str) else None}
    deltas = [first] + [{"content": t} for t in halves(message.get("content") or "")]
    if message.get("reasoning_content"):
        deltas += [{"reasoning_content": t} for t in halves(message["reasoning_content"])]
    for n, call in enumerate(message.get("tool_calls") or ()):
        deltas.append({"tool_calls": [{"index": n, "id": call["id"], "type": "function",
                                       "function": {"name": call["function"]["name"], "arguments": ""}}]})
        deltas += [{"tool_calls": [{"index": n, "function": {"arguments": t}}]}
                   for t in halves(call["function"]["arguments"])]
    chunks = [{**head, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    finish = body["choices"][0]["finish_reason"]
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return [*chunks, {**head, "choices": [], "usage": body["usage"]}]


CASES = ([("/v1/messages", b, sse(anthropic_events(b), named=True)) for b in ANTHROPIC]
         + [("/v1/chat/completions", b, sse(chat_chunks(b), named=False, done=True)) for b in CHAT]
         + [("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", GEMINI_BODY,
             sse(GEMINI_CHUNKS, named=False))])


def meaning(body: dict) -> tuple:
    """What a reader takes from a response: its message (fields without a value left out), usage, stop reason, id."""
    message, usage, stop, ident = providers.unwrap(body)
    message = {k: v for k, v in message.items() if v not in (None, [], {})}
    if "tool_calls" in message:  # DeepSeek's unstreamed tool calls carry their `index`, as its stream's deltas do
        message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in message["tool_calls"]]
    return message, usage, stop, ident


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    db = tmp_path_factory.mktemp("streams") / "r.db"
    with Upstream() as up, recording_proxy(db, up.url) as proxied:
        yield up, proxied, db


def recorded_response(proxied, count: int) -> dict:
    deadline = time.monotonic() + 10
    while proxied.recording.count < count and time.monotonic() < deadline:
        time.sleep(0.01)
    proxied.recording.sessions.recorder.flush()
    return reasonlog.open_store(proxied.recording.sessions.recorder.db_path, read_only=True).get_call(
        proxied.recording.last_call)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(CASES), cuts=st.lists(st.floats(0, 1, exclude_min=True, exclude_max=True), max_size=12))
def test_any_chunking_passes_bytes_through_and_rebuilds_the_unstreamed_response(proxied, case, cuts):
    up, proxy, _ = proxied
    path, body, streamed = case
    points = sorted({int(c * len(streamed)) for c in cuts} - {0})
    up.stream([streamed[a:b] for a, b in zip([0, *points], [*points, len(streamed)], strict=True)])
    with httpx.stream("POST", proxy.url + path, content=json.dumps({"stream": True, "messages": []})) as response:
        received = b"".join(response.iter_raw())
    assert received == streamed
    call = recorded_response(proxy, len(up.received))
    assert call["raw"].encode() == streamed
    message, usage, stop, ident = meaning(body)
    assert meaning({"choices": [{"message": call["response"]}]})[0] == message if "choices" in body else \
        call["response"] == message
    assert (call["stop_reason"], call["provider_message_id"]) == (stop, ident)
    assert [call[k] for k in TOKENS] == [getattr(usage, k) for k in TOKENS]


TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
