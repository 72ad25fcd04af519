"""ReasonlogCallback drives real LangChain chat models (langchain-openai, langchain-anthropic) and tools
against recorded payloads served on 127.0.0.1."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections import Counter

import anthropic
import openai
import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import ToolException, tool
from langchain_openai import ChatOpenAI
from sdk_server import load_chunks, load_json

import reasonlog
from reasonlog.langchain import ReasonlogCallback
from reasonlog.parts import parts_of


@pytest.fixture
def db_target(db):
    """This suite runs on SQLite and on PostgreSQL."""
    return db

CHAT, MESSAGES = "openai-chat", "anthropic-messages"
ASK = [SystemMessage("Be brief."), HumanMessage("Weather in San Francisco?")]


@tool
def weather(location: str) -> str:
    """The weather at a place."""
    time.sleep(0.005)  # a duration the recording must show
    return f"Sunny in {location}, 18 C."


@tool
def broken(location: str) -> str:
    """A tool whose backend is down."""
    raise ToolException("quote service unavailable")


def openai_model(server, **kwargs) -> ChatOpenAI:
    return ChatOpenAI(model="deepseek-reasoner", base_url=server.url + "/v1", api_key="test-key", max_retries=0,
                      **kwargs)


def anthropic_model(server, **kwargs) -> ChatAnthropic:
    return ChatAnthropic(model="claude-test-model", base_url=server.url, api_key="test-key", max_retries=0, **kwargs)


def stored(rec, session_id: str) -> tuple[dict, list[dict]]:
    rec.flush()
    store = reasonlog.open_store(rec.db_path)
    session = store.get_session(session_id)
    return session, [store.get_call(c["id"]) for c in session["calls"]]


def tokens(call: dict) -> tuple:
    return (call["input_tokens"], call["cache_read_tokens"], call["cache_write_tokens"], call["output_tokens"],
            call["reasoning_tokens"])


def tool_uses(message: dict) -> list[tuple]:
    return [(p.tool_use_id, p.name, p.input) for p in parts_of(message) if p.kind == "tool_use"]


# ---------------------------------------------------------------------- an agent loop


def run_weather_agent(server, handler) -> list:
    """Call the model, run the tool it asks for through LangChain, send the result back, call again."""
    server.reply_json(load_json(CHAT, "deepseek-tool-call.json"))
    server.reply_json(load_json(CHAT, "openai-text.json"))
    model = openai_model(server).bind_tools([weather])
    config = {"callbacks": [handler]}
    history = list(ASK)
    asked = model.invoke(history, config=config)
    history.append(asked)
    history += [weather.invoke(call, config=config) for call in asked.tool_calls]
    history.append(model.invoke(history, config=config))
    return history


def test_agent_loop_records_calls_tool_results_and_one_timeline(server, rec):
    handler = ReasonlogCallback(rec, agent="trader", run="backtest-7", labels={"desk": "fx"})
    history = run_weather_agent(server, handler)
    handler.close()
    rec.flush()
    [listed] = reasonlog.open_store(rec.db_path).list_sessions(reasonlog.SessionFilter(run="backtest-7"))
    session, calls = stored(rec, listed["id"])
    assert (session["agent"], session["run"], session["status"]) == ("trader", "backtest-7", "completed")
    assert session["labels"] == {"desk": "fx"} and len(calls) == 2

    first, second = calls
    assert tool_uses(first["response"]) == [("call_00_9V0vrf86Pc9aelHCJMZqnJBo", "weather",
                                             {"location": "San Francisco"})]
    assert (first["stop_reason"], second["stop_reason"]) == ("tool_calls", "stop")
    assert tokens(first) == (19, 320, 0, 92, 48)  # DeepSeek counts reasoning inside completion tokens
    assert tokens(second) == (16, 0, 0, 363, 0)
    assert first["provider_message_id"] == "7a630f5b-b7e6-4878-82f8-d77db164d42b"
    assert (first["provider"], first["model"], second["model"]) == ("openai", "deepseek-reasoner",
                                                                    "gpt-4.1-nano-2025-04-14")
    assert first["raw"]["token_usage"]["prompt_cache_hit_tokens"] == 320  # the server's own counting stays
    assert all(c["status"] == "ok" and c["latency_ms"] > 0 for c in calls)
    assert second["response"]["content"] == history[-1].content

    [result] = session["tool_results"]
    assert (result["tool_use_id"], result["name"], result["is_error"]) == ("call_00_9V0vrf86Pc9aelHCJMZqnJBo",
                                                                           "weather", False)
    assert result["input"] == {"location": "San Francisco"}
    assert result["content"] == "Sunny in San Francisco, 18 C."
    assert result["duration_ms"] >= 5

    # What LangChain put on the wire is what a replay sends, and each message is stored once.
    store = reasonlog.open_store(rec.db_path)
    for call, sent in zip(calls, server.requests, strict=False):
        replay = store.replay_call(call["id"])
        assert replay["messages"] == sent["body"]["messages"]
        assert replay["tools"] == sent["body"]["tools"] and replay["model"] == sent["body"]["model"]
    roles = [m["role"] for m in session["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    contents = Counter(json.dumps(m["content"], sort_keys=True) for m in session["messages"])
    assert max(contents.values()) == 1


@tool("updateIssueList")
def update_issue_list() -> str:
    """Refresh the issue list."""
    return "3 open issues"


def test_anthropic_agent_loop_pairs_results_and_stores_each_message_once(server, rec):
    server.reply_json(load_json(MESSAGES, "anthropic-tool-no-args.json"))
    server.reply_json(load_json(MESSAGES, "anthropic-text.json"))
    model = anthropic_model(server).bind_tools([update_issue_list])
    config = {"callbacks": [ReasonlogCallback(rec)]}

    async def loop() -> None:  # async, as LangGraph agents run: the handler runs inline in the event loop
        history = list(ASK)
        history.append(await model.ainvoke(history, config=config))
        history += [await update_issue_list.ainvoke(call, config=config) for call in history[-1].tool_calls]
        history.append(await model.ainvoke(history, config=config))

    with rec.session() as s:
        asyncio.run(loop())
    session, calls = stored(rec, s.id)
    assert [m["role"] for m in session["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    assert tool_uses(calls[0]["response"]) == [("toolu_01LRmxn9vGM1d2DZSDBowdZ1", "updateIssueList", {})]
    [result] = session["tool_results"]
    assert (result["tool_use_id"], result["content"]) == ("toolu_01LRmxn9vGM1d2DZSDBowdZ1", "3 open issues")
    assert [tokens(c) for c in calls] == [(602, 0, 0, 93, 0), (12, 0, 0, 29, 0)]


def test_calls_land_in_the_current_session_which_close_leaves_open(server, rec):
    server.reply_json(load_json(MESSAGES, "anthropic-text.json"))
    handler = ReasonlogCallback(rec)
    with rec.session(agent="mine") as s:
        anthropic_model(server).invoke(ASK, config={"callbacks": [handler]})
        handler.close()
        assert not s.ended
    session, [call] = stored(rec, s.id)
    assert session["agent"] == "mine" and call["provider"] == "anthropic"


# ---------------------------------------------------------------------- providers and usage


# (uncached input, cache read, cache write, output, of which reasoning): the table test_capture_openai.py
# works out by hand, so a LangChain recording counts tokens exactly as instrument_openai does.
CHAT_TOKENS = {
    "deepseek-tool-call.json": (19, 320, 0, 92, 48),  # reasoning inside completion_tokens
    "xai-tool-call.json": (63, 244, 0, 281, 255),  # reasoning beside completion_tokens
    "groq-tool-call.json": (218, 0, 0, 15, 0),
    "mistral-tool-call.json": (124, 0, 0, 22, 0),
    "openai-text.json": (16, 0, 0, 363, 0),
}


@pytest.mark.parametrize("name", sorted(CHAT_TOKENS))
def test_chat_openai_records_fixture_usage_stop_reason_and_tool_calls(server, rec, name):
    payload = load_json(CHAT, name)
    server.reply_json(payload)
    with rec.session() as s:
        reply = openai_model(server).bind_tools([weather]).invoke(ASK, config={"callbacks": [ReasonlogCallback(rec)]})
    _, [call] = stored(rec, s.id)
    choice = payload["choices"][0]
    assert tokens(call) == CHAT_TOKENS[name]
    # Streams carry only LangChain's usage_metadata: it must give the same counts.
    assert reasonlog.Usage.from_langchain(reply.usage_metadata) == reasonlog.Usage.from_openai(payload["usage"])
    assert (call["stop_reason"], call["provider_message_id"], call["model"]) == \
        (choice["finish_reason"], payload["id"], payload["model"])
    assert [t[0] for t in tool_uses(call["response"])] == [t["id"] for t in choice["message"].get("tool_calls") or ()]


@pytest.mark.parametrize("name", ["anthropic-text.json", "anthropic-tool-no-args.json",
                                  "anthropic-clear-thinking.1.json",
                                  "anthropic-claude-opus-5-reasoning-high.1.json"])
def test_chat_anthropic_records_fixture_usage_stop_reason_and_parts(server, rec, name):
    payload = load_json(MESSAGES, name)
    server.reply_json(payload)
    with rec.session() as s:
        anthropic_model(server).bind_tools([weather]).invoke(ASK, config={"callbacks": [ReasonlogCallback(rec)]})
    _, [call] = stored(rec, s.id)
    usage = reasonlog.Usage.from_anthropic(payload["usage"])
    assert tokens(call) == (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens,
                            usage.output_tokens, usage.reasoning_tokens)
    assert (call["stop_reason"], call["provider_message_id"]) == (payload["stop_reason"], payload["id"])
    assert tool_uses(call["response"]) == [(b["id"], b["name"], b["input"]) for b in payload["content"]
                                           if b["type"] == "tool_use"]
    thinking = [b["thinking"] for b in payload["content"] if b["type"] == "thinking"]
    assert [p.text for p in parts_of(call["response"]) if p.kind == "thinking"] == thinking
    assert call["request"]["tools"][0]["name"] == "weather" and call["request"]["max_tokens"] == 4096


@pytest.mark.filterwarnings("ignore:Received unexpected tool content block")  # langchain-anthropic, code execution
def test_streamed_calls_take_usage_from_usage_metadata(server, rec):
    server.reply_stream(load_chunks(CHAT, "deepseek-tool-call.chunks.txt"), named=False, done=True)
    server.reply_stream(load_chunks(MESSAGES, "anthropic-code-execution-20260120-prompt-cache.1.chunks.txt"),
                        named=True)
    handler = ReasonlogCallback(rec)
    with rec.session() as s:
        openai_model(server, streaming=True, stream_usage=True).invoke(ASK, config={"callbacks": [handler]})
        anthropic_model(server, streaming=True).invoke(ASK, config={"callbacks": [handler]})
    _, (deepseek, claude) = stored(rec, s.id)
    # The same disjoint counts instrument_openai / instrument_anthropic record for these streams.
    assert tokens(deepseek) == (19, 320, 0, 83, 39)
    assert tokens(claude) == (6, 6289, 3337, 198, 0)
    for call in (deepseek, claude):
        assert call["status"] == "ok" and 0 < call["ttft_ms"] <= call["latency_ms"]
    assert tool_uses(deepseek["response"])[0][1] == "weather"


# ---------------------------------------------------------------------- failures


def test_server_error_is_recorded_as_a_failed_call_and_reaches_the_caller(server, rec):
    server.reply_json({"error": {"message": "upstream overloaded", "type": "server_error"}}, status=500)
    server.reply_json({"type": "error", "error": {"type": "api_error", "message": "boom"}}, status=500)
    handler = ReasonlogCallback(rec)
    with rec.session() as s:
        with pytest.raises(openai.InternalServerError):
            openai_model(server).invoke(ASK, config={"callbacks": [handler]})
        with pytest.raises(anthropic.InternalServerError):
            anthropic_model(server).invoke(ASK, config={"callbacks": [handler]})
    _, calls = stored(rec, s.id)
    assert [(c["status"], c["error"]["status_code"], c["provider"]) for c in calls] == \
        [("error", 500, "openai"), ("error", 500, "anthropic")]
    assert "upstream overloaded" in calls[0]["error"]["message"]
    assert calls[0]["request"]["messages"] == server.requests[0]["body"]["messages"]


def test_failed_tools_are_recorded_as_errors(server, rec):
    call = {"name": "broken", "args": {"location": "Oslo"}, "id": "call_1", "type": "tool_call"}
    handled = broken.model_copy(update={"handle_tool_error": True})
    handler = ReasonlogCallback(rec)
    with rec.session() as s:
        with pytest.raises(ToolException):
            broken.invoke(call, config={"callbacks": [handler]})
        reply = handled.invoke({**call, "id": "call_2"}, config={"callbacks": [handler]})
    assert reply.status == "error"
    session, _ = stored(rec, s.id)
    results = [(r["tool_use_id"], r["is_error"], r["content"]) for r in session["tool_results"]]
    assert results == [("call_1", True, "ToolException: quote service unavailable"),
                       ("call_2", True, "quote service unavailable")]


# ---------------------------------------------------------------------- threads, import


def test_runs_from_concurrent_threads_are_kept_apart(server, rec):
    for _ in range(4):
        server.reply_json(load_json(MESSAGES, "anthropic-text.json"))
    prompts = [[HumanMessage(f"question {n}")] for n in range(4)]
    with rec.session() as s:
        anthropic_model(server).batch(prompts, config={"callbacks": [ReasonlogCallback(rec)], "max_concurrency": 4})
    _, calls = stored(rec, s.id)
    assert sorted(c["request"]["messages"][0]["content"] for c in calls) == [f"question {n}" for n in range(4)]
    assert all(c["status"] == "ok" and c["output_tokens"] == 29 for c in calls)


BLOCK_LANGCHAIN = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0].startswith("langchain"):
            raise ImportError(f"blocked: {name}")
sys.meta_path.insert(0, Block())
import reasonlog, reasonlog.capture, reasonlog.cli.main
assert not [m for m in sys.modules if m.startswith("langchain")]
try:
    import reasonlog.langchain
except ImportError as exc:
    print("ImportError:", exc)
"""


def test_reasonlog_imports_without_langchain():
    done = subprocess.run([sys.executable, "-c", BLOCK_LANGCHAIN], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "pip install langchain-core" in done.stdout
