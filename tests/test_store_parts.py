"""The store in three parts (writer, reader, admin) and its narrow reads, on both dialects."""
from __future__ import annotations

import inspect

import pytest
from conftest import NO_POSTGRES, POSTGRES, postgres_schema

import reasonlog
from reasonlog.store import NotFound, Store, StoreAdmin, StoreReader, StoreWriter, Unavailable


def _methods(part: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(part, inspect.isfunction) if not name.startswith("_")}


@pytest.fixture
def store(db):
    opened = reasonlog.open_store(db)
    yield opened
    opened.close()


def test_every_method_of_the_store_belongs_to_a_part_and_every_backend_has_it(store):
    parts = _methods(StoreWriter) | _methods(StoreReader) | _methods(StoreAdmin)
    assert _methods(Store) == parts
    missing = sorted(name for name in parts if not callable(getattr(store, name, None)))
    assert missing == []


def test_session_row_is_the_list_row_and_reads_no_timeline(db, store):
    rec = reasonlog.Recorder(db, writer="sync", strict=True)
    with rec.session(agent="a", external_id="ext-1") as s:
        s.call(messages=[{"role": "user", "content": "hi"}], response={"role": "assistant", "content": "hello"},
               model="m")
    rec.close()
    listed = store.list_sessions(reasonlog.SessionFilter(limit=None))
    row = store.session_row(listed[0]["id"])
    assert row == listed[0]
    assert row["external_id"] == "ext-1" and row["call_count"] == 1
    assert "messages" not in row and "calls" not in row
    with pytest.raises(NotFound, match="no session 'nope'"):
        store.session_row("nope")


def test_what_postgresql_leaves_to_its_own_tools_is_unavailable_naming_them(tmp_path):
    if not POSTGRES:
        pytest.skip(NO_POSTGRES)
    for url in postgres_schema():
        store = reasonlog.open_store(url)
        with pytest.raises(Unavailable, match="pg_dump"):
            store.backup(tmp_path / "b.db")
        with pytest.raises(Unavailable, match="amcheck"):
            store.check()
        store.close()
