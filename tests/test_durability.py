"""Nothing lost: spill when the database refuses a batch; schema upgrades in one transaction each (a new SQLite
file's, all in one).

Each test runs on SQLite and on PostgreSQL (`db_target` over the `dialect` fixture), but for the upgrade of a
SQLite file written by the first schema.
"""
from __future__ import annotations

import shutil
import sqlite3
import threading
from pathlib import Path

import pytest
from helpers import Locked, execute_db, is_postgres, query_db, spill_folder

import reasonlog
from reasonlog.capture.sinks import SpillingSink, StoreSink
from reasonlog.store import postgres as postgres_store
from reasonlog.store import schema
from reasonlog.store import sqlite as sqlite_store
from reasonlog.store.schema import Migration

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def db_target(db):
    """This suite runs on SQLite and on PostgreSQL."""
    return db


def test_a_locked_database_spills_and_the_next_open_writes_it_in_order(db_target, store_of):
    with Locked(db_target):  # another process holds the write lock
        rec = reasonlog.Recorder(db_target, writer="sync", store_options={"busy_timeout_ms": 50})
        with rec.session(agent="locked-out") as s:
            for i in range(3):
                s.call(messages=[{"role": "user", "content": f"q{i}"}], response=f"a{i}")
        rec.close()
    # The session's start, three calls and its end, each its own batch (a synchronous writer).
    assert (rec.stats()["spilled_batches"], rec.stats()["dropped"]) == (5, 0)
    assert len(list(spill_folder(db_target).glob("*.spill"))) == 5

    rec2 = reasonlog.Recorder(db_target)  # the next recorder writes what waited, before anything new
    with rec2.session(agent="after") as s2:
        s2.call(messages=[{"role": "user", "content": "later"}], response="ok")
    rec2.close()
    store = store_of()
    status = store.status()
    assert (status["pending_spill_files"], status["spilled_batches"]) == ([], 5)
    session = next(x for x in store.list_sessions(reasonlog.SessionFilter()) if x["agent"] == "locked-out")
    texts = [m["content"]["content"] for m in store.get_session(session["id"])["messages"] if m["role"] == "user"]
    assert texts == ["q0", "q1", "q2"]
    assert store.get_session(session["id"])["status"] == "completed"


@pytest.mark.slow
def test_a_read_only_database_spills_instead_of_raising(db_target):
    reasonlog.open_store(db_target).close()
    # A store opened for reading refuses every write, as a file its permissions forbid writing does.
    sink = SpillingSink(StoreSink(lambda: reasonlog.open_store(db_target, read_only=True)), spill_folder(db_target))
    rec = reasonlog.Recorder(db_target, writer="sync", sink=sink)  # the documented seam
    with rec.session(agent="ro") as s:
        s.call(messages=[{"role": "user", "content": "x"}], response="y")
    rec.close()
    assert rec.stats()["spilled_batches"] == 3
    assert f"{db_target}: read-only" in rec.stats()["last_error"]


@pytest.mark.slow
def test_a_database_made_by_the_first_schema_upgrades_and_keeps_its_data(tmp_path):
    """tests/fixtures/schema1.db was written by `reasonlog demo` at schema 1
    (commit 'README with the two set-up commands').

    SQLite only: the fixture is a file; PostgreSQL's upgrade from schema 1 is in test_postgres.py."""
    path = tmp_path / "old.db"
    shutil.copy(FIXTURES / "schema1.db", path)
    store = reasonlog.open_store(path)
    assert store.schema_version() == schema.SQLITE_MIGRATIONS[-1].number
    sessions = store.list_sessions(reasonlog.SessionFilter())
    assert len(sessions) == 2 and sum(s["call_count"] for s in sessions) == 10
    for s in sessions:
        full = store.get_session(s["id"])
        assert full["xml_tool_tags"] is None and len(full["outcomes"]) == 2
        for call in full["calls"]:
            assert store.replay_call(call["id"])["system"].startswith("You are a trading agent")
    store.close()
    rec = reasonlog.Recorder(path, writer="sync")  # and it takes new recordings
    with rec.session(agent="new", xml_tools=["search"]) as s:
        s.call(messages=[{"role": "user", "content": "q"}], response="<search>x</search>")
    rec.close()
    assert reasonlog.open_store(path).status()["counts"]["sessions"] == 3


