"""A trading simulator's logs (AI-Trader's agent_data): a session per model-day, positions as outcomes with the
price the cash moved by, tool results recognised, days without a reply, re-imports and bad lines."""
from __future__ import annotations

import shutil

import pytest
from conftest import FIXTURES

from reasonlog.io.importing import plan, run_import
from reasonlog.store import SessionFilter, open_store

AGENT_DATA = FIXTURES / "ai-trader-agent-log" / "agent_data"
ALL = SessionFilter(limit=None)


def day(store, model: str, date: str) -> dict:
    (session,) = store.list_sessions(SessionFilter(model=model, labels={"date": date}, limit=None))
    return store.get_session(session["id"])


@pytest.mark.slow
def test_every_model_day_is_a_session_with_its_positions(db, tmp_path):
    store = open_store(db)
    report = run_import(store, plan([AGENT_DATA]))
    # 5 models x 20 days; 154 assistant replies; 60 "Tool results:" messages; every action but the 5 starting lines
    assert report.added == {"sessions": 100, "calls": 154, "messages": 321, "tool_results": 60, "outcomes": 296}
    assert (report.files, report.skipped, report.failed) == (105, [], [])
    sessions = store.list_sessions(ALL)
    assert {s["run"] for s in sessions} == {"ai-trader-agent-log"}
    assert {s["labels"]["source"] for s in sessions} == {"trading-log"}


@pytest.mark.slow
def test_gpt5_on_2025_10_02_bought_nvda_then_googl(db, tmp_path):
    store = open_store(db)
    run_import(store, plan([AGENT_DATA]))
    session = day(store, "gpt-5", "2025-10-02")
    positions = [o["payload"] for o in session["outcomes"] if o["kind"] == "position"]
    assert [(p["action"], p["symbol"], p["amount"], p["cash_after"]) for p in positions[:2]] == [
        ("buy", "NVDA", 10, 8104.0), ("buy", "GOOGL", 6, 6633.1)]
    assert [p["price"] for p in positions[:2]] == [189.6, 245.15]  # as the day's reply quotes them
    assert [p["action_id"] for p in positions] == [1, 2, 3, 4, 5, 6, 7]
    (call,) = session["calls"]
    assert {o["call_id"] for o in session["outcomes"]} == {call["id"]}
    request = store.replay_call(call["id"])
    assert request == {"model": "gpt-5", "messages": [
        {"role": "user", "content": "Please analyze and update today's (2025-10-02) positions."}]}
    assert store.get_call(call["id"])["response"]["content"].endswith("<FINISH_SIGNAL>")


@pytest.mark.slow
def test_tool_results_sent_as_user_text_are_tool_results(db, tmp_path):
    store = open_store(db)
    run_import(store, plan([AGENT_DATA / "claude-3.7-sonnet"]))
    with_tools = [s for s in (store.get_session(x["id"]) for x in store.list_sessions(ALL)) if s["tool_results"]]
    first = with_tools[0]
    result = first["tool_results"][0]
    sent = [m for m in store.replay_call(first["calls"][-1]["id"])["messages"]
            if isinstance(m["content"], str) and m["content"].startswith("Tool results: ")]
    assert sent[0]["content"] == "Tool results: " + result["content"]


def test_a_day_with_a_prompt_and_no_reply_is_interrupted(db, tmp_path):
    store = open_store(db)
    run_import(store, plan([AGENT_DATA / "gpt-5"]))
    session = day(store, "gpt-5", "2025-10-13")
    assert (session["status"], session["calls"]) == ("interrupted", [])
    assert session["exchanges"][0]["input"] == "Please analyze and update today's (2025-10-13) positions."


