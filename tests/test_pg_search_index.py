"""PostgreSQL's trigram index holds each text's words once and a block of contents a row (migration 20,
store/pg_search.py): a query still finds exactly what the stored text holds, and a database of schema 19 is
indexed anew by the upgrade."""
from __future__ import annotations

import psycopg
import pytest
from conftest import NO_POSTGRES, POSTGRES, postgres_schema
from helpers import query_db
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reasonlog.model import CallRecorded, OutcomeRecorded, SessionStarted
from reasonlog.store import SessionFilter, open_store, pg_search
from reasonlog.store.search import index_form

pytestmark = pytest.mark.skipif(not POSTGRES, reason=NO_POSTGRES)
EVERYTHING = SessionFilter(limit=None)


@pytest.fixture
def url():
    yield from postgres_schema()


def session(sid: str, minute: int, texts: list[str]) -> list:
    at = f"2025-07-01T10:{minute:02d}:00Z"
    return [SessionStarted(session_id=sid, started_at=at, agent="a"),
            CallRecorded(call_id=f"{sid}-c", session_id=sid, exchange_id=None, started_at=at,
                         request={"model": "m", "messages": [{"role": "user", "content": t} for t in texts]},
                         response={"role": "assistant", "content": "ok"}, model="m")]


def found(store, text: str) -> list[tuple[str, int]]:
    return [(h["session_id"], h["message_idx"]) for h in store.search(text, EVERYTHING, limit=None)]


def test_texts_written_in_one_block_are_each_decided_by_their_own_text(url):
    """Two sessions in one batch share a block whose words hold both phrases' words: each phrase is found only
    where its own text holds it, across a line break and inside words as before."""
    store = open_store(url)
    store.write_batch([*session("s1", 1, ["the checkout timed\nout at the gateway", "Ünïcode ÄRGER here"]),
                       *session("s2", 2, ["out the door the checkout timed", "retry in 5 s"])])
    assert query_db(url, "SELECT cardinality(ids) FROM contents_search") == [(5,)]  # four messages and "ok"
    assert found(store, "timed out") == []  # the block's words hold "timed out"; neither text does
    assert found(store, "checkout timed") == [("s2", 0), ("s1", 0)]
    assert found(store, "med\nout at") == [("s1", 0)]
    assert found(store, "eckout tim") == [("s2", 0), ("s1", 0)]
    assert found(store, "door the check") == [("s2", 0)]
    assert found(store, "out the door -gateway") == [("s2", 0)]
    assert found(store, "gateway OR \"n 5 s\"") == [("s2", 1), ("s1", 0)]
    assert found(store, "cheCKout timed") == [("s2", 0), ("s1", 0)]
    assert found(store, "äRGer") == [("s1", 1)]
    assert found(store, "the checkout timed out at the gateway door") == []
    store.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.text(st.sampled_from("ab c\n\t_%\\é日本x"), max_size=30), min_size=1, max_size=4),
       data=st.data())
def test_every_text_holding_a_needle_is_in_a_block_its_pattern_matches(texts, data):
    """The property the index rests on: wherever a needle occurs in a text, the LIKE pattern of the needle matches
    the words of any block holding that text (in PostgreSQL's own LIKE)."""
    which = data.draw(st.integers(0, len(texts) - 1))
    low = index_form(texts[which])
    start = data.draw(st.integers(0, len(low)))
    needle = low[start:data.draw(st.integers(start, len(low)))]
    if not needle.strip():
        return
    words = pg_search.words_of(*(index_form(t) for t in texts))
    with psycopg.connect(POSTGRES) as conn:
        assert conn.execute("SELECT %s LIKE %s", (words, pg_search._pattern(needle))).fetchone()[0] is True


def test_a_schema_19_database_is_indexed_anew_by_the_upgrade(url):
    """A database with one row of text per content (schema 19, or 21 over main's placeholder 20) upgrades to blocks
    of words, and search finds what it held: messages, an outcome, and no block twice."""
    store = open_store(url)
    for k in range(3):
        store.write_batch([*session(f"s{k}", k, [f"session {k} line {n}: the price of item {n * 7 + k}"
                                                 for n in range(20)]),
                           OutcomeRecorded(outcome_id=f"o{k}", session_id=f"s{k}", at="2025-07-01T11:00:00Z",
                                           outcome_kind="trade", payload={"symbol": f"NVDA{k}"})])
    before = {q: found(store, q) for q in ("item 15", "line 3:", "nvda1", "price")}
    store.close()
    with psycopg.connect(url, autocommit=True) as conn:  # back to schema 19's layout and rows
        conn.execute("CREATE TABLE old_search AS SELECT unnest(ids) AS rowid, text FROM contents_search")
        conn.execute("DROP TABLE contents_search")
        conn.execute("ALTER TABLE old_search RENAME TO contents_search")
        conn.execute("ALTER TABLE contents_search ADD PRIMARY KEY (rowid)")
        conn.execute("CREATE INDEX contents_search_text ON contents_search USING gin (text public.gin_trgm_ops)")
        conn.execute("DELETE FROM _reasonlog_migrations WHERE number = 20")
    assert query_db(url, "SELECT COUNT(*) FROM contents_search") == [(61,)]  # 60 messages and "ok"
    store = open_store(url)
    assert store.schema_version() == 22  # 21 and 22 stay recorded: as on a database main's placeholder 20 left
    assert query_db(url, "SELECT COUNT(*), COUNT(DISTINCT x) FROM contents_search, unnest(ids) x") == [(61, 61)]
    assert query_db(url, "SELECT COUNT(*) FROM contents_search") == [(4,)]  # 61 contents in blocks of 16
    assert {q: found(store, q) for q in before} == before
    assert found(store, "item 15") == [("s1", 2)]  # n = 2: 2 * 7 + 1
    assert [(h["session_id"], h["kind"]) for h in store.search("nvda1", EVERYTHING)] == [("s1", "outcome")]
    assert len(found(store, "price")) == 60
    store.close()
