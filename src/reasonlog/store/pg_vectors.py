"""Search by meaning ranked inside PostgreSQL where it has pgvector (migration 21; docs/search.md).

Migration 21 creates the `vector` extension (in `public`, where every schema finds it) when the server offers it
and the role may create it, and adds `unit_vectors.embedding`, the same float32 vector as `unit_vectors.vector` in
pgvector's type. Without the extension (Debian's packages have none; creating it needs a superuser) nothing is
added and the codes in memory (store/vector_index.py) rank as before.

With it:

- vectors are saved with their `embedding`; the vectors stored before the extension was there are filled in by the
  embedding pass (`fill`, `reasonlog embed` and the server's background pass), a few thousand a transaction, so a
  stopped pass goes on where it stopped;
- each model and dimension has a partial HNSW index over `(embedding::vector(DIM)) vector_cosine_ops`, created by
  the first save or fill of that model (`ensure_index`, in a transaction of its own);
- a search asks the index for the max(`CANDIDATES`, `PER_HIT` x limit) nearest (`hnsw.ef_search` = `EF_SEARCH`), the
  session filter joined in (pgvector 0.8's iterative scan goes on through the index until as many pass, or
  `MAX_SCAN` were looked at), and ranks those by exact cosine similarity over their float32 vectors, as the codes'
  path does (`vector_index.scored`). A filtered answer that comes back short when the model has more than
  `MAX_SCAN` vectors may have been cut: the exact scan restricted by the filter answers instead. While any vector of
  the model has no `embedding` yet, the codes rank.

No process then keeps the model's codes in memory: that is what pgvector is for (48 bytes a unit a worker).
"""
from __future__ import annotations

import hashlib
import struct
import threading
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.adapt import Dumper

from . import vectors
from .terms import SessionFilter
from .vector_index import scored
from .vectors import sessions_sql

EXTENSION = "vector"
FILL = 2000  # old vectors given their `embedding` a transaction
MAX_SCAN = 50_000  # index entries an iterative scan looks at at most (hnsw.max_scan_tuples; vector_index.WIDEST)
EF_SEARCH = 200  # the index's list of candidates (hnsw.ef_search): recall@10 1.000 at 500,000 units (docs/search.md)
EF_SEARCH_MAX = 1000  # pgvector's ceiling for hnsw.ef_search
CANDIDATES = 40  # rows asked of the index at least, and PER_HIT for each text ranked: its distances are exact, so it
PER_HIT = 2  # needs far fewer than the codes' 400 (asking 400 cost 2.5 x the server time for the same recall)
HNSW = "m = 16, ef_construction = 64"  # pgvector's defaults, written out


class Embedding(bytes):
    """float32 little-endian bytes sent as a pgvector `vector` (binary, its type left for the server to infer)."""


class EmbeddingDumper(Dumper):
    """pgvector's binary form: the dimension and a reserved word (uint16 each), then the numbers big-endian."""

    format = psycopg.pq.Format.BINARY

    def dump(self, obj: Any) -> bytes:
        import numpy as np

        numbers = np.frombuffer(obj, dtype="<f4")
        return struct.pack(">HH", len(numbers), 0) + numbers.astype(">f4").tobytes()


def register(conn: psycopg.Connection) -> None:
    """Let `conn` send `Embedding` values (each new connection of a PostgreSQL store)."""
    conn.adapters.register_dumper(Embedding, EmbeddingDumper)


# ------------------------------------------------------------------ migration 21


def enable(cur) -> None:
    """Migration 21's Python step: the extension and the `embedding` column where the server offers pgvector and this
    role may create it (a savepoint undoes a refused attempt); nothing otherwise."""
    if cur.execute("SELECT 1 FROM pg_available_extensions WHERE name = ?", (EXTENSION,)).fetchone() is None:
        return
    cur.execute("SAVEPOINT reasonlog_pgvector")
    try:
        cur.execute(f"CREATE EXTENSION IF NOT EXISTS {EXTENSION} SCHEMA public")
    except psycopg.Error:  # not a superuser, no `public` schema: the codes in memory rank, as before
        cur.execute("ROLLBACK TO SAVEPOINT reasonlog_pgvector")
        return
    cur.execute("RELEASE SAVEPOINT reasonlog_pgvector")
    schema = cur.execute("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
                         " WHERE e.extname = ?", (EXTENSION,)).fetchone()[0]
    cur.execute(f'ALTER TABLE unit_vectors ADD COLUMN embedding "{schema}".vector')
    cur.execute("ALTER TABLE unit_vectors ALTER COLUMN embedding SET STORAGE EXTERNAL")
    # The vectors still to fill (none once the embedding pass has run): found without reading the others.
    cur.execute("CREATE INDEX unit_vectors_unfilled ON unit_vectors(model, dim, id) WHERE embedding IS NULL")


