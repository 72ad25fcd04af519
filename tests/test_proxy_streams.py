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


# ------------------------------------------------------------------------------ any events, even malformed

KINDS = ["message_start", "message_delta", "message_stop", "content_block_start", "content_block_delta",
         "content_block_stop", "response.created", "response.in_progress", "response.completed", "response.failed",
         "response.incomplete", "response.output_item.added", "response.output_item.done",
         "response.content_part.added", "response.output_text.delta", "response.reasoning_summary_part.added",
         "response.reasoning_summary_text.delta", "response.function_call_arguments.delta", "text_delta",
         "thinking_delta", "input_json_delta", "signature_delta", "citations_delta", "function_call"]
KEYS = ["type", "message", "delta", "usage", "index", "content_block", "content", "text", "partial_json", "item",
        "output_index", "content_index", "summary_index", "response", "part", "choices", "tool_calls", "id",
        "function", "arguments", "candidates", "parts", "usageMetadata", "finishReason", "role", "model", "citation",
        "signature", "thinking", "reasoning_content", "refusal", "finish_reason", "name", "thought"]
LEAF = st.one_of(st.none(), st.booleans(), st.integers(-2, 3), st.sampled_from(KINDS), st.text(max_size=4))
VALUE = st.recursive(LEAF, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                  st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)),
                     max_leaves=12)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.sampled_from(["anthropic", "openai_chat", "openai_responses", "gemini"]), st.lists(VALUE, max_size=8))
def test_a_provider_folds_any_events_without_raising(name, events):
    """Whatever an upstream streams (a known event's shape with any value in any field, or no shape at all), the
    provider's folding takes it and gives a body (none before anything it can start one from): a proxied call is
    then recorded, not lost to an exception."""
    provider = next(p for p in providers.PROTOCOLS if p.api == name)
    stream = provider.Stream()
    for event in events:
        stream.add(event)
    body = stream.body()
    assert body is None or isinstance(body, dict)
