"""The Claude Agent SDK logger, driven by the real SDK against a fake `claude` executable.

`tests/fixtures/claude_agent/*.jsonl` were written by the real Claude Code CLI 2.1.330 (the
binary bundled with claude-agent-sdk 0.2.187) in stream-json mode, two exchanges in one process,
against a local HTTP server on 127.0.0.1 that answered with scripted Anthropic Messages streams.
The subagent stream is the shared, trimmed vercel/ai fixture.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import reasonlog
from reasonlog import query
from reasonlog.claude_agent import ClaudeAgentLogger

HERE = Path(__file__).resolve().parent
FAKE_CLI = HERE / "fake_claude" / "claude"
TWO_EXCHANGES = HERE / "fixtures" / "claude_agent" / "two-exchanges-cumulative.jsonl"
PARTIAL = HERE / "fixtures" / "claude_agent" / "partial-messages.jsonl"
SUBAGENT = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real" / "claude-agent-sdk" / \
    "subagent-step-stream.json"
PROMPTS = ("Run echo hi and tell me what it printed.", "What is 2+2?")


def drive_client(monkeypatch, stream: Path, logger, prompts=PROMPTS, **options):
    """Run the real ClaudeSDKClient over the fake CLI, feeding every message to the logger."""
    sdk = pytest.importorskip("claude_agent_sdk")
    import anyio

    monkeypatch.setenv("FAKE_CLAUDE_STREAM", str(stream))

    async def main():
        async with sdk.ClaudeSDKClient(sdk.ClaudeAgentOptions(cli_path=str(FAKE_CLI), **options)) as client:
            for prompt in prompts:
                logger.log_user_input(prompt)
                await client.query(prompt)
                async for message in client.receive_response():
                    logger.log(message)

    anyio.run(main)


def only_session(store, **flt) -> dict:
    sessions = store.list_sessions(reasonlog.SessionFilter(**flt))
    assert len(sessions) == 1
    return store.get_session(sessions[0]["id"])


def results_of(path: Path) -> list[dict]:
    return [m for m in map(json.loads, path.read_text().splitlines()) if m["type"] == "result"]


def test_cumulative_costs_are_differenced_per_exchange(monkeypatch, recorder, store_of):
    logger = ClaudeAgentLogger(recorder, run="job-1", labels={"team": "qa"})
    drive_client(monkeypatch, TWO_EXCHANGES, logger)
    logger.close()

    s = only_session(store_of())
    first, last = results_of(TWO_EXCHANGES)
    ex1, ex2 = s["exchanges"]
    assert ex1["stats"]["cost_usd"] == pytest.approx(first["total_cost_usd"])
    assert ex2["stats"]["cost_usd"] == pytest.approx(last["total_cost_usd"] - first["total_cost_usd"])
    assert ex1["stats"]["cost_usd"] + ex2["stats"]["cost_usd"] == pytest.approx(last["total_cost_usd"])
    # The session's cost, as `reasonlog sessions` shows it, is the SDK's last running total.
    assert s["cost_usd"] == pytest.approx(last["total_cost_usd"])
    # Tokens too: the second exchange made one call (7 uncached in, 6 out), not the process total.
    assert (ex2["stats"]["input_tokens"], ex2["stats"]["output_tokens"]) == (7, 6)
    assert ex2["stats"]["model_usage"] == last["modelUsage"]  # the running totals are kept raw
    assert [e["input"] for e in s["exchanges"]] == list(PROMPTS)
    assert ex1["result"] == "The command printed `hi`." and ex1["stats"]["num_turns"] == 2
    assert s["external_id"] == first["session_id"] and s["run"] == "job-1" and s["status"] == "completed"
    assert s["labels"] | {"team": "qa"} == s["labels"] and s["labels"]["tools"] == "Bash"


@pytest.mark.slow
def test_content_blocks_of_one_response_make_one_call(monkeypatch, recorder, store_of):
    logger = ClaudeAgentLogger(recorder)
    drive_client(monkeypatch, TWO_EXCHANGES, logger)
    logger.close()

    s = only_session(store_of())
    assert [c["provider_message_id"] for c in s["calls"]] == ["msg_01Fake0001", "msg_01Fake0002", "msg_01Fake0003"]
    first = [m for m in s["messages"] if m["role"] == "assistant"][0]["content"]["content"]
    assert [b["type"] for b in first] == ["text", "tool_use"] and first[1]["id"] == "toolu_01EchoHi"
    assert [c["stop_reason"] for c in s["calls"]] == ["tool_use", "end_turn", "end_turn"]
    (tool,) = s["tool_results"]
    assert (tool["tool_use_id"], tool["name"], tool["content"], tool["is_error"]) == ("toolu_01EchoHi", "Bash", "hi",
                                                                                      False)
    assert tool["input"] == {"command": "echo hi", "description": "Print hi"}
    second_call = store_of().get_call(s["calls"][1]["id"])
    assert second_call["request"]["messages"][-1]["content"][0]["tool_use_id"] == "toolu_01EchoHi"


@pytest.mark.slow
def test_partial_messages_give_each_call_its_final_output_tokens(monkeypatch, recorder, store_of):
    logger = ClaudeAgentLogger(recorder)
    drive_client(monkeypatch, PARTIAL, logger, prompts=PROMPTS[:1], include_partial_messages=True)
    logger.close()

    calls = only_session(store_of())["calls"]
    # The assistant messages say output_tokens=1 (written at message_start); message_delta has the truth.
    assert [c["output_tokens"] for c in calls] == [24, 9]
    assert [c["cache_write_tokens"] for c in calls] == [1500, 60]


@pytest.mark.slow
def test_subagent_messages_go_to_a_linked_child_session(monkeypatch, recorder, store_of):
    sdk = pytest.importorskip("claude_agent_sdk")
    import anyio

    monkeypatch.setenv("FAKE_CLAUDE_STREAM", str(SUBAGENT))
    logger = ClaudeAgentLogger(recorder, agent="orchestrator")

    async def main():
        logger.log_user_input("Delegate pwd and echo to a subagent.")
        async for message in sdk.query(prompt="Delegate pwd and echo to a subagent.",
                                       options=sdk.ClaudeAgentOptions(cli_path=str(FAKE_CLI))):
            logger.log(message)

    anyio.run(main)
    logger.close()

    store = store_of()
    main = only_session(store, agent="orchestrator")
    child = only_session(store, agent="general-purpose")
    (spawn,) = main["calls"]  # thinking + Agent tool_use: one response without an id, merged
    assert child["parent_session_id"] == main["id"] and child["parent_call_id"] == spawn["id"]
    (child_call,) = child["calls"]  # the subagent's two Bash calls came in one response
    tool_ids = [b["id"] for m in child["messages"] if m["role"] == "assistant" for b in m["content"]["content"]]
    assert tool_ids == ["toolu_subagent_pwd", "toolu_subagent_echo"]
    assert [(t["tool_use_id"], t["content"]) for t in child["tool_results"]] == [
        ("toolu_subagent_pwd", "/work/packages/harness-claude-code"), ("toolu_subagent_echo", "subagent-done")]
    assert [t["tool_use_id"] for t in main["tool_results"]] == ["toolu_main_agent"]
    assert child["exchanges"][0]["input"] == "Use Bash to run pwd, then echo subagent-done."
    assert child["exchanges"][0]["result"] == "Both commands ran successfully."
    assert child["status"] == "completed" and child_call["cache_read_tokens"] == 3519


@pytest.mark.slow
def test_close_after_a_crash_keeps_what_was_seen(monkeypatch, recorder, store_of):
    sdk = pytest.importorskip("claude_agent_sdk")
    monkeypatch.setenv("FAKE_CLAUDE_EXIT_AFTER", "4")  # init, two assistant blocks, the tool result
    logger = ClaudeAgentLogger(recorder)
    with pytest.raises(sdk.ClaudeSDKError) as raised:
        drive_client(monkeypatch, TWO_EXCHANGES, logger)
    logger.close(raised.value)

    s = only_session(store_of())
    assert s["status"] == "failed" and s["exchanges"][0]["status"] == "failed"
    assert [c["provider_message_id"] for c in s["calls"]] == ["msg_01Fake0001"]
    assert [t["tool_use_id"] for t in s["tool_results"]] == ["toolu_01EchoHi"]


def segment_dicts(path: Path) -> tuple[list[dict], list[dict]]:
    """The fixture's two exchanges as the JSON dicts the TypeScript SDK yields."""
    messages = [json.loads(line) for line in path.read_text().splitlines()]
    cut = next(i for i, m in enumerate(messages) if m["type"] == "result") + 1
    return messages[:cut], messages[cut:]


