"""Gemini CLI chats (synthetic files that follow the format, see tests/fixtures/gemini/README.md): a reply
appended again replaces the first, $rewindTo removes the message named and all after it, $set updates the
session (and its `messages` replace the conversation), tokens split once, sub-agent chats, the older .json
document, grown and changed files imported again without duplicates, bad records named."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES

from reasonlog.io.importing import ImportError_, plan, run_import
from reasonlog.store import SessionFilter, open_store

GEMINI = Path(__file__).resolve().parent / "fixtures" / "gemini"
TMP = GEMINI / "tmp"
CHATS = TMP / "9f3c2b" / "chats"
CHAT = "5c1e0b3a-7f2d-4a8e-9b61-2d4f8a7c0e11"
MAIN = CHATS / f"session-2025-11-20T09-00-{CHAT[:8]}.jsonl"
SUB = "3b7f9e21-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
OLD = "0a1b2c3d-0000-4000-8000-000000000002"
DAMAGED = GEMINI / "damaged" / "session-2025-11-21T10-00-d00dfeed.jsonl"
ALL = SessionFilter(limit=None)
# list prices per token in the bundled table (input, cache read, output)
PRO, FLASH = (1.25e-6, 1.25e-7, 1e-5), (3e-7, 3e-8, 2.5e-6)


def calls(store, sid):
    return [(c["model"], c["input_tokens"], c["cache_read_tokens"], c["output_tokens"], c["reasoning_tokens"])
            for c in store.get_session(sid)["calls"]]


def cost(price, uncached, cached, output):
    return uncached * price[0] + cached * price[1] + output * price[2]


def test_a_chat_becomes_a_session_with_one_call_per_reply(db, tmp_path):
    store = open_store(db)
    report = run_import(store, plan([TMP]))
    assert (report.failed, report.skipped) == ([], [])
    assert report.added == {"sessions": 3, "calls": 7, "messages": 16, "tool_results": 2, "outcomes": 2}
    # input includes cached; thoughts are reasoning, in output; tool-use prompt tokens are input
    assert calls(store, CHAT) == [("gemini-2.5-pro", 2000, 6000, 160, 120), ("gemini-2.5-pro", 350, 8000, 12, 0),
                                  ("gemini-2.5-flash", 200, 8200, 9, 0), ("gemini-2.5-pro", 200, 8300, 45, 30),
                                  ("gemini-2.5-pro", 1200, 0, 20, 0)]
    assert calls(store, OLD) == [("gemini-2.5-flash", 3000, 0, 8, 0)]
    sessions = {s["id"]: s for s in store.list_sessions(ALL)}
    main = sessions[CHAT]
    assert (main["input_tokens"], main["cache_read_tokens"], main["output_tokens"], main["reasoning_tokens"]) == (
        3950, 30500, 246, 150)
    assert main["cost_usd"] == pytest.approx(cost(PRO, 3750, 22300, 237) + cost(FLASH, 200, 8200, 9), rel=1e-12)
    assert (main["summary"], main["ended_at"], main["labels"]) == (
        "Server port question", "2025-11-20T09:01:30.000000Z",
        {"source": "gemini", "project_hash": "9f3c2b", "kind": "main"})
    assert (sessions[SUB]["parent_session_id"], sessions[SUB]["labels"]["kind"]) == (CHAT, "subagent")
    session = store.get_session(CHAT)
    assert [(t["name"], t["content"], t["is_error"]) for t in session["tool_results"]] == [
        ("read_file", "port: 8080", False), ("replace", "permission denied", True)]
    assert [(o["kind"], o["payload"]) for o in session["outcomes"]] == [
        ("gemini:info", "Checkpoint saved."), ("compaction", {"messages": 2})]


def test_the_reply_appended_again_wins_and_rewind_removes_the_message_named(db, tmp_path):
    store = open_store(db)
    run_import(store, plan([MAIN]))
    ids = [c["id"] for c in store.get_session(CHAT)["calls"]]
    first = store.get_call(ids[0])["response"]  # the last of the four versions of m2, not the empty draft
    assert [list(p) for p in first["parts"]] == [["text", "thought"], ["text"], ["functionCall"]]
    assert first["parts"][1] == {"text": "I'll read the config first."}
    second = store.replay_call(ids[1])["contents"]
    assert second[2]["parts"][0]["functionResponse"]["response"] == {"output": "port: 8080"}
    texts = [_texts(store.replay_call(i)["contents"]) for i in ids[2:]]
    assert texts[0] == ["What port does the server use?", "I'll read the config first.", "It listens on 8080.",
                        "Change it to 9090."]
    # $rewindTo m5 removed m5 ("Change it to 9090.") and its reply; their call stays, billed
    assert texts[1] == ["What port does the server use?", "I'll read the config first.", "It listens on 8080.",
                        "Change port to 9090 in config.yaml."]
    # $set.messages replaced the conversation with its compressed form
    assert texts[2] == ["<state_snapshot>The server port is 8080 in config.yaml; editing it failed: permission"
                        " denied.</state_snapshot>", "Got it. Thanks for the additional context!",
                        "Try again with sudo."]
    assert [e["input"] for e in store.get_session(CHAT)["exchanges"]] == [
        "What port does the server use?", "Change it to 9090.", "Change port to 9090 in config.yaml.",
        "Try again with sudo."]
    hits = store.search("9090", ALL)
    assert [(h["kind"], h["role"], h["session_id"]) for h in hits] == [
        ("message", "user", CHAT), ("message", "user", CHAT), ("message", "assistant", CHAT),
        ("tool_result", "tool", CHAT)]


def _texts(contents):
    return [p["text"] for c in contents for p in c["parts"] if "text" in p and not p.get("thought")]


def test_importing_again_adds_nothing(db, tmp_path):
    store = open_store(db)
    run_import(store, plan([TMP]))
    again = run_import(store, plan([TMP]))
    assert (again.unchanged, again.added) == (3, dict.fromkeys(again.added, 0))


@pytest.mark.parametrize("source", [MAIN, DAMAGED])
@pytest.mark.slow
def test_a_grown_chat_equals_a_whole_import_at_every_split(tmp_path, source):
    whole = open_store(tmp_path / "whole.db")
    run_import(whole, plan([source]))
    lines = source.read_bytes().splitlines(keepends=True)
    for cut in range(1, len(lines)):
        target = tmp_path / f"c{cut}" / source.name
        target.parent.mkdir()
        target.write_bytes(b"".join(lines[:cut]))
        store = open_store(tmp_path / f"c{cut}.db")
        first = run_import(store, plan([target]))
        with open(target, "ab") as f:
            f.write(b"".join(lines[cut:]))
        again = run_import(store, plan([target]))
        assert again.failed == [] and again.appended + again.rewritten == 1, cut
        assert first.added["calls"] + again.added["calls"] == whole.record_counts()["calls"], cut
        assert _snapshot(store) == _snapshot(whole), cut
        assert set(run_import(store, plan([target])).added.values()) == {0}


def _snapshot(store):
    out = []
    for s in store.list_sessions(ALL):
        full = store.get_session(s["id"])
        out.append((s["id"], s["ended_at"], s["summary"], [e["input"] for e in full["exchanges"]],
                    [(c["id"], c["input_tokens"], c["cache_read_tokens"], c["output_tokens"], c["reasoning_tokens"],
                      store.replay_call(c["id"]), store.get_call(c["id"])["response"]) for c in full["calls"]],
                    [(t["id"], t["content"]) for t in full["tool_results"]], [o["id"] for o in full["outcomes"]]))
    return out


def test_a_reply_completed_after_an_import_replaces_the_imported_one(db, tmp_path):
    target = tmp_path / "session-x.jsonl"
    lines = MAIN.read_bytes().splitlines(keepends=True)
    target.write_bytes(b"".join(lines[:6]))  # m2 with its text and tokens, not yet its tool call
    store = open_store(db)
    assert run_import(store, plan([target])).added["calls"] == 1
    (draft,) = store.get_session(CHAT)["calls"]
    assert store.get_call(draft["id"])["response"]["parts"][-1] == {"text": "I'll read the config first."}
    with open(target, "ab") as f:
        f.write(b"".join(lines[6:]))
    again = run_import(store, plan([target]))
    assert (again.rewritten, again.appended, again.added["calls"]) == (1, 0, 4)
    assert [list(p) for p in store.get_call(draft["id"])["response"]["parts"]][-1] == ["functionCall"]


def test_under_watch_an_unfinished_reply_waits(db, tmp_path):
    target = tmp_path / "session-x.jsonl"
    lines = MAIN.read_bytes().splitlines(keepends=True)
    target.write_bytes(b"".join(lines[:8]))  # m2's tool call is still executing
    store = open_store(db)
    assert run_import(store, plan([target]), live=True).added["calls"] == 0
    with open(target, "ab") as f:
        f.write(b"".join(lines[8:10]))  # the tool call ended: the reply is complete
    again = run_import(store, plan([target]), live=True)
    assert (again.appended, again.rewritten, again.added["calls"], again.added["tool_results"]) == (1, 0, 1, 1)


def test_a_rewritten_document_is_imported_again_without_duplicates(db, tmp_path):
    chat = tmp_path / "session-2025-09-01T12-00-0a1b2c3d.json"
    doc = json.loads((CHATS / chat.name).read_text())
    chat.write_text(json.dumps(doc, indent=2))
    store = open_store(db)
    assert run_import(store, plan([chat])).added["calls"] == 1
    doc["messages"] += [{"id": "a3", "timestamp": "2025-09-01T12:01:00.000Z", "type": "user", "content": "Bye"},
                        {"id": "a4", "timestamp": "2025-09-01T12:01:02.000Z", "type": "gemini", "content": "Bye!",
                         "tokens": {"input": 3100, "output": 3, "cached": 3000, "total": 3103},
                         "model": "gemini-2.5-flash"}]
    doc["lastUpdated"] = "2025-09-01T12:01:02.000Z"
    chat.write_text(json.dumps(doc, indent=2))
    again = run_import(store, plan([chat]))
    assert (again.rewritten, again.added["calls"], again.added["sessions"]) == (1, 1, 0)
    assert calls(store, OLD) == [("gemini-2.5-flash", 3000, 0, 8, 0), ("gemini-2.5-flash", 100, 3000, 3, 0)]
    assert store.get_session(OLD)["ended_at"] == "2025-09-01T12:01:02.000000Z"


def test_bad_records_are_named_and_a_cut_last_line_waits(db, tmp_path):
    target = tmp_path / DAMAGED.name
    shutil.copy(DAMAGED, target)
    store = open_store(db)
    report = run_import(store, plan([target]))
    assert [(w.rsplit(":", 1)[1], why) for w, why in report.skipped] == [
        ("2", "not JSON (unexpected end of data)"), ("3", "not a JSON object (a list)"),
        ("4", "a message record needs a string `id` and `type`"),
        ("6", "tokens: tokens.input: expected a non-negative integer, got 'lots'")]
    assert report.added == {"sessions": 1, "calls": 2, "messages": 4, "tool_results": 0, "outcomes": 1}
    (outcome,) = store.get_session("d00dfeed-0000-4000-8000-000000000003")["outcomes"]
    assert (outcome["kind"], outcome["payload"]) == ("gemini:compression", "Chat compressed from 9000 to 2000 tokens.")
    with open(target, "a") as f:  # the writer finishes the last line
        f.write('er","content":"Thanks."}\n')
    again = run_import(store, plan([target]))
    assert (again.appended, again.skipped, again.added["calls"]) == (1, [], 0)
    exchanges = store.get_session("d00dfeed-0000-4000-8000-000000000003")["exchanges"]
    assert [e["input"] for e in exchanges] == ["Say hello.", "Again.", "Thanks."]


def test_detection(tmp_path):
    assert {imp.name for _, imp in plan([GEMINI])} == {"gemini"}
    assert [p.name for p, _ in plan([TMP])] == [
        f"{SUB}.jsonl", "session-2025-09-01T12-00-0a1b2c3d.json", MAIN.name]
    for other in ("claude-code-transcripts/spotter", "ai-trader-agent-log", "claude-agent-sdk",
                  "pycatan-ai-logs", "openai-responses"):
        assert "gemini" not in {imp.name for _, imp in _plan_or_none(FIXTURES / other)}


def _plan_or_none(path):
    try:
        return plan([path])
    except ImportError_:
        return []