def _migrations(target) -> tuple[object, str]:
    """The module whose migrations opening `target` applies, and the name of its list."""
    if is_postgres(target):
        return postgres_store, "PG_MIGRATIONS"
    return sqlite_store, "SQLITE_MIGRATIONS"


def _columns(target, table: str) -> list[str]:
    if is_postgres(target):
        return [r[0] for r in query_db(target, "SELECT column_name FROM information_schema.columns"
                                               f" WHERE table_schema = current_schema() AND table_name = '{table}'")]
    return [r[1] for r in query_db(target, f"PRAGMA table_info({table})")]


def _has_table(target, name: str) -> bool:
    if is_postgres(target):
        return query_db(target, f"SELECT to_regclass('{name}') IS NOT NULL") == [(True,)]
    return query_db(target, f"SELECT 1 FROM sqlite_master WHERE name = '{name}'") == [(1,)]


@pytest.mark.slow
def test_a_new_migration_applies_once_with_its_record(db_target, monkeypatch, store_of):
    rec = reasonlog.Recorder(db_target, writer="sync")
    with rec.session(agent="old") as s:
        call = s.call(messages=[{"role": "user", "content": "from schema 1"}], response="kept")
    rec.close()
    module, name = _migrations(db_target)
    latest = getattr(module, name)[-1].number
    extra = Migration(latest + 1, "test: sessions get a note", """
-- Adds sessions.note; NULL means no note was written.
ALTER TABLE sessions ADD COLUMN note TEXT;
""")
    monkeypatch.setattr(module, name, getattr(module, name) + (extra,))
    store = store_of()
    assert store.schema_version() == latest + 1
    assert store.get_call(call)["response"]["content"][0]["text"] == "kept"
    assert "note" in _columns(db_target, "sessions")
    assert query_db(db_target, f"SELECT number, name FROM _reasonlog_migrations WHERE number > {latest}") == [
        (latest + 1, "test: sessions get a note")]  # its record, once
    assert store.upgrade() == []


@pytest.mark.slow
def test_a_failing_migration_leaves_the_schema_and_its_record_untouched(db_target, monkeypatch):
    reasonlog.open_store(db_target).close()
    module, name = _migrations(db_target)
    latest = getattr(module, name)[-1].number
    broken = Migration(latest + 1, "broken", """
-- Adds a table, then fails: neither the table nor the record may remain.
CREATE TABLE half_done (x INTEGER);
INSERT INTO no_such_table VALUES (1);
""")
    monkeypatch.setattr(module, name, getattr(module, name) + (broken,))
    with pytest.raises(Exception, match="no_such_table") as raised:
        reasonlog.open_store(db_target)
    assert type(raised.value).__name__ == ("UndefinedTable" if is_postgres(db_target) else "OperationalError")
    assert query_db(db_target, "SELECT MAX(number) FROM _reasonlog_migrations") == [(latest,)]
    assert not _has_table(db_target, "half_done")


def test_a_new_sqlite_file_takes_every_migration_or_none(tmp_path, monkeypatch):
    """A new file's migrations run in one transaction: a failure in the last leaves the file new, and the next open
    makes the whole schema with a record for each migration."""
    path = tmp_path / "new.db"
    every = sqlite_store.SQLITE_MIGRATIONS
    broken = Migration(every[-1].number + 1, "broken", """
-- Fails after the whole schema was made: none of it may remain.
INSERT INTO no_such_table VALUES (1);
""")
    monkeypatch.setattr(sqlite_store, "SQLITE_MIGRATIONS", every + (broken,))
    with pytest.raises(sqlite3.OperationalError, match="no_such_table"):
        reasonlog.open_store(path)
    assert query_db(path, "SELECT type, name FROM sqlite_master") == [("table", "_reasonlog_migrations")]
    assert query_db(path, "SELECT COUNT(*) FROM _reasonlog_migrations") == [(0,)]
    monkeypatch.setattr(sqlite_store, "SQLITE_MIGRATIONS", every)
    store = reasonlog.open_store(path)
    assert store.schema_version() == every[-1].number
    store.close()
    assert query_db(path, "SELECT number, name FROM _reasonlog_migrations ORDER BY number") == [
        (m.number, m.name) for m in every]