@pytest.mark.slow
def test_resume_in_a_new_process_appends_and_restarts_the_running_total(recorder, store_of, db_path):
    first, _ = segment_dicts(TWO_EXCHANGES)
    for m in first:
        for key in ("result_index", "model_usage_since_last_result"):  # as older CLIs write them
            m.pop(key, None)
    with ClaudeAgentLogger(recorder) as logger:
        logger.log_user_input(PROMPTS[0])
        for m in first:
            logger.log(m)
    # A later process resumes the same SDK session: its totals start again from zero.
    replay = json.loads(json.dumps(first))
    replay[0]["messaging_socket_path"] = "/tmp/cc-socks/9999.sock"
    later = reasonlog.Recorder(db_path, writer="sync", strict=True)
    with ClaudeAgentLogger(later) as logger:
        logger.log_user_input("Again, please.")
        for m in replay:
            logger.log(m)
    later.close()

    s = only_session(store_of())
    costs = [e["stats"]["cost_usd"] for e in s["exchanges"]]
    assert costs == pytest.approx([first[-1]["total_cost_usd"]] * 2)
    assert [e["input"] for e in s["exchanges"]] == [PROMPTS[0], "Again, please."]
    assert len(s["calls"]) == 4 and s["status"] == "completed"


@pytest.mark.slow
def test_a_running_total_that_goes_down_means_a_new_process(recorder, store_of):
    first, second = segment_dicts(TWO_EXCHANGES)
    third = json.loads(json.dumps(first))
    third[-1].pop("result_index")  # no process marker: only the smaller total tells
    with ClaudeAgentLogger(recorder) as logger:
        for m in first + second + third:
            logger.log(m)
    stats = [e["stats"] for e in only_session(store_of())["exchanges"]]
    assert stats[2]["cost_usd"] == pytest.approx(first[-1]["total_cost_usd"])
    assert stats[2]["input_tokens"] == 17  # the whole (new) process so far, not 17 - 24


