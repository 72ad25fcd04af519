"""OpenCode: the database OpenCode 1.18.33 wrote and the JSON storage OpenCode 1.1.53 wrote (tests/fixtures/opencode,
see its NOTICE.md), imported with their tokens and cost to the unit; then hand-written records for what the real
runs did not hold: a step without its finish, a failed message, bad JSON, bad tokens, a compaction, a session being
written under watch, a database that grows, and the JSON storage that OpenCode copies into its database."""
from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from reasonlog.io.formats.opencode import importer as opencode
from reasonlog.io.importing import plan, run_import
from reasonlog.store import SessionFilter, open_store

OPENCODE = Path(__file__).resolve().parent / "fixtures" / "opencode"
DB_118 = OPENCODE / "v1.18.33"
JSON_11 = OPENCODE / "v1.1.53"
ALL = SessionFilter(limit=None)
TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")


def totals(store) -> dict:
    rows = store.list_sessions(ALL)
    out = {k: sum(s[k] for s in rows) for k in TOKENS}
    out["cost_usd"] = round(sum(s["cost_usd"] or 0 for s in rows), 9)
    out["calls"] = sum(s["call_count"] for s in rows)
    return out


def test_the_database_opencode_wrote_imports_with_its_tokens_and_cost(db, tmp_path):
    folder = tmp_path / "opencode"
    shutil.copytree(DB_118, folder)
    store = open_store(db)
    report = run_import(store, plan([folder]))
    assert (report.failed, report.skipped) == ([], [])
    assert report.added == {"sessions": 3, "calls": 6, "messages": 12, "tool_results": 2, "outcomes": 0}
    # OpenCode's own sums in its `session` table: 0.015657 + 0.015171 + 0.000486
    assert totals(store) == {"input_tokens": 4468, "output_tokens": 234, "cache_read_tokens": 18000,
                             "cache_write_tokens": 2400, "reasoning_tokens": 0, "cost_usd": 0.031314, "calls": 6}
    sessions = {s["id"]: s for s in store.list_sessions(ALL)}
    child = sessions["ses_decc196bfffekqtldWYxz8dakt"]
    assert child["parent_session_id"] == "ses_decc1ac8effeyd0LKmbFTrx68s"
    assert child["labels"] == {"source": "opencode", "cwd": "/tmp/h22/run/proj", "version": "1.18.33",
                               "title": "Say hello (@general subagent)"}
    first = store.get_session("ses_decc24b3affeczyWd4oIxemPrA")
    assert [(c["input_tokens"], c["output_tokens"], c["cache_read_tokens"], c["cache_write_tokens"], c["cost_usd"],
             c["stop_reason"]) for c in first["calls"]] == [
        (2210, 57, 9000, 1200, 0.014685, "tool-calls"), (12, 30, 0, 0, 0.000486, "stop"),
        (12, 30, 0, 0, 0.000486, "stop")]
    assert [(t["name"], t["content"], t["is_error"]) for t in first["tool_results"]] == [
        ("bash", "hello from the tool\n", False)]
    assert [e["input"] for e in first["exchanges"]] == ['"Please run the shell command: echo hello"',
                                                        '"Thanks, that is all"']
    # the call after the tool ran sent the tool's result back
    replayed = store.replay_call(first["calls"][1]["id"])["messages"]
    assert replayed[-1]["content"][0] == {"type": "tool_result", "tool_use_id": "toolu_01LocalBash000000000001",
                                          "content": "hello from the tool\n", "is_error": False}
    again = run_import(store, plan([folder]))
    assert (again.unchanged, again.added["calls"]) == (1, 0)


def test_the_json_storage_of_older_opencode_imports_the_same_way(db):
    store = open_store(db)
    report = run_import(store, plan([JSON_11]))
    assert (report.files, report.failed, report.skipped) == (3, [], [])
    assert report.added == {"sessions": 3, "calls": 5, "messages": 10, "tool_results": 2, "outcomes": 0}
    assert totals(store) == {"input_tokens": 4456, "output_tokens": 204, "cache_read_tokens": 18000,
                             "cache_write_tokens": 2400, "reasoning_tokens": 0, "cost_usd": 0.030828, "calls": 5}
    child = store.get_session("ses_decc0c5a3ffewKAVukwZETyiBN")
    assert child["parent_session_id"] == "ses_decc0c7aeffep2sw2YKb8V8tUq"


