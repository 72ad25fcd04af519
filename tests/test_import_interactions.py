"""Per-interaction conversation JSON (synthetic files that follow the documented structure, see
tests/fixtures/interactions/README.md): one call per file replaying what was sent, sliding-window facts,
XML tool tags, tool follow-ups in their exchange, and storage that holds each resent message once."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import orjson
import pytest

from reasonlog.io.importing import plan, run_import
from reasonlog.store import SessionFilter, open_store

LOGS = Path(__file__).resolve().parent / "fixtures" / "interactions" / "logs"
ALL = SessionFilter(limit=None)


def files(session: str = "consulta-7f3a") -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(LOGS.glob(f"conversation_{session}_*.json"))]


def the_session(store, external: str = "consulta-7f3a") -> dict:
    (s,) = [s for s in store.list_sessions(ALL) if s["external_id"] == external]
    return store.get_session(s["id"])


def test_each_file_is_a_call_that_replays_what_was_sent(db, tmp_path):
    store = open_store(db)
    report = run_import(store, plan([LOGS]))
    assert (report.files, report.failed, report.skipped) == (21, [], [])
    session = the_session(store)
    records = files()
    assert len(session["calls"]) == 20
    for call, record in zip(session["calls"], records, strict=True):
        sent = store.replay_call(call["id"])
        meta = record["request_metadata"]
        history = meta["conversation_history_sent_to_llm"]
        assert sent["system"] == meta["system_prompt"]
        assert sent["messages"][:len(history)] == history
        assert (sent["max_tokens"], sent["temperature"]) == (2048, 0.2)
        m = record["metrics"]
        assert (call["input_tokens"] + call["cache_read_tokens"], call["cache_read_tokens"], call["output_tokens"],
                call["latency_ms"], call["stop_reason"]) == (m["tokens_input"], m["cache_tokens_saved"],
                                                             m["tokens_output"], m["llm_time_ms"], "end_turn")
        given = meta["sliding_window_info"]
        assert {k: call["context_facts"][k] for k in given} == given


def test_tool_tags_follow_ups_and_the_sliding_window(db, tmp_path):
    store = open_store(db)
    run_import(store, plan([LOGS]))
    session = the_session(store)
    assert session["xml_tool_tags"] == ["query_db", "read_doc"]
    # 12 questions; the 8 that used a tool have a follow-up call in the same exchange
    assert [len([c for c in session["calls"] if c["exchange_id"] == e["id"]]) for e in session["exchanges"]] == \
        [2, 2, 2, 1, 2, 1, 2, 2, 1, 2, 2, 1]
    last = files()[-1]["request_metadata"]["sliding_window_info"]
    assert (last["turns_in_context"], last["turns_removed"]) == (10, 9)
    final = store.get_session(session["id"])["calls"][-1]["context_facts"]
    assert (final["turns_in_context"], final["turns_removed"], final["derived"]) == (10, 9, False)


def test_storage_holds_each_message_once(db, tmp_path):
    store = open_store(db)
    run_import(store, plan([LOGS]))
    distinct = set()
    for record in files() + files("consulta-b001"):
        meta = record["request_metadata"]
        distinct.add(orjson.dumps(meta["system_prompt"], option=orjson.OPT_SORT_KEYS))
        for m in meta["conversation_history_sent_to_llm"]:
            distinct.add(orjson.dumps(m, option=orjson.OPT_SORT_KEYS))
        distinct.add(orjson.dumps({"content": record["llm_response"], "role": "assistant"},
                                  option=orjson.OPT_SORT_KEYS))
    sent = sum(len(json.dumps(r["request_metadata"]["conversation_history_sent_to_llm"]))
               for r in files() + files("consulta-b001"))
    stored = store.status()["unique_content_bytes"]
    assert stored == sum(len(d) for d in distinct)
    assert stored * 3 < sent  # the resent history is stored once


@pytest.mark.slow
def test_reimport_adds_nothing_and_a_bad_file_is_named(db, tmp_path):
    logs = tmp_path / "logs"
    shutil.copytree(LOGS, logs)
    store = open_store(db)
    first = run_import(store, plan([logs]))
    assert run_import(store, plan([logs])).added == dict.fromkeys(first.added, 0)
    (logs / "conversation_broken_20251105_000000.json").write_text('{"request_metadata": {}, "llm_response": "x"}')
    (logs / "conversation_cut_20251105_000001.json").write_text('{"request_metadata": {"llm_response"')
    report = run_import(store, plan([logs]))
    assert sorted((Path(w).name, why) for w, why in report.skipped) == [
        ("conversation_broken_20251105_000000.json", "missing field(s) timestamp, session_id"),
        ("conversation_cut_20251105_000001.json", "not JSON (unexpected end of data)")]
    assert report.added["calls"] == 0


def test_detection():
    assert {imp.name for _, imp in plan([LOGS])} == {"interactions"}
