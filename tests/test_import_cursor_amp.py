"""Cursor agent transcripts and Amp threads, from files written by hand in the shapes their readers document
(tests/fixtures/cursor and tests/fixtures/amp, see their NOTICE.md: no real file with a licence was found): Cursor
with no tokens and the import saying so, Amp to the token and cent from its ledger; bad and unknown records, empty
files, a cut at any byte."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_logs import import_cut_then_whole
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reasonlog.io.formats.amp import importer as amp
from reasonlog.io.formats.cursor import NO_USAGE, cursor_time
from reasonlog.io.formats.cursor import importer as cursor
from reasonlog.io.importing import plan, run_import
from reasonlog.store import open_store

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CURSOR_ID = "6f1c2b9e-4a3d-4e8f-9b21-0c5d7a8e1f42"
CURSOR = FIXTURES / "cursor" / "projects" / "home-me-src-app" / "agent-transcripts" / CURSOR_ID / f"{CURSOR_ID}.jsonl"
AMP_ID = "T-3f2a9c4e-8b1d-4e7a-9f60-2c5b8d1e7a93"
AMP = FIXTURES / "amp" / "threads" / f"{AMP_ID}.json"


def test_a_cursor_transcript_imports_without_inventing_tokens(db):
    store = open_store(db)
    report = run_import(store, plan([FIXTURES / "cursor" / "projects"]))
    assert (report.failed, report.skipped, report.rejected, report.notes) == ([], [], 0, [NO_USAGE])
    assert report.added == {"sessions": 1, "calls": 4, "messages": 6, "tool_results": 0, "outcomes": 0}
    session = store.get_session(CURSOR_ID)
    assert (session["agent"], session["labels"], session["started_at"]) == (
        "cursor", {"source": "cursor", "project": "home-me-src-app"}, "2026-11-25T16:20:00.000000Z")
    assert [(e["input"], e["started_at"]) for e in session["exchanges"]] == [
        ("run the tests and tell me what fails", "2026-11-25T16:20:00.000000Z"),
        ("fix it", "2026-11-25T16:24:00.000000Z")]
    assert [(c["input_tokens"], c["cost_usd"], c["model"]) for c in session["calls"]] == [(None, None, None)] * 4
    sent = store.replay_call(session["calls"][1]["id"])["messages"]
    assert [b["type"] for m in sent for b in m["content"]] == ["text", "text", "tool_use"]
    assert run_import(store, plan([CURSOR])).unchanged == 1


def test_cursor_times_are_read_with_their_zone():
    assert cursor_time("Sunday, Sep 20, 2026, 12:31 AM (UTC+3)") == "2026-09-19T21:31:00.000000Z"
    assert cursor_time("Monday, Jan 5, 2026, 11:05 PM (UTC-5:30)") == "2026-01-06T04:35:00.000000Z"
    assert cursor_time("Sunday, Smarch 20, 2026, 12:31 AM (UTC+3)") is None


def write(path: Path, lines: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_bad_cursor_lines_are_named_and_unknown_ones_kept(db, tmp_path):
    path = write(tmp_path / "p" / "agent-transcripts" / "c1.jsonl", [
        {"role": "user", "message": {"content": "<user_query>hi</user_query>"}}, "{no", "7",
        {"role": "robot", "message": {"content": []}}, {"type": "checkpoint", "n": 1},
        {"role": "assistant", "message": {"content": [{"type": "text", "text": "hello"}]}},
        {"type": "turn_ended", "status": "aborted"}])
    with open(path, "a") as f:
        f.write('{"role": "user", "mess')
    store = open_store(db)
    report = run_import(store, plan([path], "cursor"))
    assert report.skipped == [(f"{path}:2", "not JSON (unexpected character, expected a string key)"),
                              (f"{path}:3", "expected a JSON object"),
                              (f"{path}:4", "a message needs a `role` (user or assistant) and `message.content`")]
    session = store.get_session("c1")
    assert [o["kind"] for o in session["outcomes"]] == ["cursor:checkpoint", "cursor:turn_ended"]
    assert (len(session["calls"]), [e["input"] for e in session["exchanges"]]) == (1, ["hi"])


def test_a_cursor_transcript_that_grows_adds_only_the_new_lines(db, tmp_path):
    path = tmp_path / "p" / "agent-transcripts" / "c1" / "c1.jsonl"
    lines = CURSOR.read_text().splitlines(keepends=True)
    path.parent.mkdir(parents=True)
    path.write_text("".join(lines[:4]))
    store = open_store(db)
    assert run_import(store, plan([path])).added["calls"] == 2
    path.write_text("".join(lines))
    grown = run_import(store, plan([path]))
    assert (grown.appended, grown.added["calls"], grown.added["sessions"]) == (1, 2, 0)
    sent = store.replay_call(store.get_session("c1")["calls"][3]["id"])["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "assistant", "user", "assistant"]


def test_an_amp_thread_imports_each_billed_request_with_its_cache_tokens(db):
    store = open_store(db)
    report = run_import(store, plan([FIXTURES / "amp" / "threads"]))
    assert (report.failed, report.skipped, report.rejected, report.notes) == ([], [], 0, [])
    assert report.added == {"sessions": 1, "calls": 4, "messages": 6, "tool_results": 2, "outcomes": 0}
    session = store.get_session(AMP_ID)
    assert session["labels"] == {"source": "amp", "title": "Fix the failing date test", "cwd": "/home/me/src/app"}
    assert [(c["model"], c["input_tokens"], c["cache_write_tokens"], c["cache_read_tokens"], c["output_tokens"])
            for c in session["calls"]] == [
        ("claude-sonnet-4-5-20250929", 12, 9120, 0, 96), ("claude-sonnet-4-5-20250929", 40, 210, 9120, 152),
        ("claude-sonnet-4-5-20250929", 35, 0, 9330, 40), ("claude-haiku-4-5-20251001", 310, 0, 0, 12)]
    # Amp's credits are not dollars: priced at list prices (cache writes 1.25x, reads 0.1x the input price).
    assert [round(c["cost_usd"], 7) for c in session["calls"]] == [0.035676, 0.0059235, 0.003504, 0.00037]
    assert [(t["tool_use_id"], t["is_error"]) for t in session["tool_results"]] == [("toolu_01A", False),
                                                                                    ("toolu_01B", True)]
    assert run_import(store, plan([AMP])).unchanged == 1


def test_a_rewritten_amp_thread_is_imported_again_whole(db, tmp_path):
    path = tmp_path / "threads" / AMP.name
    thread = json.loads(AMP.read_text())
    kept, thread["messages"] = thread["messages"], thread["messages"][:2]
    thread["usageLedger"]["events"] = thread["usageLedger"]["events"][:1]
    path.parent.mkdir()
    path.write_text(json.dumps(thread))
    store = open_store(db)
    assert run_import(store, plan([path])).added["calls"] == 1
    thread["messages"] = kept
    thread["usageLedger"] = json.loads(AMP.read_text())["usageLedger"]
    path.write_text(json.dumps(thread, indent=1))
    again = run_import(store, plan([path]))
    assert (again.rewritten, again.added["calls"]) == (1, 3)
    assert len(store.get_session(AMP_ID)["calls"]) == 4


def test_bad_amp_records_are_named(db, tmp_path):
    path = tmp_path / "threads" / "T-1.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"id": "T-1", "created": 1795626000000, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}, "oops", {"role": "assistant"},
        {"role": "assistant", "messageId": 3, "content": [], "usage": {"model": "m", "inputTokens": "12"}}],
        "usageLedger": {"events": [7]}}))
    store = open_store(db)
    report = run_import(store, plan([path], "amp"))
    assert report.skipped == [
        (f"{path} (usageLedger.events[0])", "a ledger event that is not an object"),
        (f"{path} (messages[1])", "a message needs a `role` (user or assistant) and a `content` list"),
        (f"{path} (messages[2])", "a message needs a `role` (user or assistant) and a `content` list"),
        (f"{path} (messages[3])", "input: expected a non-negative integer, got '12'; the call is kept without usage")]
    assert [c["input_tokens"] for c in store.get_session("T-1")["calls"]] == [None]
    path.write_text('{"id": "T-1", "messages": [')
    assert run_import(store, plan([path], "amp")).skipped == [
        (str(path), "not JSON (unexpected end of data); a thread Amp is writing is read on the next pass")]


def test_empty_files_add_nothing(db, tmp_path):
    store = open_store(db)
    empty = write(tmp_path / "p" / "agent-transcripts" / "c1.jsonl", [])
    thread = tmp_path / "threads" / "T-2.json"
    thread.parent.mkdir()
    thread.write_text("")
    report = run_import(store, plan([empty], "cursor") + plan([thread], "amp"))
    assert (report.failed, report.added["sessions"]) == ([], 0)
    assert report.skipped == [(str(thread), "not JSON (Input is a zero-length, empty document); a thread Amp is"
                                            " writing is read on the next pass")]


def test_the_default_folders(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("CURSOR_CONFIG_DIR", "AMP_DATA_DIR", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    assert cursor.default_folders() == [tmp_path / ".cursor" / "projects"]
    assert amp.default_folders() == [tmp_path / ".local" / "share" / "amp" / "threads"]
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert amp.default_folders() == [tmp_path / "data" / "amp" / "threads"]
    monkeypatch.setenv("AMP_DATA_DIR", str(tmp_path / "a"))
    assert amp.default_folders() == [tmp_path / "a" / "threads"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, CURSOR.stat().st_size))
@pytest.mark.slow
def test_any_cut_of_the_cursor_transcript_completes_to_the_whole(tmp_path_factory, cut):
    import_cut_then_whole(tmp_path_factory.mktemp("cut"), CURSOR, f"p/agent-transcripts/c/{CURSOR_ID}.jsonl", cut,
                          "cursor")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, AMP.stat().st_size))
@pytest.mark.slow
def test_any_cut_of_the_amp_thread_completes_to_the_whole(tmp_path_factory, cut):
    import_cut_then_whole(tmp_path_factory.mktemp("cut"), AMP, f"threads/{AMP.name}", cut, "amp")


def test_a_cursor_line_with_its_own_timestamp_gives_the_time(db, tmp_path):
    path = write(tmp_path / "p" / "agent-transcripts" / "c2.jsonl", [
        {"role": "user", "timestamp": "2026-03-01T09:00:00Z", "message": {"content": "<user_query>go</user_query>"}},
        {"role": "assistant", "timestamp": 1772355605000 / 1000, "message": {"content": "done"}}])
    store = open_store(db)
    run_import(store, plan([path], "cursor"))
    session = store.get_session("c2")
    assert (session["started_at"], session["calls"][0]["started_at"]) == ("2026-03-01T09:00:00.000000Z",
                                                                         "2026-03-01T09:00:05.000000Z")


def test_an_amp_message_id_of_another_type_costs_that_message(tmp_path):
    """Found by tests/test_import_mutants.py: a `messageId` or a ledger event's `toMessageId` of another type failed
    the importer (`unhashable type`); each is its record's skip, and the thread's other calls are imported."""
    thread = json.loads(AMP.read_text())
    store = open_store(tmp_path / "clean.db")
    clean = run_import(store, plan([AMP])).added["calls"]
    k = next(i for i, m in enumerate(thread["messages"]) if m.get("role") == "user")
    thread["messages"][k]["messageId"] = {"id": thread["messages"][k].get("messageId")}
    thread["usageLedger"]["events"][0]["toMessageId"] = [1]
    target = tmp_path / AMP.name
    target.write_text(json.dumps(thread))
    store = open_store(tmp_path / "t.db")
    report = run_import(store, plan([target]))
    assert report.failed == []
    assert report.skipped == [
        (f"{target} (usageLedger.events[0])", "expected `toMessageId` as a text, got a list"),
        (f"{target} (messages[{k}])", "expected `messageId` as a text, got an object")]
    assert report.added["calls"] == clean == 4  # (the message whose ledger event was left out: from its own usage)
