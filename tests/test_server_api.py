"""The /v1 read API over imported data: runs, sessions with the CLI's filters, search and cursor pages that stay
right while sessions are written, one session paged, a call's exact request, diffs, statistics, and errors
that name the parameter."""
from __future__ import annotations

import pytest
from conftest import FIXTURES, fresh_database
from fastapi.testclient import TestClient

from reasonlog.io.importing import plan, run_import
from reasonlog.server.app import create_app
from reasonlog.store import SessionFilter, open_store

AGENT_DATA = FIXTURES / "ai-trader-agent-log" / "agent_data"
SPOTTER = FIXTURES / "claude-code-transcripts" / "spotter"


@pytest.fixture(scope="module")
def served(tmp_path_factory, dialect):
    with fresh_database(dialect, tmp_path_factory.mktemp("api")) as db:
        store = open_store(db)
        run_import(store, plan([AGENT_DATA, SPOTTER]))
        yield TestClient(create_app(lambda: open_store(db, read_only=True))), store
        store.close()


def test_sessions_filter_and_page_by_cursor(served):
    client, store = served
    everything = [s["id"] for s in store.list_sessions(SessionFilter(limit=None))]
    seen, cursor = [], None
    while True:
        params = {"limit": 30, **({"cursor": cursor} if cursor else {})}
        body = client.get("/v1/sessions", params=params).json()
        seen += [s["id"] for s in body["sessions"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == everything and len(seen) == 107
    gpt5 = client.get("/v1/sessions", params={"model": "gpt-5", "label": "date=2025-10-02"}).json()
    assert [(s["model"], s["labels"]["date"]) for s in gpt5["sessions"]] == [("gpt-5", "2025-10-02")]
    assert client.get("/v1/sessions", params={"run": "no-such-run"}).json() == {"sessions": [], "next_cursor": None}
    found = client.get("/v1/sessions", params={"q": "phx.server doesnt seem to start"}).json()["sessions"]
    assert [s["id"] for s in found] == ["55604662-cf2a-4331-851a-ec234028f8ca"]


def test_a_cursor_page_stays_right_while_sessions_are_written(served, tmp_path):
    client, store = served
    first = client.get("/v1/sessions", params={"limit": 5}).json()
    import reasonlog

    rec = reasonlog.Recorder(store.path, writer="sync")
    with rec.session(agent="newcomer"):
        pass
    rec.close()
    second = client.get("/v1/sessions", params={"limit": 5, "cursor": first["next_cursor"]}).json()
    everything = [s["id"] for s in store.list_sessions(SessionFilter(limit=None))]
    start = everything.index(first["sessions"][-1]["id"]) + 1
    assert [s["id"] for s in second["sessions"]] == everything[start:start + 5]


def test_one_session_paged_and_a_calls_exact_request(served):
    client, store = served
    body = client.get("/v1/sessions/ae4a77f8", params={"offset": 10, "limit": 5}).json()
    full = store.get_session("ae4a77f8-aedd-4bc1-888f-c94edc91af04")
    assert body["message_count"] == len(full["messages"])
    assert [m["idx"] for m in body["messages"]] == [m["idx"] for m in full["messages"][10:15]]
    call_id = full["calls"][3]["id"]
    assert client.get(f"/v1/calls/{call_id}/request").json() == store.replay_call(call_id)
    assert client.get(f"/v1/calls/{call_id}").json()["request"] == store.replay_call(call_id)
    diff = client.get("/v1/diff", params={"a": full["calls"][3]["id"], "b": full["calls"][4]["id"]}).json()
    assert diff["added"]


def test_stats_and_runs_agree_with_the_cli(served):
    client, store = served
    days = {r["day"]: r for r in client.get("/v1/stats", params={"by": "day"}).json()["rows"]}
    assert (days["2026-02-12"]["calls"], days["2026-02-12"]["output_tokens"]) == (221, 49482)
    runs = {r["run"]: r for r in client.get("/v1/runs").json()["runs"]}
    assert runs["ai-trader-agent-log"]["calls"] == 154


def test_errors_name_the_parameter(served):
    client, _ = served
    cases = [("/v1/sessions", {"since": "yesterday"}, 400, "since: 'yesterday' is not a valid date"),
             ("/v1/sessions", {"label": "nolabel"}, 400, "label: expected KEY=VALUE, got 'nolabel'"),
             ("/v1/sessions", {"cursor": "garbage!"}, 400, "cursor: not a cursor this API gave"),
             ("/v1/sessions/nope", {}, 404, "session nope: no session matches 'nope'"),
             ("/v1/calls/nope/request", {}, 404, "call nope: no call matches 'nope'")]
    for path, params, status, text in cases:
        r = client.get(path, params=params)
        assert (r.status_code, r.json()["detail"][:len(text)]) == (status, text), path
    bad = client.get("/v1/sessions", params={"limit": 0})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "limit"]
    assert client.get("/v1/stats", params={"by": "week"}).status_code == 422


def test_outcomes_by_kind_and_session(served):
    client, store = served
    day = store.list_sessions(SessionFilter(model="gpt-5", labels={"date": "2025-10-02"}, limit=None))[0]
    mine = client.get("/v1/outcomes", params={"kind": "position", "session": day["id"]}).json()["outcomes"]
    assert [(o["payload"]["symbol"], o["payload"]["cash_after"]) for o in mine][-2:] == [
        ("GOOGL", 6633.1), ("NVDA", 8104.0)]  # newest first
    every = client.get("/v1/outcomes", params={"kind": "position", "limit": 500}).json()["outcomes"]
    assert len(every) == 296
    assert client.get("/v1/outcomes", params={"kind": "nothing-like-this"}).json() == {"outcomes": []}
    assert client.get("/v1/outcomes", params={"session": "nope"}).status_code == 404