@pytest.mark.slow
def test_messages_before_init_are_rejected_not_raised(db_path, store_of):
    rec = reasonlog.Recorder(db_path, writer="sync")
    logger = ClaudeAgentLogger(rec)
    logger.log({"type": "assistant", "message": {"content": []}})
    logger.log(object())
    assert rec.stats()["rejected"] == 2
    rec.close()


# ------------------------------------------------------------------ issue 8: one number per question

def _result(session_id: str, total: float, model_usage: dict, **extra) -> dict:
    return {"type": "result", "subtype": "success", "session_id": session_id, "total_cost_usd": total,
            "modelUsage": model_usage, "num_turns": 1, "is_error": False, "result": "ok", **extra}


def _init(session_id: str, socket: str = "/tmp/cc-socks/1.sock") -> dict:
    return {"type": "system", "subtype": "init", "session_id": session_id, "model": "claude-sonnet-4-5",
            "messaging_socket_path": socket}


def _reply(msg_id: str, text: str, parent: str | None = None) -> dict:
    return {"type": "assistant", "parent_tool_use_id": parent, "message": {
        "id": msg_id, "role": "assistant", "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": text}],
        "usage": {"input_tokens": 3, "output_tokens": 1}}}


def _usage(inp: int, out: int, cost: float) -> dict:
    return {"inputTokens": inp, "outputTokens": out, "cacheReadInputTokens": 0, "cacheCreationInputTokens": 0,
            "costUSD": cost}


@pytest.mark.slow
def test_exchange_tokens_and_cost_come_from_model_usage_per_model(recorder, store_of):
    with ClaudeAgentLogger(recorder, run="m") as logger:
        logger.log_user_input("go")
        for m in (_init("s1"), _reply("msg_1", "done")):
            logger.log(m)
        logger.log(_result("s1", 0.0123, {"claude-sonnet-4-5": _usage(1000, 200, 0.012),
                                          "claude-haiku-4-5": _usage(100, 20, 0.0003)},
                           usage={"input_tokens": 1000, "output_tokens": 200}))
    store = store_of()
    (ex,) = only_session(store)["exchanges"]
    # Tokens and cost from modelUsage (both models); `usage` (the main model only) stays raw.
    assert (ex["stats"]["input_tokens"], ex["stats"]["output_tokens"], ex["stats"]["cost_usd"]) == (1100, 220, 0.0123)
    assert ex["stats"]["usage"] == {"input_tokens": 1000, "output_tokens": 200}
    by_model = {r["model"]: (r["input_tokens"], r["output_tokens"], r["cost_usd"])
                for r in query.stats(store, "model", reasonlog.SessionFilter(run="m"))}
    assert by_model == {"claude-sonnet-4-5": (1000, 200, 0.012), "claude-haiku-4-5": (100, 20, 0.0003)}


@pytest.mark.slow
def test_a_new_sdk_session_gets_its_own_prompt_and_the_old_one_no_extra_exchange(recorder, store_of):
    with ClaudeAgentLogger(recorder) as logger:
        logger.log_user_input("first")
        for m in (_init("s1"), _reply("msg_1", "one"), _result("s1", 0.10, {"claude-sonnet-4-5": _usage(10, 5, 0.10)})):
            logger.log(m)
        logger.log_user_input("after /clear")
        # Same CLI process, new SDK session: its running totals start again (0.15 is all its own).
        for m in (_init("s2"), _reply("msg_2", "two"), _result("s2", 0.15, {"claude-sonnet-4-5": _usage(7, 3, 0.15)})):
            logger.log(m)
    store = store_of()
    by_external = {s["external_id"]: store.get_session(s["id"]) for s in store.list_sessions(reasonlog.SessionFilter())}
    old, new = by_external["s1"], by_external["s2"]
    assert [(e["input"], e["status"]) for e in old["exchanges"]] == [("first", "completed")]
    assert [(e["input"], e["status"]) for e in new["exchanges"]] == [("after /clear", "completed")]
    assert (old["cost_usd"], new["cost_usd"]) == (0.10, 0.15)
    assert (new["input_tokens"], new["output_tokens"]) == (7, 3)
