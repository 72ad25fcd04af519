"""What the server answers when the request or the database is at fault, on both dialects: a 400 naming a
parameter that holds a NUL byte (every read route, every parameter), a 503 with Retry-After from the dashboard
while the database is unreachable, and reads that never wait behind a write that is blocked. Ingestion writes
through the recorders' writer: a batch that meets a locked database is kept in a spill file beside it and written
before the next batch once the lock is gone, with the writer's counters."""
from __future__ import annotations

import contextlib
import sqlite3
import threading
import time

import httpx
import psycopg
import pytest
import uvicorn
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_cluster import free_port
from test_server_recovery import batch

from reasonlog.server.app import create_app, serve_app
from reasonlog.store import SessionFilter, open_store

# The dashboard's pages are not in the schema: their parameters, as its routes take them.
DASHBOARD = [("/", [], ["run", "agent", "model", "status", "source", "since", "until", "q", "mode", "sort", "after"]),
             ("/sessions/{session_id}", ["session_id"], ["view", "offset", "limit"]),
             ("/calls/{call_id}", ["call_id"], ["against"]), ("/usage", [], ["since", "until"]),
             ("/usage.csv", [], ["by", "since", "until"]), ("/login", [], ["next"])]


def read_routes(app) -> list[tuple[str, list[str], list[str]]]:
    """Every GET route of the schema with its path and query parameters, and the dashboard's."""
    found = []
    for path, operations in app.openapi()["paths"].items():
        params = operations.get("get", {}).get("parameters")
        if params:
            found.append((path, [p["name"] for p in params if p["in"] == "path"],
                          [p["name"] for p in params if p["in"] == "query"]))
    return found + DASHBOARD


def test_a_nul_byte_in_any_parameter_of_any_read_route_is_a_400_naming_it(db):
    open_store(db).close()
    app = serve_app(db)
    routes = read_routes(app)
    assert len(routes) == 18  # every read route with a parameter (a new one is tested here too)
    answers = {}
    with TestClient(app, raise_server_exceptions=False) as client:  # its end closes the app's stores
        for path, path_params, query_params in routes:
            for name in [*path_params, *query_params]:
                url = path.format(**{p: "x" if p != name else "a%00b" for p in path_params})
                answer = client.get(url + (f"?{name}=a%00b" if name in query_params else ""))
                answers[(path, name)] = (answer.status_code, answer.json().get("detail", "")[:len(name) + 1])
    assert {key: value for key, value in answers.items() if value != (400, f"{key[1]}:")} == {}
    assert len(answers) == 75


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(min_size=1, max_size=12))
@pytest.mark.slow
def test_any_text_in_the_sessions_filters_is_answered_never_a_500(db, text):
    with TestClient(serve_app(db), raise_server_exceptions=False) as client:
        for name in ("agent", "run", "model", "status", "q", "since", "label", "score"):
            answer = client.get("/v1/sessions", params={name: text})
            assert answer.status_code in (200, 400), (name, text, answer.status_code, answer.text)


def unreachable(dialect: str, tmp_path) -> str:
    if dialect == "sqlite":
        return str(tmp_path / "missing" / "nothing.db")
    return f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"  # nobody listens there


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_the_dashboard_and_api_answer_503_while_the_database_is_unreachable(kind, tmp_path):
    target = unreachable(kind, tmp_path)
    client = TestClient(create_app(lambda: open_store(target, read_only=True)), raise_server_exceptions=False)
    for path in ("/", "/usage", "/usage.csv", "/sessions/x", "/v1/sessions", "/v1/stats", "/reasoning"):
        answer = client.get(path, headers={"Accept": "text/html"})
        assert (path, answer.status_code, answer.headers.get("retry-after")) == (path, 503, "2")
        assert "the database cannot be used now" in answer.text
    assert client.get("/readyz").json()["status"] == "not ready"
    assert client.get("/healthz").status_code == 200


@contextlib.contextmanager
def served(app, port: int):
    """`app` under uvicorn in a thread on 127.0.0.1:`port`, until the block ends."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield server
    finally:
        server.should_exit = True
        thread.join(20)


class BlockedWriter:
    """Another process's write that holds the database: SQLite's write lock, or PostgreSQL's lock on the
    session the batch writes (the one every writer of that session takes)."""

    def __init__(self, target, session_id: str):
        self.target, self.session_id = target, session_id

    def __enter__(self):
        if isinstance(self.target, str) and self.target.startswith("postgresql"):
            self.conn = psycopg.connect(self.target, autocommit=True)
            self.conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 7))", (self.session_id,))
        else:
            self.conn = sqlite3.connect(self.target, isolation_level=None)
            self.conn.execute("BEGIN IMMEDIATE")
        return self

    def __exit__(self, *exc):
        self.conn.close()


def test_reads_do_not_wait_behind_a_blocked_write_and_a_batch_that_meets_a_locked_file_is_spilled_then_written(
        db, dialect):
    open_store(db).close()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with served(serve_app(db), port), contextlib.ExitStack() as blocking:
        assert httpx.get(f"{base}/readyz", timeout=60).status_code == 200  # a server that has been running
        blocking.enter_context(BlockedWriter(db, "S00007"))
        answers: list[httpx.Response] = []
        writing = threading.Thread(target=lambda: answers.append(httpx.post(f"{base}/v1/ingest", content=batch(7),
                                                                            timeout=60)))
        writing.start()
        time.sleep(0.5)  # the write is waiting for its lock now
        began = time.monotonic()
        for path in ("/v1/sessions", "/readyz", "/v1/stats", "/"):
            assert httpx.get(base + path, timeout=60).status_code == 200
        waited = time.monotonic() - began
        # Behind the write they would take the rest of its 5 s busy timeout (4.5 s); 1.0 failed at load 13.
        assert waited < 3.0, f"four reads took {waited:.1f} s behind the blocked write"
        if dialect == "sqlite":  # the busy timeout passes: the batch waits in a spill file, kept, not refused
            writing.join(30)
            assert (answers[0].status_code, answers[0].json()) == (200, {
                "batch_id": "batch-7", "events": 2, "duplicate": False, "rejected": [], "spilled": True})
            assert sessions_of(db) == []
    writing.join(30)
    if dialect == "postgresql":  # the lock was let go: the write went through
        assert (answers[0].status_code, answers[0].json()["spilled"]) == (200, False)
    with served(serve_app(db), port):  # the next batch (here of a server started again) writes the spilled one first
        assert httpx.post(f"{base}/v1/ingest", content=batch(8), timeout=60).json()["spilled"] is False
        assert httpx.post(f"{base}/v1/ingest", content=batch(7), timeout=60).json()["duplicate"] is True
    assert sessions_of(db) == ["S00007", "S00008"]
    with contextlib.closing(open_store(db)) as store:
        status = store.status()  # what `reasonlog db status` shows
    spilled = {"sqlite": 1, "postgresql": 0}[dialect]
    assert (status["spilled_batches"], status["replayed_batches"], status["pending_spill_files"]) == (
        spilled, spilled, [])


def sessions_of(db) -> list[str]:
    with contextlib.closing(open_store(db, read_only=True)) as store:
        return sorted(s["id"] for s in store.list_sessions(SessionFilter(limit=None)))
