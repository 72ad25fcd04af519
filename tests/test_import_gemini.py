"""Gemini CLI chats (synthetic files that follow the format, see tests/fixtures/gemini/README.md): a reply
appended again replaces the first, $rewindTo takes the window back, $set updates the session, tokens split
once, the older .json document, changed files imported again without duplicates, bad records named."""
from __future__ import annotations

import shutil
from pathlib import Path

from conftest import FIXTURES

from reasonlog.io.importing import ImportError_, plan, run_import
from reasonlog.store import SessionFilter, open_store

GEMINI = Path(__file__).resolve().parent / "fixtures" / "gemini"
CHATS = GEMINI / "tmp" / "9f3c2b" / "chats"
CHAT = "5c1e0b3a-7f2d-4a8e-9b61-2d4f8a7c0e11"
OLD = "0a1b2c3d-0000-4000-8000-000000000002"
ALL = SessionFilter(limit=None)


def calls(store, sid):
    return [(c["model"], c["input_tokens"], c["cache_read_tokens"], c["output_tokens"], c["reasoning_tokens"])
            for c in store.get_session(sid)["calls"]]


def test_a_chat_becomes_a_session_with_one_call_per_reply(tmp_path):
    store = open_store(tmp_path / "t.db")
    report = run_import(store, plan([GEMINI]))
    assert (report.failed, report.skipped) == ([], [])
    assert report.added == {"sessions": 2, "calls": 5, "messages": 10, "tool_results": 2, "outcomes": 1}
    # input includes cached; thoughts are reasoning, in output; tool-use prompt tokens are input
    assert calls(store, CHAT) == [("gemini-2.5-pro", 2000, 6000, 160, 120), ("gemini-2.5-pro", 350, 8000, 12, 0),
                                  ("gemini-2.5-flash", 200, 8200, 9, 0), ("gemini-2.5-pro", 200, 8300, 45, 30)]
    assert calls(store, OLD) == [("gemini-2.5-flash", 3000, 0, 8, 0)]
    session = store.get_session(CHAT)
    assert (session["summary"], session["ended_at"]) == ("Server port question", "2025-11-20T09:01:30.000000Z")
    assert [(t["name"], t["is_error"]) for t in session["tool_results"]] == [("read_file", False), ("replace", True)]


def test_the_reply_appended_again_wins_and_rewind_takes_the_window_back(tmp_path):
    store = open_store(tmp_path / "t.db")
    run_import(store, plan([CHATS / f"session-2025-11-20T09-00-{CHAT[:8]}.jsonl"]))
    session = store.get_session(CHAT)
    first = store.get_call(session["calls"][0]["id"])["response"]
    assert first["parts"][1] == {"text": "I'll read the config first."}  # not the empty draft appended before it
    second = store.replay_call(session["calls"][1]["id"])["contents"]
    assert [c["role"] for c in second] == ["user", "model", "user"]
    assert second[2]["parts"][0]["functionResponse"]["response"] == {"output": "port: 8080"}
    after_rewind = store.replay_call(session["calls"][3]["id"])["contents"]
    texts = [p.get("text") for c in after_rewind for p in c["parts"] if "text" in p and not p.get("thought")]
    assert texts == ["What port does the server use?", "I'll read the config first.", "It listens on 8080.",
                     "Change port to 9090 in config.yaml."]  # "Change it to 9090." and its reply were rewound


def test_a_changed_chat_is_imported_again_without_duplicates(tmp_path):
    folder = tmp_path / "chats"
    shutil.copytree(CHATS, folder)
    store = open_store(tmp_path / "t.db")
    run_import(store, plan([folder]))
    assert run_import(store, plan([folder])).added["calls"] == 0
    chat = folder / f"session-2025-11-20T09-00-{CHAT[:8]}.jsonl"
    with open(chat, "a") as f:
        f.write('{"id":"m9","timestamp":"2025-11-20T09:02:00.000Z","type":"user","content":"Thanks"}\n'
                '{"id":"m10","timestamp":"2025-11-20T09:02:02.000Z","type":"gemini","content":"You are welcome.",'
                '"tokens":{"input":8600,"output":5,"cached":8500,"thoughts":0,"tool":0,"total":8605},'
                '"model":"gemini-2.5-pro"}\n')
    again = run_import(store, plan([folder]))
    assert (again.rewritten, again.added["calls"], again.added["sessions"]) == (1, 1, 0)
    assert len(store.get_session(CHAT)["calls"]) == 5


def test_bad_records_are_named(tmp_path):
    chat = tmp_path / "session-x.jsonl"
    chat.write_text('{"sessionId":"s-bad","startTime":"2025-11-20T09:00:00Z"}\n[1]\n{"id":"u1"}\n'
                    '{"$rewindTo":"nope"}\n{not json\n'
                    '{"id":"u2","timestamp":"2025-11-20T09:00:01Z","type":"user","content":"hi"}\n'
                    '{"id":"g1","timestamp":"2025-11-20T09:00:02Z","type":"gemini","content":"hello",'
                    '"tokens":{"input":"lots"},"model":"gemini-2.5-pro"}\n')
    store = open_store(tmp_path / "t.db")
    report = run_import(store, plan([chat]))
    assert [(w.rsplit(":", 1)[1], why) for w, why in report.skipped] == [
        ("5", "not JSON (unexpected character, expected a string key)"), ("2", "not a JSON object (a list)"),
        ("3", "a message record needs an `id` and a `type`"),
        ("4", "$rewindTo names no message of the conversation ('nope')"),
        ("7", "tokens: tokens.input: expected a non-negative integer, got 'lots'")]
    assert report.added["calls"] == 1


def test_detection(tmp_path):
    assert {imp.name for _, imp in plan([GEMINI])} == {"gemini"}
    for other in ("claude-code-transcripts/spotter", "ai-trader-agent-log", "claude-agent-sdk"):
        assert "gemini" not in {imp.name for _, imp in _plan_or_none(FIXTURES / other)}


def _plan_or_none(path):
    try:
        return plan([path])
    except ImportError_:
        return []
