"""Vectors of the unit texts (migration 15): the backlog, saving, and ranking by cosine similarity.

Vectors are float32, L2-normalised, one row per (model, text). Ranking is an exact scan over the model's vectors:
on SQLite by sqlite-vec's `vec_distance_cosine` on a connection of its own (`VectorReader`: sqlean.py's SQLite,
or the stdlib's where it loads extensions), so the database file itself needs no extension to be opened; on
PostgreSQL by numpy over the vectors read in chunks through a binary cursor (where the server has pgvector, its
index ranks instead: store/pg_vectors.py). numpy and sqlite-vec are imported only here, when vectors are ranked or
averaged.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import reading
from .dbapi import translate_placeholders
from .terms import SessionFilter, StoreError

EXTRA = "pip install 'reasonlog[semantic]'"
SCAN_ROWS = 20000  # vectors a PostgreSQL scan reads at a time (about 30 MB at 384 dimensions)


# ------------------------------------------------------------------ the backlog


def backlog(cur, model: str, limit: int, after: int = 0) -> list[tuple[int, str]]:
    """Up to `limit` unit texts (id, text) with no vector of `model`, ids above `after`, in id order."""
    from .units import decoded  # here: a store opened for a text search never loads the cutting (units.py)

    rows = cur.execute("SELECT t.id, t.codec, t.data FROM unit_texts t WHERE t.id > ? AND NOT EXISTS"
                       " (SELECT 1 FROM unit_vectors v WHERE v.model = ? AND v.text_id = t.id) ORDER BY t.id LIMIT ?",
                       (after, model, limit)).fetchall()
    return [(tid, decoded(codec, data)) for tid, codec, data in rows]


def counts(cur, model: str | None) -> dict[str, int]:
    """Units, distinct texts, texts with a vector of `model`, and the backlog (texts without one)."""
    units = cur.execute("SELECT COUNT(*) FROM search_units").fetchone()[0]
    texts = cur.execute("SELECT COUNT(*) FROM unit_texts").fetchone()[0]
    # A vector goes with its text (units.forget_sessions), so the model's vectors are its texts embedded.
    embedded = 0 if model is None else cur.execute(
        "SELECT COUNT(*) FROM unit_vectors WHERE model = ?", (model,)).fetchone()[0]
    return {"units": units, "texts": texts, "embedded": embedded, "backlog": texts - embedded}


def save(cur, model: str, rows: list[tuple[int, bytes]], embedding: Callable[[bytes], object] | None = None) -> int:
    """Store vectors (text id, float32 bytes) of `model`; a vector stored meanwhile by another worker stays.
    `embedding`: on PostgreSQL with pgvector, what sends the vector again as `unit_vectors.embedding`."""
    for _, vector in rows:
        if len(vector) % 4 or not vector:
            raise ValueError(f"a vector of {len(vector)} bytes is no float32 vector")
    if embedding is None:
        cur.executemany("INSERT INTO unit_vectors (model, text_id, dim, code, vector) VALUES (?, ?, ?, ?, ?)"
                        " ON CONFLICT (model, text_id) DO NOTHING",
                        [(model, tid, len(v) // 4, sign_code(v), v) for tid, v in rows])
    else:
        cur.executemany("INSERT INTO unit_vectors (model, text_id, dim, code, vector, embedding) VALUES (?, ?, ?, ?,"
                        " ?, ?) ON CONFLICT (model, text_id) DO NOTHING",
                        [(model, tid, len(v) // 4, sign_code(v), v, embedding(v)) for tid, v in rows])
    return len(rows)


def sign_code(vector: bytes) -> bytes:
    """The sign bits of a float32 vector (bit i set: number i > 0), numpy's packbits order (the first number the
    highest bit of the first byte), zero-padded to whole 8-byte words: 48 bytes at 384 dimensions."""
    import numpy as np

    bits = np.packbits(np.frombuffer(vector, dtype="<f4") > 0).tobytes()
    return bits + bytes(-len(bits) % 8)


def stale_means(cur, model: str) -> list[tuple[str, int]]:
    """Sessions (id, embedded units) whose mean vector of `model` averages another number of units than they have."""
    have = dict(cur.execute("SELECT session_id, units FROM session_vectors WHERE model = ?", (model,)).fetchall())
    now = cur.execute("SELECT u.session_id, COUNT(*) FROM search_units u JOIN unit_vectors v ON v.text_id = u.text_id"
                      " AND v.model = ? GROUP BY u.session_id", (model,)).fetchall()
    return [(sid, n) for sid, n in now if have.get(sid) != n]


def means(cur, model: str, sessions: list[tuple[str, int]]) -> list[tuple[str, int, int, bytes]]:
    """(session id, units, dim, the L2-normalised mean of its unit vectors) of each of `sessions`."""
    import numpy as np

    out = []
    for sid, n in sessions:
        blobs = [bytes(b) for (b,) in cur.execute(
            "SELECT v.vector FROM search_units u JOIN unit_vectors v ON v.text_id = u.text_id AND v.model = ?"
            " WHERE u.session_id = ?", (model, sid)).fetchall()]
        if not blobs:
            continue
        matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), -1)
        mean = matrix.mean(axis=0)
        mean /= max(float(np.linalg.norm(mean)), 1e-12)
        out.append((sid, n, matrix.shape[1], mean.astype("<f4").tobytes()))
    return out


def save_means(cur, model: str, rows: list[tuple[str, int, int, bytes]]) -> int:
    cur.executemany("INSERT INTO session_vectors (model, session_id, dim, units, vector) VALUES (?, ?, ?, ?, ?)"
                    " ON CONFLICT (model, session_id) DO UPDATE SET dim = excluded.dim, units = excluded.units,"
                    " vector = excluded.vector", [(model, sid, dim, n, v) for sid, n, dim, v in rows])
    return len(rows)


def session_vector(cur, model: str, session_id: str) -> bytes | None:
    row = cur.execute("SELECT vector FROM session_vectors WHERE model = ? AND session_id = ?",
                      (model, session_id)).fetchone()
    return None if row is None else bytes(row[0])


# ------------------------------------------------------------------ what a ranking may look at


def sessions_sql(flt: SessionFilter) -> tuple[str, list]:
    """The condition on sessions `s` of what `flt` selects that a ranking heeds; "1=1" without one."""
    return reading.filter_sql(SessionFilter(run=flt.run, agent=flt.agent, model=flt.model, status=flt.status,
                                            labels=flt.labels, since=flt.since, until=flt.until, parent=flt.parent,
                                            limit=None))


def candidates_sql(flt: SessionFilter, table: str) -> tuple[str, list]:
    """A condition on `table`'s rows (unit_vectors or session_vectors) keeping those of sessions `flt` selects;
    "1=1" without a filter (the scan then reads the model's vectors alone)."""
    where, args = sessions_sql(flt)
    if where == "1=1":
        return where, []
    sessions = f"SELECT s.id FROM sessions s WHERE {where}"
    if table == "session_vectors":
        return f"session_id IN ({sessions})", args
    return f"text_id IN (SELECT u.text_id FROM search_units u WHERE u.session_id IN ({sessions}))", args


# ------------------------------------------------------------------ ranking on SQLite


class VectorReader:
    """A read-only connection to a SQLite database with sqlite-vec loaded, opened on first use, one per store."""

    def __init__(self, path: Path):
        self.path = path
        self._conn: Any = None
        self._lock = threading.Lock()

    def rank(self, table: str, model: str, query: bytes, flt: SessionFilter, limit: int,
             exclude: str | None = None) -> list[tuple[int | str, float]]:
        """The `limit` rows of `table` nearest `query`: (text id or session id, cosine similarity), best first."""
        key = "text_id" if table == "unit_vectors" else "session_id"
        where, args = candidates_sql(flt, table)
        if exclude is not None:
            where, args = f"{where} AND session_id != ?", [*args, exclude]
        with self._lock:
            conn = self._connection()
            rows = conn.execute(f"SELECT {key}, vec_distance_cosine(vector, ?) AS d FROM {table}"
                                f" WHERE model = ? AND dim = ? AND {where} ORDER BY d, {key} LIMIT ?",
                                [query, model, len(query) // 4, *args, limit]).fetchall()
        return [(k, 1.0 - d) for k, d in rows]

    def _connection(self):
        if self._conn is None:
            self._conn = connect_with_vec(self.path)
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def connect_with_vec(path: Path):
    """A read-only connection to `path` that has sqlite-vec's functions: through sqlean.py (SQLite 3.50, extension
    loading built in), else the stdlib sqlite3 when it can load extensions."""
    try:
        import sqlite_vec
    except ImportError:
        raise StoreError(f"semantic search on SQLite needs sqlite-vec: {EXTRA}") from None
    module = _sqlite_with_extensions()
    conn = module.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0, check_same_thread=False)
    try:
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
    except Exception as exc:
        conn.close()
        raise StoreError(f"cannot load sqlite-vec into SQLite {module.sqlite_version}: {exc}") from None
    return conn


def _sqlite_with_extensions():
    try:
        import sqlean  # type: ignore[import-not-found]

        return sqlean
    except ImportError:
        import sqlite3

        if hasattr(sqlite3.Connection, "enable_load_extension"):
            return sqlite3
    raise StoreError(f"this Python's sqlite3 cannot load extensions, and sqlean.py is not installed: {EXTRA}")


# ------------------------------------------------------------------ ranking on PostgreSQL


def rank_scan(conn, table: str, model: str, query: bytes, flt: SessionFilter, limit: int,
              exclude: str | None = None) -> list[tuple[int | str, float]]:
    """PostgreSQL: the `limit` rows of `table` nearest `query`, by an exact scan of the model's vectors with numpy
    (`conn`: a psycopg connection; the vectors come through a server-side binary cursor, SCAN_ROWS at a time)."""
    import numpy as np

    key = "text_id" if table == "unit_vectors" else "session_id"
    q = np.frombuffer(query, dtype="<f4")
    where, args = candidates_sql(flt, table)
    if exclude is not None:
        where, args = f"{where} AND session_id != ?", [*args, exclude]
    sql = translate_placeholders(f"SELECT {key}, vector FROM {table} WHERE model = ? AND dim = ? AND {where}")
    keys: list[Any] = []
    scores: list[Any] = []
    with conn.transaction(), conn.cursor(name="reasonlog_vector_scan", binary=True) as cur:
        cur.itersize = SCAN_ROWS
        cur.execute(sql, [model, len(q), *args])
        while rows := cur.fetchmany(SCAN_ROWS):
            matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), len(q))
            scores.append(matrix @ q)
            keys += [r[0] for r in rows]
    if not keys:
        return []
    found = np.concatenate(scores)
    top = np.argpartition(-found, limit - 1)[:limit] if len(found) > limit else np.arange(len(found))
    return sorted(((keys[i], float(found[i])) for i in top), key=lambda kv: (-kv[1], kv[0]))
