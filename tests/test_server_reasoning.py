"""GET /reasoning over the trading simulator's imported logs (the contract its clients call), health and
readiness, the OpenAPI schema, and `reasonlog serve` binding only to loopback."""
from __future__ import annotations

import datetime
import json
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass

import hypothesis
import hypothesis.strategies as st
import pytest
from click.testing import CliRunner
from conftest import FIXTURES, fresh_database
from fastapi.testclient import TestClient

from reasonlog.cli.main import cli as reasonlog_cli
from reasonlog.io.importing import plan, run_import
from reasonlog.server.app import create_app
from reasonlog.store import open_store

AGENT_DATA = FIXTURES / "ai-trader-agent-log" / "agent_data"


@pytest.fixture(scope="module")
def client(tmp_path_factory, dialect):
    with fresh_database(dialect, tmp_path_factory.mktemp("server")) as db:
        store = open_store(db)
        run_import(store, plan([AGENT_DATA]))
        store.close()
        yield TestClient(create_app(lambda: open_store(db, read_only=True), "test"))


def test_one_model_day_with_its_positions(client):
    r = client.get("/reasoning", params={"date": "2025-10-02", "model": "gpt-5"})
    assert r.status_code == 200
    body = r.json()
    assert (body["count"], body["deployment_mode"]) == (1, "test")
    (session,) = body["sessions"]
    assert (session["job_id"], session["date"], session["model"], session["conversation"]) == (
        "ai-trader-agent-log", "2025-10-02", "gpt-5", None)
    assert [(p["action_type"], p["symbol"], p["amount"], p["cash_after"]) for p in session["positions"][:2]] == [
        ("buy", "NVDA", 10, 8104.0), ("buy", "GOOGL", 6, 6633.1)]
    assert set(session["positions"][0]) == {"action_id", "action_type", "symbol", "amount", "price", "cash_after",
                                            "portfolio_value"}
    assert set(session) == {"session_id", "job_id", "date", "model", "session_summary", "started_at",
                            "completed_at", "total_messages", "positions", "conversation"}


def test_the_full_conversation_when_asked(client):
    r = client.get("/reasoning", params={"date": "2025-10-02", "model": "gpt-5", "include_full_conversation": "true"})
    (session,) = r.json()["sessions"]
    conversation = session["conversation"]
    assert len(conversation) == session["total_messages"] == 2
    assert [(m["message_index"], m["role"]) for m in conversation] == [(0, "user"), (1, "assistant")]
    assert conversation[0]["content"] == "Please analyze and update today's (2025-10-02) positions."
    assert conversation[1]["content"].endswith("<FINISH_SIGNAL>")
    assert set(conversation[0]) == {"message_index", "role", "content", "summary", "tool_name", "tool_input",
                                    "timestamp"}


def test_filters_combine_and_order_by_date_then_model(client):
    day = client.get("/reasoning", params={"date": "2025-10-02"}).json()
    assert [s["model"] for s in day["sessions"]] == sorted(s["model"] for s in day["sessions"])
    assert day["count"] == 5
    job = client.get("/reasoning", params={"job_id": "ai-trader-agent-log", "model": "qwen3-max"}).json()
    assert job["count"] == 20
    assert [s["date"] for s in job["sessions"]] == sorted(s["date"] for s in job["sessions"])
    assert client.get("/reasoning").json()["count"] == 100


def test_a_malformed_date_is_400_and_nothing_found_is_404(client):
    bad = client.get("/reasoning", params={"date": "2025-13-45"})
    assert (bad.status_code, bad.json()) == (400, {"detail": "Invalid date format: 2025-13-45. Expected YYYY-MM-DD"})
    none = client.get("/reasoning", params={"date": "2024-01-01", "model": "gpt-5"})
    assert (none.status_code, none.json()) == (404, {"detail": "No reasoning sessions found for date=2024-01-01,"
                                                               " model=gpt-5"})


@pytest.mark.parametrize("date", ["2025-10-2", "2025-1-02", "20251002", "2025-10-02T00:00", " 2025-10-02",
                                  "2025/10/02", "２０２５-10-02"])
def test_a_date_not_written_yyyy_mm_dd_is_the_400_naming_it(client, date):
    bad = client.get("/reasoning", params={"date": date})
    assert (bad.status_code, bad.json()) == (400, {"detail": f"Invalid date format: {date}. Expected YYYY-MM-DD"})


