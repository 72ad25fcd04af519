"""`response=` given an OpenAI Responses body (or its `output` list), recorded from the live API: the conversation
gets the output items as one assistant message, the call its usage as disjoint counters, stop reason and id."""
from __future__ import annotations

import json

import pytest
from conftest import FIXTURES

RESPONSES = FIXTURES / "openai-responses"


def _body(name: str) -> dict:
    return json.loads((RESPONSES / name).read_text())


def _record(recorder, store_of, response):
    with recorder.session(agent="a", model="gpt-5") as s:
        call = s.call(messages=[{"role": "user", "content": "search?"}], response=response)
    store = store_of()
    return store.get_call(call), store.get_session(s.id)


def test_a_responses_body_gives_the_output_items_and_disjoint_usage(recorder, store_of):
    body = _body("openai-web-search-tool.1.json")
    call, session = _record(recorder, store_of, body)
    assert session["messages"][-1]["content"] == {"role": "assistant", "content": body["output"]}
    # input_tokens 19681 includes 3712 cached; output_tokens 3773 includes 3136 reasoning
    assert (call["input_tokens"], call["cache_read_tokens"], call["output_tokens"], call["reasoning_tokens"]) == (
        15969, 3712, 3773, 3136)
    assert (call["stop_reason"], call["provider_message_id"]) == (
        "completed", "resp_0953eda47ee17412006933306199c88195b44f9cf2986e1d5b")
    assert call["raw"] == body
    assert call["cost_usd"] is not None


def test_a_function_call_output_stops_for_tool_calls(recorder, store_of):
    body = _body("openai-client-tool-search.2.json")
    call, session = _record(recorder, store_of, body)
    assert call["stop_reason"] == "tool_calls"
    assert [i["type"] for i in session["messages"][-1]["content"]["content"]] == [i["type"] for i in body["output"]]


@pytest.mark.parametrize("name", ["openai-reasoning-encrypted-content.1.json", "openai-code-interpreter-tool.1.json",
                                  "parallel-tool-call-wrapper.1.json"])
def test_the_output_list_alone_is_the_assistant_message(recorder, store_of, name):
    output = _body(name)["output"]
    call, session = _record(recorder, store_of, output)
    assert session["messages"][-1]["content"] == {"role": "assistant", "content": output}
    assert call["input_tokens"] is None  # no usage was given with a bare list


def test_a_responses_body_without_usage_figures_is_still_its_message(recorder, store_of):
    body = {**_body("openai-reasoning-encrypted-content.1.json"), "usage": None}  # as an unfinished body says
    call, session = _record(recorder, store_of, body)
    assert session["messages"][-1]["content"] == {"role": "assistant", "content": body["output"]}
    assert (call["provider_message_id"], call["input_tokens"]) == (body["id"], None)
