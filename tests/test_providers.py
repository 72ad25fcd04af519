"""The provider protocols in one place (issue 21 item 4): each unwraps its own recorded bodies and no other's, says
where a request keeps its context, and the dashboard asks it for endpoints and context windows."""
from __future__ import annotations

import json

import pytest
from conftest import FIXTURES

from reasonlog import providers
from reasonlog.providers import anthropic, gemini, openai_chat, openai_responses
from reasonlog.server.dashboard.pages import _curl, window_of

BODIES = {
    anthropic: ["anthropic-messages/anthropic-text.json", "anthropic-messages/anthropic-tool-no-args.json"],
    openai_chat: ["openai-chat/openai-text.json", "openai-chat/deepseek-tool-call.json"],
    openai_responses: ["openai-responses/openai-web-search-tool.1.json"],
}


@pytest.mark.parametrize("protocol", BODIES, ids=lambda p: p.__name__.rsplit(".", 1)[-1])
def test_each_protocol_unwraps_its_own_bodies_and_no_other(protocol):
    for name in BODIES[protocol]:
        body = json.loads((FIXTURES / name).read_text())
        assert [p for p in providers.PROTOCOLS if p.unwrap(body) is not None] == [protocol]
        found = providers.unwrap(body)
        assert found is not None and found.id == body.get("id")
        assert found.usage is not None and found.usage.output_tokens > 0


def test_gemini_usage_splits_the_cache_off_the_prompt_and_counts_thoughts_as_output():
    body = {"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 1000, "cachedContentTokenCount": 600, "candidatesTokenCount": 40,
                              "thoughtsTokenCount": 25, "totalTokenCount": 1065}, "responseId": "r1"}
    found = providers.unwrap(body)
    assert found.message == {"role": "model", "parts": [{"text": "hi"}]}
    u = found.usage
    assert (u.input_tokens, u.cache_read_tokens, u.output_tokens, u.reasoning_tokens) == (400, 600, 65, 25)
    assert (found.stop_reason, found.id) == ("STOP", "r1")


def test_where_each_protocol_keeps_its_context():
    assert providers.MESSAGE_KEYS == ("messages", "input", "contents")
    assert providers.SYSTEM_KEYS == ("system", "instructions", "system_instruction")
    assert providers.messages_of({"contents": [{"role": "user"}], "system_instruction": "s"}) == [{"role": "user"}]
    assert providers.system_of({"instructions": "be brief", "input": []}) == "be brief"


def test_the_dashboard_sends_each_call_to_its_own_endpoint_and_measures_its_window():
    gemini_call = {"provider": "google", "model": "gemini-2.5-pro", "request": {"contents": []}}
    assert _curl(gemini_call, "{}").startswith(
        "curl https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:generateContent")
    assert _curl({"provider": "openai", "request": {"input": []}}, "{}").startswith(
        "curl https://api.openai.com/v1/responses")
    assert _curl({"provider": "anthropic", "request": {"messages": []}}, "{}").startswith(
        "curl https://api.anthropic.com/v1/messages")
    assert (window_of("claude-sonnet-4-5"), window_of("gpt-4o"), window_of("gemini-2.5-pro")) == \
        (200_000, 128_000, 1_048_576)
    assert window_of("a-model-nobody-lists") is None
    assert gemini.PATH.startswith("/v1beta/")
