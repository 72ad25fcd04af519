"""PostgreSQL's full-text index: `pg_trgm` trigrams over the text each record is searched by (schema 13), answering
the same substring queries as SQLite's FTS5 trigram index (store/search.py).

Each of `contents_search`, `tool_results_search`, `outcomes_search` and `reasoning_records_search` holds a record's
`search.index_form` (its lowercased searchable text, plus the bigrams of its CJK runs) under a GIN index with the
`gin_trgm_ops` operator class. A query asks for one group of its terms as LIKE patterns (the alternatives of an
OR), the group whose shortest term is longest: pg_trgm finds the records holding that
group's trigrams, and the stored text decides every term, as on SQLite. A term of fewer than three characters
(other than a CJK pair, found through its indexed bigram) narrows nothing: the records are scanned.

Why not the word index of schemas 6-12 (a tsvector of words and a vocabulary): measured on the medium workload
(benchmarks/bench_postgres.py --trgm), it took 3.5 x the unique content against pg_trgm's 1.5 x, and 80 ms to
2.8 s a query against 0.6-53 ms.
"""
from __future__ import annotations

import re
from typing import Any

# `search` imports nothing of this module: no cycle.
from .search import grams_of

SEARCH_TABLES = ("contents_search", "tool_results_search", "outcomes_search", "reasoning_records_search")


class TrigramIndex:
    """The `index` of `PostgresStore` (see store/search.py for the contract FTS5 fills on SQLite)."""

    @staticmethod
    def add(cur, index: str, rows: list[tuple[int, str]]) -> None:
        # PostgreSQL text holds no NUL; a NUL is in no query either (a NUL in a parameter is refused).
        # One COPY: the rows of a batch in one statement, not one INSERT (parsed and planned) per row.
        cur.copy_rows(index, ("rowid", "text"), ((rowid, text.replace("\x00", " ")) for rowid, text in rows))

    @staticmethod
    def remove(cur, index: str, rows: list[tuple[int, str]]) -> None:
        cur.executemany(f"DELETE FROM {index} WHERE rowid = ?", [(rowid,) for rowid, _ in rows])

    @staticmethod
    def matches(index: str) -> str:
        # LIKE, not a regular expression: pg_trgm takes every trigram of a LIKE pattern, where its analysis of a
        # long regular expression keeps a few (a rare phrase left 36,600 candidates to recheck instead of 295).
        return f"{index}.text LIKE ANY (?::text[])"

    @staticmethod
    def argument(cur, query: Any) -> list[str] | None:
        """LIKE patterns of the query's most selective group (its alternatives); None when it narrows nothing."""
        def shortest(group: tuple[str, ...]) -> int:
            return min(len(_needle(term)) for term in group)
        group = max(query.groups, key=shortest)
        if shortest(group) < 3:
            return None
        return ["%" + _LIKE_SPECIAL.sub(r"\\\g<0>", _needle(term).replace("\x00", "")) + "%" for term in group]

    @staticmethod
    def is_common(cur, match: list[str], common: int) -> bool:
        """Whether about `common` contents or more hold the patterns: estimated from a sample of the stored text.

        A GIN bitmap holds every hit before a LIMIT can stop it, so counting through the index cost as much as
        the search that follows (45-100 ms for a rare phrase of common words at 500,000 texts, asked twice). A
        sample of about `SAMPLE_ROWS` texts, drawn by whole pages, costs a few ms; either answer is correct (it
        chooses how the hits are looked for), and a table smaller than the sample is counted whole."""
        total = cur.execute("SELECT reltuples FROM pg_class WHERE oid = to_regclass('contents_search')").fetchone()
        total = float(total[0]) if total and total[0] is not None else -1.0
        if total < 2 * SAMPLE_ROWS:  # small, or never analysed (-1): count through the index
            return cur.execute(f"SELECT COUNT(*) FROM (SELECT 1 FROM contents_search WHERE"
                               f" {TrigramIndex.matches('contents_search')} LIMIT {common}) c",
                               (match,)).fetchone()[0] >= common
        hits, drawn = cur.execute(
            f"SELECT COUNT(*) FILTER (WHERE {TrigramIndex.matches('s')}), COUNT(*) FROM (SELECT text FROM"
            f" contents_search TABLESAMPLE SYSTEM ({100.0 * SAMPLE_ROWS / total:.6f}) LIMIT {4 * SAMPLE_ROWS}) s",
            (match,)).fetchone()  # the LIMIT bounds a sample drawn on an estimate that the table outgrew
        return drawn > 0 and hits * total >= common * drawn


SAMPLE_ROWS = 2000  # texts a sample for `is_common` draws (by pages); at COMMON = 5,000 of 500,000, 20 hold it

_LIKE_SPECIAL = re.compile(r"[\\%_]")


def _needle(term: str) -> str:
    """What the indexed text holds wherever `term` occurs: the term, or a CJK pair's indexed bigram."""
    grams = grams_of(term) if len(term) == 2 else None
    return grams[0] if grams else term


TRIGRAMS = TrigramIndex()


def create_indexes(cur) -> None:
    """Migration 13's Python step: pg_trgm installed once per database (in `public`, where every schema finds it;
    migrations hold an advisory lock, so two never race), the trigram tables in place of the word index, then
    filled from everything stored."""
    cur.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public")
    schema = cur.execute("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
                         " WHERE e.extname = 'pg_trgm'").fetchone()[0]
    for table in SEARCH_TABLES:
        cur.execute(f"DROP TABLE {table}")
        cur.execute(f"CREATE TABLE {table} (rowid BIGINT PRIMARY KEY, text TEXT NOT NULL)")
        cur.execute(f'CREATE INDEX {table}_text ON {table} USING gin (text "{schema}".gin_trgm_ops)')
    cur.execute("DROP TABLE search_words")
    _index_stored(cur)


def _index_stored(cur) -> None:
    import orjson

    from ..parts import searchable_text
    from . import search
    from .content import Dictionaries
    from .reading import ContentReader

    reader, last = ContentReader(cur, Dictionaries()), 0
    while True:
        rows = cur.execute("SELECT id, codec, dict_id, data FROM contents WHERE kind != 'tool' AND id > ?"
                           " ORDER BY id LIMIT 1000", (last,)).fetchall()
        if not rows:
            break
        search.index_contents(cur, [(cid, searchable_text(orjson.loads(reader.bytes_of(codec, dict_id, bytes(data)))))
                                    for cid, codec, dict_id, data in rows], TRIGRAMS)
        last = rows[-1][0]
    search.index_every_record(cur, search.RECORD_TABLES, TRIGRAMS)
