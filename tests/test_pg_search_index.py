"""PostgreSQL's trigram index holds a block of contents a row (migration 20), each content's text whole in it
(migration 23, store/pg_search.py): a query still finds exactly what the stored text holds (a full scan's answer,
and SQLite's), and a database of schema 19 or 22 is indexed anew by the upgrade."""
from __future__ import annotations

import psycopg
import pytest
from conftest import NO_POSTGRES, POSTGRES, postgres_schema
from helpers import query_db
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from search_cases import EVERYTHING, drawn_query, found, scanned, session, texts

from reasonlog.model import OutcomeRecorded
from reasonlog.store import open_store, pg_search
from reasonlog.store.search import index_form

pytestmark = pytest.mark.skipif(not POSTGRES, reason=NO_POSTGRES)


@pytest.fixture
def url():
    yield from postgres_schema()


def test_texts_written_in_one_block_are_each_decided_by_their_own_text(url):
    """Two sessions in one batch share a block whose text holds both phrases' words: each phrase is found only
    where its own text holds it, across a line break and inside words as before; and the block's row says which
    content holds the phrase before any content is read (its segments)."""
    store = open_store(url)
    store.write_batch([*session("s1", 1, ["the checkout timed\nout at the gateway", "Ünïcode ÄRGER here"]),
                       *session("s2", 2, ["out the door the checkout timed", "retry in 5 s"])])
    assert query_db(url, "SELECT cardinality(ids) FROM contents_search") == [(5,)]  # four messages and "ok"
    assert query_db(url, "SELECT COUNT(*) FROM contents_search CROSS JOIN LATERAL unnest(ids,"
                         " string_to_array(text, chr(30))) AS c(id, text) WHERE c.text LIKE '%checkout timed%'"
                    ) == [(2,)]
    assert found(store, "timed out") == []  # the block's text holds "timed out" across two texts; neither text does
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
    the words of any record holding that text, and the text of any block holding it as well as the block's own
    segment for that text (in PostgreSQL's own LIKE)."""
    which = data.draw(st.integers(0, len(texts) - 1))
    low = index_form(texts[which])
    start = data.draw(st.integers(0, len(low)))
    needle = low[start:data.draw(st.integers(start, len(low)))]
    if not needle.strip():
        return
    words = pg_search.words_of(*(index_form(t) for t in texts))
    block = pg_search.segments_of(*(index_form(t) for t in texts))
    with psycopg.connect(POSTGRES) as conn:
        assert conn.execute("SELECT %s LIKE %s", (words, pg_search._pattern(needle))).fetchone()[0] is True
        assert conn.execute("SELECT %s LIKE %s, strpos((string_to_array(%s, chr(30)))[%s], %s) > 0",
                            (block, pg_search._whole(needle), block, which + 1, pg_search._clean(needle))
                            ).fetchone() == (True, True)


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
    assert store.schema_version() == 26  # 21-26 stay recorded: as on a database main's placeholder 20 left
    assert query_db(url, "SELECT COUNT(*), COUNT(DISTINCT x) FROM contents_search, unnest(ids) x") == [(61, 61)]
    assert query_db(url, "SELECT COUNT(*) FROM contents_search") == [(1,)]  # 61 contents in blocks of 64
    assert {q: found(store, q) for q in before} == before
    assert found(store, "item 15") == [("s1", 2)]  # n = 2: 2 * 7 + 1
    assert [(h["session_id"], h["kind"]) for h in store.search("nvda1", EVERYTHING)] == [("s1", "outcome")]
    assert len(found(store, "price")) == 60
    store.close()


def test_a_schema_22_database_gets_whole_texts_in_its_blocks(url):
    """A database whose blocks hold their contents' words once (schema 22) is refilled by migration 23 with each
    content's text whole: a phrase whose words two texts of a block share is found only where it is said."""
    store = open_store(url)
    store.write_batch([*session("s1", 1, ["the checkout timed\nout at the gateway"]),
                       *session("s2", 2, ["out the door the checkout timed"])])
    store.close()
    with psycopg.connect(url, autocommit=True) as conn:  # back to schema 22's rows
        for rowid, text in conn.execute("SELECT rowid, text FROM contents_search").fetchall():
            conn.execute("UPDATE contents_search SET text = %s WHERE rowid = %s",
                         (pg_search.words_of(*text.split(pg_search.SEP)), rowid))
        conn.execute("DELETE FROM _reasonlog_migrations WHERE number >= 23")  # a schema 22 file has none after it
    store = open_store(url)
    assert store.schema_version() == 26  # 23 applied again, 24 (a trigger) made again, 25, 26
    assert query_db(url, "SELECT cardinality(ids), array_length(string_to_array(text, chr(30)), 1)"
                         " FROM contents_search") == [(3, 3)]  # two messages and "ok"
    assert found(store, "timed out") == []
    assert found(store, "timed\nout at") == [("s1", 0)]
    assert found(store, "door the checkout") == [("s2", 0)]
    store.close()


def test_a_pruned_content_leaves_its_block_with_its_text(url, tmp_path):
    """Pruning a session takes its contents out of the block they share with a kept session's: the block keeps
    the other texts, each beside its own id, and searches find only what is kept."""
    store = open_store(url)
    store.write_batch([*session("old", 1, ["the old checkout timed out", "shared words here"]),
                       *session("new", 2, ["a new checkout", "more words"])])
    assert query_db(url, "SELECT cardinality(ids) FROM contents_search") == [(5,)]  # four messages and "ok"
    from reasonlog.store.maintenance import PruneCriteria
    assert store.prune(PruneCriteria(before="2025-07-01T10:02:00Z", include_open=True))["sessions"] == 1
    assert query_db(url, "SELECT cardinality(ids), array_length(string_to_array(text, chr(30)), 1)"
                         " FROM contents_search") == [(3, 3)]
    assert found(store, "checkout") == [("new", 0)]
    assert found(store, "timed out") == []
    assert found(store, "more words") == [("new", 1)]
    store.close()


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    """One PostgreSQL store and one SQLite store, written the same batches by the property below."""
    schema = postgres_schema()
    pg = open_store(next(schema))
    lite = open_store(tmp_path_factory.mktemp("twin") / "twin.db")
    yield pg, lite, []
    pg.close()
    lite.close()
    next(schema, None)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(st.lists(texts, min_size=1, max_size=4), min_size=1, max_size=3), data=st.data())
def test_search_finds_what_a_full_scan_finds_and_sqlite_does(twins, batch, data):
    """Sessions written in one batch (sharing a block) with generated texts, then a query that is a piece of one of
    them, an operator query or any text: PostgreSQL's hits are exactly a scan of every stored text's, and
    SQLite's, in the same order."""
    pg, lite, written = twins
    first = len(written)
    events = []
    for k, said in enumerate(batch):
        sid = f"s{first + k:04d}"
        events += session(sid, (first + k) % 60, said)
        written.append((sid, said))
    for store in (pg, lite):
        store.write_batch(events)
    query, parsed = drawn_query(data, [t for _, said in written[first:] for t in said])
    scan = scanned(written, parsed)
    hits = found(pg, query)
    assert sorted(hits) == scan
    assert hits == found(lite, query)
