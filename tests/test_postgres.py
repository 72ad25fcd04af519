"""What only a shared database server makes possible: migrations and writers in several processes at once.

The rest of the store's behaviour is tested on both dialects by the `dialect` fixture (conftest.py).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import NO_POSTGRES, POSTGRES, empty_database, fresh_database
from helpers import query_db
from test_ingest import free_port

import reasonlog
from reasonlog.capture.http_sink import HttpSink
from reasonlog.store import SessionFilter, open_store
from reasonlog.store.schema import SQLITE_MIGRATIONS
from reasonlog.store.schema_pg import PG_MIGRATIONS
from reasonlog.wire.codec import canonical

needs_postgres = pytest.mark.skipif(not POSTGRES, reason=NO_POSTGRES)
ALL = SessionFilter(limit=None)


def layout(target) -> list[tuple]:
    """Every table's columns (name, type, not null, default) and every index, in a stable order."""
    if isinstance(target, str):
        return query_db(target, "SELECT table_name, column_name, data_type, is_nullable, column_default,"
                                " collation_name FROM information_schema.columns"
                                " WHERE table_schema = current_schema() ORDER BY 1, 2") + \
            query_db(target, "SELECT tablename, indexname, replace(indexdef, current_schema() || '.', '')"
                             " FROM pg_indexes WHERE schemaname = current_schema() ORDER BY 1, 2")
    tables = [name for (name,) in query_db(target, "SELECT name FROM sqlite_master WHERE type = 'table'"
                                                   " ORDER BY name")]
    return [(t, *col) for t in tables for col in query_db(target, f"PRAGMA table_info('{t}')")] + \
        query_db(target, "SELECT tbl_name, name, sql FROM sqlite_master WHERE type = 'index' ORDER BY 1, 2")


def test_a_database_migrated_from_the_first_schema_equals_a_fresh_one(dialect, tmp_path):
    migrations = PG_MIGRATIONS if dialect == "postgresql" else SQLITE_MIGRATIONS
    assert [m.number for m in migrations] == [m.number for m in SQLITE_MIGRATIONS]  # one numbering for both
    with fresh_database(dialect, _folder(tmp_path, "a")) as fresh, \
            empty_database(dialect, _folder(tmp_path, "b")) as old:
        open_store(fresh).close()
        first = open_store(old, upgrade=False)
        _apply_first_schema(first, migrations[0])
        first.close()
        assert open_store(old, read_only=False, upgrade=False).schema_version() == 1
        upgraded = open_store(old)
        assert upgraded.schema_version() == migrations[-1].number
        upgraded.close()
        assert layout(old) == layout(fresh)
        assert len(layout(fresh)) > 100  # the comparison saw the whole schema, not an empty one


def _folder(tmp_path, name):
    (tmp_path / name).mkdir()
    return tmp_path / name


def _apply_first_schema(store, first) -> None:
    """What a reasonlog of schema 1 left: its tables and its bookkeeping row (through the store's own upgrade,
    told that only the first migration exists)."""
    import reasonlog.store.postgres as pg
    import reasonlog.store.sqlite as lite

    module = pg if isinstance(store, pg.PostgresStore) else lite
    name = "PG_MIGRATIONS" if module is pg else "SQLITE_MIGRATIONS"
    every = getattr(module, name)
    setattr(module, name, (first,))
    try:
        assert store.upgrade() == [1]
    finally:
        setattr(module, name, every)


