"""The reply a real agent CLI sends back in its own form is one message in the timeline (issue 31, item 1), named
case by case from the requests the CLIs sent in tests/test_cli_tool_loops.py (which needs the CLIs installed).
Each case records the reply as the provider gave it, then the next request with the reply as the client resent it
and a tool result: the session holds the prompt, the reply and the result, each once, and replay gives back the
bytes each call sent."""
from __future__ import annotations

import pytest

import reasonlog

PROMPT = {"role": "user", "content": "Read hello.txt"}

CASES = {
    # Qwen Code, OpenCode, Cline: the arguments re-serialised, content "" sent back as null, type kept
    "chat arguments re-serialised": (
        {"role": "assistant", "content": "", "reasoning_content": "The shell will tell.", "tool_calls": [
            {"id": "call_000", "type": "function",
             "function": {"name": "run_shell_command", "arguments": '{"command": "cat hello.txt"}'}}]},
        {"role": "assistant", "content": None, "reasoning_content": "The shell will tell.", "tool_calls": [
            {"id": "call_000", "type": "function",
             "function": {"name": "run_shell_command", "arguments": '{"command":"cat hello.txt"}'}}]},
        {"role": "tool", "tool_call_id": "call_000", "content": "hello\n"}),
    # a client of the AI SDK leaving the reasoning out
    "chat reasoning left out": (
        {"role": "assistant", "content": "", "reasoning_content": "The shell will tell.", "tool_calls": [
            {"id": "call_000", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_000", "type": "function", "function": {"name": "bash", "arguments": '{"command":"ls"}'}}]},
        {"role": "tool", "tool_call_id": "call_000", "content": "hello.txt\n"}),
    # Gemini CLI: the role `model`, an id and a signature it made, the thought part left out
    "gemini id, signature, no thought": (
        {"role": "model", "parts": [{"text": "The shell will tell.", "thought": True},
                                    {"functionCall": {"name": "run_shell_command",
                                                      "args": {"command": "cat hello.txt"}}}]},
        {"role": "model", "parts": [{"functionCall": {"id": "run_shell_command_1795826613881_0",
                                                      "name": "run_shell_command",
                                                      "args": {"command": "cat hello.txt"}},
                                     "thoughtSignature": "skip_thought_signature_validator"}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "run_shell_command_1795826613881_0",
                                                         "name": "run_shell_command",
                                                         "response": {"output": "hello"}}}]}),
}

CODEX_REPLY = [
    {"type": "reasoning", "id": "rs_0000", "summary": [{"type": "summary_text", "text": "The shell will tell."}],
     "encrypted_content": "enc-0"},
    {"type": "custom_tool_call", "id": "ctc_000", "status": "completed", "call_id": "call_000", "name": "exec",
     "input": 'const r = await tools.exec_command({cmd: "cat hello.txt"});\ntext(r.output);'}]
PASSTHROUGH = {"internal_chat_message_metadata_passthrough": {"turn_id": "01a21f9d-f96f-7040-883c-d51a3d7c4c2e"}}


@pytest.fixture
def recorded(db):
    rec = reasonlog.Recorder(db, writer="sync", strict=True)
    yield rec, reasonlog.open_store(db)
    rec.close()


def _loop(rec, store, reply, resent: list, result, **request) -> tuple[dict, list[str]]:
    with rec.session(agent="cli") as s:
        first = s.call(messages=[PROMPT], response=reply, **request)
        second = s.call(messages=[PROMPT, *resent, result], response={"role": "assistant", "content": "hello"},
                        **request)
    return store.get_session(s.id), [first, second]


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_reply_resent_in_the_clients_form_is_one_message(recorded, case):
    rec, store = recorded
    reply, resent, result = CASES[case]
    session, ids = _loop(rec, store, reply, [resent], result)
    assert [(m["role"], m["content"]) for m in session["messages"]] == [
        ("user", PROMPT), ("assistant", reply), (result["role"], result), ("assistant", {"role": "assistant",
                                                                                        "content": "hello"})]
    assert store.replay_call(ids[1])["messages"] == [PROMPT, resent, result]
    assert store.get_call(ids[1])["window"]["unsent"] == 0


def test_codex_items_resent_with_its_metadata_are_the_reply(recorded):
    rec, store = recorded
    resent = [{**i, "content": None, **PASSTHROUGH} if i["type"] == "reasoning" else {**i, **PASSTHROUGH}
              for i in CODEX_REPLY]
    output = {"type": "custom_tool_call_output", "id": "ctco_1", "call_id": "call_000",
              "output": [{"type": "input_text", "text": "hello\n"}]}
    session, ids = _loop(rec, store, {"role": "assistant", "content": CODEX_REPLY}, resent, output)
    assert [m["role"] for m in session["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert store.replay_call(ids[1])["messages"] == [PROMPT, *resent, output]
    assert store.get_call(ids[1])["window"]["unsent"] == 0