def extension_schema(cur) -> str | None:
    """The schema of the `vector` type `unit_vectors.embedding` has; None when the table has no such column."""
    row = cur.execute("SELECT n.nspname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid"
                      " JOIN pg_namespace n ON n.oid = t.typnamespace WHERE a.attrelid = to_regclass('unit_vectors')"
                      " AND a.attname = 'embedding' AND NOT a.attisdropped").fetchone()
    return None if row is None else row[0]


# ------------------------------------------------------------------ writing


def index_name(model: str, dim: int) -> str:
    return f"unit_vectors_hnsw_{int(dim)}_{hashlib.sha1(model.encode()).hexdigest()[:12]}"


def literal(text: str) -> str:
    """`text` as an SQL string literal (standard_conforming_strings, on since PostgreSQL 9.1)."""
    return "'" + text.replace("'", "''") + "'"


def ensure_index(cur, schema: str, model: str, dim: int) -> None:
    """The HNSW index of `model`'s vectors of `dim`, made once (under a lock: two workers never make it together).
    Alone in its transaction: it waits for the writers of `unit_vectors` under way, and holds nothing they wait for."""
    if cur.execute("SELECT to_regclass(?)", (index_name(model, dim),)).fetchone()[0] is not None:
        return
    cur.execute("SELECT pg_advisory_xact_lock(hashtextextended('reasonlog:pgvector index', 7))")
    cur.execute(index_sql(schema, model, dim))


def index_sql(schema: str, model: str, dim: int) -> str:
    """The statement that makes the HNSW index of `model`'s vectors of `dim` (where it is not yet)."""
    return (f'CREATE INDEX IF NOT EXISTS {index_name(model, dim)} ON unit_vectors USING hnsw'
            f' ((embedding::"{schema}".vector({int(dim)})) "{schema}".vector_cosine_ops) WITH ({HNSW})'
            f" WHERE model = {literal(model)} AND dim = {int(dim)}")


def unfilled(cur) -> list[tuple[str, int]]:
    """The (model, dim) pairs with vectors that have no `embedding` yet."""
    return [(m, d) for m, d in cur.execute("SELECT DISTINCT model, dim FROM unit_vectors WHERE embedding IS NULL")]


def fill(cur, limit: int) -> int:
    """Give up to `limit` vectors stored without it their `embedding`, oldest first; how many."""
    rows = cur.execute("SELECT id, vector FROM unit_vectors WHERE embedding IS NULL ORDER BY id LIMIT ?",
                       (limit,)).fetchall()
    cur.executemany("UPDATE unit_vectors SET embedding = ? WHERE id = ?", [(Embedding(v), i) for i, v in rows])
    return len(rows)


def ready(cur, model: str, dim: int) -> bool:
    """Whether every vector of `model` and `dim` has its `embedding` and the index exists (then pgvector ranks)."""
    if cur.execute("SELECT to_regclass(?)", (index_name(model, dim),)).fetchone()[0] is None:
        return False
    return cur.execute("SELECT 1 FROM unit_vectors WHERE embedding IS NULL AND model = ? AND dim = ? LIMIT 1",
                       (model, dim)).fetchone() is None


# ------------------------------------------------------------------ ranking


def rank(conn: psycopg.Connection, schema: str, model: str, query: bytes, flt: SessionFilter, limit: int
         ) -> list[tuple[int | str, float]] | None:
    """The `limit` texts nearest `query` whose units are in sessions `flt` selects, (text id, cosine similarity)
    best first: the index's nearest candidates rescored exactly. None: the filter passed too few of them (the exact
    scan answers instead)."""
    from .dbapi import translate_placeholders

    dim, want = len(query) // 4, max(CANDIDATES, PER_HIT * limit)
    where, args = sessions_sql(flt)
    passing = "" if where == "1=1" else (" AND EXISTS (SELECT 1 FROM search_units u JOIN sessions s ON s.id ="
                                         f" u.session_id WHERE u.text_id = v.text_id AND {where})")
    sql = translate_placeholders(
        f"SELECT v.text_id, v.vector FROM unit_vectors v WHERE v.model = {literal(model)} AND v.dim = {dim}{passing}"
        f' ORDER BY v.embedding::"{schema}".vector({dim}) OPERATOR("{schema}".<=>) ?::"{schema}".vector LIMIT ?')
    with conn.transaction(), conn.cursor() as cur:
        cur.execute("SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', 'relaxed_order',"
                    " true), set_config('hnsw.max_scan_tuples', %s, true)",
                    (str(min(EF_SEARCH_MAX, max(EF_SEARCH, want))), str(MAX_SCAN)))
        rows = cur.execute(sql, [*args, Embedding(query), want]).fetchall()  # type: ignore[arg-type]
        if len(rows) < want and passing and _more_than(cur, model, dim, MAX_SCAN):
            return None
    return scored(query, [tid for tid, _ in rows], [bytes(v) for _, v in rows], limit)