def test_importing_again_adds_nothing_and_new_positions_are_added(db, tmp_path):
    data = tmp_path / "run1" / "agent_data"
    shutil.copytree(AGENT_DATA / "qwen3-max", data / "qwen3-max")
    store = open_store(db)
    first = run_import(store, plan([data]))
    assert first.added["outcomes"] == 27
    again = run_import(store, plan([data]))
    assert again.added == dict.fromkeys(first.added, 0)
    positions = data / "qwen3-max" / "position" / "position.jsonl"
    lines = positions.read_bytes().splitlines(keepends=True)
    last = lines[-1].replace(b'"id": 27', b'"id": 28').replace(b'"amount": ', b'"amount": 1', 1)
    positions.write_bytes(b"".join(lines) + last)
    grown = run_import(store, plan([data]))
    assert (grown.added["outcomes"], grown.added["sessions"], grown.added["calls"]) == (1, 0, 0)


def test_a_rewritten_log_keeps_its_positions(db, tmp_path):
    data = tmp_path / "r" / "agent_data"
    shutil.copytree(AGENT_DATA / "gpt-5", data / "gpt-5")
    store = open_store(db)
    run_import(store, plan([data]))
    log = data / "gpt-5" / "log" / "2025-10-02" / "log.jsonl"
    log.write_bytes(log.read_bytes() + b'{"signature": "gpt-5", "new_messages": {"role": "user", "content": "more"}}\n')
    again = run_import(store, plan([data]))
    assert again.rewritten == 1
    session = day(store, "gpt-5", "2025-10-02")
    assert len([o for o in session["outcomes"] if o["kind"] == "position"]) == 7
    assert len(store.list_sessions(ALL)) == 20


def test_bad_lines_are_named_and_the_rest_imported(db, tmp_path):
    data = tmp_path / "b" / "agent_data"
    shutil.copytree(AGENT_DATA / "gpt-5", data / "gpt-5")
    log = data / "gpt-5" / "log" / "2025-10-03" / "log.jsonl"
    log.write_bytes(b'{"signature": "gpt-5"}\n[1]\n{not json\n' + log.read_bytes())
    store = open_store(db)
    report = run_import(store, plan([data]))
    assert [(w.rsplit(":", 1)[1], why) for w, why in report.skipped] == [
        ("1", "expected an object with `new_messages`"), ("2", "expected an object with `new_messages`"),
        ("3", "not JSON (unexpected character, expected a string key)")]
    assert report.added["sessions"] == 20


def test_detection_picks_trading_logs_and_nothing_else(tmp_path):
    assert {imp.name for _, imp in plan([AGENT_DATA])} == {"trading-log"}
    assert {imp.name for _, imp in plan([FIXTURES / "claude-code-transcripts" / "spotter"])} == {"claude-code"}


def test_ai_traders_own_data_folder_is_detected_with_each_market_a_run(db, tmp_path):
    """AI-Trader writes `data/agent_data/` (NASDAQ) and `data/agent_data_astock/` (A-shares) side by side:
    importing `data/` finds both, each market its own run, so the same model and day are two sessions."""
    data = tmp_path / "AI-Trader" / "data"
    shutil.copytree(AGENT_DATA / "gpt-5", data / "agent_data" / "gpt-5")
    shutil.copytree(AGENT_DATA / "qwen3-max", data / "agent_data_astock" / "qwen3-max")
    shutil.copytree(AGENT_DATA / "gpt-5", data / "agent_data_astock" / "gpt-5")
    files = plan([data])
    assert {imp.name for _, imp in files} == {"trading-log"} and len(files) == 3 * 21
    store = open_store(db)
    report = run_import(store, files)
    assert (report.added["sessions"], report.skipped, report.failed) == (60, [], [])
    runs = {(s["run"], s["model"]) for s in store.list_sessions(ALL)}
    assert runs == {("data", "gpt-5"), ("data-astock", "gpt-5"), ("data-astock", "qwen3-max")}
    assert plan([data / "agent_data_astock"]) == [f for f in files if "agent_data_astock" in str(f[0])]
    astock_day = data / "agent_data_astock" / "gpt-5" / "log" / "2025-10-02" / "log.jsonl"
    assert [imp.name for _, imp in plan([astock_day])] == ["trading-log"]
