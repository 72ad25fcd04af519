"""The README's Python snippets run as written (each one whole: tests/test_readme_commands.py runs every block of
the README and docs/ in a fresh interpreter), here in this process against a stand-in for the providers on
127.0.0.1, and what each snippet promises is read back from the database."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from docs_upstream import DocsUpstream
from sdk_server import load_chunks, load_json

import reasonlog

ROOT = Path(__file__).resolve().parents[1]


def readme_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def run_block(code: str) -> dict:
    names: dict = {"__name__": "__main__"}
    exec(compile(code, "README.md", "exec"), names)  # noqa: S102 - the README's own code
    return names


@pytest.fixture
def db(tmp_path, monkeypatch):
    path = tmp_path / "readme.db"
    monkeypatch.setenv("REASONLOG_DB", str(path))
    monkeypatch.chdir(tmp_path)
    with DocsUpstream() as upstream:
        for key, value in {"ANTHROPIC_BASE_URL": upstream.url, "ANTHROPIC_API_KEY": "sk-ant-test",
                           "OPENAI_BASE_URL": upstream.url + "/v1", "OPENAI_API_KEY": "sk-test",
                           "HOME": str(tmp_path)}.items():
            monkeypatch.setenv(key, value)
        yield path


def test_there_are_five_python_snippets():
    assert len(readme_blocks()) == 5


def test_record_from_python(db):
    resp = load_json("anthropic-messages", "anthropic-tool-no-args.json")  # what the stand-in answers
    run_block(readme_blocks()[0])
    store = reasonlog.open_store(db)
    (session,) = store.list_sessions(reasonlog.SessionFilter())
    full = store.get_session(session["id"])
    (call,) = full["calls"]
    assert (session["agent"], session["run"], session["labels"]) == ("trader", "job-1", {"date": "2025-10-02"})
    assert (call["input_tokens"], call["output_tokens"], call["provider_message_id"], call["stop_reason"]) == (
        resp["usage"]["input_tokens"], resp["usage"]["output_tokens"], resp["id"], "tool_use")
    assert [(t["tool_use_id"], t["content"]) for t in full["tool_results"]] == [
        ("toolu_01LRmxn9vGM1d2DZSDBowdZ1", "NVDA 180.5")]
    assert [(o["kind"], o["payload"]["symbol"]) for o in full["outcomes"]] == [("trade", "NVDA")]
    assert full["exchanges"][0]["result"] == "Bought 10 NVDA"


def test_instrumenting_the_sdk_clients(db):
    names = run_block(readme_blocks()[1])
    names["rec"].close()
    assert reasonlog.open_store(db).list_sessions(reasonlog.SessionFilter())[0]["agent"] == "researcher"


def test_langchain_callback(db):
    names = run_block(readme_blocks()[2])
    assert names["reply"].content == load_json("openai-chat", "openai-text.json")["choices"][0]["message"]["content"]
    (session,) = reasonlog.open_store(db).list_sessions(reasonlog.SessionFilter())
    assert (session["agent"], session["run"], session["call_count"]) == ("trader", "2025-10-02", 1)


def test_claude_agent_logger(db):
    """The SDK runs the Claude Code CLI it bundles, which asks the stand-in (ANTHROPIC_BASE_URL) for its answer."""
    run_block(readme_blocks()[3])
    store = reasonlog.open_store(db)
    (session,) = store.list_sessions(reasonlog.SessionFilter())
    (call,) = store.get_session(session["id"])["calls"]
    answer = load_chunks("anthropic-messages", "anthropic-text.chunks.txt")[0]["message"]
    assert (session["run"], call["model"], call["input_tokens"]) == ("nightly", answer["model"], 12)


def test_hand_written_loop(db):
    names = run_block(readme_blocks()[4])
    store = reasonlog.open_store(db)
    (session,) = store.list_sessions(reasonlog.SessionFilter())
    full = store.get_session(session["id"])
    assert [(t["name"], t["content"]) for t in full["tool_results"]] == [("find_best_nodes", [20, 31])]
    assert [(o["kind"], o["call_id"]) for o in full["outcomes"]] == [("move", names["call"])]
    assert session["xml_tool_tags"] == ["semantic_search"]
