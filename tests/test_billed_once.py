"""A call that reaches one database by two paths is billed once (issue 31, item 4): the real Claude Code run
through `reasonlog run`, and the same run imported from its own transcript (`import`, then `watch --once`), in
either order: the import after the proxy's recording, or before the proxy's writes reach the database (a `watch`
that imported while the run went on). The proxy's record is the one billed (it holds the exact request, the
upstream's bytes, latency and time to first token); `stats`, `sessions`, a session's calls and the API agree."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import orjson
import pytest
from fastapi.testclient import TestClient
from proxy_upstream import Upstream, anthropic_events, responses_events
from sdk_server import load_json, sse
from test_proxy_cli_sessions import ToolUpstream, anthropic_reply
from test_proxy_clis import cli, run_through_proxy

import reasonlog
from reasonlog import query
from reasonlog.capture.proxy_record import Exchange, Recording
from reasonlog.capture.proxy_routes import route_of
from reasonlog.capture.proxy_sessions import Sessions
from reasonlog.server.app import create_app
from reasonlog.store import SessionFilter

ALL = SessionFilter(limit=None)
PROMPT = "Please run the shell command: echo hello"
# The two calls of the loop (the Bash tool call, then the answer) at claude-sonnet-4-5's list prices: input 2210 +
# 12, output 57 + 30, cache reads 9000, cache writes 1200 (5 minutes), as the upstream reported them.
COST = 0.015171
BILLED = [("msg_01", 57), ("msg_02", 30)]
EXPECTED = {"stats": {"recorded": (2, 2222, 87, COST)}, "sessions": (2, 87, COST), "calls": (87, COST),
            "api": {"recorded": (2, 87, COST)}, "billed": BILLED,
            "twins": [("msg_01", False), ("msg_01", True), ("msg_02", False), ("msg_02", True)]}


def reasonlog_cli(db, *args: str, home) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "HOME": str(home), "COLUMNS": "300"})
    assert done.returncode == 0, done.stderr
    return done

pytestmark = pytest.mark.xdist_group("billed_once")  # one worker runs the real CLI of the module's fixture once


@pytest.fixture(scope="module")
def claude_run(tmp_path_factory):
    """One real Claude Code loop (a Bash tool call, then an answer) recorded by `reasonlog run`: the folder, the
    database, and the requests the upstream received with the replies it sent."""
    claude = cli("claude")
    folder = tmp_path_factory.mktemp("claude-run")
    with ToolUpstream() as up:
        done = run_through_proxy(folder, folder / "run.db", up.url, claude, "-p", PROMPT, "--allowedTools", "Bash",
                                 ANTHROPIC_API_KEY="sk-ant-fake")
    assert done.returncode == 0, done.stderr
    sent = [(n, r) for n, r in enumerate((r for r in up.received if r.path.startswith("/v1/messages")), 1)]
    return folder, sent


def figures(db) -> dict:
    """What each reader says: `stats` by source, the sessions' totals, the calls one by one, the API's stats."""
    store = reasonlog.open_store(db, read_only=True)
    sessions = store.list_sessions(ALL)
    calls = [c for s in sessions for c in store.get_session(s["id"])["calls"]]
    stats = query.stats(store, "source", ALL)
    store.close()
    api = TestClient(create_app(lambda: reasonlog.open_store(db, read_only=True))).get(
        "/v1/stats", params={"by": "source"}).json()
    return {"stats": {row["source"]: (row["calls"], row["input_tokens"], row["output_tokens"],
                                      round(row["cost_usd"], 6)) for row in stats},
            "sessions": (sum(s["call_count"] for s in sessions), sum(s["output_tokens"] for s in sessions),
                         round(sum(s["cost_usd"] or 0 for s in sessions), 6)),
            "calls": (sum(c["output_tokens"] or 0 for c in calls), round(sum(c["cost_usd"] or 0 for c in calls), 6)),
            "api": {r["source"]: (r["calls"], r["output_tokens"], round(r["cost_usd"], 6)) for r in api["rows"]},
            "billed": sorted((c["provider_message_id"], c["output_tokens"]) for c in calls if "counted_in" not in c),
            "twins": sorted((c["provider_message_id"], "counted_in" in c) for c in calls)}


def test_a_run_recorded_then_imported_then_watched_is_billed_once(claude_run, tmp_path):
    folder, _ = claude_run
    db = tmp_path / "r.db"
    shutil.copy(folder / "run.db", db)  # the proxy's recording, closed: `run` has ended
    alone = figures(db)
    assert (alone["billed"], alone["sessions"]) == (BILLED, (2, 87, COST))
    projects = folder / "home" / ".claude" / "projects"
    reasonlog_cli(db, "import", str(projects), home=folder / "home")
    reasonlog_cli(db, "watch", "--once", str(projects), home=folder / "home")
    assert figures(db) == EXPECTED  # the proxy's records are the ones billed, the imported ones counted in them
    rows = json.loads(reasonlog_cli(db, "stats", "--by", "source", "--json", home=folder / "home").stdout)
    assert [(r["source"], r["calls"], r["output_tokens"]) for r in rows] == [("recorded", 2, 87)]
    store = reasonlog.open_store(db, read_only=True)
    (imported,) = store.list_sessions(SessionFilter(labels={"source": "claude-code"}, limit=None))
    twins = [c["counted_in"] for c in store.get_session(imported["id"])["calls"]]
    store.close()
    shown = reasonlog_cli(db, "show", imported["id"], home=folder / "home").stdout
    lines = [line for line in shown.splitlines() if "counted in" in line]
    assert [line.split("counted in call ")[1].split()[0] for line in lines] == twins
    page = TestClient(create_app(lambda: reasonlog.open_store(db, read_only=True))).get(f"/sessions/{imported['id']}")
    assert [f'<a href="/calls/{twin}">call {twin}</a>' in page.text for twin in twins] == [True, True]


@pytest.mark.slow
def test_an_import_before_the_proxys_writes_reach_the_database_is_billed_once(claude_run, tmp_path):
    folder, sent = claude_run
    db = tmp_path / "r.db"
    projects = folder / "home" / ".claude" / "projects"
    reasonlog_cli(db, "import", str(projects), home=folder / "home")
    assert figures(db)["stats"] == {"claude-code": (2, 2222, 87, COST)}
    recorder = reasonlog.Recorder(db)
    recording = Recording(Sessions(recorder, agent="claude", run="claude in /w"))
    for n, received in sent:  # the proxy's own write path, given the exchanges it saw, after the import
        reply = sse(anthropic_events(anthropic_reply(orjson.loads(received.body), n)), named=True)
        now = time.perf_counter()
        recording.submit(Exchange(route_of("POST", received.path), received.body, dict(received.headers),  # type: ignore[arg-type]
                                  time.time(), now, status=200, chunks=[(now, reply)], ended=now, complete=True))
    recording.close()
    recorder.close()
    reasonlog_cli(db, "watch", "--once", str(projects), home=folder / "home")
    assert figures(db) == EXPECTED


def run_codex(folder) -> tuple[list, bytes]:
    """One real Codex run through `reasonlog run` into `folder/run.db`: the requests its upstream received, and
    the stream it answered each with."""
    body = load_json("openai-responses", "openai-reasoning-encrypted-content.1.json")
    streamed = sse(responses_events(body), named=True)
    with Upstream() as up:
        up.answers["responses"] = (json.dumps(body).encode(), streamed)
        done = run_through_proxy(folder, folder / "run.db", up.url, cli("codex"), "exec", "--skip-git-repo-check",
                                 "Compute it", OPENAI_API_KEY="sk-proj-fake")
    assert done.returncode == 0, done.stderr
    return [r for r in up.received if r.method == "POST" and r.path == "/v1/responses"], streamed


def by_source(db) -> dict:
    store = reasonlog.open_store(db, read_only=True)
    rows = {r["source"]: (r["calls"], r["input_tokens"], r["output_tokens"], r["reasoning_tokens"])
            for r in query.stats(store, "source", ALL)}
    calls = sorted((s["labels"].get("source", "recorded"), "counted_in" in c) for s in store.list_sessions(ALL)
                   for c in store.get_session(s["id"])["calls"])
    store.close()
    return {"stats": rows, "calls": calls}


CODEX_ONCE = {"stats": {"recorded": (1, 865, 163, 128)}, "calls": [("codex", True), ("recorded", False)]}


@pytest.mark.slow
def test_a_codex_run_recorded_and_imported_is_billed_once_by_its_thread_and_position(tmp_path):
    """Codex's rollout names no response id: its call is matched by Codex's thread id (both sessions' external
    id) and its position, its tokens agreeing."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    sent, streamed = run_codex(first)
    sessions = first / "home" / ".codex" / "sessions"
    reasonlog_cli(first / "run.db", "import", str(sessions), home=first / "home")
    reasonlog_cli(first / "run.db", "watch", "--once", str(sessions), home=first / "home")
    assert by_source(first / "run.db") == CODEX_ONCE
    reasonlog_cli(second / "r.db", "import", str(sessions), home=first / "home")  # the import first, then the proxy's
    recorder = reasonlog.Recorder(second / "r.db")
    recording = Recording(Sessions(recorder, agent="codex", run="codex in /w"))
    for received in sent:
        now = time.perf_counter()
        recording.submit(Exchange(route_of("POST", received.path), received.body, dict(received.headers),  # type: ignore[arg-type]
                                  time.time(), now, status=200, chunks=[(now, streamed)], ended=now, complete=True))
    recording.close()
    recorder.close()
    assert by_source(second / "r.db") == CODEX_ONCE
