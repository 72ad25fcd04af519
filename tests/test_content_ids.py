"""A content's id on SQLite (issue 34): once the database has its zstd dictionary, a content the writer has not met is
compressed first and stored by one `INSERT … ON CONFLICT (hash) DO NOTHING` (`SQLiteStore.add_content`), where a
lookup and then an insert (`SQLStore.add_content`, PostgreSQL's way) made two statements. A content another writer
stored meets the conflict and keeps its id; SQLite uses up no id on it, so every id is the one the lookup gives."""
from __future__ import annotations

import shutil

import pytest
from helpers import query_db
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reasonlog
from reasonlog.store.sql import SQLStore
from reasonlog.store.sqlite import SQLiteStore

CONTENTS = "SELECT id, hash, kind, size, codec, dict_id, data FROM contents ORDER BY id"
CALLS = "SELECT id, session_id, context_json FROM calls ORDER BY id"


class LookupFirst(SQLiteStore):
    """The general path on SQLite: a lookup, then an insert of what is new."""

    add_content = SQLStore.add_content  # type: ignore[assignment]


def _message(i: int) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": f"message {i}: " + "the cart times out " * 12}]}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A database whose dictionary is trained: 520 contents of about 300 bytes (it takes 500 and 128 KiB)."""
    path = tmp_path_factory.mktemp("trained") / "t.db"
    rec = reasonlog.Recorder(path, writer="sync")
    with rec.session(agent="a") as s:
        for i in range(520):
            s.call(messages=[_message(i)], response={"role": "assistant", "content": f"ok {i}"})
    rec.close()
    assert query_db(path, "SELECT COUNT(*) FROM zstd_dicts") == [(1,)]
    return path


def _write(kind: type[SQLiteStore], path, stories: list[list[int]]) -> list[str]:
    """Each story written by a writer of its own (as another process would: an empty cache), one call each."""
    calls = []
    for story in stories:
        rec = reasonlog.Recorder(sink=kind(path), writer="sync")  # (closing the recorder closes its store)
        with rec.session(agent="b") as s:
            calls.append(s.call(messages=[_message(i) for i in story], response={"role": "assistant", "content": "k"}))
        rec.close()
    return calls


def test_a_content_another_writer_stored_keeps_its_id_and_uses_up_none(trained, tmp_path):
    """Named case: a second writer sends 3 new messages among 3 the first one stored. The stored ones keep their
    ids, the new ones take the next ids with no gap and are compressed with the dictionary, and the call reads
    back as it was sent."""
    path = tmp_path / "t.db"
    shutil.copy(trained, path)
    [(before,)] = query_db(path, "SELECT MAX(id) FROM contents")
    [call] = _write(SQLiteStore, path, [[1000, 3, 4, 1001, 5, 1002]])
    store = reasonlog.open_store(path)
    try:
        sent = store.get_call(call)["request"]["messages"]
    finally:
        store.close()
    assert sent == [_message(i) for i in (1000, 3, 4, 1001, 5, 1002)]
    ids = [r[0] for r in query_db(path, "SELECT id FROM contents ORDER BY id")]
    assert ids == list(range(1, before + 5))  # 4 new contents (3 messages and the reply): no id skipped
    new = query_db(path, f"SELECT codec, dict_id FROM contents WHERE id > {before} AND size > 200")
    assert new == [(2, 1)] * 3


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stories=st.lists(st.lists(st.integers(min_value=0, max_value=530), min_size=1, max_size=6),
                        min_size=1, max_size=4))
def test_one_statement_stores_what_a_lookup_and_an_insert_store(trained, tmp_path_factory, stories):
    """Property: stories of messages, some stored already (below 520), some new, some repeated, written by writers
    of their own into copies of one trained database, through `SQLiteStore.add_content` and through the lookup
    and insert: the same contents (ids, hashes, codecs, bytes) and the same calls' contexts."""
    folder = tmp_path_factory.mktemp("pair")
    tables = []
    for kind in (SQLiteStore, LookupFirst):
        path = folder / f"{kind.__name__}.db"
        shutil.copy(trained, path)
        _write(kind, path, stories)
        tables.append((query_db(path, CONTENTS), [row[2] for row in query_db(path, CALLS)]))
    assert tables[0] == tables[1]