# ------------------------------------------------------------------------------------------ hand-written


def blank_db(tmp_path: Path) -> Path:
    """OpenCode's own schema (a copy of the real database) with its rows removed."""
    folder = tmp_path / "opencode"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "opencode.db"
    shutil.copy(DB_118 / "opencode.db", path)
    with sqlite3.connect(path) as con:
        con.executescript("DELETE FROM part; DELETE FROM message; DELETE FROM session; DELETE FROM event;")
    return path


def add_session(path: Path, sid: str, updated: int = 2000, parent: str | None = None) -> None:
    with sqlite3.connect(path) as con:
        con.execute("INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, time_created,"
                    " time_updated) VALUES (?, 'global', ?, 's', '/w', 'a title', '1.18.33', 1000, ?)"
                    " ON CONFLICT (id) DO UPDATE SET time_updated = excluded.time_updated", (sid, parent, updated))


def add_message(path: Path, sid: str, mid: str, data: dict | str, parts: list[dict | str] = ()) -> None:
    created = data.get("time", {}).get("created", 1500) if isinstance(data, dict) else 1500
    with sqlite3.connect(path) as con:
        con.execute("INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?,?,?,?,?)",
                    (mid, sid, created, created, data if isinstance(data, str) else json.dumps(data)))
        for n, part in enumerate(parts):
            con.execute("INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)"
                        " VALUES (?,?,?,?,?,?)", (f"prt_{mid}_{n:02d}", mid, sid, created, created,
                                                   part if isinstance(part, str) else json.dumps(part)))


def user(text: str, at: int) -> tuple[dict, list[dict]]:
    return {"role": "user", "time": {"created": at}}, [{"type": "text", "text": text}]


def reply(at: int, *, tokens: dict | None = None, cost: float = 0.001, done: bool = True, **extra) -> dict:
    return {"role": "assistant", "time": {"created": at, **({"completed": at + 50} if done else {})},
            "modelID": "claude-sonnet-4-5", "providerID": "anthropic", "cost": cost,
            "tokens": tokens or {"input": 10, "output": 5, "reasoning": 0, "cache": {"read": 0, "write": 0}}, **extra}


def finish(inp: int, out: int, reasoning: int = 0, cost: float = 0.001, read: int = 0) -> dict:
    return {"type": "step-finish", "reason": "stop", "cost": cost,
            "tokens": {"input": inp, "output": out, "reasoning": reasoning, "cache": {"read": read, "write": 0}}}


def test_steps_in_one_message_are_calls_and_reasoning_is_output(db, tmp_path):
    path = blank_db(tmp_path)
    add_session(path, "ses_a")
    add_message(path, "ses_a", "msg_01", *user("go", 1100))
    add_message(path, "ses_a", "msg_02", reply(1200), [
        {"type": "step-start"}, {"type": "reasoning", "text": "think"},
        {"type": "tool", "callID": "c1", "tool": "read",
         "state": {"status": "error", "input": {"filePath": "x"}, "error": "no such file"}},
        finish(100, 20, reasoning=7, cost=0.002, read=50), {"type": "step-start"},
        {"type": "text", "text": "done"}, finish(130, 4, cost=0.0015)])
    store = open_store(db)
    report = run_import(store, plan([path]))
    assert report.skipped == []
    session = store.get_session("ses_a")
    assert [(c["input_tokens"], c["output_tokens"], c["reasoning_tokens"], c["cache_read_tokens"], c["cost_usd"])
            for c in session["calls"]] == [(100, 27, 7, 50, 0.002), (130, 4, 0, 0, 0.0015)]
    assert [(t["name"], t["content"], t["is_error"]) for t in session["tool_results"]] == [
        ("read", "no such file", True)]


