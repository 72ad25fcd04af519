"""The provider protocols in one place (issue 21 item 4): each unwraps its own recorded bodies and no other's, says
where a request keeps its context, and the dashboard asks it for endpoints and context windows. Each is one typed
value (`providers.Provider`, issue 33) that the proxy's routing reads."""
from __future__ import annotations

import json

import pytest
from conftest import FIXTURES
from hypothesis import given
from hypothesis import strategies as st

from reasonlog import providers
from reasonlog.capture.proxy_routes import error_body, provider_of, recordable_headers, route_of
from reasonlog.providers import ANTHROPIC, GEMINI, OPENAI_CHAT, OPENAI_RESPONSES, gemini
from reasonlog.server.dashboard.pages import _curl, window_of

BODIES = {
    ANTHROPIC: ["anthropic-messages/anthropic-text.json", "anthropic-messages/anthropic-tool-no-args.json"],
    OPENAI_CHAT: ["openai-chat/openai-text.json", "openai-chat/deepseek-tool-call.json"],
    OPENAI_RESPONSES: ["openai-responses/openai-web-search-tool.1.json"],
}


@pytest.mark.parametrize("protocol", BODIES, ids=lambda p: p.api)
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


def test_each_provider_is_one_typed_value_its_module_holds():
    assert [(p.api, p.name, p.base_url + p.path) for p in providers.PROTOCOLS] == [
        ("anthropic", "anthropic", "https://api.anthropic.com/v1/messages"),
        ("openai_chat", "openai", "https://api.openai.com/v1/chat/completions"),
        ("openai_responses", "openai", "https://api.openai.com/v1/responses"),
        ("gemini", "google", "https://generativelanguage.googleapis.com/v1beta/models/{model}:generateContent")]
    assert all(isinstance(p, providers.Provider) for p in providers.PROTOCOLS)
    assert providers.protocol_of("google") is GEMINI
    assert providers.protocol_of(None, {"input": "hi"}) is OPENAI_RESPONSES


def test_the_proxy_routes_each_protocols_path_to_it_and_forwards_the_rest():
    assert [(r.protocol.api, r.path_streams, r.model) for r in (
        route_of("POST", "/v1/messages?beta=true"), route_of("POST", "/v1/chat/completions"),
        route_of("POST", "/openai/v1/responses/"),
        route_of("POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"))] == [
        ("anthropic", False, None), ("openai_chat", False, None), ("openai_responses", False, None),
        ("gemini", True, "gemini-2.5-flash")]
    assert (route_of("GET", "/v1/messages"), route_of("POST", "/v1/models")) == (None, None)
    assert [provider_of(None, path, headers) for path, headers in (
        ("/v1/models", {"anthropic-version": "2023-06-01"}), ("/v1/models", {"x-goog-api-key": "k"}),
        ("/v1beta/models", {}), ("/v1/models", {"authorization": "Bearer k"}))] == [
        "anthropic", "google", "google", "openai"]


def test_errors_are_in_each_providers_own_shape_and_no_key_header_is_written_down():
    assert error_body("anthropic", 409, "replay_mismatch", "m") == {
        "type": "error", "error": {"type": "replay_mismatch", "message": "m"}}
    assert error_body("google", 502, "upstream_unreachable", "m") == {
        "error": {"code": 502, "message": "m", "status": "UPSTREAM_UNREACHABLE"}}
    assert error_body("openai", 409, "k", "m") == {"error": {"message": "m", "type": "k", "param": None, "code": "k"}}
    sent = {h: "secret" for p in providers.PROTOCOLS for h in p.key_headers} | {"anthropic-version": "2023-06-01"}
    assert recordable_headers(sent) == {"anthropic-version": "2023-06-01"}


@given(st.sampled_from(providers.PROTOCOLS), st.from_regex(r"/[a-z0-9/]{0,20}", fullmatch=True))
def test_any_path_ending_as_a_protocol_says_is_that_protocols_call(protocol, prefix):
    for suffix in protocol.path_suffixes:
        route = route_of("POST", prefix.rstrip("/") + suffix)
        assert route is not None and route.protocol is protocol and route.provider == protocol.name
