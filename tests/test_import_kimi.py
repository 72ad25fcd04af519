"""Kimi CLI: the session Kimi CLI 1.51.0 wrote (tests/fixtures/kimi, see its NOTICE.md), to the token, with the import
saying that no model is named; then hand-written wire lines: a sub-agent's usage, a step that grew after it was
imported, bad and unknown lines, an empty file; and every cut of the real wire file."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from agent_logs import ALL, import_cut_then_whole
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reasonlog.io.formats.kimi import NO_MODEL
from reasonlog.io.formats.kimi import importer as kimi
from reasonlog.io.importing import plan, run_import
from reasonlog.store import open_store

ROOT = Path(__file__).resolve().parent / "fixtures" / "kimi" / "v1.51.0" / "sessions"
SID = "bcc8c9dd-1e83-48db-a90b-976979a2ccbb"
REAL = ROOT / "a52e96230bdd9e98f3c99f52c584332e" / SID / "wire.jsonl"


def test_the_session_kimi_wrote_imports_with_its_tokens(db):
    store = open_store(db)
    report = run_import(store, plan([ROOT]))
    assert (report.failed, report.skipped, report.rejected, report.notes) == ([], [], 0, [NO_MODEL])
    assert report.added == {"sessions": 1, "calls": 3, "messages": 7, "tool_results": 1, "outcomes": 0}
    session = store.get_session(SID)
    assert (session["agent"], session["labels"]) == ("kimi-cli", {"source": "kimi", "cwd": "/tmp/h22imp/kproj"})
    assert [(c["input_tokens"], c["cache_read_tokens"], c["output_tokens"], c["model"], c["cost_usd"])
            for c in session["calls"]] == [(19, 320, 83, None, None), (16, 0, 300, None, None),
                                           (16, 0, 300, None, None)]
    assert [e["input"] for e in session["exchanges"]] == ["Please run the shell command: echo hello",
                                                          "Thanks, that is all"]
    assert [(t["name"], t["content"], t["is_error"]) for t in session["tool_results"]] == [("Shell", "hello\n", False)]
    sent = store.replay_call(session["calls"][1]["id"])
    assert sent["system"].startswith("You are Kimi Code CLI")
    assert [b["type"] for m in sent["messages"] for b in m["content"]] == ["text", "thinking", "tool_use",
                                                                           "tool_result"]
    assert run_import(store, plan([ROOT])).unchanged == 1


def wire(second: float, kind: str, **payload) -> dict:
    return {"timestamp": 1767261600 + second, "message": {"type": kind, "payload": payload}}


def write(path: Path, lines: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


HEAD = [{"type": "metadata", "protocol_version": "1.10"}, wire(0, "TurnBegin", user_input="hi"),
        wire(1, "StepBegin", n=1), wire(2, "ContentPart", type="text", text="Hel"),
        wire(2.5, "ContentPart", type="text", text="lo")]
USAGE = {"input_other": 10, "output": 5, "input_cache_read": 0, "input_cache_creation": 0}


def test_a_subagents_steps_are_calls_of_its_child_session(db, tmp_path):
    path = write(tmp_path / "h" / "k1" / "wire.jsonl", [
        *HEAD, wire(3, "StatusUpdate", token_usage=USAGE, message_id="m1"),
        wire(4, "SubagentEvent", agent_id="a7", subagent_type="coder", parent_tool_call_id="t1",
             event={"type": "StatusUpdate", "payload": {"token_usage": {**USAGE, "input_other": 70}}}),
        wire(5, "CompactionBegin"), wire(6, "TurnEnd")])
    store = open_store(db)
    report = run_import(store, plan([path], "kimi"))
    assert (report.added["sessions"], report.added["calls"], report.added["outcomes"]) == (2, 2, 1)
    (call,) = store.get_session("k1")["calls"]
    assert store.get_call(call["id"])["response"]["content"] == [{"type": "text", "text": "Hello"}]
    child = store.get_session("k1@a7")
    assert (child["parent_session_id"], child["agent"], [c["input_tokens"] for c in child["calls"]]) == (
        "k1", "coder", [70])
    assert sorted(s["id"] for s in store.list_sessions(ALL)) == ["k1", "k1@a7"]


def test_a_step_that_grew_after_it_was_imported_imports_the_file_again(db, tmp_path):
    path = write(tmp_path / "h" / "k1" / "wire.jsonl", HEAD)
    store = open_store(db)
    run_import(store, plan([path], "kimi"))
    write(path, [*HEAD, wire(3, "StatusUpdate", token_usage=USAGE, message_id="m1")])
    assert run_import(store, plan([path], "kimi")).rewritten == 1
    (call,) = store.get_session("k1")["calls"]
    assert (call["input_tokens"], call["provider_message_id"]) == (10, "m1")


def test_bad_lines_are_named_and_unknown_events_kept(db, tmp_path):
    bad = wire(3, "StatusUpdate", token_usage={**USAGE, "output": -5})
    path = write(tmp_path / "h" / "k1" / "wire.jsonl", [*HEAD, "[]", "{x", {"timestamp": 1}, bad,
                                                        wire(4, "Hologram", x=1)])
    with open(path, "a") as f:
        f.write('{"timestamp": 17')
    store = open_store(db)
    report = run_import(store, plan([path], "kimi"))
    assert report.skipped == [
        (f"{path}:6", "expected `{timestamp, message: {type, payload}}`"),
        (f"{path}:7", "not JSON (unexpected character, expected a string key)"),
        (f"{path}:8", "expected `{timestamp, message: {type, payload}}`"),
        (f"{path}:9", "token_usage.output: expected a non-negative integer, got -5; the call is kept without usage")]
    session = store.get_session("k1")
    assert [c["input_tokens"] for c in session["calls"]] == [None]
    assert [o["kind"] for o in session["outcomes"]] == ["kimi:Hologram"]


def test_an_empty_file_adds_nothing(db, tmp_path):
    path = write(tmp_path / "h" / "k1" / "wire.jsonl", [])
    report = run_import(open_store(db), plan([path], "kimi"))
    assert (report.failed, report.skipped, report.added["sessions"]) == ([], [], 0)


def test_the_default_folder_follows_kimi_share_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KIMI_SHARE_DIR", raising=False)
    assert kimi.default_folders() == [tmp_path / ".kimi" / "sessions"]
    monkeypatch.setenv("KIMI_SHARE_DIR", str(tmp_path / "k"))
    assert kimi.default_folders() == [tmp_path / "k" / "sessions"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, REAL.stat().st_size))
@pytest.mark.slow
def test_any_cut_of_the_real_wire_file_imports_without_error_and_completes_to_the_whole(tmp_path_factory, cut):
    import_cut_then_whole(tmp_path_factory.mktemp("cut"), REAL, f"h/{SID}/wire.jsonl", cut, "kimi")


def test_under_watch_a_last_step_waits_while_the_file_is_fresh_and_is_read_once_it_rests(db, tmp_path):
    path = write(tmp_path / "h" / "k1" / "wire.jsonl", HEAD)
    store = open_store(db)
    assert run_import(store, plan([path], "kimi"), live=True).added["calls"] == 0  # just written: may still grow
    rested = path.stat().st_mtime - 60
    os.utime(path, (rested, rested))
    assert run_import(store, plan([path], "kimi"), live=True).added["calls"] == 1


def test_a_wire_format_this_importer_does_not_know_is_one_line_and_a_failed_import(tmp_path):
    """Issue 31 item 6: a newer Kimi Code wire file (JSON-RPC envelopes under a newer protocol_version) gave one skip
    per line and exit 0; it is one line naming the file and what was expected, and the import fails."""
    from click.testing import CliRunner

    from reasonlog.cli.main import cli

    folder = tmp_path / "sessions" / "a52e96230bdd9e98f3c99f52c584332e" / SID
    folder.mkdir(parents=True)
    events = [{"jsonrpc": "2.0", "method": "event", "params": {"type": kind, "payload": {"n": n}}}
              for n, kind in enumerate(["TurnBegin", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"])]
    target = folder / "wire.jsonl"
    target.write_text("\n".join(json.dumps(v) for v in [{"type": "metadata", "protocol_version": "2.0"}, *events])
                      + "\n")
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "t.db"), "import", "--json", str(tmp_path / "sessions")])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["skipped"] == [{"where": str(target), "reason": (
        "nothing read: none of its 5 records is one the kimi importer knows (the first, 2: expected `{timestamp,"
        " message: {type, payload}}`); is it written by a version of the agent this reasonlog does not read yet?")}]
    assert report["added"]["sessions"] == 0