def test_bad_records_are_named_and_the_rest_imported(db, tmp_path):
    path = blank_db(tmp_path)
    add_session(path, "ses_b")
    add_message(path, "ses_b", "msg_01", *user("go", 1100))
    add_message(path, "ses_b", "msg_02", "{not json")
    add_message(path, "ses_b", "msg_03", reply(1300), ["[1, 2]", finish(-5, 3)])
    add_message(path, "ses_b", "msg_04", {"role": "system", "time": {"created": 1400}})
    store = open_store(db)
    report = run_import(store, plan([path]))
    assert report.skipped == [
        (f"{path} (part prt_msg_03_00)", "a part whose `data` is not a JSON object"),
        (f"{path} (message msg_02)", "a message whose `data` is not a JSON object"),
        (f"{path} (message msg_03)",
         "tokens: tokens.input: expected a non-negative integer, got -5; the call is kept without them"),
        (f"{path} (message msg_04)", "a message with role 'system' (expected user or assistant)")]
    calls = store.get_session("ses_b")["calls"]
    assert [(c["input_tokens"], c["cost_usd"]) for c in calls] == [(None, None)]


def test_a_failed_message_is_an_error_call_and_a_zero_cost_is_priced_by_reasonlog(db, tmp_path):
    path = blank_db(tmp_path)
    add_session(path, "ses_c")
    add_message(path, "ses_c", "msg_01", *user("go", 1100))
    add_message(path, "ses_c", "msg_02", reply(1200, cost=0, error={"name": "APIError", "data": {"message": "429"}},
                                               done=False), [{"type": "step-start"}, {"type": "text", "text": "pa"}])
    store = open_store(db)
    run_import(store, plan([path]))
    (call,) = store.get_session("ses_c")["calls"]
    assert (call["status"], call["error"], call["input_tokens"]) == (
        "error", {"name": "APIError", "data": {"message": "429"}}, 10)
    assert call["cost_source"].startswith("computed@")  # OpenCode's 0 meant "no price", not "free"


def test_a_compaction_restarts_the_window_after_its_summary(db, tmp_path):
    path = blank_db(tmp_path)
    add_session(path, "ses_d")
    add_message(path, "ses_d", "msg_01", *user("first", 1100))
    add_message(path, "ses_d", "msg_02", reply(1200), [{"type": "text", "text": "one"}, finish(10, 5)])
    add_message(path, "ses_d", "msg_03", {"role": "user", "time": {"created": 1300}}, [{"type": "compaction"}])
    add_message(path, "ses_d", "msg_04", reply(1400, summary=True), [{"type": "text", "text": "summary"},
                                                                     finish(40, 8)])
    add_message(path, "ses_d", "msg_05", *user("next", 1500))
    add_message(path, "ses_d", "msg_06", reply(1600), [{"type": "text", "text": "two"}, finish(20, 3)])
    store = open_store(db)
    run_import(store, plan([path]))
    session = store.get_session("ses_d")
    sent = [store.replay_call(c["id"])["messages"] for c in session["calls"]]
    assert [len(m) for m in sent] == [1, 3, 3]  # [compaction request, summary, next]
    assert sent[2][1] == {"role": "assistant", "content": [{"type": "text", "text": "summary"}]}
    assert [o["kind"] for o in session["outcomes"]] == ["compaction"]


def test_a_growing_database_adds_only_what_is_new_and_watch_waits_for_a_reply(db, tmp_path):
    path = blank_db(tmp_path)
    add_session(path, "ses_e", updated=2000)
    add_message(path, "ses_e", "msg_01", *user("go", 1100))
    add_message(path, "ses_e", "msg_02", reply(1200), [finish(10, 5)])
    add_message(path, "ses_e", "msg_03", *user("more", 1300))
    add_message(path, "ses_e", "msg_04", reply(1400, done=False), [{"type": "text", "text": "stre"}])
    store = open_store(db)
    first = run_import(store, plan([path]), live=True)
    assert first.added["calls"] == 1  # the reply still being written waits
    with sqlite3.connect(path) as con:
        done = reply(1400)
        con.execute("UPDATE message SET data = ? WHERE id = 'msg_04'", (json.dumps(done),))
        con.execute("INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES"
                    " ('prt_z', 'msg_04', 'ses_e', 1450, 1450, ?)", (json.dumps(finish(30, 9)),))
    add_session(path, "ses_e", updated=3000)
    second = run_import(store, plan([path]), live=True)
    assert (second.appended, second.added["calls"], second.added["sessions"]) == (1, 1, 0)
    session = store.get_session("ses_e")
    assert [(c["input_tokens"], c["output_tokens"]) for c in session["calls"]] == [(10, 5), (30, 9)]
    assert len(session["exchanges"]) == 2
    assert run_import(store, plan([path])).unchanged == 1