def _more_than(cur, model: str, dim: int, n: int) -> bool:
    """Whether `model` has more than `n` vectors of `dim` (reads n + 1 index entries at most)."""
    return cur.execute("SELECT COUNT(*) FROM (SELECT 1 FROM unit_vectors WHERE model = %s AND dim = %s LIMIT %s) t",
                       (model, dim, n + 1)).fetchone()[0] > n


# ------------------------------------------------------------------ the store's side


class PgVectorStore:
    """What `PostgresStore` does differently where the database has pgvector (provides `_read`, `_write`, `_lock`,
    `_conn`, and `SemanticStore`'s methods it extends)."""

    _read: Callable[..., Any]
    _write: Callable[..., Any]
    _lock: Any
    _conn: Any
    pgvector = True  # False: rank by the codes in memory even where pgvector could (benchmarks compare the two)
    _schema: str | None | bool = False  # the extension's schema; None: no pgvector here; False: not looked yet
    _ready: frozenset[tuple[str, int]] = frozenset()  # (model, dim) whose vectors all have an embedding and an index
    _indexed: frozenset[tuple[str, int]] = frozenset()  # (model, dim) whose index this process saw made

    def _pgvector(self) -> str | None:
        if self._schema is False:
            self._schema = self._read(extension_schema)
        return self._schema  # type: ignore[return-value]

    def _is_ready(self, model: str, dim: int) -> bool:
        """Whether pgvector ranks `model`'s vectors of `dim` (once so, so for good: every save then fills it)."""
        if not self.pgvector:
            return False
        if (model, dim) in self._ready:
            return True
        if self._pgvector() is None or not self._read(ready, model, dim):
            return False
        self._ready = self._ready | {(model, dim)}
        return True

    def vector_ranking(self, model: str, dim: int) -> str:
        """What ranks `model`'s vectors of `dim`: "pgvector" (the database's HNSW index), else "codes"."""
        return "pgvector" if self._is_ready(model, dim) else "codes"

    def save_vectors(self, model: str, rows: list[tuple[int, bytes]]) -> int:
        schema = self._pgvector()
        if schema is None:
            return super().save_vectors(model, rows)  # type: ignore[misc]
        for dim in sorted({len(v) // 4 for _, v in rows}):
            self._index(schema, model, dim)
        return self._write(vectors.save, model, rows, embedding=Embedding)

    def fill_vector_index(self, stop: threading.Event | None = None) -> int:
        """Give the vectors stored before pgvector was there their `embedding`, `FILL` a transaction, until none is
        left or `stop` is set; how many."""
        schema = self._pgvector()
        if schema is None:
            return 0
        for model, dim in self._read(unfilled):
            self._index(schema, model, dim)
        done = 0
        while stop is None or not stop.is_set():
            n = self._write(fill, FILL)
            done += n
            if n < FILL:
                break
        return done

    def _index(self, schema: str, model: str, dim: int) -> None:
        if (model, dim) not in self._indexed:
            self._write(ensure_index, schema, model, dim)
            self._indexed = self._indexed | {(model, dim)}

    def _rank_by_index(self, model: str, query: bytes, flt: SessionFilter, limit: int
                       ) -> list[tuple[Any, float]] | None:
        if not self._is_ready(model, len(query) // 4):
            return super()._rank_by_index(model, query, flt, limit)  # type: ignore[misc]
        with self._lock:
            return rank(self._conn, self._pgvector() or "public", model, query, flt, limit)

    def warm_vectors(self, model: str, dim: int) -> None:
        if not self._is_ready(model, dim):
            super().warm_vectors(model, dim)  # type: ignore[misc]
