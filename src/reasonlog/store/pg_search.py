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

Since migration 20 a row of `contents_search` stands for a *block* of the contents a batch wrote (up to `BLOCK`): their
ids, and since migration 23 each content's indexed text whole, in the order of the ids, between `SEP`s (migration 20
kept the block's words once; the other search tables still hold a record's words once, `words_of`), TOAST-compressed.
pg_trgm's trigrams are taken within words, so the GIN index holds a block's keys once however many contents say them:
a term's LIKE pattern finds the blocks holding its trigrams, the block's text is rechecked whole, and each content of
such a block is then checked by its own text in SQL (`strpos`), so only the contents that hold the term are read and
verified, as with one row per content. Measured on the medium workload (benchmarks/bench_pg_search.py,
docs/performance.md, "search on the blocks"): one row per content took 1.91 x the unique content; blocks of words 0.79 x
with every content of a found block read (16 x as many for a rare term, and a phrase's order lost); whole texts in
blocks of 64 0.78 x, with rare terms and phrases as cheap as one row per content.
"""
from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

# `search` imports nothing of this module: no cycle.
from .search import grams_of

SEARCH_TABLES = ("contents_search", "tool_results_search", "outcomes_search", "reasoning_records_search")


class TrigramIndex:
    """The `index` of `PostgresStore` (see store/search.py for the contract; SQLite's is store/text_blocks.py)."""

    @staticmethod
    def add(cur, index: str, rows: list[tuple[int, str]]) -> None:
        # One COPY: the rows of a batch in one statement, not one INSERT (parsed and planned) per row.
        if index != "contents_search":
            cur.copy_rows(index, ("rowid", "text"), ((rowid, words_of(text)) for rowid, text in rows))
            return
        blocks = [rows[k:k + BLOCK] for k in range(0, len(rows), BLOCK)]
        cur.copy_rows(index, ("rowid", "ids", "text"), ((min(cid for cid, _ in block), [cid for cid, _ in block],
                                                         segments_of(*(t for _, t in block))) for block in blocks))

    @staticmethod
    def remove(cur, index: str, ids: list[int]) -> None:
        if index == "contents_search":
            forget_contents(cur, ids)
            return
        cur.executemany(f"DELETE FROM {index} WHERE rowid = ?", [(rowid,) for rowid in ids])

    @staticmethod
    def rows(index: str) -> str:
        """What a search joins its records to: a row of contents_search for each content of a block, with its text."""
        return (f"{index} CROSS JOIN LATERAL unnest({index}.ids, string_to_array({index}.text, chr({ord(SEP)})))"
                f" AS {index}_id(id, text)") if index == "contents_search" else index

    @staticmethod
    def indexed(index: str) -> str:
        """What the index gives of a table (nothing waits on PostgreSQL: it is `rows`)."""
        return TrigramIndex.rows(index)

    @staticmethod
    def joins(index: str, column: str) -> str:
        """The condition joining a row of `rows(index)` to the record `column` names."""
        return f"{column} = {index}_id.id" if index == "contents_search" else f"{column} = {index}.rowid"

    @staticmethod
    def ids(index: str) -> str:
        """The id of the record a row of `rows(index)` stands for."""
        return f"{index}_id.id" if index == "contents_search" else f"{index}.rowid"

    @staticmethod
    def matches(index: str, needles: list[str]) -> str:
        """The condition a row of `rows(index)` meets when its record may hold one of the needles (`arguments` fill
        it).

        LIKE, not a regular expression: pg_trgm takes every trigram of a LIKE pattern, where its analysis of a long
        regular expression keeps a few (a rare phrase left 36,600 candidates to recheck instead of 295). A block of
        contents is found through the index by its whole text, then each of its contents by its own, with `strpos`
        (a plain substring search: a third of LIKE's time over the same texts)."""
        if index == "contents_search":
            each = " OR ".join([f"strpos({index}_id.text, ?) > 0"] * len(needles))
            return f"{index}.text LIKE ANY (?::text[]) AND ({each})"
        return f"{index}.text LIKE ANY (?::text[])"

    @staticmethod
    def arguments(index: str, needles: list[str]) -> list:
        """The values of `matches(index, needles)`'s placeholders."""
        if index == "contents_search":
            return [[_whole(needle) for needle in needles], *(_clean(needle) for needle in needles)]
        return [[_pattern(needle) for needle in needles]]

    @staticmethod
    @contextlib.contextmanager
    def planned(cur) -> Iterator[None]:
        """Within a read transaction: the statements run meanwhile find their rows through the trigram indexes.

        A planner counts a sequential scan by the table's own pages, not by the TOAST pages its texts are in, so on a
        table of a few hundred blocks it scans them all, decompressing each text (48-131 ms for a term nothing holds
        on the medium workload, where the index answers in 0.3 ms). Bigger tables are scanned through the
        index anyway; the setting lasts until the block ends (`SET LOCAL`, then its default again), or with the
        transaction a failed statement aborted."""
        other = cur.connection.cursor()  # `cur` keeps the rows of the statement run within the block
        other.execute("SET LOCAL enable_seqscan = off")
        yield  # a statement that failed aborted the transaction, and the setting ends with it: nothing to undo
        other.execute("SET LOCAL enable_seqscan TO DEFAULT")

    @staticmethod
    def argument(cur, query: Any) -> list[str] | None:
        """The needles of the query's most selective group (its alternatives); None when it narrows nothing."""
        def shortest(group: tuple[str, ...]) -> int:
            return min(len(_needle(term)) for term in group)
        group = max(query.groups, key=shortest)
        if shortest(group) < 3:
            return None
        return [_needle(term) for term in group]

    @staticmethod
    def arguments_of(cur, queries: list[Any]) -> list[list[str] | None]:
        """`argument` of each query."""
        return [TrigramIndex.argument(cur, query) for query in queries]

    @staticmethod
    def is_common(cur, needles: list[str], common: int) -> bool:
        """Whether about `common` contents or more hold the needles: counted content by content on a small table,
        estimated from a sample of the blocks on a large one (each content of a sampled block that holds them counts).
        (Counted by blocks on a small table too, a rare phrase of common words went to the walk: 297 ms for a page of
        sessions on the medium workload, 75 ms through the index.) Counted exactly, a text is common from a quarter of
        `common` (`EXACT_SHARE`): the index's path splits every block it finds into its texts, so the walk, which stops
        at the page, costs less sooner (CPU for a page of 50 sessions on the medium workload: `rror`, 4,795 texts, 145
        ms through the index and 44 ms walking; `keyerror`, 558 texts, 76 and 73 ms).

        A GIN bitmap holds every hit before a LIMIT can stop it, so counting through the index cost as much as
        the search that follows (45-100 ms for a rare phrase of common words at 500,000 texts, asked twice). A
        sample of about `SAMPLE_ROWS` blocks, drawn by whole pages, costs a few ms; either answer is correct (it
        chooses how the hits are looked for), and a table smaller than the sample is counted whole."""
        total = cur.execute("SELECT reltuples FROM pg_class WHERE oid = to_regclass('contents_search')").fetchone()
        total = float(total[0]) if total and total[0] is not None else -1.0
        if total < 2 * SAMPLE_ROWS:  # small, or never analysed (-1): count through the index, content by content
            common = max(1, common // EXACT_SHARE)
            with TrigramIndex.planned(cur):
                return cur.execute(f"SELECT COUNT(*) FROM (SELECT 1 FROM {TrigramIndex.rows('contents_search')}"
                                   f" WHERE {TrigramIndex.matches('contents_search', needles)} LIMIT {common}) c",
                                   TrigramIndex.arguments("contents_search", needles)).fetchone()[0] >= common
        patterns = [_whole(needle) for needle in needles]
        hits, drawn = cur.execute(  # contents in the blocks that match, blocks drawn
            f"SELECT COALESCE(SUM(cardinality(ids)) FILTER (WHERE s.text LIKE ANY (?::text[])), 0), COUNT(*) FROM"
            f" (SELECT ids, text FROM contents_search TABLESAMPLE SYSTEM ({100.0 * SAMPLE_ROWS / total:.6f})"
            f" LIMIT {4 * SAMPLE_ROWS}) s", (patterns,)).fetchone()  # the LIMIT bounds
        return drawn > 0 and hits * total >= common * drawn  # a sample drawn on an estimate that the table outgrew


EXACT_SHARE = 4  # on a small table, counted exactly, a text is common from common // EXACT_SHARE texts (is_common)
SAMPLE_ROWS = 500  # rows (blocks) a sample for `is_common` draws (by pages): about 30,000 contents in blocks of 64

_LIKE_SPECIAL = re.compile(r"[\\%_]")
BLOCK = 64  # contents a row of contents_search stands for, at most: a batch's new contents, in blocks of 64
SEP = "\x1e"  # between the texts of a block's contents (a NUL or SEP inside a text is stored as a space)


def words_of(*texts: str) -> str:
    """What the index holds for these texts (`search.index_form`s): each whitespace-separated word once, in the order
    of its first occurrence, each between single spaces. (PostgreSQL text holds no NUL: a NUL separates words.)"""
    return " " + " ".join(dict.fromkeys(w for text in texts for w in text.replace("\x00", " ").split())) + " "


def segments_of(*texts: str) -> str:
    """What contents_search holds for a block of contents (their `search.index_form`s): each text whole, in the order
    of the block's ids, between `SEP`s."""
    return SEP.join(_clean(text) for text in texts)


def _clean(text: str) -> str:
    return text.replace("\x00", " ").replace(SEP, " ")


def _whole(needle: str) -> str:
    """The LIKE pattern the text of a block's content matches wherever it holds `needle` (and so the block's): the
    needle's whitespace-separated pieces in order, anything between them. pg_trgm asks its index for the pieces'
    trigrams, and a block's recheck stops at the pieces' first occurrences in order (the whole phrase, where a block
    holds its words but not the phrase, was looked for to the block's end by LIKE's matcher: most of a phrase's
    time); each content's text is then searched for the needle itself (`strpos`)."""
    return "%" + "%".join(_LIKE_SPECIAL.sub(r"\\\g<0>", piece) for piece in _clean(needle).split()) + "%"


def _pattern(needle: str) -> str:
    """The LIKE pattern every `words_of` of a text holding `needle` matches: its longest whitespace-separated piece,
    bounded by a space on each side where the needle goes on past it (a word's end or start there)."""
    needle = needle.replace("\x00", " ")
    pieces = needle.split()
    if not pieces:
        return "%"
    longest = max(range(len(pieces)), key=lambda i: len(pieces[i]))
    before = " " if longest > 0 or needle[0].isspace() else ""
    after = " " if longest < len(pieces) - 1 or needle[-1].isspace() else ""
    return "%" + before + _LIKE_SPECIAL.sub(r"\\\g<0>", pieces[longest]) + after + "%"


def forget_contents(cur, gone: list[int]) -> None:
    """Take deleted contents out of their blocks, their texts with them (a block none is left in goes)."""
    cur.execute("DELETE FROM contents_search WHERE ids && ?::bigint[] AND ids <@ ?::bigint[]", (gone, gone))
    sep = f"chr({ord(SEP)})"
    cur.execute(f"UPDATE contents_search SET (ids, text) = (SELECT array_agg(i ORDER BY n), string_agg(t, {sep}"
                f" ORDER BY n) FROM unnest(ids, string_to_array(text, {sep})) WITH ORDINALITY AS u(i, t, n)"
                " WHERE i <> ALL(?::bigint[])) WHERE ids && ?::bigint[]", (gone, gone))


def _needle(term: str) -> str:
    """What the indexed text holds wherever `term` occurs: the term, or a CJK pair's indexed bigram."""
    grams = grams_of(term) if len(term) == 2 else None
    return grams[0] if grams else term


TRIGRAMS = TrigramIndex()


def create_indexes(cur) -> None:
    """Migration 13's Python step: pg_trgm installed once per database (in `public`, where every schema finds it;
    migrations hold an advisory lock, so two never race), the trigram tables in place of the word index. They are
    filled by migration 20, which makes them anew (13 filled them from everything stored, in the shape 20 left)."""
    cur.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public")
    schema = _trgm_schema(cur)
    for table in SEARCH_TABLES:
        cur.execute(f"DROP TABLE {table}")
        cur.execute(f"CREATE TABLE {table} (rowid BIGINT PRIMARY KEY, text TEXT NOT NULL)")
        cur.execute(f'CREATE INDEX {table}_text ON {table} USING gin (text "{schema}".gin_trgm_ops)')
    cur.execute("DROP TABLE search_words")


def index_words(cur) -> None:
    """Migration 20's Python step: each search table made anew holding words (`words_of`), `contents_search` in
    blocks (with their ids, under a GIN index a prune finds a content's block by), its text compressed by lz4 where
    the server has it, and all filled from everything stored."""
    schema = _trgm_schema(cur)
    lz4 = cur.execute("SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
                      ).fetchone()
    compression = " COMPRESSION lz4" if lz4 and lz4[0] else ""
    for table in SEARCH_TABLES:
        ids = " ids BIGINT[] NOT NULL," if table == "contents_search" else ""
        cur.execute(f"DROP TABLE {table}")
        cur.execute(f"CREATE TABLE {table} (rowid BIGINT PRIMARY KEY,{ids} text TEXT{compression} NOT NULL)")
        cur.execute(f'CREATE INDEX {table}_text ON {table} USING gin (text "{schema}".gin_trgm_ops)')
    cur.execute("CREATE INDEX contents_search_ids ON contents_search USING gin (ids)")
    _index_stored(cur)


def index_words_where_missing(cur) -> None:
    """Migration 20 for a database that recorded it while it was a placeholder changing nothing (main held the
    number before the blocks were merged): its `contents_search` has one text a row and no `ids`."""
    if cur.execute("SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('contents_search') AND attname = 'ids'"
                   " AND NOT attisdropped").fetchone() is None:
        index_words(cur)


def _trgm_schema(cur) -> str:
    return cur.execute("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
                       " WHERE e.extname = 'pg_trgm'").fetchone()[0]


def index_segments(cur) -> None:
    """Migration 23's Python step: contents_search refilled from every stored content, a block's row holding each of
    its contents' text whole (`segments_of`) where migration 20 left the block's words. Its indexes are made after
    the rows: a GIN index built at once is half the size of one filled row by row, and quicker."""
    schema = _trgm_schema(cur)
    cur.execute("DROP INDEX IF EXISTS contents_search_text")
    cur.execute("DROP INDEX IF EXISTS contents_search_ids")
    cur.execute("TRUNCATE contents_search")
    _index_stored_contents(cur)
    cur.execute(f'CREATE INDEX contents_search_text ON contents_search USING gin (text "{schema}".gin_trgm_ops)')
    cur.execute("CREATE INDEX contents_search_ids ON contents_search USING gin (ids)")


def _index_stored(cur) -> None:
    from . import search

    _index_stored_contents(cur)
    search.index_every_record(cur, search.RECORD_TABLES, TRIGRAMS)


def _index_stored_contents(cur) -> None:
    import orjson

    from ..parts import searchable_text
    from . import search
    from .content import Dictionaries
    from .reading import ContentReader

    reader, last = ContentReader(cur, Dictionaries()), 0
    while True:
        rows = cur.execute("SELECT id, codec, dict_id, data FROM contents WHERE kind != 'tool' AND id > ?"
                           " ORDER BY id LIMIT 1024", (last,)).fetchall()
        if not rows:
            break
        search.index_contents(cur, [(cid, searchable_text(orjson.loads(reader.bytes_of(codec, dict_id, bytes(data)))))
                                    for cid, codec, dict_id, data in rows], TRIGRAMS)
        last = rows[-1][0]
