"""Aider: the chat history aider 0.86.2 wrote (tests/fixtures/aider, see its NOTICE.md), with no tokens invented and
the import saying so; then hand-written histories: a reflection, appended exchanges, a reply that grew after it was
imported, bad lines, an empty file; and every cut of the real file."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from agent_logs import ALL, import_cut_then_whole
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reasonlog.cli.main import cli
from reasonlog.io.formats.aider import NO_USAGE
from reasonlog.io.formats.aider import importer as aider
from reasonlog.io.importing import plan, run_import
from reasonlog.store import open_store

REAL = Path(__file__).resolve().parent / "fixtures" / "aider" / "v0.86.2" / "repo" / ".aider.chat.history.md"


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    """Aider writes local times without a zone: the tests read them in UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def sessions(store) -> list[dict]:
    return [store.get_session(s["id"]) for s in sorted(store.list_sessions(ALL), key=lambda s: s["started_at"])]


def test_the_history_aider_wrote_imports_without_inventing_tokens(db):
    store = open_store(db)
    report = run_import(store, plan([REAL.parent]))
    assert (report.failed, report.skipped, report.rejected, report.notes) == ([], [], 0, [NO_USAGE])
    assert report.added == {"sessions": 2, "calls": 2, "messages": 4, "tool_results": 0, "outcomes": 2}
    first, second = sessions(store)
    assert (first["agent"], first["model"], first["started_at"]) == ("aider", "openai/gpt-4.1-nano",
                                                                     "2026-11-25T17:22:43.000000Z")
    assert first["labels"] == {"source": "aider", "cwd": str(REAL.parent), "version": "0.86.2", "edit_format": "diff"}
    assert [e["input"] for s in (first, second) for e in s["exchanges"]] == [
        "Please explain what this repository is for", "Thanks, that is all"]
    calls = first["calls"] + second["calls"]
    assert [(c["input_tokens"], c["output_tokens"], c["cost_usd"]) for c in calls] == [(None, None, None)] * 2
    reply = store.get_call(calls[0]["id"])["response"]["content"][0]["text"]
    assert reply.startswith("**Holiday Name:** Harmony Day\n\n") and reply.endswith("mutual respect.")
    assert [o["payload"]["text"] for s in (first, second) for o in s["outcomes"]] == [
        "Tokens: 2.4k sent, 306 received. Cost: $0.00036 message, $0.00036 session.",
        "Tokens: 2.3k sent, 306 received. Cost: $0.00036 message, $0.00036 session."]
    assert run_import(store, plan([REAL])).unchanged == 1


def test_the_import_says_aider_has_no_tokens(tmp_path):
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "r.db"), "import", str(REAL)], catch_exceptions=False)
    assert result.exit_code == 0
    assert f"note: {NO_USAGE}\n" in result.output


# Aider ends its `####` and `>` lines with two spaces (Markdown line breaks): kept here as aider writes them.
HISTORY = "\n".join([
    "", "# aider chat started at 2026-01-01 10:00:00", "",
    "> Aider v0.86.2", "> Model: anthropic/claude-sonnet-4-5 with diff edit format", "",
    "#### fix the bug  ", "#### in main.py  ", "", "I will fix it.", "", "main.py", "<<<<<<< SEARCH", "=======",
    ">>>>>>> REPLACE", "", "> The LLM did not conform to the edit format.  ", "", "Here is the fixed edit.", "",
    "> Applied edit to main.py  ", "> Tokens: 1.2k sent, 80 received.  ", ""])


def test_a_reflection_is_a_second_call_answering_aiders_notes(db, tmp_path):
    path = tmp_path / ".aider.chat.history.md"
    path.write_text(HISTORY)
    store = open_store(db)
    report = run_import(store, plan([path]))
    assert (report.added["calls"], report.added["outcomes"]) == (2, 1)
    (session,) = sessions(store)
    assert [e["input"] for e in session["exchanges"]] == ["fix the bug\nin main.py"]
    sent = store.replay_call(session["calls"][1]["id"])["messages"]
    assert [(m["role"], m["content"] if m["role"] == "user" else m["content"][0]["text"][:14]) for m in sent] == [
        ("user", "fix the bug\nin main.py"), ("assistant", "I will fix it."),
        ("user", "The LLM did not conform to the edit format.")]
    assert session["outcomes"][0]["call_id"] == session["calls"][1]["id"]


