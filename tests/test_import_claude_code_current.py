"""Claude Code transcripts as current versions write them (hand-written, see tests/fixtures/claude_code/README.md):
titles, records the importer passes on as outcomes, a summary first line, a summary of another session alone in its
file, system lines, an inline sub-agent whose agentId is only on its user lines, thinking blocks with only a
signature, 1-hour cache writes, and sub-agents nested five deep."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from reasonlog.io.importing import plan, run_import
from reasonlog.model import FileImported
from reasonlog.pricing import load_price_table
from reasonlog.store import SessionFilter, open_store

HERE = Path(__file__).resolve().parent / "fixtures" / "claude_code"
SID = "7c1e0a52-93b4-4f1d-9e8a-2b6c0d4e5f61"
CURRENT = HERE / "current" / f"{SID}.jsonl"
NESTED_ID = "9e8d7c6b-5a49-4382-8170-6f5e4d3c2b1a"
CHAIN = ["f9a0b1c", "d4e5f60", "c3d4e5f", "b2c3d4e", "a1b2c3d"]
ALL = SessionFilter(limit=None)


@pytest.fixture
def current(tmp_path):
    store = open_store(tmp_path / "t.db")
    report = run_import(store, plan([CURRENT]))
    return store, report


def test_the_title_is_the_custom_title_over_the_ai_title(current):
    store, report = current
    assert (report.failed, report.skipped) == ([], [])
    assert store.get_session(SID)["labels"]["title"] == "EU checkout bug"


def test_a_summary_first_line_neither_moves_the_start_nor_makes_a_session(current):
    store, _ = current
    sessions = {s["id"]: s for s in store.list_sessions(ALL)}
    assert sorted(sessions) == [SID, f"b7c8d9e@{SID}"]  # no session named after a record without sessionId
    assert sessions[SID]["started_at"] == "2026-03-02T09:00:00.000000Z"  # the first instant, not the file's mtime
    (summary,) = [o for o in store.get_session(SID)["outcomes"] if o["kind"] == "summary"]
    assert summary["payload"] == {"summary": "Checkout refactor", "leaf_uuid": "0a9f3c1e-5b7d-4e2a-9c8b-1d2e3f4a5b6c"}


def test_records_of_new_types_and_system_lines_are_kept(current):
    store, _ = current
    kinds = Counter(o["kind"] for o in store.get_session(SID)["outcomes"])
    assert kinds == Counter(["summary", "claude-code:permission-mode", "claude-code:mode", "claude-code:attachment",
                             "claude-code:system", "claude-code:ai-title", "claude-code:last-prompt",
                             "claude-code:custom-title", "claude-code:agent-name", "claude-code:ai-title"])
    hook = next(o for o in store.get_session(SID)["outcomes"] if o["kind"] == "claude-code:system")
    assert (hook["payload"]["subtype"], hook["at"]) == ("stop_hook_summary", "2026-03-02T09:00:25.500000Z")
    attachment = next(o for o in store.get_session(SID)["outcomes"] if o["kind"] == "claude-code:attachment")
    assert attachment["payload"]["attachment"]["filename"] == "src/checkout.ts"


def test_an_inline_sub_agent_with_its_id_on_user_lines_only_is_one_session(current):
    store, _ = current
    child = store.get_session(f"b7c8d9e@{SID}")
    assert [(c["model"], c["input_tokens"], c["output_tokens"]) for c in child["calls"]] == [
        ("claude-haiku-4-5-20251001", 20, 40)]
    assert child["parent_session_id"] == SID
    assert [b.get("name") for b in store.get_call(child["parent_call_id"])["response"]["content"]] == [None, "Task"]
    assert child["agent"] == "Explore"


def test_a_thinking_block_with_only_a_signature_is_kept(current):
    store, _ = current
    first = store.get_session(SID)["calls"][0]
    blocks = store.get_call(first["id"])["response"]["content"]
    signature = "EqQBCkYIBxgCKkBvJ3m0redactedsignatureQ2hlY2tvdXQ"
    assert blocks[0] == {"type": "thinking", "thinking": "", "signature": signature}
    assert store.replay_call(store.get_session(SID)["calls"][1]["id"])["messages"][1]["content"][0] == blocks[0]
    assert [b["type"] for b in blocks] == ["thinking", "tool_use"]


def test_one_hour_cache_writes_are_priced_at_the_one_hour_rate(current):
    store, _ = current
    first = store.get_session(SID)["calls"][0]
    assert (first["input_tokens"], first["cache_write_tokens"], first["cache_write_1h_tokens"],
            first["cache_read_tokens"], first["output_tokens"]) == (6, 12000, 10000, 8000, 210)
    p = load_price_table().get("claude-opus-4-6")
    expected = 6 * p.input + 2000 * p.cache_write_5m + 10000 * p.cache_write_1h + 8000 * p.cache_read + 210 * p.output
    assert first["cost_usd"] == pytest.approx(expected, rel=1e-12)
    assert p.cache_write_1h == pytest.approx(2 * p.input)


def test_a_file_with_only_a_summary_of_another_session_makes_no_session(tmp_path):
    store = open_store(tmp_path / "t.db")
    source = HERE / "summary_only" / "2f6b1d7e-0c4a-4b8e-a1d2-3e4f5a6b7c8d.jsonl"
    report = run_import(store, plan([source]))
    assert store.list_sessions(ALL) == []
    assert report.skipped == [(f"{source}:1", "a summary with no session in this file (it names the message "
                                              "31b6bc99-15c0-4d23-b4a8-544268d86746 of another session): not kept "
                                              "unless the file's session follows")]


def test_sub_agents_nested_five_deep_each_hang_from_the_call_that_spawned_them(tmp_path):
    store = open_store(tmp_path / "t.db")
    report = run_import(store, plan([HERE / "nested"]))
    assert (report.failed, report.skipped, report.added["sessions"], report.added["calls"]) == ([], [], 6, 11)
    parent = NESTED_ID
    for depth, agent in enumerate(CHAIN, 1):
        child = store.get_session(f"{agent}@{NESTED_ID}")
        assert child["parent_session_id"] == parent, depth
        spawn = store.get_call(child["parent_call_id"])
        assert spawn["session_id"] == parent, depth
        assert spawn["response"]["content"][0]["id"] == ("toolu_main" if depth == 1 else f"toolu_{CHAIN[depth - 2]}")
        assert [c["output_tokens"] for c in child["calls"]] == ([30 + depth, 7 + depth] if depth < 5 else [12])
        parent = child["id"]


def _snapshot(store):
    out = []
    for s in sorted(store.list_sessions(ALL), key=lambda s: s["id"]):
        full = store.get_session(s["id"])
        out.append((s["id"], s["started_at"], s["parent_session_id"], s["parent_call_id"], s["labels"],
                    [(c["id"], c["input_tokens"], c["cache_write_1h_tokens"], c["output_tokens"],
                      store.replay_call(c["id"]), store.get_call(c["id"])["response"]) for c in full["calls"]],
                    sorted((o["id"], o["kind"], o["at"]) for o in full["outcomes"])))
    return out


@pytest.mark.parametrize("cut", range(1, 19))
def test_a_transcript_imported_in_two_parts_equals_one_imported_whole(tmp_path, cut):
    """Calls, sessions, outcomes and labels: a title written after the first part was imported (a `/rename` that
    `watch` sees) becomes the session's title then, as if the file had been imported whole (issue 25 item 3)."""
    whole = open_store(tmp_path / "whole.db")
    run_import(whole, plan([CURRENT]))
    lines = CURRENT.read_bytes().splitlines(keepends=True)
    target = tmp_path / "p" / CURRENT.name
    target.parent.mkdir()
    target.write_bytes(b"".join(lines[:cut]))
    store = open_store(tmp_path / "t.db")
    run_import(store, plan([target]))
    with open(target, "ab") as f:
        f.write(b"".join(lines[cut:]))
    again = run_import(store, plan([target]))
    assert (again.failed, again.skipped) == ([], [])
    assert _snapshot(store) == _snapshot(whole)


