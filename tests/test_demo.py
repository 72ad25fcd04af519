"""The demo tells a true story (issue 8 §7): each provider's own request shape, a window that never
orphans a tool result, instants that agree, and a new run each time."""
from __future__ import annotations

from datetime import UTC, datetime

import reasonlog
from reasonlog.demo import run_demo


def _calls(store, session_id):
    session = store.get_session(session_id)
    return session, [(c, store.replay_call(c["id"])) for c in session["calls"]]


def test_each_agent_sends_its_providers_request_shape(db_path, store_of):
    run_demo(db_path)
    store = store_of()
    for s in store.list_sessions(reasonlog.SessionFilter()):
        for _, request in _calls(store, s["id"])[1]:
            if s["agent"] == "gpt-5":  # OpenAI Chat Completions
                assert "system" not in request and request["messages"][0]["role"] == "system"
                assert {t["type"] for t in request["tools"]} == {"function"}
                assert "max_completion_tokens" in request
            else:  # Anthropic Messages
                assert isinstance(request["system"], str) and "input_schema" in request["tools"][0]
                assert all(m["role"] in ("user", "assistant") for m in request["messages"])


def _tool_ids(message: dict) -> tuple[set, set]:
    """(tool calls made, tool results given) in one message, in either provider's shape."""
    made = {tc["id"] for tc in message.get("tool_calls") or ()}
    given = {message["tool_call_id"]} if message.get("role") == "tool" else set()
    if isinstance(message.get("content"), list):
        made |= {b["id"] for b in message["content"] if b.get("type") == "tool_use"}
        given |= {b["tool_use_id"] for b in message["content"] if b.get("type") == "tool_result"}
    return made, given


def test_the_sliding_window_never_leaves_a_result_without_its_call(db_path, store_of):
    run_demo(db_path, exchanges=6)
    store = store_of()
    windows = 0
    for s in store.list_sessions(reasonlog.SessionFilter()):
        for _, request in _calls(store, s["id"])[1]:
            seen: set = set()
            for message in request["messages"]:
                made, given = _tool_ids(message)
                assert given <= seen, (s["agent"], given - seen)
                seen |= made
            windows += 1
    assert windows == 2 * 6 * 2 + 2  # two agents, two calls a day, one failed call each


def test_every_instant_falls_inside_what_contains_it(db_path, store_of):
    run_demo(db_path)
    store = store_of()
    for s in store.list_sessions(reasonlog.SessionFilter()):
        session = store.get_session(s["id"])
        exchanges = {e["id"]: e for e in session["exchanges"]}
        for call in session["calls"]:
            ex = exchanges[call["exchange_id"]]
            assert ex["started_at"] <= call["started_at"] <= ex["ended_at"]
        for e in session["exchanges"]:
            assert session["started_at"] <= e["started_at"] <= e["ended_at"] <= session["ended_at"]
        for item in session["tool_results"] + session["outcomes"]:
            assert session["started_at"] <= item["at"] <= session["ended_at"]


def test_two_demos_in_the_same_second_are_two_runs(db_path, store_of):
    second = datetime(2026, 11, 22, 9, 30, 0, tzinfo=UTC)
    first, second = run_demo(db_path, start=second), run_demo(db_path, start=second)
    assert first["run"] != second["run"]
    runs = {s["run"] for s in store_of().list_sessions(reasonlog.SessionFilter())}
    assert runs == {first["run"], second["run"]}
