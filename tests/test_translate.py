"""Requests translated between provider protocols (issue 23): anthropic -> openai -> anthropic keeps every message's
text, tool names, ids and arguments for any conversation of text, tool_use and tool_result; what a protocol has
no place for is named, never dropped silently; Gemini gets the same conversation in its own shape."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlog.parts import parts_of
from reasonlog.providers import ANTHROPIC, GEMINI, OPENAI_CHAT
from reasonlog.providers.translate import translate_request

NAMES = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", min_size=1, max_size=12)
TEXT = st.text(min_size=1, max_size=40)
JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=10)
                    | st.floats(allow_nan=False, allow_infinity=False),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=8)
ARGUMENTS = st.dictionaries(st.text(max_size=8), JSON, max_size=4)


@st.composite
def conversations(draw) -> dict:
    """An Anthropic request: user and assistant turns in alternation; each tool_use answered in the next turn."""
    messages, pending, count = [], [], draw(st.integers(1, 6))
    for n in range(count):
        if n % 2 == 0:
            results = [{"type": "tool_result", "tool_use_id": i, "content": draw(st.text(max_size=30))}
                       for i in pending]
            said = draw(st.lists(TEXT, min_size=0 if results else 1, max_size=2))
            texts = [{"type": "text", "text": t} for t in said]
            blocks = results + texts
            messages.append({"role": "user", "content": blocks[0]["text"] if blocks == texts[:1] and draw(
                st.booleans()) else blocks})
            pending = []
        else:
            texts = [{"type": "text", "text": t} for t in draw(st.lists(TEXT, max_size=2))]
            uses = [{"type": "tool_use", "id": f"toolu_{n}_{k}_{draw(NAMES)}", "name": draw(NAMES),
                     "input": draw(ARGUMENTS)} for k in range(draw(st.integers(0 if texts else 1, 3)))]
            messages.append({"role": "assistant", "content": texts + uses})
            pending = [u["id"] for u in uses]
    return {"model": "claude-sonnet-4-5", "max_tokens": 512, "system": draw(TEXT), "messages": messages,
            "tools": [{"name": "search", "description": "find", "input_schema": {"type": "object"}}]}


def _facts(request: dict) -> list:
    """What a reader must find again in each message: role, texts, tool calls, tool results."""
    return [(m["role"], [(p.kind, p.text, p.tool_use_id, p.name, p.input) for p in parts_of(m)])
            for m in request["messages"]]


@settings(max_examples=300, deadline=None)
@given(conversations())
def test_anthropic_to_openai_and_back_keeps_every_message(request):
    there = translate_request(request, ANTHROPIC, OPENAI_CHAT, "gpt-5")
    back = translate_request(there.request, OPENAI_CHAT, ANTHROPIC, "claude-sonnet-4-5")
    assert there.notices == [] and back.notices == []
    assert _facts(back.request) == _facts(request)
    assert back.request["system"] == request["system"] and back.request["tools"] == request["tools"]
    assert back.request["max_tokens"] == 512


def test_what_openai_cannot_take_is_named_once():
    request = {"model": "claude-opus-4-6", "max_tokens": 100, "top_k": 5, "thinking": {"type": "enabled"},
               "system": [{"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}],
               "tools": [{"type": "web_search_20250305", "name": "web_search"},
                         {"name": "grep", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}],
               "messages": [{"role": "user", "content": "hi"},
                            {"role": "assistant", "content": [
                                {"type": "thinking", "thinking": "plan", "signature": "EqQB"},
                                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
                                {"type": "text", "text": "done"}]},
                            {"role": "user", "content": [{"type": "text", "text": "more"}]}]}
    translated = translate_request(request, ANTHROPIC, OPENAI_CHAT)
    assert translated.notices == [
        "cache_control (Anthropic prompt caching mark)",
        "Anthropic server tool web_search (web_search_20250305)",
        "Anthropic parameter top_k", "Anthropic parameter thinking",
        "thinking block and its signature (the OpenAI protocol takes no earlier reasoning)",
        "server_tool_use block (a provider-only block; not sent to OpenAI)"]
    assert translated.request["messages"] == [
        {"role": "system", "content": "rules"}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "done"}, {"role": "user", "content": "more"}]
    assert translated.request["tools"] == [{"type": "function", "function": {
        "name": "grep", "parameters": {"type": "object"}}}]


def test_openai_to_anthropic_names_what_it_cannot_carry():
    request = {"model": "gpt-5", "seed": 7, "messages": [
        {"role": "developer", "content": "be terse"}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "reasoning_content": "think",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"}]}
    translated = translate_request(request, OPENAI_CHAT, ANTHROPIC)
    assert translated.notices == [
        "OpenAI parameter seed",
        "thinking block (the Anthropic protocol takes no earlier reasoning)",
        "max_tokens: the recorded request set none; 4096 sent (Anthropic requires it)"]
    assert translated.request == {
        "model": "gpt-5", "system": "be terse", "max_tokens": 4096, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok"}]}]}


def test_an_anthropic_request_in_gemini_shape():
    request = {"model": "claude-sonnet-4-5", "max_tokens": 64, "system": "be terse", "tool_choice": {"type": "any"},
               "tools": [{"name": "f", "description": "does f", "input_schema": {"type": "object"}}],
               "messages": [{"role": "user", "content": "hi"},
                            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f",
                                                               "input": {"a": 1}}]},
                            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                          "content": "{\"ok\": true}"}]}]}
    translated = translate_request(request, ANTHROPIC, GEMINI)
    assert translated.notices == [] and translated.request == {
        "system_instruction": {"parts": [{"text": "be terse"}]},
        "contents": [{"role": "user", "parts": [{"text": "hi"}]},
                     {"role": "model", "parts": [{"functionCall": {"id": "t1", "name": "f", "args": {"a": 1}}}]},
                     {"role": "user", "parts": [{"functionResponse": {"id": "t1", "name": "f",
                                                                      "response": {"ok": True}}}]}],
        "tools": [{"functionDeclarations": [{"name": "f", "description": "does f",
                                             "parametersJsonSchema": {"type": "object"}}]}],
        "generationConfig": {"maxOutputTokens": 64}, "toolConfig": {"functionCallingConfig": {"mode": "ANY"}}}
    back = translate_request(translated.request, GEMINI, ANTHROPIC, "claude-sonnet-4-5")
    assert back.request["messages"][:2] == request["messages"][:2]