def test_a_file_whose_state_holds_no_titles_keeps_its_rename_when_it_grows(tmp_path):
    """A file imported in part by a version that kept no titles in its state (it read the whole file for them each
    time): when the file grows with an AI title, the rename read before still wins (issue 34: one pass per file)."""
    lines = CURRENT.read_bytes().splitlines(keepends=True)
    target = tmp_path / "p" / CURRENT.name
    target.parent.mkdir()
    target.write_bytes(b"".join(lines[:17]))  # the AI title and the rename, not the last AI title
    store = open_store(tmp_path / "t.db")
    run_import(store, plan([target]))
    row = store.import_file(str(target.resolve()))
    assert row is not None and row["state"]["titles"] == {SID: ["EU checkout bug", "Fix EU checkout VAT crash"]}
    del row["state"]["titles"]
    store.write_batch([FileImported(**row)])
    with open(target, "ab") as f:
        f.write(b"".join(lines[17:]))
    again = run_import(store, plan([target]))
    assert (again.appended, again.failed, again.skipped) == (1, [], [])
    assert store.get_session(SID)["labels"]["title"] == "EU checkout bug"


def test_a_title_read_after_its_session_started_is_its_label(tmp_path):
    """The titles are read in the one pass over the file: a session that starts before its titles are written
    ends with the last rename as its label, in the labels it is listed by too."""
    store = open_store(tmp_path / "t.db")
    run_import(store, plan([CURRENT]))
    assert store.get_session(SID)["labels"]["title"] == "EU checkout bug"
    (listed,) = [s for s in store.list_sessions(SessionFilter(limit=None, labels={"title": "EU checkout bug"}))]
    assert listed["id"] == SID
