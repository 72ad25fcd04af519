"""PostgreSQL schemas for the tests: a new empty one, or a migrated one used again once a test has ended.

Migrating a new schema to the latest version (22 migrations, 111 tables, indexes and sequences) costs PostgreSQL
0.3 to 0.9 s, and some 640 tests of the whole suite each asked for one. A test that takes `db` on PostgreSQL gets a
migrated, empty schema instead: one this worker made and migrated, or one an earlier test of this worker used,
taken back only when it has the same tables, indexes, sequences (each owned by its column), functions and triggers
as a freshly migrated schema, emptied (every table but the ones the migrations fill, which must still hold exactly
what they filled; `TRUNCATE … RESTART IDENTITY` starts the owned sequences again), and renamed, so nothing kept by
name (a spill file, a lock) reaches the next test. Anything else is dropped, as a new schema always was.
"""
from __future__ import annotations

import atexit
import uuid
from collections.abc import Iterator

import psycopg

_READY: list[tuple[str, dict[str, str]]] = []  # this worker's migrated schemas, emptied, with their filled tables
_FRESH: list[list[tuple]] = []  # the shape of a freshly migrated schema

_SHAPE = """
SELECT 'rel', relname, relkind::text FROM pg_class WHERE relnamespace = %(s)s::text::regnamespace
UNION ALL SELECT 'trigger', t.tgname, r.relname FROM pg_trigger t JOIN pg_class r ON r.oid = t.tgrelid
          WHERE r.relnamespace = %(s)s::text::regnamespace
UNION ALL SELECT 'function', proname, md5(prosrc) FROM pg_proc WHERE pronamespace = %(s)s::text::regnamespace
UNION ALL SELECT 'owned', s.relname, t.relname FROM pg_class s
          JOIN pg_depend d ON d.objid = s.oid AND d.deptype IN ('a', 'i') JOIN pg_class t ON t.oid = d.refobjid
          WHERE s.relkind = 'S' AND s.relnamespace = %(s)s::text::regnamespace
ORDER BY 1, 2, 3"""


def url_of(server: str, schema: str) -> str:
    joiner = "&" if "?" in server else "?"
    return f"{server}{joiner}options=-csearch_path%3D{schema}"


def new_schema(server: str) -> Iterator[str]:
    """A URL whose connections use a new, empty schema; the schema is dropped afterwards."""
    schema = _name()
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield url_of(server, schema)
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def migrated_schema(server: str) -> Iterator[str]:
    """A URL whose connections use a migrated, empty schema, taken back for the next test if it can be."""
    with psycopg.connect(server, autocommit=True) as conn:
        schema, filled = _take(conn, server)
    try:
        yield url_of(server, schema)
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            _give_back(conn, schema, filled)


def _name() -> str:
    return "t_" + uuid.uuid4().hex[:16]


def _take(conn: psycopg.Connection, server: str) -> tuple[str, dict[str, str]]:
    schema = _name()
    if _READY:
        ready, filled = _READY.pop()
        conn.execute(f"ALTER SCHEMA {ready} RENAME TO {schema}")
        return schema, filled
    conn.execute(f"CREATE SCHEMA {schema}")
    import reasonlog

    reasonlog.open_store(url_of(server, schema)).close()  # migrated by the store itself
    if not _FRESH:
        _FRESH.append(_shape(conn, schema))
        atexit.register(_drop_ready, server)
    return schema, _filled(conn, schema)


def _give_back(conn: psycopg.Connection, schema: str, filled: dict[str, str]) -> None:
    """Empty the schema for the next test when it is shaped as a fresh one and its filled tables hold what the
    migrations filled them with; drop it otherwise."""
    try:
        conn.execute("SET lock_timeout = '2s'")  # a connection a test left open: drop instead of waiting on it
        if _shape(conn, schema) == _FRESH[0]:
            emptied = [t for (t,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s",
                                                  (schema,)) if t not in filled]
            conn.execute(f"TRUNCATE {', '.join(f'{schema}.{t}' for t in emptied)} RESTART IDENTITY CASCADE")
            if _digests(conn, schema, filled) == filled:
                _READY.append((schema, filled))
                return
    except psycopg.Error:
        pass
    conn.execute("SET lock_timeout = 0")
    conn.execute(f"DROP SCHEMA {schema} CASCADE")


def _shape(conn: psycopg.Connection, schema: str) -> list[tuple]:
    return conn.execute(_SHAPE, {"s": schema}).fetchall()


def _filled(conn: psycopg.Connection, schema: str) -> dict[str, str]:
    """Each table holding rows, with a digest of them all (the migrations' own rows: their bookkeeping, lookups)."""
    tables = [t for (t,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))]
    return {t: d for t, d in _digests(conn, schema, tables).items() if d is not None}


def _digests(conn: psycopg.Connection, schema: str, tables) -> dict[str, str | None]:
    return {t: conn.execute(f"SELECT count(*)::text || md5(string_agg(r::text, ',' ORDER BY r::text))"
                            f" FROM {schema}.{t} r").fetchone()[0] for t in tables}  # type: ignore[index]


def _drop_ready(server: str) -> None:
    with psycopg.connect(server, autocommit=True) as conn:
        while _READY:
            conn.execute(f"DROP SCHEMA {_READY.pop()[0]} CASCADE")
