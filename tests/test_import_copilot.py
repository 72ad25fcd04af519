"""GitHub Copilot CLI: the event log Copilot CLI 1.0.102 wrote with its own key pointed at a local upstream
(tests/fixtures/copilot, see its NOTICE.md), to the token, equal to Copilot's own running totals; then hand-written
events: a usage record whose reply came later, bad and unknown lines, an empty file; and every cut of the real log."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_logs import import_cut_then_whole
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reasonlog.io.formats.copilot import importer as copilot
from reasonlog.io.importing import plan, run_import
from reasonlog.store import open_store

ROOT = Path(__file__).resolve().parent / "fixtures" / "copilot" / "v1.0.102" / "session-state"
SID = "a285b3e5-3a04-49d1-81df-bd8b64a1777c"
REAL = ROOT / SID / "events.jsonl"


def test_the_log_copilot_wrote_imports_with_its_tokens(db):
    store = open_store(db)
    report = run_import(store, plan([ROOT]))
    assert (report.failed, report.skipped, report.rejected) == ([], [], 0)
    assert report.added == {"sessions": 1, "calls": 3, "messages": 7, "tool_results": 1, "outcomes": 2}
    session = store.get_session(SID)
    assert (session["agent"], session["model"]) == ("copilot-cli", "gpt-4.1-nano")
    assert session["labels"] == {"source": "copilot", "cwd": "/tmp/h22imp/cproj", "branch": "master",
                                 "version": "1.0.102"}
    calls = session["calls"]
    assert [(c["input_tokens"], c["cache_read_tokens"], c["output_tokens"], c["reasoning_tokens"], c["latency_ms"])
            for c in calls] == [(19, 320, 83, 39, 114.0), (16, 0, 300, 0, 38.0), (16, 0, 300, 0, 163.0)]
    # Copilot's own running totals (its last session.shutdown) count input with the cache reads in it.
    totals = session["outcomes"][-1]["payload"]["modelMetrics"]["gpt-4.1-nano"]["usage"]
    assert (totals["inputTokens"], totals["outputTokens"]) == (
        sum(c["input_tokens"] + c["cache_read_tokens"] for c in calls), sum(c["output_tokens"] for c in calls))
    assert [round(c["cost_usd"], 10) for c in calls] == [0.0000431, 0.0001216, 0.0001216]  # list prices
    assert [(t["name"], t["input"], t["is_error"]) for t in session["tool_results"]] == [
        ("bash", {"command": "echo hello"}, False)]
    sent = store.replay_call(calls[1]["id"])
    assert sent["system"].startswith("You are the GitHub Copilot CLI")
    assert [b["type"] for m in sent["messages"] for b in m["content"]] == ["text", "thinking", "tool_use",
                                                                           "tool_result"]
    assert run_import(store, plan([ROOT])).unchanged == 1


def event(kind: str, second: int, n: int, **data) -> dict:
    return {"type": kind, "data": data, "id": f"e{n}", "timestamp": f"2026-01-01T10:00:{second:02d}.000Z",
            "parentId": None}


def start() -> dict:
    return event("session.start", 0, 0, sessionId="c1", copilotVersion="1.0.102", selectedModel="gpt-5",
                 context={"cwd": "/w"})


def usage(second: int, n: int, api: str) -> dict:
    return event("session.usage_record", second, n, usage={
        "model": "gpt-5", "inputTokens": 100, "outputTokens": 10, "cacheReadTokens": 40, "reasoningTokens": 4,
        "cost": 1.0, "duration": 500, "apiCallId": api})


def write(path: Path, lines: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_a_reply_after_its_usage_was_imported_alone_imports_the_log_again(db, tmp_path):
    lines = [start(), event("user.message", 1, 1, content="hi"), usage(2, 2, "r1"),
             event("assistant.message", 3, 3, content="hello", apiCallId="r1")]
    path = write(tmp_path / "c1" / "events.jsonl", lines[:3])
    store = open_store(db)
    run_import(store, plan([path], "copilot"))
    (call,) = store.get_session("c1")["calls"]
    # Copilot's `cost` 1.0 is one premium request, not a dollar: the call is priced at gpt-5's list prices.
    assert (call["input_tokens"], call["cache_read_tokens"], round(call["cost_usd"], 9)) == (60, 40, 0.00018)
    write(path, lines)
    assert run_import(store, plan([path], "copilot")).rewritten == 1
    (call,) = store.get_session("c1")["calls"]
    assert store.get_call(call["id"])["response"]["content"] == [{"type": "text", "text": "hello"}]


def test_bad_lines_are_named_and_unknown_events_kept(db, tmp_path):
    bad = usage(2, 2, "r1")
    bad["data"]["usage"]["outputTokens"] = 1.5
    path = write(tmp_path / "c1" / "events.jsonl", [
        event("user.message", 0, 9, content="too early"), start(), "{nope", {"type": "x"}, bad,
        event("assistant.message", 3, 3, content="hello", apiCallId="r1"),
        event("session.model_change", 4, 4, newModel="gpt-5-mini")])
    with open(path, "a") as f:
        f.write('{"type": "user.mess')
    store = open_store(db)
    report = run_import(store, plan([path], "copilot"))
    assert report.skipped == [
        (f"{path}:1", "an event before `session.start` (with a `sessionId` and a `timestamp`)"),
        (f"{path}:3", "not JSON (unexpected character, expected a string key)"),
        (f"{path}:4", "expected an event with a string `type` and a `data` object"),
        (f"{path}:5", "usage.outputTokens: expected a non-negative integer, got 1.5; the call is kept without usage")]
    session = store.get_session("c1")
    assert [c["input_tokens"] for c in session["calls"]] == [None]
    assert [o["kind"] for o in session["outcomes"]] == ["copilot:session.model_change"]


def test_an_empty_file_adds_nothing(db, tmp_path):
    path = write(tmp_path / "c1" / "events.jsonl", [])
    report = run_import(open_store(db), plan([path], "copilot"))
    assert (report.failed, report.skipped, report.added["sessions"]) == ([], [], 0)


def test_the_default_folder_follows_copilot_home(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("COPILOT_HOME", raising=False)
    assert copilot.default_folders() == [tmp_path / ".copilot" / "session-state"]
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "c"))
    assert copilot.default_folders() == [tmp_path / "c" / "session-state"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, REAL.stat().st_size))
@pytest.mark.slow
def test_any_cut_of_the_real_log_imports_without_error_and_completes_to_the_whole(tmp_path_factory, cut):
    import_cut_then_whole(tmp_path_factory.mktemp("cut"), REAL, f"{SID}/events.jsonl", cut, "copilot")


def test_a_log_without_usage_records_says_so_and_its_tokens_are_unknown(db, tmp_path):
    """Issue 31 item 6: a Copilot log with no `session.usage_record` (what some versions and setups write) gave calls
    of 0 tokens and said nothing."""
    folder = tmp_path / SID
    folder.mkdir()
    lines = [line for line in REAL.read_text().splitlines(keepends=True) if '"session.usage_record"' not in line]
    (folder / "events.jsonl").write_text("".join(lines))
    store = open_store(db)
    report = run_import(store, plan([folder]))
    assert (report.failed, report.skipped) == ([], [])
    assert report.notes == ["Copilot CLI wrote no `session.usage_record` for 3 call(s) of "
                            f"{folder / 'events.jsonl'}: their tokens and cost are unknown (not 0)"]
    calls = store.get_session(SID)["calls"]
    assert [(c["input_tokens"], c["output_tokens"], c["cost_usd"]) for c in calls] == [(None, None, None)] * 3
