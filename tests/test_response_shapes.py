"""`response=` given a whole provider response: the conversation gets the message, the call its accounting."""
from __future__ import annotations

import reasonlog

ANTHROPIC = {"id": "msg_01ABC", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
             "content": [{"type": "text", "text": "Buy 10 NVDA."}], "stop_reason": "end_turn", "stop_sequence": None,
             "usage": {"input_tokens": 120, "output_tokens": 9, "cache_read_input_tokens": 1000,
                       "cache_creation_input_tokens": 0}}
OPENAI = {"id": "chatcmpl-9", "object": "chat.completion", "created": 1760000000, "model": "gpt-5",
          "choices": [{"index": 0, "finish_reason": "stop",
                       "message": {"role": "assistant", "content": "Buy 10 NVDA.", "refusal": None}}],
          "usage": {"prompt_tokens": 1120, "completion_tokens": 9,
                    "prompt_tokens_details": {"cached_tokens": 1000}}}


def _record(recorder, store_of, response, **extra):
    with recorder.session(agent="a", model="m") as s:
        call = s.call(messages=[{"role": "user", "content": "trade?"}], response=response, **extra)
    store = store_of()
    return store.get_call(call), store.get_session(s.id)


def test_an_anthropic_message_response_gives_the_message_and_its_accounting(recorder, store_of):
    call, session = _record(recorder, store_of, ANTHROPIC)
    assert session["messages"][-1]["content"] == {"role": "assistant", "content": ANTHROPIC["content"]}
    assert (call["stop_reason"], call["provider_message_id"]) == ("end_turn", "msg_01ABC")
    assert (call["input_tokens"], call["output_tokens"], call["cache_read_tokens"]) == (120, 9, 1000)
    assert call["raw"] == ANTHROPIC  # nothing of it is lost


def test_an_openai_chat_completion_gives_the_message_and_its_accounting(recorder, store_of):
    call, session = _record(recorder, store_of, OPENAI)
    assert session["messages"][-1]["content"] == OPENAI["choices"][0]["message"]
    assert (call["stop_reason"], call["provider_message_id"]) == ("stop", "chatcmpl-9")
    assert (call["input_tokens"], call["output_tokens"], call["cache_read_tokens"]) == (120, 9, 1000)
    assert call["raw"] == OPENAI


def test_what_the_caller_gave_wins_over_what_the_response_says(recorder, store_of):
    call, _ = _record(recorder, store_of, ANTHROPIC, usage=reasonlog.Usage(input_tokens=1, output_tokens=2),
                      stop_reason="max_tokens", raw={"mine": True})
    assert (call["input_tokens"], call["output_tokens"], call["stop_reason"], call["raw"]) == (1, 2, "max_tokens",
                                                                                             {"mine": True})


def test_a_message_dict_is_still_kept_as_it_is(recorder, store_of):
    message = {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "id": "kept"}
    call, session = _record(recorder, store_of, message)
    assert session["messages"][-1]["content"] == message and call["stop_reason"] is None
