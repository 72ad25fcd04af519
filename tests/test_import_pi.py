"""Pi: the session files pi 0.73.1 wrote (tests/fixtures/pi, see its NOTICE.md), to the token and cent, with the file
its `fork` command wrote counted once; then hand-written trees: the active branch is the session and every other
leaf a fork (a child session), a file that grows on its branch or starts a new one, and bad lines named."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from reasonlog.io.formats.pi import importer as pi
from reasonlog.io.importing import plan, run_import
from reasonlog.store import SessionFilter, open_store

REAL = Path(__file__).resolve().parent / "fixtures" / "pi" / "v0.73.1" / "sessions"
MAIN, FORK = "01a21345-1412-76d1-87a2-1fb2242f5b16", "01a21345-4f11-76d4-90c2-a488079d9aaa"
ALL = SessionFilter(limit=None)


def test_the_sessions_pi_wrote_import_with_its_tokens_and_cost(db):
    store = open_store(db)
    report = run_import(store, plan([REAL]))
    assert (report.failed, report.skipped, report.rejected) == ([], [], 0)
    assert report.added == {"sessions": 2, "calls": 3, "messages": 6, "tool_results": 1, "outcomes": 0}
    main = store.get_session(MAIN)
    assert [(c["input_tokens"], c["output_tokens"], c["cache_read_tokens"], c["cache_write_tokens"], c["cost_usd"])
            for c in main["calls"]] == [(2210, 57, 9000, 1200, 0.014685), (12, 30, 0, 0, 0.000486),
                                        (12, 30, 0, 0, 0.000486)]
    assert main["labels"] == {"source": "pi", "cwd": "/tmp/h22/run/piproj", "version": "3"}
    fork = store.get_session(FORK)  # `fork` copied the entries before the forked prompt: no call twice
    assert (fork["parent_session_id"], fork["labels"]["forked_from"], fork["calls"]) == (MAIN, MAIN, [])
    assert [(t["name"], t["content"]) for t in main["tool_results"]] == [("bash", "hello from the tool\n")]
    assert run_import(store, plan([REAL])).unchanged == 2


def header(sid: str = "s1") -> dict:
    return {"type": "session", "version": 3, "id": sid, "timestamp": "2026-01-01T10:00:00.000Z", "cwd": "/w"}


def entry(eid: str, parent: str | None, message: dict, second: int) -> dict:
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": f"2026-01-01T10:00:{second:02d}.000Z",
            "message": message}


def user(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}


def reply(text: str, tokens: int, ms: int, cost: float = 0.001) -> dict:
    return {"role": "assistant", "content": [{"type": "text", "text": text}], "provider": "anthropic",
            "model": "claude-sonnet-4-5", "stopReason": "stop", "timestamp": 1767261600000 + ms,
            "usage": {"input": tokens, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": tokens + 5,
                      "cost": {"total": cost}}}


def write(path: Path, lines: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))


TREE = [header(), entry("u1", None, user("first"), 1), entry("a1", "u1", reply("one", 100, 2000), 2),
        entry("u2", "a1", user("try A"), 3), entry("a2", "u2", reply("A", 200, 4000), 4),
        # back to a1 in /tree, and a second prompt there: the new active branch
        entry("u3", "a1", user("try B"), 5), entry("a3", "u3", reply("B", 300, 6000), 6)]


def test_the_active_branch_is_the_session_and_the_other_leaf_a_fork(db, tmp_path):
    path = tmp_path / "sessions" / "--w--" / "2026-01-01T10-00-00-000Z_s1.jsonl"
    write(path, TREE)
    store = open_store(db)
    report = run_import(store, plan([path.parent]))
    assert report.added["calls"] == 3  # a1 is in both branches: once
    main = store.get_session("s1")
    assert [c["input_tokens"] for c in main["calls"]] == [100, 300]
    assert [e["input"] for e in main["exchanges"]] == ["first", "try B"]
    fork = store.get_session("s1@a2")
    assert (fork["parent_session_id"], fork["labels"]["fork"], fork["labels"]["forked_at"]) == ("s1", "true", "a1")
    assert [c["input_tokens"] for c in fork["calls"]] == [200]
    assert [m["role"] for m in store.replay_call(fork["calls"][0]["id"])["messages"]] == ["user", "assistant", "user"]


def test_a_file_growing_on_its_branch_is_read_from_where_it_stopped_and_a_new_branch_reads_it_again(db, tmp_path):
    path = tmp_path / "s.jsonl"
    write(path, TREE[:3])
    store = open_store(db)
    run_import(store, plan([path]))
    with open(path, "a") as f:
        f.write(json.dumps(TREE[3]) + "\n" + json.dumps(TREE[4]) + "\n")
    grown = run_import(store, plan([path]))
    assert (grown.appended, grown.rewritten, grown.added["calls"]) == (1, 0, 1)
    sent = store.replay_call(store.get_session("s1")["calls"][1]["id"])["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    with open(path, "a") as f:
        f.write(json.dumps(TREE[5]) + "\n" + json.dumps(TREE[6]) + "\n")
    branched = run_import(store, plan([path]))
    assert (branched.rewritten, branched.added["sessions"]) == (1, 1)  # s1 again, and its fork s1@a2
    assert [c["input_tokens"] for c in store.get_session("s1")["calls"]] == [100, 300]
    assert sum(s["call_count"] for s in store.list_sessions(ALL)) == 3


def test_bad_lines_are_named_and_the_rest_imported(db, tmp_path):
    path = tmp_path / "s.jsonl"
    bad_usage = reply("x", 10, 3000)
    bad_usage["usage"]["input"] = "many"
    write(path, [header(), "{oops", entry("u1", None, user("hi"), 1), {"type": "message", "parentId": "u1"},
                 entry("m1", "u1", {"content": "no role"}, 2), entry("a1", "m1", bad_usage, 3)])
    store = open_store(db)
    report = run_import(store, plan([path], "pi"))
    assert report.skipped == [(f"{path}:2", "not JSON (unexpected character, expected a string key)"),
                              (f"{path}:4", "an entry without a string `id`"),
                              (f"{path}:5", "a message entry needs a `message` object with a string `role`"),
                              (f"{path}:6", "usage.input: expected a non-negative integer, got 'many'; the call is"
                                            " kept without usage")]
    assert [c["input_tokens"] for c in store.get_session("s1")["calls"]] == [None]


def test_the_default_folder_is_under_home_or_pi_coding_agent_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)
    assert pi.default_folders() == [tmp_path / ".pi" / "agent" / "sessions"]
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    assert pi.default_folders() == [tmp_path / "agent" / "sessions"]


def test_a_pi_folder_is_detected_and_a_claude_transcript_is_not(tmp_path):
    assert pi.detect(REAL)
    other = tmp_path / "x.jsonl"
    shutil.copy(Path(__file__).resolve().parent / "fixtures" / "import_source.jsonl", other)
    assert not pi.detect(other)


def test_a_parent_id_that_is_an_object_costs_its_line_and_not_the_file(tmp_path):
    """Issue 30: a line whose `parentId` is an object lost the whole file to `unhashable type: 'dict'`."""
    source = REAL / "--tmp-h22-run-piproj--" / "2026-11-25T15-13-43-955Z_01a21345-1412-76d1-87a2-1fb2242f5b16.jsonl"
    lines = source.read_text().splitlines(keepends=True)
    third = json.loads(lines[2])
    third["parentId"] = {"id": third["parentId"]}
    lines[2] = json.dumps(third) + "\n"
    target = tmp_path / source.name
    target.write_text("".join(lines))
    store = open_store(tmp_path / "t.db")
    report = run_import(store, plan([target]))
    assert report.failed == []
    assert report.skipped == [(f"{target}:3", "expected `parentId` as a text or null, got an object")]
    calls = store.get_session(MAIN)["calls"]
    assert [(c["input_tokens"], c["output_tokens"]) for c in calls] == [(2210, 57), (12, 30), (12, 30)]
