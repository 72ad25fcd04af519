"""A call that reaches one database by two paths is billed once (issue 31, item 4): the real Claude Code run
through `reasonlog run`, and the same run imported from its own transcript (`import`, then `watch --once`), in
either order: the import after the proxy's recording, or before the proxy's writes reach the database (a `watch`
that imported while the run went on). The proxy's record is the one billed (it holds the exact request, the
upstream's bytes, latency and time to first token); `stats`, `sessions`, a session's calls and the API agree."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import orjson
import pytest
from proxy_upstream import anthropic_events
from sdk_server import sse
from test_proxy_cli_sessions import ToolUpstream, anthropic_reply
from test_proxy_clis import cli, run_through_proxy

import reasonlog
from reasonlog import query
from reasonlog.capture.proxy_record import Exchange, Recording
from reasonlog.capture.proxy_routes import route_of
from reasonlog.capture.proxy_sessions import Sessions
from reasonlog.store import SessionFilter

ALL = SessionFilter(limit=None)
PROMPT = "Please run the shell command: echo hello"


def reasonlog_cli(db, *args: str, home) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "HOME": str(home)})
    assert done.returncode == 0, done.stderr
    return done


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
    """What each reader says: `stats` by source, the sessions' totals, the calls billed one by one."""
    store = reasonlog.open_store(db, read_only=True)
    sessions = store.list_sessions(ALL)
    calls = [c for s in sessions for c in store.get_session(s["id"])["calls"]]
    stats = query.stats(store, "source", ALL)
    store.close()
    return {"stats": {row["source"]: (row["calls"], row["input_tokens"], row["output_tokens"],
                                      round(row["cost_usd"], 6)) for row in stats},
            "sessions": (sum(s["call_count"] for s in sessions), sum(s["output_tokens"] for s in sessions),
                         round(sum(s["cost_usd"] or 0 for s in sessions), 6)),
            "calls": (sum(c["output_tokens"] or 0 for c in calls), round(sum(c["cost_usd"] or 0 for c in calls), 6)),
            "billed": sorted((c["provider_message_id"], c["output_tokens"]) for c in calls if not c.get("counted_in")),
            "twins": sorted((c["provider_message_id"], c.get("counted_in") is not None) for c in calls)}


def expected(calls: int, cost: float) -> dict:
    output = 57 + 30
    return {"stats": {"recorded": (calls, 2210 + 12, output, cost)}, "sessions": (calls, output, cost),
            "calls": (output, cost)}


def test_a_run_recorded_then_imported_then_watched_is_billed_once(claude_run):
    folder, sent = claude_run
    db = folder / "run.db"
    alone = figures(db)
    assert alone["billed"] == [("msg_01", 57), ("msg_02", 30)]
    cost = alone["sessions"][2]
    assert cost > 0
    reasonlog_cli(db, "import", str(folder / "home" / ".claude" / "projects"), home=folder / "home")
    reasonlog_cli(db, "watch", "--once", str(folder / "home" / ".claude" / "projects"), home=folder / "home")
    after = figures(db)
    assert {k: after[k] for k in ("stats", "sessions", "calls")} == expected(2, cost)
    assert after["billed"] == alone["billed"]  # the proxy's records are the ones billed
    assert after["twins"] == [("msg_01", False), ("msg_01", True), ("msg_02", False), ("msg_02", True)]


def test_an_import_before_the_proxys_writes_reach_the_database_is_billed_once(claude_run, tmp_path):
    folder, sent = claude_run
    db = tmp_path / "r.db"
    projects = folder / "home" / ".claude" / "projects"
    reasonlog_cli(db, "import", str(projects), home=folder / "home")
    imported = figures(db)
    assert imported["stats"] == {"claude-code": (2, 2222, 87, imported["sessions"][2])}
    recorder = reasonlog.Recorder(db)
    recording = Recording(Sessions(recorder, agent="claude", run="claude in /w"))
    for n, received in sent:  # the proxy's own write path, given the exchanges it saw, after the import
        reply = sse(anthropic_events(anthropic_reply(orjson.loads(received.body), n)),
                    named=True)
        recording.submit(Exchange(route_of("POST", received.path), received.body, dict(received.headers),
                                  time.time(), time.perf_counter(), status=200, chunks=[(time.perf_counter(), reply)],
                                  ended=time.perf_counter(), complete=True))
    recording.close()
    recorder.close()
    reasonlog_cli(db, "watch", "--once", str(projects), home=folder / "home")
    after = figures(db)
    recorded_alone = figures(folder / "run.db")
    assert {k: after[k] for k in ("stats", "sessions", "calls")} == expected(2, recorded_alone["sessions"][2])
    assert after["billed"] == recorded_alone["billed"]
    assert after["twins"] == [("msg_01", False), ("msg_01", True), ("msg_02", False), ("msg_02", True)]


def test_stats_by_source_on_the_command_line_says_the_same(claude_run):
    folder, _ = claude_run
    db = folder / "run.db"
    rows = json.loads(reasonlog_cli(db, "stats", "--by", "source", "--json", home=folder / "home").stdout)
    assert [(r["source"], r["calls"], r["output_tokens"]) for r in rows] == [("recorded", 2, 87)]
