"""Recording a workload call the way an agent loop would, shared by tests."""
from __future__ import annotations

from contextlib import contextmanager

import reasonlog

PEM_BODY = "MIIEpAIBAAKCAQEA7xTq9Vw3bLmN4kZ2rT8sYp1QaHcUoJ5nD6fE"
# One example of each kind of secret the redactor masks, for the tests that plant them.
SECRETS = {
    "anthropic_key": "sk-ant-api03-" + "Ab3_-x" * 6,
    "openai_key": "sk-proj-" + "a1B2" * 10,
    "google_api_key": "AIzaSy" + "B7c" * 11,
    "aws_access_key": "AKIAIOSFODNN7EXAMPLE",
    "aws_secret_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",  # masked by its label (AWS_SECRET_ACCESS_KEY=)
    "github_token": "ghp_" + "Ab1" * 12,
    "slack_token": "xoxb-1234567890-abcdefghij",
    "huggingface_token": "hf_" + "Ab1" * 11,
    "groq_key": "gsk_" + "Ab1" * 8,
    "xai_key": "xai-" + "Ab1" * 8,
    "stripe_key": "sk_live_" + "Ab1" * 6,
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "bearer_token": "Bearer abc123DEF456ghi789JKL",
    "private_key": f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----",
}


def record_workload(rec: reasonlog.Recorder, calls: list[dict]) -> dict[str, str]:
    """Record workload calls through the public API; returns workload session id -> reasonlog id."""
    sessions, ids, last_call = {}, {}, {}
    for c in calls:
        last_call[c["session_id"]] = c
    for c in calls:
        sid = c["session_id"]
        if sid not in sessions:
            s = rec.session(agent=c["agent"], model=c["model"], provider=c["provider"], external_id=sid,
                            labels={"user": c["user_id"]}, started_at=c["ts_start"])
            sessions[sid], ids[sid] = s, s.id
        s = sessions[sid]
        if c["iteration"] == 0:
            s.exchange(input=c["request"]["messages"][-1]["content"][0]["text"])
        s.call(request=c["request"], response={"role": "assistant", "content": c["response"]["content"]},
               stop_reason=c["response"]["stop_reason"], usage=reasonlog.Usage.from_anthropic(c["response"]["usage"]),
               latency_ms=c["latency_ms"], started_at=c["ts_start"], provider_message_id=c["response"]["id"],
               raw=c["response"], id=c["call_id"])
        if c is last_call[sid]:
            s.end()
    return ids


def query_db(target, sql: str) -> list[tuple]:
    """Rows of a read-only SQL query on a test database, SQLite file or PostgreSQL URL (for checks of layout)."""
    if isinstance(target, str) and target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target) as conn:
            return [tuple(r) for r in conn.execute(sql).fetchall()]
    import sqlite3

    with sqlite3.connect(target) as conn:
        return conn.execute(sql).fetchall()


def execute_db(target, sql: str, params: tuple = ()) -> None:
    """Run one statement that changes a test database (SQLite file or PostgreSQL URL), committed."""
    if is_postgres(target):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute(sql.replace("?", "%s"), params)  # type: ignore[arg-type]
        return
    import sqlite3

    with sqlite3.connect(target) as conn:
        conn.execute(sql, params)


def is_postgres(target) -> bool:
    return isinstance(target, str) and target.startswith("postgresql://")


def spill_folder(target):
    """The first folder a recorder spills to for `target`: beside a SQLite file, in the user's data folder for
    a PostgreSQL URL (which has no 'beside')."""
    from reasonlog.capture.spillfiles import spill_dirs

    return spill_dirs(target)[0]


class Locked:
    """Another connection holds the database's write lock until the block ends (or `release()`): SQLite's
    BEGIN IMMEDIATE; on PostgreSQL every reasonlog table locked in EXCLUSIVE mode (reads go on, writes wait)."""

    def __init__(self, target):
        reasonlog.open_store(target).close()
        self.target = target
        if is_postgres(target):
            import psycopg

            from reasonlog.store.postgres import TABLES

            self.conn = psycopg.connect(target, autocommit=True)
            self.lock = [f"LOCK TABLE {', '.join(TABLES)} IN EXCLUSIVE MODE"]
        else:
            import sqlite3

            self.conn = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
            self.lock = []

    def __enter__(self):
        self.conn.execute("BEGIN" if self.lock else "BEGIN IMMEDIATE")
        for statement in self.lock:
            self.conn.execute(statement)
        return self

    def release(self) -> None:
        self.conn.execute("ROLLBACK")
        self.conn.close()

    def __exit__(self, *exc):
        self.release()


def create_extension(conn, name: str) -> None:
    """`CREATE EXTENSION IF NOT EXISTS name SCHEMA public` on an autocommit connection, under an advisory lock: two
    processes creating the same extension at once (tests in parallel workers) would otherwise collide on
    pg_extension's unique name."""
    conn.execute("SELECT pg_advisory_lock(hashtextextended('reasonlog-tests-extension', 0))")
    try:
        conn.execute(f"CREATE EXTENSION IF NOT EXISTS {name} SCHEMA public")
    finally:
        conn.execute("SELECT pg_advisory_unlock(hashtextextended('reasonlog-tests-extension', 0))")


@contextmanager
def two_stores(folder, first: str, second: str):
    """Two SQLite stores in `folder` (closed after), for one story written into both by two paths of the writer."""
    paths = (folder / first, folder / second)
    stores = tuple(reasonlog.open_store(p) for p in paths)
    try:
        yield stores, paths
    finally:
        for store in stores:
            store.close()


def assert_stored_alike(pair, batches: list, second_path, tables: dict[str, str]) -> None:
    """Write each batch into both stores of `pair` (`two_stores`), the second inside `second_path()`, in turn (the
    story goes on editing its objects after each), and check every table of `tables` holds the same rows."""
    (first, second), paths = pair
    for batch in batches:
        assert first.write_batch(batch) is True
        with second_path():
            assert second.write_batch(batch) is True
    assert [query_db(paths[0], sql) for sql in tables.values()] == [query_db(paths[1], sql) for sql in
                                                                    tables.values()]
