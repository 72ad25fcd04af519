"""A game's per-player log tree (PyCatan AI, real logs): a session per player, a call per request and iteration
with its own tokens (the files' totals also count the tool batches), tool results matched to their batch, the
move as an outcome, an aborted game, re-imports of a changed tree, and broken files."""
from __future__ import annotations

import json
import shutil

import pytest
from conftest import FIXTURES

from reasonlog.io.importing import plan, run_import
from reasonlog.store import SessionFilter, open_store

GAMES = FIXTURES / "pycatan-ai-logs"
GAME = GAMES / "session_20260109_170804"
ABORTED = GAMES / "session_20260109_171431"
ALL = SessionFilter(limit=None)


def player(store, name: str, game: str = GAME.name) -> dict:
    (s,) = [s for s in store.list_sessions(SessionFilter(agent=name, run=game, limit=None))]
    return store.get_session(s["id"])


def test_a_game_is_a_run_with_a_session_per_player(db, tmp_path):
    store = open_store(db)
    report = run_import(store, plan([GAMES]))
    assert (report.files, report.failed, report.skipped) == (2, [], [])
    assert report.added == {"sessions": 4, "calls": 14, "messages": 26, "tool_results": 9, "outcomes": 12}
    runs = {(s["run"], s["agent"], s["status"]) for s in store.list_sessions(ALL)}
    assert runs == {(GAME.name, "Alice", "completed"), (GAME.name, "Bob", "completed"),
                    (GAME.name, "Charlie", "interrupted"), (ABORTED.name, "Alice", "interrupted")}


def test_each_call_has_its_own_tokens_and_the_totals_are_not_counted_twice(db, tmp_path):
    store = open_store(db)
    run_import(store, plan([GAME]))
    alice = player(store, "Alice")
    assert [(c["input_tokens"], c["output_tokens"], c["reasoning_tokens"]) for c in alice["calls"]] == [
        (2172, 41 + 1032, 1032), (5878, 305 + 1541, 1541), (2318, 54 + 1150, 1150), (5586, 304 + 2588, 2588)]
    # The files' `total` of a final response also counts the tool batch before it; reasonlog does not.
    files = [json.loads(p.read_text()) for p in sorted((GAME / "Alice" / "responses").rglob("*.json"))]
    batches = {b["timestamp"]: b["tokens"]["total"] for b in json.loads((GAME / "tool_executions.json").read_text())}
    stored = sum(c["input_tokens"] + c["output_tokens"] for c in alice["calls"])
    assert sum(f["tokens"]["total"] for f in files) - stored == sum(
        batches[t] for t in ("2026-01-09T17:08:14.338297", "2026-01-09T17:08:32.283106"))
    assert (alice["input_tokens"], alice["output_tokens"]) == (15954, 7015)
    assert (player(store, "Bob")["input_tokens"], player(store, "Charlie")["output_tokens"]) == (17840, 20209)


def test_tool_calls_results_and_the_move(db, tmp_path):
    store = open_store(db)
    run_import(store, plan([GAME]))
    bob = player(store, "Bob")
    assert [(t["tool_use_id"], t["name"]) for t in bob["tool_results"]] == [
        ("call_1", "find_best_nodes"), ("call_1", "inspect_node"), ("call_2", "analyze_path_potential"),
        ("call_3", "analyze_path_potential")]
    assert bob["tool_results"][0]["content"]["total_found"] == json.loads(
        (GAME / "tool_executions.json").read_text())[2]["calls"][0]["result"]["total_found"]
    alice = player(store, "Alice")
    moves = [o for o in alice["outcomes"] if o["kind"] == "game_action"]
    assert [(m["payload"]["action"], m["payload"]["parameters"]) for m in moves] == [
        ("place_starting_settlement", {"node": 20}), ("place_starting_road", {"from": 20, "to": 10})]
    final = store.get_call(moves[0]["call_id"])
    assert "[Response was too brief]" not in final["response"]["content"]  # the model's text, not the parser's
    follow_up = store.replay_call(alice["calls"][1]["id"])
    assert [m["role"] for m in follow_up["messages"]] == ["user", "assistant", "user"]
    assert follow_up["messages"][2]["content"].startswith("=== Tool Results ===")
    assert [o["payload"]["message"] for o in alice["outcomes"] if o["kind"] == "chat"][0].startswith("hey everyone")


def test_a_game_that_stopped_shows_its_missing_responses(db, tmp_path):
    store = open_store(db)
    run_import(store, plan([GAMES]))
    charlie = player(store, "Charlie")
    assert [c["status"] for c in charlie["calls"]] == ["ok", "ok", "ok", "ok", "error"]
    assert charlie["calls"][-1]["error"] == {"message": "no response was recorded (the game stopped)"}
    aborted = player(store, "Alice", ABORTED.name)
    assert (aborted["status"], aborted["ended_at"]) == ("interrupted", "2026-01-09T17:16:20.803942Z")
    assert [c["status"] for c in aborted["calls"]] == ["error"]


@pytest.mark.slow
def test_a_changed_tree_is_imported_again_and_broken_files_are_named(db, tmp_path):
    game = tmp_path / GAME.name
    shutil.copytree(GAME, game)
    store = open_store(db)
    run_import(store, plan([game]))
    assert run_import(store, plan([game])).unchanged == 1
    (game / "Bob" / "responses" / "response_2.json").write_text("{broken")
    again = run_import(store, plan([game]))
    assert again.rewritten == 1
    assert again.skipped == [(str(game / "session_metadata.json"), "Bob/responses/response_2.json: not readable JSON"
                                                                   " (unexpected character, expected a string key)")]
    bob = player(store, "Bob")
    assert [c["status"] for c in bob["calls"]] == ["ok", "ok", "ok", "error"]
    assert len(store.list_sessions(ALL)) == 3


def test_detection():
    assert {imp.name for _, imp in plan([GAMES])} == {"game-log"}
    assert [p.name for p, _ in plan([GAMES])] == ["session_metadata.json", "session_metadata.json"]