def test_appended_exchanges_are_read_from_where_the_import_stopped(db, tmp_path):
    path = tmp_path / ".aider.chat.history.md"
    path.write_text(HISTORY)
    store = open_store(db)
    run_import(store, plan([path]))
    with open(path, "a") as f:
        f.write("#### and now?\n\nAll done.\n\n# aider chat started at 2026-01-01 11:00:00\n\n#### hi\n\nHello.\n")
    grown = run_import(store, plan([path]))
    assert (grown.appended, grown.rewritten, grown.added["calls"], grown.added["sessions"]) == (1, 0, 2, 1)
    first = sessions(store)[0]
    assert [m["role"] for m in store.replay_call(first["calls"][2]["id"])["messages"]] == ["user", "assistant"] * 2 + [
        "user"]


def test_a_reply_that_grew_after_it_was_imported_imports_the_file_again(db, tmp_path):
    path = tmp_path / ".aider.chat.history.md"
    path.write_text("# aider chat started at 2026-01-01 10:00:00\n\n#### hi\n\nHello\n")
    store = open_store(db)
    run_import(store, plan([path]))
    with open(path, "a") as f:
        f.write("there.\n")
    again = run_import(store, plan([path]))
    assert (again.rewritten, again.added["calls"]) == (1, 0)  # the call taken short is replaced by the whole one
    (session,) = sessions(store)
    assert store.get_call(session["calls"][0]["id"])["response"]["content"][0]["text"] == "Hello\nthere."


def test_bad_lines_are_named_and_a_cut_last_line_waits(db, tmp_path):
    path = tmp_path / ".aider.chat.history.md"
    path.write_bytes(b"stray text\n# aider chat started at 2026-01-01 10:00:00\n#### caf\xe9\n#### hi\n\nHel")
    store = open_store(db)
    report = run_import(store, plan([path], "aider"))
    assert report.skipped == [(f"{path}:1", "a line before the first `# aider chat started at` header"),
                              (f"{path}:3", "not UTF-8 (byte 9)")]
    assert report.added["calls"] == 0
    with open(path, "ab") as f:
        f.write(b"lo.\n")
    assert run_import(store, plan([path], "aider")).added["calls"] == 1


def test_an_empty_file_adds_nothing(db, tmp_path):
    path = tmp_path / ".aider.chat.history.md"
    path.write_text("")
    report = run_import(open_store(db), plan([path], "aider"))
    assert (report.failed, report.skipped, report.added["sessions"]) == ([], [], 0)


def test_the_default_is_the_history_in_this_folder_and_home_or_the_one_named(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AIDER_CHAT_HISTORY_FILE", raising=False)
    assert aider.default_folders() == [tmp_path / ".aider.chat.history.md",
                                       tmp_path / "home" / ".aider.chat.history.md"]
    monkeypatch.setenv("AIDER_CHAT_HISTORY_FILE", str(tmp_path / "h.md"))
    assert aider.default_folders() == [tmp_path / "h.md"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, REAL.stat().st_size))
@pytest.mark.slow
def test_any_cut_of_the_real_history_imports_without_error_and_completes_to_the_whole(tmp_path_factory, cut):
    import_cut_then_whole(tmp_path_factory.mktemp("cut"), REAL, "repo/.aider.chat.history.md", cut, "aider")


def test_under_watch_a_last_reply_waits_while_the_file_is_fresh(db, tmp_path):
    path = tmp_path / ".aider.chat.history.md"
    path.write_text("# aider chat started at 2026-01-01 10:00:00\n\n#### hi\n\nHello\n")
    store = open_store(db)
    assert run_import(store, plan([path]), live=True).added["calls"] == 0  # the reply may still be written
    rested = path.stat().st_mtime - 60
    os.utime(path, (rested, rested))
    assert run_import(store, plan([path]), live=True).added["calls"] == 1
