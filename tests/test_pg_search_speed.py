"""PostgreSQL's substring search asks its trigram index once for a rare phrase (issue 20: `/v1/sessions?q=` rare
text took 182 ms at 500,000 messages, half of it the index asked a second time to tell a common text)."""
from __future__ import annotations

import psycopg
import pytest
from conftest import NO_POSTGRES, POSTGRES, postgres_schema

from reasonlog.model import CallRecorded, SessionStarted
from reasonlog.store import SessionFilter, open_store, pg_search, search

pytestmark = pytest.mark.skipif(not POSTGRES, reason=NO_POSTGRES)


@pytest.fixture
def url():
    yield from postgres_schema()


def write_sessions(store, sessions: int, per: int) -> None:
    """`sessions` sessions of `per` distinct messages, each with a common word; session 7 says one rare phrase."""
    for k in range(sessions):
        sid = f"s{k:03d}"
        messages = [{"role": "user", "content": f"{sid} line {n}: the price of item {n * 7 + k}"} for n in range(per)]
        if k == 7:
            messages.append({"role": "user", "content": "the checkout timed out at the gateway"})
        store.write_batch([SessionStarted(session_id=sid, started_at=f"2025-07-01T{k % 24:02d}:{k // 24:02d}:00Z",
                                          agent="a"),
                           CallRecorded(call_id=f"{sid}-c", session_id=sid, exchange_id=None,
                                        started_at=f"2025-07-01T{k % 24:02d}:{k // 24:02d}:01Z",
                                        request={"model": "m", "messages": messages},
                                        response={"role": "assistant", "content": "ok"}, model="m")])


def test_a_text_is_told_common_or_rare_from_a_sample_and_found_the_same(url, monkeypatch):
    """Past twice `SAMPLE_ROWS` texts (and once analysed), a sample tells a common text from a rare one; either
    way the pages are the whole answer's. (The time this saves shows at 500,000 texts: benchmarks/bench_server.py.)"""
    store = open_store(url)
    write_sessions(store, 60, 80)  # 4,800 texts, in blocks of up to 64 (a row of contents_search each)
    monkeypatch.setattr(pg_search, "SAMPLE_ROWS", 50)  # so that the 120 blocks are sampled, not counted
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE contents_search")
        assert conn.execute("SELECT reltuples FROM pg_class WHERE oid = to_regclass('contents_search')"
                            ).fetchone()[0] >= 2 * pg_search.SAMPLE_ROWS
    monkeypatch.setattr(search, "COMMON", 1000)  # "price" is in every text, the phrase in one
    assert [s["id"] for s in store.list_sessions(SessionFilter(text="checkout timed out", limit=51))] == ["s007"]
    everything = [s["id"] for s in store.list_sessions(SessionFilter(text="price", limit=None))]
    assert len(everything) == 60
    for limit in (1, 5, 51):
        assert [s["id"] for s in store.list_sessions(SessionFilter(text="price", limit=limit))] == everything[:limit]
    store.close()


def test_on_a_small_table_a_text_counted_content_by_content_is_found_the_same(url, monkeypatch):
    """Below twice `SAMPLE_ROWS` blocks the contents holding a text are counted one by one (a quarter of `COMMON`
    makes it common); a common text, one near the line and a rare phrase each page as the whole answer does."""
    store = open_store(url)
    write_sessions(store, 12, 20)  # 240 texts: "price" in each, "line 1" in 12 x 11 (line 1, 10-19), the phrase once
    monkeypatch.setattr(search, "COMMON", 400)  # common from 100 texts counted one by one
    for text, sessions in (("price", 12), ("line 1", 12), ("checkout timed out", 1), ("s003 line 1", 1)):
        everything = [s["id"] for s in store.list_sessions(SessionFilter(text=text, limit=None))]
        assert len(everything) == sessions
        for limit in (1, 5, 51):
            assert [s["id"] for s in store.list_sessions(SessionFilter(text=text, limit=limit))] == everything[:limit]
    store.close()
