"""What the search tests of both dialects write and ask: one-call sessions of given texts, and generated queries
checked against a scan of every stored text (tests/test_pg_search_index.py, tests/test_search_pending.py)."""
from __future__ import annotations

import sqlite3
from array import array

import zstandard
from hypothesis import assume
from hypothesis import strategies as st

from reasonlog.model import CallRecorded, SessionStarted
from reasonlog.parts import searchable_text
from reasonlog.store import SessionFilter
from reasonlog.store.search import Query, index_form
from reasonlog.store.terms import StoreError

EVERYTHING = SessionFilter(limit=None)
ALPHABET = "ab c\n\t_%\\éÉ日本xΣ\x1e"
texts = st.text(st.sampled_from(ALPHABET), max_size=24)


def session(sid: str, minute: int, said: list[str]) -> list:
    """A session with one call whose user messages are `said`; the assistant answers "ok"."""
    at = f"2025-07-01T10:{minute % 60:02d}:00Z"
    return [SessionStarted(session_id=sid, started_at=at, agent="a"),
            CallRecorded(call_id=f"{sid}-c", session_id=sid, exchange_id=None, started_at=at,
                         request={"model": "m", "messages": [{"role": "user", "content": t} for t in said]},
                         response={"role": "assistant", "content": "ok"}, model="m")]


RECORDS = {0: ("id", "contents"), 1: ("rowid", "tool_results"), 2: ("rowid", "outcomes"),
           3: ("rowid", "reasoning_records")}  # store/text_blocks.py's kinds


def block_texts(path) -> dict[tuple[int, int], str]:
    """What a SQLite file's blocks of searched text hold (schema 26, store/text_blocks.py), read as the migration that
    made them documents them: (kind, id) -> text. Each block reads back whole, and holds a record once."""
    held: dict[tuple[int, int], str] = {}
    with sqlite3.connect(path) as db:
        for kind, lo, hi, ids_blob, ends_blob, data in db.execute("SELECT kind, lo, hi, ids, ends, data FROM"
                                                                  " search_blocks"):
            ids, ends = array("q", ids_blob), array("I", ends_blob)  # little-endian, as this machine
            text = zstandard.ZstdDecompressor().decompress(data)
            assert (lo, hi, ends[-1]) == (min(ids), max(ids), len(text))
            start = 0
            for rid, end in zip(ids, ends, strict=True):
                assert (kind, rid) not in held and text[end - 1:end] == b"\x00"
                held[(kind, rid)] = text[start:end - 1].decode("utf-8", "surrogatepass")
                start = end
    return held


def sound(path) -> None:
    """The blocks hold only records that are stored, none that waits in `search_pending` too, each as its text is."""
    held = block_texts(path)
    with sqlite3.connect(path) as db:
        waiting = set(db.execute("SELECT kind, id FROM search_pending").fetchall())
        stored = {(kind, rid) for kind, (key, table) in RECORDS.items()
                  for (rid,) in db.execute(f"SELECT {key} FROM {table}")}
    assert held.keys() <= stored and not held.keys() & waiting


def found(store, text: str) -> list[tuple[str, int]]:
    return [(h["session_id"], h["message_idx"]) for h in store.search(text, EVERYTHING, limit=None)]


def drawn_query(data, said: list[str]) -> tuple[str, Query]:
    """A piece of one of `said`, any text, or an operator query (one both dialects parse)."""
    low = index_form(data.draw(st.sampled_from(said)))
    start = data.draw(st.integers(0, max(len(low) - 1, 0)))
    query = data.draw(st.one_of(st.just(low[start:data.draw(st.integers(start, len(low)))]), texts,
                                st.builds(lambda a, b: f'"{a}" OR {b}', st.text("abcé日本 ", min_size=1, max_size=5),
                                          st.text("abcx", min_size=1, max_size=3))))
    assume(query.strip())
    try:
        return query, Query.parse(query)
    except StoreError:  # an operator query with an empty term: refused alike by both stores
        assume(False)
        raise


def scanned(written: list[tuple[str, list[str]]], parsed: Query) -> list[tuple[str, int]]:
    """What a scan of every written text finds, sorted: (session id, message position)."""
    return sorted((sid, n) for sid, said in written for n, text in enumerate([*said, "ok"])
                  if parsed.first_in(searchable_text(text).lower()))