@hypothesis.settings(max_examples=60, deadline=None, suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(date=st.one_of(st.text(max_size=12), st.dates().map(lambda d: d.isoformat()),
                                 st.from_regex(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}", fullmatch=True)))
def test_any_date_is_a_day_found_a_day_not_found_or_the_400(client, date):
    r = client.get("/reasoning", params={"date": date})
    try:
        real = datetime.date.fromisoformat(date).isoformat() == date and len(date) == 10
    except ValueError:
        real = False
    if real:
        assert r.status_code in (200, 404)
    elif "\x00" in date:  # refused before any route, as in every parameter of every route (issue 20)
        assert (r.status_code, r.json()) == (400, {"detail": "date: contains a NUL byte (%00), which no recorded"
                                                             " text can hold"})
    else:
        assert (r.status_code, r.json()) == (400, {"detail": f"Invalid date format: {date}. Expected YYYY-MM-DD"})


@pytest.mark.slow
def test_health_readiness_and_the_schema(client, tmp_path):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz").json()
    assert (ready["status"], ready["schema_version"]) == ("ready", 26)  # 26: SQLite's text kept in blocks
    schema = client.get("/openapi.json").json()
    params = {p["name"] for p in schema["paths"]["/reasoning"]["get"]["parameters"]}
    assert params == {"job_id", "date", "model", "include_full_conversation"}
    assert set(schema["paths"]["/reasoning"]["get"]["responses"]) == {"200", "400", "401", "403", "404", "422", "503"}
    down = TestClient(create_app(lambda: open_store(tmp_path / "missing.db", read_only=True)))
    r = down.get("/readyz")
    assert r.status_code == 503 and r.json()["status"] == "not ready"
    assert "missing.db" in r.json()["detail"]


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def cli(db, *args) -> Ran:
    """The command run in this process (an exception escaping it fails the test)."""
    result = CliRunner().invoke(reasonlog_cli, ["--db", str(db), *args], catch_exceptions=False)
    return Ran(result.exit_code, result.stdout, result.stderr)


def test_keys_are_bearer_tokens_with_scopes(tmp_path):
    db = tmp_path / "t.db"
    store = open_store(db)
    run_import(store, plan([AGENT_DATA / "gpt-5"]))
    app = TestClient(create_app(lambda: open_store(db, read_only=True)))
    assert app.get("/reasoning", params={"model": "gpt-5"}).status_code == 200  # no key yet: loopback, open
    made = cli(db, "keys", "create", "--scope", "read", "--name", "dashboard")
    secret = made.stdout.strip()
    assert made.returncode == 0 and secret.startswith("rlk_") and "only time it is shown" in made.stderr
    missing = app.get("/reasoning")
    assert (missing.status_code, missing.json()["detail"]) == (
        401, "no API key: send Authorization: Bearer <key> (reasonlog keys create)")
    assert missing.headers["www-authenticate"] == "Bearer"
    wrong = app.get("/reasoning", headers={"Authorization": "Bearer rlk_nope"})
    assert (wrong.status_code, wrong.json()["detail"].split(":")[0]) == (401, "a wrong or revoked API key")
    good = app.get("/reasoning", params={"model": "gpt-5"}, headers={"Authorization": f"Bearer {secret}"})
    assert (good.status_code, good.json()["count"]) == (200, 20)
    assert app.get("/healthz").status_code == 200  # the liveness probe needs no key
    listed = json.loads(cli(db, "keys", "list", "--json").stdout)
    assert [(k["name"], k["scope"], k["prefix"], k["revoked_at"]) for k in listed] == [
        ("dashboard", "read", secret[:12], None)]
    assert secret not in db.read_bytes().decode("latin-1")  # only its hash is kept
    assert cli(db, "keys", "revoke", listed[0]["prefix"]).returncode == 0
    assert app.get("/reasoning", headers={"Authorization": f"Bearer {secret}"}).status_code == 401
    assert app.get("/reasoning").status_code == 401  # with every key revoked it stays closed, not open
    again = cli(db, "keys", "revoke", listed[0]["prefix"])
    assert again.returncode == 1 and "no working key has this id or prefix" in again.stderr
    bad_scope = cli(db, "keys", "create", "--scope", "root")
    assert bad_scope.returncode == 2 and "'root' is not one of 'read', 'write', 'admin'" in bad_scope.stderr


def test_serve_binds_beyond_loopback_only_with_a_key(tmp_path):
    db = tmp_path / "t.db"
    refused = cli(db, "serve", "--host", "0.0.0.0")
    assert refused.returncode == 2
    assert "--host 0.0.0.0: serving beyond this machine needs an API key" in refused.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "reasonlog", "--db", str(db), "serve",
                               "--port", str(port)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                    assert r.read() == b'{"status":"ok"}'
                    break
            except OSError:
                assert time.monotonic() < deadline, "the server did not answer"
                time.sleep(0.1)
    finally:
        server.terminate()
        server.wait(timeout=10)
