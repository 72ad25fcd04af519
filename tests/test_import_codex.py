"""Codex CLI rollouts (synthetic files that follow the format, see tests/fixtures/codex/README.md): usage from
last_token_usage with cached input and reasoning split once, running totals never added, a sub-agent's replay
counted once, resumed sessions, compaction, tool results, bad lines, incremental imports."""
from __future__ import annotations

import shutil
from pathlib import Path

from conftest import FIXTURES

from reasonlog.io.importing import plan, run_import
from reasonlog.store import SessionFilter, open_store

CODEX = Path(__file__).resolve().parent / "fixtures" / "codex"
MAIN = "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5"
SUB = "019a2d80-0000-7000-8000-00000000b0b0"
ALL = SessionFilter(limit=None)


def tokens(store, sid):
    return [(c["input_tokens"], c["cache_read_tokens"], c["output_tokens"], c["reasoning_tokens"])
            for c in store.get_session(sid)["calls"]]


def test_usage_per_call_from_last_token_usage(tmp_path):
    store = open_store(tmp_path / "t.db")
    report = run_import(store, plan([CODEX]))
    assert (report.failed, report.skipped) == ([], [])
    assert report.added == {"sessions": 2, "calls": 4, "messages": 16, "tool_results": 1, "outcomes": 2}
    # input_tokens includes cached_input_tokens; output_tokens includes reasoning_output_tokens
    assert tokens(store, MAIN) == [(2000, 3000, 200, 150), (400, 5000, 60, 20), (2000, 0, 40, 0)]
    # the sub-agent replays its parent's first call (same lines, same running total): counted once
    assert tokens(store, SUB) == [(1000, 500, 30, 10)]
    (model,) = {c["model"] for c in store.call_rows(ALL)}
    assert model == "gpt-5-codex"


def test_requests_replay_the_conversation_with_the_instructions(tmp_path):
    store = open_store(tmp_path / "t.db")
    run_import(store, plan([CODEX / f"rollout-2025-10-29T00-59-38-{MAIN}.jsonl"]))
    session = store.get_session(MAIN)
    second = store.replay_call(session["calls"][1]["id"])
    assert second["instructions"] == "You are Codex, a coding agent."
    assert [i["type"] for i in second["input"]] == ["message", "message", "reasoning", "function_call",
                                                    "function_call_output"]
    (result,) = session["tool_results"]
    assert (result["tool_use_id"], result["name"], result["is_error"]) == ("call_1", "shell", True)
    # after the compaction the window starts again from its summary
    third = store.replay_call(session["calls"][2]["id"])
    assert third["input"][0]["content"][0]["text"] == "Summary: fixed parse(); tests pass."
    assert [o["kind"] for o in session["outcomes"]] == ["compaction", "codex:ghost_snapshot"]
    assert [e["input"] for e in session["exchanges"]] == ["Fix the failing test", "Now run the linter"]


def test_a_grown_rollout_adds_only_its_new_calls(tmp_path):
    source = CODEX / f"rollout-2025-10-29T00-59-38-{MAIN}.jsonl"
    lines = source.read_bytes().splitlines(keepends=True)
    whole = open_store(tmp_path / "whole.db")
    run_import(whole, plan([source]))
    for cut in range(1, len(lines)):
        target = tmp_path / f"c{cut}" / source.name
        target.parent.mkdir()
        target.write_bytes(b"".join(lines[:cut]))
        store = open_store(tmp_path / f"c{cut}.db")
        run_import(store, plan([target]))
        with open(target, "ab") as f:
            f.write(b"".join(lines[cut:]))
        again = run_import(store, plan([target]))
        assert (again.appended, again.rewritten) == (1, 0), cut
        assert tokens(store, MAIN) == tokens(whole, MAIN), cut
        ids = [c["id"] for c in whole.get_session(MAIN)["calls"]]
        assert [store.replay_call(i) for i in ids] == [whole.replay_call(i) for i in ids], cut
        assert run_import(store, plan([target])).unchanged == 1


def test_bad_lines_are_named_and_a_cut_last_line_waits(tmp_path):
    source = CODEX / f"rollout-2025-10-29T00-59-41-{SUB}.jsonl"
    target = tmp_path / "r.jsonl"
    lines = source.read_bytes().splitlines(keepends=True)
    target.write_bytes(lines[0] + b'{"type":"response_item"}\n42\n{"timestamp":"never","type":"event_msg",'
                       b'"payload":{}}\n' + b"".join(lines[1:]) + b'{"timestamp":"2025-10-29T00:59:44Z","ty')
    store = open_store(tmp_path / "t.db")
    report = run_import(store, plan([target]))
    assert [(w.rsplit(":", 1)[1], why) for w, why in report.skipped] == [
        ("2", "`timestamp` must be an ISO-8601 instant and `payload` an object"),
        ("3", "expected an object with `type`, `timestamp` and `payload`"),
        ("4", "`timestamp` must be an ISO-8601 instant and `payload` an object")]
    assert report.added["calls"] == 2


def test_detection(tmp_path):
    home = tmp_path / ".codex" / "sessions" / "2025" / "10" / "29"
    home.mkdir(parents=True)
    for f in CODEX.glob("*.jsonl"):
        shutil.copy(f, home)
    assert {imp.name for _, imp in plan([tmp_path / ".codex"])} == {"codex"}
    for other in ("claude-code-transcripts/spotter", "ai-trader-agent-log"):
        assert "codex" not in {imp.name for _, imp in plan([FIXTURES / other])}
