"""Claude Agent SDK message dumps: imported as ClaudeAgentLogger records the same stream live (sessions, calls,
tokens, cost), as JSONL or a JSON array, once however often and from wherever it is imported."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES

import reasonlog
from reasonlog.claude_agent import ClaudeAgentLogger
from reasonlog.io.importing import plan, run_import
from reasonlog.store import SessionFilter, open_store

STREAM = Path(__file__).resolve().parent / "fixtures" / "claude_agent" / "two-exchanges-cumulative.jsonl"
TRIMMED = FIXTURES / "claude-agent-sdk" / "subagent-step-stream.json"
ALL = SessionFilter(limit=None)


def figures(store) -> list[tuple]:
    out = []
    for s in sorted(store.list_sessions(ALL), key=lambda s: (s["agent"] or "", s["call_count"])):
        full = store.get_session(s["id"])
        out.append((s["agent"], s["model"], s["call_count"], s["input_tokens"], s["output_tokens"],
                    s["cache_read_tokens"], s["cache_write_tokens"], round(s["cost_usd"] or 0, 9),
                    [(c["input_tokens"], c["output_tokens"]) for c in full["calls"]], len(full["tool_results"])))
    return out


def test_a_dump_imports_as_the_logger_records_it_live(db, tmp_path):
    live = reasonlog.Recorder(tmp_path / "live.db", writer="sync")
    with ClaudeAgentLogger(live) as logger:
        for line in STREAM.read_text().splitlines():
            logger.log(json.loads(line))
    live.close()
    store = open_store(db)
    report = run_import(store, plan([STREAM]))
    assert (report.failed, report.skipped) == ([], [])
    assert figures(store) == figures(open_store(tmp_path / "live.db"))
    (session,) = store.list_sessions(ALL)
    results = [json.loads(x) for x in STREAM.read_text().splitlines() if json.loads(x)["type"] == "result"]
    assert session["cost_usd"] == pytest.approx(results[-1]["total_cost_usd"])
    assert session["external_id"] == results[-1]["session_id"]


def test_a_json_array_is_the_same_and_a_copy_is_imported_once(db, tmp_path):
    array = tmp_path / "a" / "dump.json"
    array.parent.mkdir()
    array.write_text(json.dumps([json.loads(x) for x in STREAM.read_text().splitlines()]))
    copy = tmp_path / "b" / "dump.json"
    copy.parent.mkdir()
    shutil.copy(array, copy)
    store = open_store(db)
    first = run_import(store, plan([array]))
    assert (first.added["sessions"], first.added["calls"]) == (1, 3)
    again = run_import(store, plan([copy]))
    assert again.added == dict.fromkeys(first.added, 0)


def test_a_trimmed_dump_without_init_keeps_its_subagent(db, tmp_path):
    store = open_store(db)
    report = run_import(store, plan([TRIMMED]))
    assert (report.failed, report.skipped) == ([], [])
    sessions = {s["agent"] or "main": s for s in store.list_sessions(ALL)}
    assert set(sessions) == {"main", "general-purpose"}
    child = sessions["general-purpose"]
    assert child["parent_session_id"] == sessions["main"]["id"]
    main = store.get_session(sessions["main"]["id"])
    # The thinking and tool_use blocks of the main agent's one message are one call.
    (call,) = main["calls"]
    blocks = store.get_call(call["id"])["response"]["content"]
    assert [b["type"] for b in blocks] == ["thinking", "tool_use"]


def test_bad_messages_are_named(db, tmp_path):
    dump = tmp_path / "bad.jsonl"
    lines = STREAM.read_text().splitlines()
    dump.write_text("\n".join([lines[0], "[1, 2]", '{"no": "type"}', "{oops", *lines[1:]]) + "\n")
    store = open_store(db)
    report = run_import(store, plan([dump]))
    assert [(w.rsplit(":", 1)[1], why) for w, why in report.skipped] == [
        ("4", "not JSON (unexpected character, expected a string key)"),
        ("2", "expected an SDK message (an object with a `type`)"),
        ("3", "expected an SDK message (an object with a `type`)")]
    assert report.added["calls"] == 3