def test_recorders_making_one_new_sqlite_file_at_once_store_every_record_once(tmp_path):
    """Eight recorders open one file no one has made yet at the same moment (their first record opens it): one makes
    the whole schema, the others find it made in their transaction and apply nothing twice; every record is stored
    once and nothing is spilled."""
    path, threads, calls = tmp_path / "new.db", 8, 5
    start = threading.Barrier(threads)
    recorders: list[reasonlog.Recorder] = []

    def record(n: int) -> None:
        rec = reasonlog.Recorder(path, writer="sync")
        recorders.append(rec)
        start.wait()
        with rec.session(agent=f"r{n}") as s:
            for i in range(calls):
                s.call(messages=[{"role": "user", "content": f"q{n}-{i}"}], response=f"a{n}-{i}")
        rec.close()

    workers = [threading.Thread(target=record, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert [(r.stats()["spilled_batches"], r.stats()["dropped"], r.stats()["rejected"]) for r in recorders] == \
        [(0, 0, 0)] * threads
    assert query_db(path, "SELECT COUNT(*), MAX(number) FROM _reasonlog_migrations") == \
        [(len(sqlite_store.SQLITE_MIGRATIONS), sqlite_store.SQLITE_MIGRATIONS[-1].number)]
    assert query_db(path, "SELECT COUNT(*), COUNT(DISTINCT agent) FROM sessions") == [(threads, threads)]
    assert query_db(path, "SELECT COUNT(*) FROM calls") == [(threads * calls,)]
    assert query_db(path, "PRAGMA journal_mode") == [("wal",)]


@pytest.mark.slow
def test_a_database_from_a_newer_reasonlog_is_refused_clearly(db_target):
    reasonlog.open_store(db_target).close()
    execute_db(db_target, "INSERT INTO _reasonlog_migrations VALUES (99, 'future', 'x')")
    with pytest.raises(reasonlog.store.StoreError, match="schema 99 is newer than this reasonlog"):
        reasonlog.open_store(db_target)


class NotJSON:
    """Something an agent might put in a message by mistake."""


@pytest.mark.slow
def test_an_event_that_cannot_be_stored_is_rejected_alone(db_target, store_of, caplog):
    rec = reasonlog.Recorder(db_target, flush_interval=60)  # one batch holds everything below
    with rec.session(agent="mixed") as s:
        first = s.call(messages=[{"role": "user", "content": "fine"}], response="ok")
        s.call(messages=[{"role": "user", "content": NotJSON()}], response="never stored")
        s.call(messages=[{"role": "user", "content": "dup"}], response="x", id=first)  # same id again
        s.call(messages=[{"role": "user", "content": "when?"}], response="x", started_at="yesterday")
        last = s.call(messages=[{"role": "user", "content": "fine"}, {"role": "assistant", "content": "ok"},
                                {"role": "user", "content": "still fine"}], response="ok again")
        sid = s.id
    rec.close()
    assert rec.stats()["spilled_batches"] == 0
    store = store_of()
    session = store.get_session(sid)
    assert [c["id"] for c in session["calls"]] == [first, last] and session["status"] == "completed"
    assert store.replay_call(last)["messages"][-1]["content"] == "still fine"
    assert store.status()["rejected_records"] == 3 and store.status()["pending_spill_files"] == []
    assert "could not store" in caplog.text
    assert [m["content"]["content"] if isinstance(m["content"], dict) else m["content"]
            for m in session["messages"]][-2:] == ["still fine", [{"type": "text", "text": "ok again"}]]


@pytest.mark.slow
def test_an_unreadable_spill_file_is_set_aside_and_does_not_block_writing(db_target, store_of):
    reasonlog.open_store(db_target).close()
    spilled = spill_folder(db_target)
    spilled.mkdir(parents=True)
    (spilled / "0001.spill").write_text('{"event": "call", "truncated')
    rec = reasonlog.Recorder(db_target, writer="sync")
    with rec.session(agent="after-crash") as s:
        s.call(messages=[{"role": "user", "content": "hi"}], response="hello")
    rec.close()
    status = store_of().status()
    assert status["counts"]["calls"] == 1 and status["pending_spill_files"] == []
    assert status["set_aside_records"] == 1  # the torn line, kept in set-aside.jsonl
