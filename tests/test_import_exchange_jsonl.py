"""Exchange-based session JSONL and reasonlog's own export, imported through `reasonlog import`: the exchange
form round-trips, a resumed logger's file is one session, appended exchanges are imported alone; an export
imports once, and a cut one is refused at its line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from reasonlog.claude_agent import ClaudeAgentLogger
from reasonlog.io import jsonl
from reasonlog.io.exchange_jsonl import export_exchange_jsonl
from reasonlog.io.importing import plan, run_import
from reasonlog.store import SessionFilter, open_store

STREAM = Path(__file__).resolve().parent / "fixtures" / "claude_agent" / "two-exchanges-cumulative.jsonl"
ALL = SessionFilter(limit=None)


def recorded_session(recorder) -> None:
    messages = [json.loads(line) for line in STREAM.read_text().splitlines()]
    results = [m for m in messages if m["type"] == "result"]
    with ClaudeAgentLogger(recorder) as logger:
        logger.log_user_input("Run echo hi and tell me what it printed.")
        for m in messages:
            logger.log(m)
            if m is results[0]:
                logger.log_user_input("What is 2+2?")


def exported_lines(store) -> list[str]:
    (session,) = store.list_sessions(ALL)
    return list(export_exchange_jsonl(store, session["id"]))


def test_an_exported_session_round_trips(recorder, store_of, tmp_path):
    recorded_session(recorder)
    first = exported_lines(store_of())
    path = tmp_path / "session.jsonl"
    path.write_text("".join(first))
    store = open_store(tmp_path / "other.db")
    report = run_import(store, plan([path]))
    assert (report.failed, report.skipped) == ([], [])
    assert report.added == {"sessions": 1, "calls": 3, "messages": 6, "tool_results": 1, "outcomes": 0}
    assert exported_lines(store) == first
    (session,) = store.list_sessions(ALL)
    reported = [json.loads(line) for line in first][-1]
    assert session["cost_usd"] == pytest.approx(reported["total_cost_usd"])
    assert (session["input_tokens"], session["output_tokens"]) == (24, 39)


def test_a_resumed_logger_file_is_one_session_and_grows_incrementally(db, recorder, store_of, tmp_path):
    recorded_session(recorder)
    start, ex1, ex2, end = exported_lines(store_of())
    path = tmp_path / "resumed.jsonl"
    path.write_text(start + ex1 + end)
    store = open_store(db)
    assert run_import(store, plan([path])).added["calls"] == 2
    with open(path, "a") as f:  # the logger was resumed: its start again, one more exchange, another end
        f.write(start + ex2 + end)
    grown = run_import(store, plan([path]))
    assert (grown.appended, grown.added["sessions"], grown.added["calls"]) == (1, 0, 1)
    (session,) = store.list_sessions(ALL)
    full = store.get_session(session["id"])
    assert [e["input"] for e in full["exchanges"]] == ["Run echo hi and tell me what it printed.", "What is 2+2?"]
    # The second exchange's call was sent the first exchange's conversation too.
    last = store.replay_call(full["calls"][-1]["id"])
    assert [m["role"] for m in last["messages"]] == ["user", "assistant", "user", "assistant", "user"]


def test_bad_lines_are_named(db, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"type": "session_start", "session_id": "s1", "ts": "2026-01-01T00:00:00Z"}\n'
                    '{"type": "exchange", "ts_start": "yesterday", "messages": []}\n'
                    '{"type": "weather"}\n'
                    '{"type": "exchange", "exchange": 2, "ts_start": "2026-01-01T00:01:00Z", "user_input": "hi",'
                    ' "messages": [{"source": "assistant", "type": "text", "text": "hello",'
                    ' "ts": "2026-01-01T00:01:01Z"}]}\n')
    store = open_store(db)
    report = run_import(store, plan([path]))
    assert [(w.rsplit(":", 1)[1], why.split(":")[0]) for w, why in report.skipped] == [
        ("2", "ts_start"), ("3", "unknown line type 'weather' (expected session_start, exchange or session_end)")]
    assert report.added["calls"] == 1


def test_reasonlog_exports_import_once_and_a_cut_one_is_refused(db, recorder, store_of, tmp_path):
    recorded_session(recorder)
    export = tmp_path / "all.jsonl"
    with open(export, "wb") as out:
        jsonl.write_export(store_of(), out)
    store = open_store(db)
    first = run_import(store, plan([export]))
    assert (first.failed, first.added["sessions"], first.added["calls"]) == ([], 1, 3)
    again = run_import(store, plan([export]))
    assert again.added == dict.fromkeys(first.added, 0)
    lines = export.read_bytes().splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(lines[:-1]))
    refused = run_import(open_store(tmp_path / "fresh.db"), plan([cut]))
    assert refused.failed == [(f"{cut}:{len(lines) - 1}",
                               "the export is incomplete: it ends here without its end record"
                               " (was the file cut short?)")]


def test_detection_of_the_two_formats(recorder, store_of, tmp_path):
    recorded_session(recorder)
    (tmp_path / "x.jsonl").write_text("".join(exported_lines(store_of())))
    with open(tmp_path / "y.jsonl", "wb") as out:
        jsonl.write_export(store_of(), out)
    assert [imp.name for _, imp in plan([tmp_path / "x.jsonl"])] == ["exchange-jsonl"]
    assert [imp.name for _, imp in plan([tmp_path / "y.jsonl"])] == ["reasonlog-jsonl"]
