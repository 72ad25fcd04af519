"""Exchange-based JSONL export: session_start, one exchange line per exchange, session_end."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import reasonlog
from reasonlog.claude_agent import ClaudeAgentLogger
from reasonlog.io.exchange_jsonl import export_exchange_jsonl

STREAM = Path(__file__).resolve().parent / "fixtures" / "claude_agent" / "two-exchanges-cumulative.jsonl"


def exported(store, session_id: str) -> list[dict]:
    lines = list(export_exchange_jsonl(store, session_id))
    assert all(line.endswith("\n") and line.count("\n") == 1 for line in lines)
    return [json.loads(line) for line in lines]


def test_claude_agent_session_exports_like_the_sdk_loggers(recorder, store_of):
    messages = [json.loads(line) for line in STREAM.read_text().splitlines()]
    results = [m for m in messages if m["type"] == "result"]
    with ClaudeAgentLogger(recorder) as logger:
        logger.log_user_input("Run echo hi and tell me what it printed.")
        for m in messages:
            if m is results[0]:
                logger.log(m)
                logger.log_user_input("What is 2+2?")
            else:
                logger.log(m)
    store = store_of()
    (session,) = store.list_sessions(reasonlog.SessionFilter())
    start, ex1, ex2, end = exported(store, session["id"])

    sid = results[0]["session_id"]
    assert start == {"type": "session_start", "session_id": sid, "ts": start["ts"], "model": "claude-sonnet-4-5",
                     "cwd": "/tmp/cc/work", "tools_available": ["Bash"], "permission_mode": "default"}
    assert (ex1["type"], ex1["exchange"], ex1["user_input"]) == ("exchange", 1,
                                                                 "Run echo hi and tell me what it printed.")
    assert [(m["source"], m["type"]) for m in ex1["messages"]] == [
        ("assistant", "text"), ("assistant", "tool_use"), ("tool", "result"), ("assistant", "text")]
    use, result = ex1["messages"][1], ex1["messages"][2]
    assert (use["tool_use_id"], use["name"], use["input"]["command"]) == ("toolu_01EchoHi", "Bash", "echo hi")
    assert (result["tool_use_id"], result["output"], result["is_error"]) == ("toolu_01EchoHi", "hi", False)
    assert ex1["stats"] == {"num_turns": 2, "duration_ms": 232, "duration_api_ms": 77, "tokens_in": 17,
                            "tokens_out": 33, "cache_creation": 1560, "cache_read": 1500,
                            "cost_usd": pytest.approx(results[0]["total_cost_usd"])}
    assert ex2["stats"]["cost_usd"] == pytest.approx(results[1]["total_cost_usd"] - results[0]["total_cost_usd"])
    assert [m["text"] for m in ex2["messages"]] == ["Second answer: 4."]
    # The session total is the SDK's last running total, not the sum of the running totals.
    assert end["total_cost_usd"] == pytest.approx(results[-1]["total_cost_usd"])
    assert end["total_tokens"] == {"input": 24, "output": 39, "cache_creation": 1590, "cache_read": 3060}
    assert (end["type"], end["total_exchanges"], end["tools_used"]) == ("session_end", 2, {"Bash": 1})
    assert end["total_duration_ms"] == 232 + 30


def test_a_hand_recorded_session_gets_stats_from_its_calls(recorder, store_of):
    with recorder.session(agent="trader", model="claude-sonnet-4-5") as s:
        ex = s.exchange("Buy or sell?")
        s.call(messages=[{"role": "user", "content": "Buy or sell?"}],
               response=[{"type": "tool_use", "id": "t1", "name": "quote", "input": {"sym": "AAPL"}}],
               usage=reasonlog.Usage(input_tokens=10, output_tokens=5, cache_read_tokens=100), cost_usd=0.01,
               latency_ms=120)
        s.tool_result("t1", {"price": 190}, name="quote", is_error=True)
        s.call(messages=[{"role": "user", "content": "Buy or sell?"}], response="Hold.",
               usage=reasonlog.Usage(input_tokens=20, output_tokens=3), cost_usd=0.02, latency_ms=80)
        ex.end("Hold.")
        sid = s.id
    start, ex1, end = exported(store_of(), sid)
    assert start["session_id"] == sid and start["tools_available"] == []
    assert ex1["stats"] | {"duration_ms": None} == {"num_turns": 2, "duration_ms": None, "duration_api_ms": 200,
                                                    "tokens_in": 30, "tokens_out": 8, "cache_creation": 0,
                                                    "cache_read": 100, "cost_usd": pytest.approx(0.03)}
    assert ex1["messages"][1] == {"source": "tool", "type": "result", "tool_use_id": "t1", "is_error": True,
                                  "output": '{"price":190}', "ts": ex1["messages"][1]["ts"]}
    assert ex1["messages"][2]["text"] == "Hold."
    assert end["tools_used"] == {"quote": 1} and end["total_cost_usd"] == pytest.approx(0.03)


def test_a_session_recorded_through_an_sdk_adapter_exports_its_calls(server, recorder, store_of):
    import anthropic
    from sdk_server import load_json

    from reasonlog.capture.anthropic import instrument_anthropic

    server.reply_json(load_json("anthropic-messages", "anthropic-tool-no-args.json"))
    server.reply_json(load_json("anthropic-messages", "anthropic-text.json"))
    client = anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0)
    instrument_anthropic(client, recorder)
    ask = {"model": "claude-test-model", "max_tokens": 100, "messages": [{"role": "user", "content": "Update"}]}
    with recorder.session(agent="sdk") as s:  # no model given, no exchanges: only the adapter's calls
        client.messages.create(**ask)
        client.messages.create(**ask)
    store = store_of()
    start, exchange, end = exported(store, s.id)
    calls = store.get_session(s.id)["calls"]
    api_ms = round(sum(c["latency_ms"] for c in calls))
    assert start["model"] == "claude-3-opus-20240229"  # the first call's model
    assert [m["type"] for m in exchange["messages"]] == ["text", "tool_use", "text"]
    assert exchange["messages"][1]["name"] == "updateIssueList"
    assert exchange["stats"]["num_turns"] == 2 and exchange["user_input"] == "Update"
    assert (exchange["stats"]["tokens_in"], exchange["stats"]["tokens_out"]) == (calls[0]["input_tokens"] + 12,
                                                                                 calls[0]["output_tokens"] + 29)
    assert exchange["stats"]["duration_api_ms"] == exchange["stats"]["duration_ms"] == api_ms > 0
    assert (end["total_exchanges"], end["tools_used"]) == (1, {"updateIssueList": 1})
    assert end["total_duration_ms"] == end["total_duration_api_ms"] == api_ms
