"""Codex CLI rollouts (synthetic files that follow the format, see tests/fixtures/codex/README.md): usage from
last_token_usage with cached input and reasoning split once, running totals never added, a repeated total and a
sub-agent's replay counted once, resumed sessions, compaction, tool results, bad lines, incremental imports."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES

from reasonlog.io.importing import ImportError_, plan, run_import
from reasonlog.store import SessionFilter, open_store

CODEX = Path(__file__).resolve().parent / "fixtures" / "codex"
DAY = CODEX / "sessions" / "2025" / "10" / "29"
MAIN = "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5"
SUB = "019a2d80-0000-7000-8000-00000000b0b0"
ARCH = "019a0000-aaaa-7bbb-8ccc-000000000a0c"
BAD = "019a3000-bbbb-7ccc-8ddd-00000000bad0"
MAIN_FILE = DAY / f"rollout-2025-10-29T00-59-38-{MAIN}.jsonl"
ARCH_FILE = CODEX / "archived_sessions" / f"rollout-2025-10-20T08-00-00-{ARCH}.jsonl"
BAD_FILE = CODEX / "damaged" / f"rollout-2025-10-30T09-00-00-{BAD}.jsonl"
ALL = SessionFilter(limit=None)
INPUT, CACHED, OUTPUT = 1.25e-6, 1.25e-7, 1e-5  # gpt-5 and gpt-5-codex list prices per token, bundled table


def tokens(store, sid):
    return [(c["input_tokens"], c["cache_read_tokens"], c["output_tokens"], c["reasoning_tokens"])
            for c in store.get_session(sid)["calls"]]


def test_usage_per_call_from_last_token_usage(db, tmp_path):
    store = open_store(db)
    report = run_import(store, plan([CODEX], "codex"))  # (read as a folder, the damaged and versions files are too)
    assert (report.failed, report.skipped) == ([], [])
    assert report.added == {"sessions": 3, "calls": 7, "messages": 22, "tool_results": 3, "outcomes": 2}
    # input_tokens includes cached_input_tokens; output_tokens includes reasoning_output_tokens; the repeated
    # token_count (same running total, new rate limits) is no call
    assert tokens(store, MAIN) == [(2000, 3000, 200, 150), (400, 5000, 60, 20), (2000, 0, 40, 0)]
    # the sub-agent replays its parent's first call (written again, at other instants): counted once
    assert tokens(store, SUB) == [(1000, 500, 30, 10)]
    assert tokens(store, ARCH) == [(3000, 0, 100, 64), (400, 2900, 80, 0), (300, 3200, 20, 0)]
    sessions = {s["id"]: s for s in store.list_sessions(ALL)}
    totals = {sid: (s["input_tokens"], s["cache_read_tokens"], s["output_tokens"], s["reasoning_tokens"])
              for sid, s in sessions.items()}
    # never the running totals (12400 input for MAIN, 6500 for SUB): each call once
    assert totals == {MAIN: (4400, 8000, 300, 170), SUB: (1000, 500, 30, 10), ARCH: (3700, 6100, 200, 64)}
    for sid, (uncached, cached, output, _) in totals.items():
        assert sessions[sid]["cost_usd"] == pytest.approx(uncached * INPUT + cached * CACHED + output * OUTPUT,
                                                          rel=1e-12)
    assert {c["model"] for c in store.call_rows(ALL)} == {"gpt-5-codex", "gpt-5"}
    assert (sessions[SUB]["parent_session_id"], sessions[MAIN]["labels"]) == (
        MAIN, {"source": "codex", "cwd": "/work/app", "cli_version": "0.46.0", "originator": "codex_cli_rs",
               "codex_source": "cli"})
    assert sessions[MAIN]["ended_at"] == "2025-10-29T01:10:03.300000Z"


def test_requests_replay_the_conversation_with_the_instructions(db, tmp_path):
    store = open_store(db)
    run_import(store, plan([MAIN_FILE]))
    session = store.get_session(MAIN)
    second = store.replay_call(session["calls"][1]["id"])
    assert (second["model"], second["instructions"]) == ("gpt-5-codex", "You are Codex, a coding agent.")
    assert [i["type"] for i in second["input"]] == ["message", "message", "reasoning", "function_call",
                                                    "function_call_output"]
    response = store.get_call(session["calls"][1]["id"])["response"]
    assert [i["type"] for i in response["content"]] == ["reasoning", "message"]
    (result,) = session["tool_results"]
    assert (result["tool_use_id"], result["name"], result["input"], result["is_error"]) == (
        "call_1", "shell", {"command": ["pytest", "-q"]}, True)
    # the session was resumed (a second session_meta) and compacted: the window starts again from its summary
    third = store.replay_call(session["calls"][2]["id"])
    assert third["input"][0]["content"][0]["text"] == "Summary: fixed parse(); tests pass."
    assert [(o["kind"], o["payload"]) for o in session["outcomes"]] == [
        ("compaction", {"summary": "Summary: fixed parse(); tests pass."}),
        ("codex:ghost_snapshot", {"commit": "abc123"})]
    assert [e["input"] for e in session["exchanges"]] == ["Fix the failing test", "Now run the linter"]
    assert [h["call_id"] for h in store.search("off-by-one", ALL)] == [session["calls"][1]["id"]]


def test_shell_custom_and_web_search_items(db, tmp_path):
    store = open_store(db)
    run_import(store, plan([ARCH_FILE]))
    session = store.get_session(ARCH)
    assert [(t["tool_use_id"], t["name"], t["is_error"]) for t in session["tool_results"]] == [
        ("ls_1", "local_shell_call", False), ("ap_1", "apply_patch", True)]
    assert session["tool_results"][0]["input"] == {"type": "exec", "command": ["ls"], "timeout_ms": 10000}
    first = store.get_call(session["calls"][0]["id"])["response"]
    assert [i["type"] for i in first["content"]] == ["reasoning", "web_search_call", "local_shell_call"]
    assert [e["result"] for e in session["exchanges"]] == [
        "The patch did not apply: README.md has no `pytest` line to change."]


def test_importing_again_adds_nothing(db, tmp_path):
    store = open_store(db)
    run_import(store, plan([CODEX], "codex"))
    again = run_import(store, plan([CODEX], "codex"))
    assert (again.unchanged, again.added) == (3, dict.fromkeys(again.added, 0))


@pytest.mark.parametrize("source", [MAIN_FILE, ARCH_FILE, BAD_FILE])
@pytest.mark.slow
def test_a_grown_rollout_adds_only_its_new_calls(tmp_path, source):
    whole = open_store(tmp_path / "whole.db")
    run_import(whole, plan([source]))
    ids = [c["id"] for s in whole.list_sessions(ALL) for c in whole.get_session(s["id"])["calls"]]
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
        assert (again.appended, again.rewritten) == (1, 0), cut
        assert first.added["calls"] + again.added["calls"] == len(ids), cut
        assert _snapshot(store) == _snapshot(whole), cut


def _snapshot(store):
    """What an import made of a file: sessions, their totals, exchanges, calls (exact requests, responses,
    usage), tool results and outcomes. (Not the message timeline: see the lead's note on `_load_state`.)"""
    out = []
    for s in store.list_sessions(ALL):
        full = store.get_session(s["id"])
        calls = [(c["id"], c["exchange_id"], c["started_at"], store.replay_call(c["id"]),
                  store.get_call(c["id"])["response"], tokens_of(c)) for c in full["calls"]]
        out.append((s["id"], s["ended_at"], s["labels"], tokens_of(s), calls,
                    [(e["id"], e["input"], e["result"], e["ended_at"]) for e in full["exchanges"]],
                    [(t["id"], t["name"], t["input"], t["content"], t["is_error"]) for t in full["tool_results"]],
                    [(o["id"], o["kind"], o["payload"]) for o in full["outcomes"]]))
    return out


def tokens_of(row):
    return row["input_tokens"], row["cache_read_tokens"], row["output_tokens"], row["reasoning_tokens"], row["cost_usd"]


def test_a_rewritten_rollout_is_imported_again_without_duplicates(db, tmp_path):
    target = tmp_path / ARCH_FILE.name
    lines = ARCH_FILE.read_bytes().splitlines(keepends=True)
    target.write_bytes(b"".join(lines[:8]))
    store = open_store(db)
    assert run_import(store, plan([target])).added["calls"] == 1
    target.write_bytes(b"".join(lines[:7]) + lines[7].replace(b'"input_tokens":3000', b'"input_tokens":3100')
                       + b"".join(lines[8:]))
    again = run_import(store, plan([target]))
    assert (again.rewritten, again.added["calls"], again.added["sessions"]) == (1, 2, 0)
    assert tokens(store, ARCH) == [(3100, 0, 100, 64), (400, 2900, 80, 0), (300, 3200, 20, 0)]


def test_bad_lines_are_named_and_a_cut_last_line_waits(db, tmp_path):
    target = tmp_path / BAD_FILE.name
    shutil.copy(BAD_FILE, target)
    store = open_store(db)
    report = run_import(store, plan([target]))
    assert [(w.rsplit(":", 1)[1], why) for w, why in report.skipped] == [
        ("3", "not JSON (unexpected end of data)"),
        ("4", "expected an object with `type`, `timestamp` and `payload`"),
        ("5", "`timestamp` must be an ISO-8601 instant and `payload` an object"),
        ("10", "token_count: last_token_usage.input_tokens: expected a non-negative integer, got -3")]
    # info: null gives no figures; the call with bad figures is kept without usage
    assert tokens(store, BAD) == [(None, None, None, None), (200, 1100, 6, 0)]
    with open(target, "a") as f:  # the writer finishes its last line
        f.write('ete","last_agent_message":"Hi again!"}}\n')
    again = run_import(store, plan([target]))
    assert (again.appended, again.skipped, again.added["calls"]) == (1, [], 0)
    assert [e["result"] for e in store.get_session(BAD)["exchanges"]] == [None, "Hi again!"]
    assert run_import(store, plan([target])).unchanged == 1


def test_detection(tmp_path):
    home = tmp_path / ".codex"
    shutil.copytree(CODEX, home)
    (home / "history.jsonl").write_text('{"session_id":"x","ts":1761699578,"text":"Fix the failing test"}\n')
    planned = [(str(p.relative_to(home)), imp.name) for p, imp in plan([home])]
    assert planned[:3] == [(str(MAIN_FILE.relative_to(CODEX)), "codex"),
                           (str((DAY / f"rollout-2025-10-29T00-59-41-{SUB}.jsonl").relative_to(CODEX)), "codex"),
                           (str(ARCH_FILE.relative_to(CODEX)), "codex")]
    # every other rollout in the folder is read as itself; history.jsonl (Codex's prompts) is named as not read
    assert sorted(planned[3:]) == sorted([("history.jsonl", "passed-over"), *((str(p.relative_to(CODEX)), "codex")
                                          for p in [BAD_FILE, *sorted((CODEX / "versions").glob("*.jsonl"))])])
    assert [imp.name for _, imp in plan([BAD_FILE])] == ["codex"]
    for other in ("claude-code-transcripts/spotter", "ai-trader-agent-log", "claude-agent-sdk", "openai-responses",
                  "pycatan-ai-logs"):
        try:
            found = {imp.name for _, imp in plan([FIXTURES / other])}
        except ImportError_:
            found = set()
        assert "codex" not in found, other
