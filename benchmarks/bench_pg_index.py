"""PostgreSQL's substring index, option by option, on the medium workload's unique messages: write time, bytes, queries.

    python benchmarks/bench_pg_index.py --db postgresql://postgres@127.0.0.1:55432/postgres
    python benchmarks/bench_pg_index.py --only block        # the options whose name holds "block"

Each option is a table in a new schema (dropped afterwards) filled as the writer fills the store's index: one COPY of
42 texts a transaction (the medium workload's new contents a batch), the text `search.index_form` of each unique
message. Then VACUUM ANALYZE, its bytes (the table with TOAST, and its index), and each query's best of three:
milliseconds, rows the index answers, and texts the store would then verify (a block's every text). The first
option is the store before migration 20 and the baseline of the printed ratios; "blocks of 16 words" is the store's
since (store/pg_search.py).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "bench"))

import psycopg  # noqa: E402
from bench_fts import unique_texts  # noqa: E402

from reasonlog.store.pg_search import _pattern, words_of  # noqa: E402

BATCH = 42
LZ4 = "TEXT COMPRESSION lz4"
TRGM = "USING gin (text public.gin_trgm_ops)"
# name: (text column, index, table options, texts a row (0: the words of one text), text of a row)
OPTIONS: dict[str, tuple[str, str, str, int, Callable[[str], str]]] = {
    "store before 20: text, GIN": ("TEXT", TRGM, "", 1, lambda t: t),
    "GIN fastupdate=off": ("TEXT", TRGM + " WITH (fastupdate = off)", "", 1, lambda t: t),
    "lz4, toast_tuple_target=128": (LZ4, TRGM, "WITH (toast_tuple_target = 128)", 1, lambda t: t),
    "GiST gist_trgm_ops, lz4": (LZ4, "USING gist (text public.gist_trgm_ops)", "", 1, lambda t: t),
    "prefix of 1,000 characters": (LZ4, TRGM, "", 1, lambda t: t[:1000]),
    "words of each text, GIN": (LZ4, TRGM, "", 0, lambda t: t),
    "tsvector of words (no text)": ("TSVECTOR", "USING gin (text)", "", 1, lambda t: t),
    "blocks of 8 words": (LZ4, TRGM, "", 8, lambda t: t),
    "blocks of 16 words (store)": (LZ4, TRGM, "", 16, lambda t: t),
    "blocks of 42 words": (LZ4, TRGM, "", 42, lambda t: t),
}
QUERIES = ("checkout timeout", "the", "rror", "laacbuen_async", "keyerror", "fallback path should")


def rows_of(texts: list[tuple[int, str]], per: int, form: Callable[[str], str]) -> list[tuple[int, list[int], str]]:
    if per == 1:
        return [(n, [n], form(t)) for n, t in texts]
    if per == 0:
        return [(n, [n], words_of(t)) for n, t in texts]
    blocks = [texts[k:k + per] for k in range(0, len(texts), per)]
    return [(b[0][0], [n for n, _ in b], words_of(*(t for _, t in b))) for b in blocks]


def measure(conn, texts, name: str) -> dict:
    column, index, options, per, form = OPTIONS[name]
    conn.execute(f"CREATE TABLE t (rowid BIGINT PRIMARY KEY, ids BIGINT[] NOT NULL, text {column} NOT NULL) {options}")
    conn.execute(f"CREATE INDEX t_text ON t {index}")
    value = "to_tsvector('simple', %s)" if column == "TSVECTOR" else "%s"
    start = time.perf_counter()
    for k in range(0, len(texts), BATCH):
        rows = rows_of(texts[k:k + BATCH], per, form)
        with conn.transaction():
            if column == "TSVECTOR":
                conn.cursor().executemany(f"INSERT INTO t VALUES (%s, %s, strip({value}))", rows)
            else:
                with conn.cursor().copy("COPY t (rowid, ids, text) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
    took = time.perf_counter() - start
    conn.execute("VACUUM ANALYZE t")
    total, idx = conn.execute("SELECT pg_total_relation_size('t'), pg_relation_size('t_text')").fetchone()
    queries = {}
    for q in QUERIES if column != "TSVECTOR" else ():
        like = _pattern(q) if per != 1 else f"%{q}%"
        best, rows = 1e9, []
        for _ in range(3):
            t0 = time.perf_counter()
            rows = conn.execute("SELECT cardinality(ids) FROM t WHERE text LIKE %s", (like,)).fetchall()
            best = min(best, time.perf_counter() - t0)
        queries[q] = (best * 1000, len(rows), sum(n for (n,) in rows))
    conn.execute("DROP TABLE t")
    return {"write_s": took, "bytes": total, "index_bytes": idx, "queries": queries}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default=os.environ.get("REASONLOG_TEST_POSTGRES"), help="a PostgreSQL URL")
    ap.add_argument("--only", default="", help="only the options whose name holds this")
    args = ap.parse_args(argv)
    if not args.db:
        ap.error("--db postgresql://… (or $REASONLOG_TEST_POSTGRES) is needed")
    texts = unique_texts()
    print(f"{len(texts)} unique texts, {sum(len(t.encode()) for _, t in texts):,} B; load {os.getloadavg()[0]:.1f}")
    schema = "bench_idx_" + uuid.uuid4().hex[:8]
    with psycopg.connect(args.db, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public")
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path = {schema}, public")
        try:
            base = None
            for name in OPTIONS:
                if args.only not in name:
                    continue
                r = measure(conn, texts, name)
                base = base or r
                print(f"{name:<30} write {r['write_s']:6.2f} s ({r['write_s'] / base['write_s']:.2f}),"
                      f" {r['bytes']:>11,} B ({r['bytes'] / base['bytes']:.2f}), index {r['index_bytes']:>11,} B")
                for q, (ms, found, verify) in r["queries"].items():
                    print(f"    {q!r:<24} {ms:7.1f} ms, {found:5} rows, {verify:5} texts to verify")
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    return 0


if __name__ == "__main__":
    sys.exit(main())
