"""Qwen Code: the chat Qwen Code 0.15.10 wrote (tests/fixtures/qwen, see its NOTICE.md), to the token, with the call
it made on the side (memory) counted; then hand-written records: a rewind, a compression, a cut or unknown line,
an empty file, a reply that comes after its telemetry was imported as a side call; and every cut of the real file."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from agent_logs import import_cut_then_whole
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reasonlog.io.formats.qwen import importer as qwen
from reasonlog.io.importing import plan, run_import
from reasonlog.store import open_store

ROOT = Path(__file__).resolve().parent / "fixtures" / "qwen" / "v0.15.10" / "projects"
SID = "1d4146fa-629e-4e5d-8ddb-afd61865dc66"
REAL = ROOT / "-tmp-h22imp-qproj" / "chats" / f"{SID}.jsonl"


def test_the_chat_qwen_code_wrote_imports_with_its_tokens(db):
    store = open_store(db)
    report = run_import(store, plan([ROOT]))
    assert (report.failed, report.skipped, report.rejected) == ([], [], 0)
    assert report.added == {"sessions": 2, "calls": 4, "messages": 7, "tool_results": 1, "outcomes": 0}
    session = store.get_session(SID)
    assert session["agent"] == "qwen-code"
    assert session["labels"] == {"source": "qwen", "cwd": "/tmp/h22imp/qproj", "version": "0.15.10"}
    assert [(c["input_tokens"], c["output_tokens"], c["cache_read_tokens"], c["reasoning_tokens"], c["latency_ms"])
            for c in session["calls"]] == [(19, 83, 320, 39, 60.0), (16, 300, 0, 0, 76.0), (16, 300, 0, 0, 439.0)]
    # No cost in the file: priced from gpt-4.1-nano's list prices (cache reads at a quarter of the input price).
    assert [round(c["cost_usd"], 10) for c in session["calls"]] == [0.0000431, 0.0001216, 0.0001216]
    # The memory extraction after the second prompt is a sub-agent's call, kept only as telemetry: a child session.
    memory = store.get_session(f"{SID}@managed-auto-memory-extractor-xy6qt1")
    assert (memory["agent"], memory["parent_session_id"]) == ("managed-auto-memory-extractor", SID)
    assert [(c["input_tokens"], c["output_tokens"], c["latency_ms"]) for c in memory["calls"]] == [(16, 300, 64.0)]
    assert [e["input"] for e in session["exchanges"]] == ["Please run the shell command: echo hello",
                                                          "Thanks, that is all"]
    assert [(t["name"], t["is_error"]) for t in session["tool_results"]] == [("run_shell_command", False)]
    sent = store.replay_call(session["calls"][1]["id"])["contents"]
    assert [c["role"] for c in sent] == ["user", "model", "user"]
    assert run_import(store, plan([ROOT])).unchanged == 1


SUB = Path(__file__).resolve().parent / "fixtures" / "qwen" / "v0.15.10-subagent" / "projects"
SUB_ID = "9fd14cdc-04c9-4a58-893f-dfdd21f9551b"


def test_a_subagents_calls_which_qwen_keeps_only_as_telemetry_are_a_child_session(db):
    store = open_store(db)
    report = run_import(store, plan([SUB]))
    assert (report.failed, report.skipped, report.rejected) == ([], [], 0)
    assert report.added == {"sessions": 2, "calls": 4, "messages": 6, "tool_results": 1, "outcomes": 0}
    main, child = store.get_session(SUB_ID), store.get_session(f"{SUB_ID}@general-purpose-mvzcph")
    assert (child["agent"], child["parent_session_id"], child["status"]) == ("general-purpose", SUB_ID, "completed")
    assert [(c["input_tokens"], c["cache_read_tokens"], c["output_tokens"]) for c in main["calls"]] == [
        (19, 320, 83), (16, 0, 300)]
    assert [(c["input_tokens"], c["cache_read_tokens"], c["output_tokens"]) for c in child["calls"]] == [
        (19, 320, 83), (16, 0, 300)]
    assert [(t["name"], t["content"][:17]) for t in main["tool_results"]] == [("agent", "**Holiday Name:**")]


def record(uuid: str, parent: str | None, kind: str, second: int, **more) -> dict:
    return {"uuid": uuid, "parentUuid": parent, "sessionId": "q1", "timestamp": f"2026-01-01T10:00:{second:02d}.000Z",
            "type": kind, "cwd": "/w", "version": "0.15.10", **more}


def user(uuid: str, parent: str | None, text: str, second: int) -> dict:
    return record(uuid, parent, "user", second, message={"role": "user", "parts": [{"text": text}]})


def reply(uuid: str, parent: str | None, text: str, second: int, prompt: int = 100) -> dict:
    return record(uuid, parent, "assistant", second, model="qwen3-coder-plus",
                  message={"role": "model", "parts": [{"text": text}]},
                  usageMetadata={"promptTokenCount": prompt, "candidatesTokenCount": 10,
                                 "totalTokenCount": prompt + 10})


def telemetry(uuid: str, parent: str | None, second: int) -> dict:
    return record(uuid, parent, "system", second, subtype="ui_telemetry", systemPayload={"uiEvent": {
        "event.name": "qwen-code.api_response", "model": "qwen3-coder-plus", "duration_ms": 70,
        "input_token_count": 50, "output_token_count": 5, "total_token_count": 55, "response_text": "side"}})


def write(path: Path, lines: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_a_rewind_and_a_compression_change_the_conversation_the_next_call_sends(db, tmp_path):
    compressed = [{"role": "user", "parts": [{"text": "summary of it all"}]}]
    path = write(tmp_path / "q1.jsonl", [
        user("u1", None, "first", 1), reply("a1", "u1", "one", 2),
        user("u2", "a1", "second", 3), reply("a2", "u2", "two", 4),
        record("r1", "a1", "system", 5, subtype="rewind", systemPayload={"targetTurnIndex": 1}),
        user("u3", "r1", "second again", 6), reply("a3", "u3", "two again", 7),
        record("c1", "a3", "system", 8, subtype="chat_compression",
               systemPayload={"info": {"originalTokenCount": 900}, "compressedHistory": compressed}),
        user("u4", "c1", "after", 9), reply("a4", "u4", "done", 10)])
    store = open_store(db)
    report = run_import(store, plan([path], "qwen"))
    assert report.added["outcomes"] == 2  # qwen:rewind, qwen:chat_compression
    calls = store.get_session("q1")["calls"]
    texts = [[p["parts"][0]["text"] for p in store.replay_call(c["id"])["contents"]] for c in calls]
    assert texts == [["first"], ["first", "one", "second"], ["first", "one", "second again"],
                     ["summary of it all", "after"]]


def test_bad_lines_are_named_and_an_unknown_type_kept(db, tmp_path):
    bad_usage = reply("a1", "u1", "one", 2)
    bad_usage["usageMetadata"]["promptTokenCount"] = -1
    path = write(tmp_path / "q1.jsonl", [user("u1", None, "hi", 1), "{oops", [1], bad_usage,
                                         record("x1", "a1", "hologram", 3),
                                         record("m1", "x1", "assistant", 4, message="text")])
    with open(path, "a") as f:
        f.write('{"uuid": "cut')  # a last line still being written
    store = open_store(db)
    report = run_import(store, plan([path], "qwen"))
    assert report.skipped == [
        (f"{path}:2", "not JSON (unexpected character, expected a string key)"),
        (f"{path}:3", "expected a record with string `uuid`, `sessionId` and `type`, and `parentUuid`"
         " (a text or null)"),
        (f"{path}:4", "promptTokenCount: expected a non-negative integer, got -1; the call is kept without usage"),
        (f"{path}:6", "a assistant record needs a `message` with a `parts` list")]
    session = store.get_session("q1")
    assert [c["input_tokens"] for c in session["calls"]] == [None]
    assert [o["kind"] for o in session["outcomes"]] == ["qwen:hologram"]


def test_an_empty_file_adds_nothing(db, tmp_path):
    path = write(tmp_path / "q1.jsonl", [])
    report = run_import(open_store(db), plan([path], "qwen"))
    assert (report.failed, report.skipped, report.added["sessions"]) == ([], [], 0)


def test_a_reply_after_its_telemetry_was_taken_for_a_side_call_imports_the_file_again(db, tmp_path):
    lines = [user("u1", None, "hi", 1), telemetry("t1", "u1", 2), reply("a1", "t1", "hello", 3, prompt=50)]
    path = write(tmp_path / "q1.jsonl", lines[:2])
    store = open_store(db)
    first = run_import(store, plan([path], "qwen"))
    assert [store.get_call(c["id"])["response"]["parts"] for c in store.get_session("q1")["calls"]] == [
        [{"text": "side"}]]
    assert first.added["calls"] == 1
    write(path, lines)
    again = run_import(store, plan([path], "qwen"))
    assert again.rewritten == 1
    calls = store.get_session("q1")["calls"]
    assert [(store.get_call(c["id"])["response"]["parts"], c["latency_ms"]) for c in calls] == [
        ([{"text": "hello"}], 70.0)]


def test_the_default_folder_follows_qwen_home(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("QWEN_HOME", "QWEN_RUNTIME_DIR"):
        monkeypatch.delenv(name, raising=False)
    assert qwen.default_folders() == [tmp_path / ".qwen" / "projects"]
    monkeypatch.setenv("QWEN_HOME", str(tmp_path / "q"))
    assert qwen.default_folders() == [tmp_path / "q" / "projects"]


def test_a_qwen_chat_is_detected_and_a_claude_transcript_is_not(tmp_path):
    assert qwen.detect(ROOT)
    other = tmp_path / "x.jsonl"
    shutil.copy(Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real" / "claude-code-transcripts"
                / "spotter" / "short.jsonl", other)
    assert not qwen.detect(other)
    assert plan([other])[0][1].name == "claude-code"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, REAL.stat().st_size))
@pytest.mark.slow
def test_any_cut_of_the_real_chat_imports_without_error_and_completes_to_the_whole(tmp_path_factory, cut):
    import_cut_then_whole(tmp_path_factory.mktemp("cut"), REAL, "chats/q.jsonl", cut, "qwen")


def test_under_watch_a_last_api_response_waits_while_the_file_is_fresh(db, tmp_path):
    path = write(tmp_path / "q1.jsonl", [user("u1", None, "hi", 1), telemetry("t1", "u1", 2)])
    store = open_store(db)
    assert run_import(store, plan([path], "qwen"), live=True).added["calls"] == 0  # its reply may come next
    rested = path.stat().st_mtime - 60
    os.utime(path, (rested, rested))
    assert run_import(store, plan([path], "qwen"), live=True).added["calls"] == 1  # at rest: a side call


def test_a_parent_uuid_that_is_an_object_costs_its_line(tmp_path):
    """Found by tests/test_import_mutants.py: a `parentUuid` of another type reached the importer's rewind and
    failed there (`unhashable type: 'dict'`); it is that line's skip, with what was expected."""
    lines = REAL.read_text().splitlines(keepends=True)
    k = next(i for i, raw in enumerate(lines) if i and json.loads(raw).get("parentUuid"))
    record = json.loads(lines[k])
    record["parentUuid"] = {"uuid": record["parentUuid"]}
    lines[k] = json.dumps(record) + "\n"
    target = tmp_path / REAL.name
    target.write_text("".join(lines))
    store = open_store(tmp_path / "t.db")
    report = run_import(store, plan([target], "qwen"))
    assert report.failed == []
    assert report.skipped == [(f"{target}:{k + 1}", "expected a record with string `uuid`, `sessionId` and `type`,"
                               " and `parentUuid` (a text or null)")]
