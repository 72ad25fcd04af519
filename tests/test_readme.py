"""The README's Python snippets run as written. Each block is taken from README.md verbatim and run with the
names it leaves to the reader (a system prompt, a provider response, a model, ...) bound to real objects:
recorded provider payloads, a LangChain model talking to a local server, recorded Claude Agent SDK messages.
What each snippet promises is then read back from the database."""
from __future__ import annotations

import ast
import asyncio
import json
import re
from pathlib import Path

import anthropic
import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from sdk_server import load_json

import reasonlog

ROOT = Path(__file__).resolve().parents[1]
STREAM = Path(__file__).resolve().parent / "fixtures" / "claude_agent" / "two-exchanges-cumulative.jsonl"


def readme_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def run_block(code: str, names: dict) -> dict:
    """Run one snippet; one with a top-level `async for` runs as the body of a coroutine, as in a notebook."""
    compiled = compile(code, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(compiled, names)  # noqa: S307 - the README's own code
    if asyncio.iscoroutine(result):
        asyncio.run(result)
    return names


@pytest.fixture
def db(tmp_path, monkeypatch):
    path = tmp_path / "readme.db"
    monkeypatch.setenv("REASONLOG_DB", str(path))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    return path


def test_there_are_five_python_snippets():
    assert len(readme_blocks()) == 5


def test_record_from_python(db):
    resp = anthropic.types.Message.model_validate(load_json("anthropic-messages", "anthropic-tool-no-args.json"))
    names = run_block(readme_blocks()[0], {
        "SYSTEM": "You trade NASDAQ stocks.", "TOOLS": [{"name": "get_price", "input_schema": {"type": "object"}}],
        "reply_blocks": [b.model_dump() for b in resp.content], "resp": resp})
    names["rec"].close()
    store = reasonlog.open_store(db)
    (session,) = store.list_sessions(reasonlog.SessionFilter())
    full = store.get_session(session["id"])
    (call,) = full["calls"]
    assert (session["agent"], session["run"], session["labels"]) == ("gpt-5", "job-1", {"date": "2025-10-02"})
    assert (call["input_tokens"], call["output_tokens"], call["provider_message_id"]) == (
        resp.usage.input_tokens, resp.usage.output_tokens, resp.id)
    assert [(t["tool_use_id"], t["content"]) for t in full["tool_results"]] == [("toolu_1", "NVDA 180.5")]
    assert [(o["kind"], o["payload"]["symbol"]) for o in full["outcomes"]] == [("trade", "NVDA")]
    assert full["exchanges"][0]["result"] == "Bought 10 NVDA"


def test_instrumenting_the_sdk_clients(db):
    names = run_block(readme_blocks()[1], {})
    names["rec"].close()
    assert reasonlog.open_store(db).list_sessions(reasonlog.SessionFilter())[0]["agent"] == "researcher"


def test_langchain_callback(db, server):
    server.reply_json(load_json("openai-chat", "openai-text.json"))

    @tool
    def weather(location: str) -> str:
        """The weather at a place."""
        return "sunny"

    rec = reasonlog.Recorder()
    model = ChatOpenAI(model="gpt-4.1-nano", base_url=server.url + "/v1", api_key="test-key", max_retries=0)
    names = run_block(readme_blocks()[2], {"rec": rec, "model": model, "tools": [weather],
                                           "messages": [HumanMessage("What is the weather in Paris?")]})
    rec.close()
    assert names["reply"].content
    (session,) = reasonlog.open_store(db).list_sessions(reasonlog.SessionFilter())
    assert (session["agent"], session["run"], session["call_count"]) == ("trader", "2025-10-02", 1)


def test_claude_agent_logger(db):
    messages = [json.loads(line) for line in STREAM.read_text().splitlines()]

    async def query(prompt, options):
        for m in messages:
            yield m

    rec = reasonlog.Recorder()
    run_block(readme_blocks()[3], {"rec": rec, "query": query, "prompt": "Run echo hi", "options": None})
    rec.close()
    (session,) = reasonlog.open_store(db).list_sessions(reasonlog.SessionFilter())
    results = [m for m in messages if m["type"] == "result"]
    assert session["run"] == "nightly"
    assert session["cost_usd"] == pytest.approx(results[-1]["total_cost_usd"])


def test_hand_written_loop(db):
    rec = reasonlog.Recorder()
    names = run_block(readme_blocks()[4], {
        "rec": rec, "history": [{"role": "user", "content": "Your move."}],
        "reply": {"role": "assistant", "content": "<semantic_search>best nodes</semantic_search>"},
        "usage": reasonlog.Usage(input_tokens=120, output_tokens=30), "find_best_nodes": lambda min_pips: [20, 31]})
    rec.close()
    store = reasonlog.open_store(db)
    (session,) = store.list_sessions(reasonlog.SessionFilter())
    full = store.get_session(session["id"])
    assert [(t["name"], t["content"]) for t in full["tool_results"]] == [("find_best_nodes", [20, 31])]
    assert [(o["kind"], o["call_id"]) for o in full["outcomes"]] == [("move", names["call"])]
    assert session["xml_tool_tags"] == ["semantic_search"]