@pytest.mark.slow
def test_the_json_storage_copied_into_the_database_is_not_counted_twice(db, tmp_path):
    folder = tmp_path / "opencode"
    shutil.copytree(JSON_11, folder)
    shutil.copy(blank_db(tmp_path / "x"), folder / "opencode.db")
    sid = "ses_decc0c5a3ffewKAVukwZETyiBN"
    add_session(folder / "opencode.db", sid)  # what OpenCode 1.2's migration does with the same ids
    add_message(folder / "opencode.db", sid, "msg_2133f3a740012UrMmQKHRvektN", *user("Say hello to the user", 1100))
    store = open_store(db)
    report = run_import(store, plan([folder]))
    assert report.skipped == [(f"{folder / 'storage/session/global' / (sid + '.json')} (session {sid})",
                               "imported already from OpenCode's other layout (opencode.db or storage/)")]
    assert report.added["sessions"] == 3


def test_the_default_folder_follows_xdg_data_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert opencode.default_folders() == [tmp_path / "data" / "opencode", tmp_path / "data" / "kilo"]
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert opencode.default_folders() == [tmp_path / ".local" / "share" / "opencode",
                                          tmp_path / ".local" / "share" / "kilo"]


@pytest.mark.parametrize("name", ["notes.db", "opencode.json"])
def test_files_that_are_not_opencode_are_not_detected(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"SQLite format 3\x00" if name.endswith(".db") else b"{}")
    assert not opencode.detect(path)


def test_a_patch_after_the_last_step_finish_is_not_another_call(db, tmp_path):
    """Issue 31 item 6: OpenCode writes a `patch` part (the files a step changed) after its message's last
    `step-finish`; it was taken for a step of its own, a sixth call repeating the message's tokens."""
    copy = tmp_path / "v1.1.53"
    shutil.copytree(JSON_11, copy)
    mid = "msg_2133f39dc001tz9r6xfav6GtQZ"
    (copy / "storage" / "part" / mid / "prt_2133f3c100011PatchAfterFinish.json").write_text(json.dumps({
        "id": "prt_2133f3c100011PatchAfterFinish", "sessionID": "ses_decc0c7aeffep2sw2YKb8V8tUq", "messageID": mid,
        "type": "patch", "hash": "4b825dc642cb6eb9a060e54bf8d69288fbee4904", "files": ["/tmp/proj/hello.txt"]}))
    store = open_store(db)
    report = run_import(store, plan([copy]))
    assert (report.failed, report.skipped) == ([], [])
    assert totals(store) == {"input_tokens": 4456, "output_tokens": 204, "cache_read_tokens": 18000,
                             "cache_write_tokens": 2400, "reasoning_tokens": 0, "cost_usd": 0.030828, "calls": 5}


EXPORTS = OPENCODE / "v1.18.33-export"  # `opencode export <session>` (1.18.33) of the three sessions of DB_118


def test_the_documents_opencode_export_writes_import_as_the_database_does(tmp_path):
    """Issue 31 item 6: `--format opencode` read 0 sessions from an `opencode export` document and exited 0."""
    from_db = open_store(tmp_path / "db.db")
    run_import(from_db, plan([OPENCODE / "v1.18.33"]))
    store = open_store(tmp_path / "t.db")
    one = sorted(EXPORTS.glob("*.json"))[0]
    assert run_import(store, plan([one], "opencode")).added["sessions"] == 1
    report = run_import(store, plan([EXPORTS]))
    assert (report.failed, report.skipped, report.unchanged) == ([], [], 1)
    assert totals(store) == totals(from_db) == {
        "input_tokens": 4468, "output_tokens": 234, "cache_read_tokens": 18000, "cache_write_tokens": 2400,
        "reasoning_tokens": 0, "cost_usd": 0.031314, "calls": 6}  # OpenCode's own totals (NOTICE.md)
    run_import(store, plan([OPENCODE / "v1.18.33"]))  # the same sessions from the database: nothing twice
    assert totals(store)["calls"] == 6