@needs_postgres
def test_processes_started_together_migrate_once():
    with empty_database("postgresql", None) as url:
        code = ("import sys, reasonlog; s = reasonlog.open_store(sys.argv[1]); print(s.schema_version()); s.close()")
        procs = [subprocess.Popen([sys.executable, "-c", code, url], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(6)]
        results = [p.communicate(timeout=120) for p in procs]
        assert [(p.returncode, out.strip(), err) for p, (out, err) in zip(procs, results, strict=True)] == \
            [(0, str(PG_MIGRATIONS[-1].number).encode(), b"")] * 6
        assert query_db(url, "SELECT number FROM _reasonlog_migrations ORDER BY number") == \
            [(m.number,) for m in PG_MIGRATIONS]


class ServeProcess:
    """`reasonlog serve` in its own process on 127.0.0.1; killed at exit."""

    def __init__(self, url: str):
        self.port = free_port()
        env = {**os.environ, "REASONLOG_DB": url}
        self.proc = subprocess.Popen([sys.executable, "-m", "reasonlog", "serve", "--port", str(self.port)],
                                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(self.base + "/readyz", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            assert self.proc.poll() is None, self.proc.stderr.read().decode() if self.proc.stderr else ""
            assert time.monotonic() < deadline, "reasonlog serve did not become ready"
            time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)


class Collect:
    """A sink that keeps the batches a recorder hands it, to send them over HTTP by hand."""

    def __init__(self):
        self.batches: list[list] = []

    def write_batch(self, events, counters=None):
        self.batches.append(list(events))

    def add_counters(self, counters):
        pass

    def close(self):
        pass


def conversation(rec, agent: str, turns: int) -> list[dict]:
    """A session whose calls resend the growing history, as chat agents do; its requests as sent."""
    requests, history = [], []
    with rec.session(agent=agent, run="team") as s:
        for i in range(turns):
            history.append({"role": "user", "content": f"{agent} asks {i}: " + "context " * 30})
            request = {"model": "gpt-5", "messages": list(history)}
            reply = {"role": "assistant", "content": [{"type": "text", "text": f"{agent} answer {i}"}]}
            s.call(messages=list(history), response=reply, model="gpt-5",
                   usage=reasonlog.Usage(input_tokens=100 + i, output_tokens=5))
            requests.append(request)
            history.append(reply)
    return requests


@needs_postgres
@pytest.mark.slow
def test_several_servers_ingest_into_the_same_session_without_conflicts_or_duplicates(tmp_path):
    """Two `reasonlog serve` processes on one database. One session's batches go to each in turn (a load
    balancer's round robin) and every batch is sent again to the other (a retry after a lost answer), while
    six other agents write their own sessions through both at once."""
    with fresh_database("postgresql", tmp_path) as url:
        open_store(url).close()
        servers = [ServeProcess(url), ServeProcess(url)]
        try:
            sinks = [HttpSink(s.base) for s in servers]
            shared = Collect()
            rec = reasonlog.Recorder(sink=shared, writer="sync")
            conversation(rec, "shared", 40)
            rec.close()
            others = []
            for n in range(6):
                sink = Collect()
                rec = reasonlog.Recorder(sink=sink, writer="sync")
                conversation(rec, f"agent-{n}", 15)
                rec.close()
                others.append(sink.batches)

            def send_shared():
                for k, batch in enumerate(shared.batches):
                    sinks[k % 2].write_batch(batch)
                    sinks[(k + 1) % 2].write_batch(batch)  # the same batch again: adds nothing

            def send_other(batches, first):
                for k, batch in enumerate(batches):
                    sinks[(k + first) % 2].write_batch(batch)

            with ThreadPoolExecutor(7) as pool:
                futures = [pool.submit(send_shared)]
                futures += [pool.submit(send_other, b, n) for n, b in enumerate(others)]
                for f in futures:
                    f.result(timeout=300)
        finally:
            for s in servers:
                s.stop()
        store = open_store(url, read_only=True)
        sessions = {s["agent"]: s for s in store.list_sessions(ALL)}
        assert sorted(sessions) == ["agent-0", "agent-1", "agent-2", "agent-3", "agent-4", "agent-5", "shared"]
        got = store.get_session(sessions["shared"]["id"])
        assert len(got["calls"]) == 40
        assert [c["idx"] for c in got["calls"]] == list(range(40))
        assert len(got["messages"]) == 80  # 40 questions and 40 answers, each once in the timeline
        for n in range(6):
            assert len(store.get_session(sessions[f"agent-{n}"]["id"])["calls"]) == 15
        assert store.status()["counts"]["calls"] == 40 + 6 * 15
        assert store.status()["rejected_records"] == 0
        last = store.replay_call(got["calls"][-1]["id"])
        assert canonical(last["messages"]) == canonical(conversation_requests("shared", 40)[-1]["messages"])
        store.close()


def conversation_requests(agent: str, turns: int) -> list[dict]:
    sink = Collect()
    rec = reasonlog.Recorder(sink=sink, writer="sync")
    requests = conversation(rec, agent, turns)
    rec.close()
    return requests




def _sqlite_schema(db) -> tuple[set, set]:
    """(table, column, NOT NULL) and (table, index) of a SQLite database, search tables apart."""
    tables = [t for (t,) in query_db(db, "SELECT name FROM sqlite_master WHERE type = 'table'"
                                         " AND name NOT LIKE 'sqlite_%' AND sql NOT LIKE 'CREATE VIRTUAL%'")
              if not _search_table(t)]
    columns = {(t, name, bool(notnull) or bool(pk)) for t in tables
               for _, name, _, notnull, _, pk in query_db(db, f"PRAGMA table_info('{t}')")}
    indexes = {(t, i) for t, i in query_db(db, "SELECT tbl_name, name FROM sqlite_master WHERE type = 'index'"
                                               " AND sql IS NOT NULL") if t in tables}
    return columns, indexes


def _pg_schema(url) -> tuple[set, set]:
    columns = {(t, c, nullable == "NO") for t, c, nullable in query_db(
        url, "SELECT table_name, column_name, is_nullable FROM information_schema.columns"
             " WHERE table_schema = current_schema()") if not _search_table(t)
               and c != "rowid"}  # SQLite gives every table an implicit rowid; PostgreSQL names it where it is used
    indexes = {(t, i) for t, i in query_db(url, "SELECT tablename, indexname FROM pg_indexes"
                                                " WHERE schemaname = current_schema()")
               if not _search_table(t) and not i.endswith(("_pkey", "_key"))}
    return columns, indexes


def _search_table(name: str) -> bool:
    """Full-text tables differ by design: blocks of text (and the rows waiting for them) on SQLite, trigram-indexed
    text tables on PostgreSQL."""
    return "_search" in name or name.startswith(("contents_fts", "search_words", "search_pending", "search_blocks"))


@needs_postgres
def test_sqlite_and_postgresql_have_the_same_tables_columns_and_indexes(tmp_path):
    """The two hand-kept schemas correspond: every table, column (and whether it may be NULL) and index of one is in
    the other, but the full-text tables, which differ by design."""
    with fresh_database("postgresql", tmp_path) as url:
        open_store(tmp_path / "s.db").close()
        open_store(url).close()
        sqlite_columns, sqlite_indexes = _sqlite_schema(tmp_path / "s.db")
        pg_columns, pg_indexes = _pg_schema(url)
    # Migration 21 adds pgvector's column and the index of its NULLs where the server has the extension.
    vector = {("unit_vectors", "embedding", False)} & pg_columns
    assert sorted(sqlite_columns - pg_columns) == [] and sorted(pg_columns - sqlite_columns - vector) == [], \
        (sorted(sqlite_columns - pg_columns), sorted(pg_columns - sqlite_columns))
    # Migration 19's indexes serve PostgreSQL's prune in batches beside writers; SQLite's prune compares whole sets.
    assert sorted(pg_indexes - sqlite_indexes) == [("calls", "calls_named"), ("calls", "calls_response"),
                                                   ("calls", "calls_system")] + \
        ([("unit_vectors", "unit_vectors_unfilled")] if vector else [])
    assert sorted(sqlite_indexes - pg_indexes) == []
    assert len(sqlite_columns) > 100 and len(sqlite_indexes) > 10  # the comparison saw the schema


@needs_postgres
def test_a_question_mark_or_percent_inside_a_literal_is_not_taken_for_a_placeholder():
    """PostgreSQL's cursor takes sqlite3's `?` placeholders; a `?` or `%` written inside quotes stays text."""
    import psycopg

    from reasonlog.store.dbapi import translate_placeholders

    sql = "SELECT '?' || ?, 'a%b' || ?, \"?\" FROM (SELECT 1 AS \"?\") t"
    assert translate_placeholders(sql) == "SELECT '?' || %s, 'a%%b' || %s, \"?\" FROM (SELECT 1 AS \"?\") t"
    with psycopg.connect(POSTGRES) as conn:
        row = psycopg.ClientCursor(conn).execute(translate_placeholders(sql), ["x", "y"]).fetchone()
    assert row == ("?x", "a%by", 1)
