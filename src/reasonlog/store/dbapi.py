"""What the SQL modules ask of a database connection's cursor: sqlite3's own, or PostgreSQL's `_Cursor`, which
takes the same `?` placeholders (`translate_placeholders`, here so that any module can run on a psycopg cursor
without importing the PostgreSQL store). Rows are the driver's tuples of column values."""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any, Protocol


class Connection(Protocol):
    def cursor(self) -> Cursor: ...


class Cursor(Protocol):
    def execute(self, sql: str, params: Any = ..., /) -> Cursor: ...
    def executemany(self, sql: str, rows: Iterable[Any], /) -> Cursor: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...
    @property
    def rowcount(self) -> int: ...
    @property
    def connection(self) -> Connection: ...


def insert_returning_rowids(cur, sql: str, rows: list[tuple]) -> list[int]:
    """Run `sql` (an INSERT of one row) for each row and return the rowids, in order: pipelined in one round trip
    on PostgreSQL (`_Cursor.executemany_returning`), a statement a row on SQLite (where a row costs no round trip)."""
    many = getattr(cur, "executemany_returning", None)
    if many is not None:
        return [row[0] for row in many(sql + " RETURNING rowid", [list(r) for r in rows])]
    return [cur.execute(sql + " RETURNING rowid", r).fetchall()[0][0] for r in rows]  # all: SQLite ends the statement


def binds_arrays(cur) -> bool:
    """Whether one `?` of this cursor's statements may take a list as an array (PostgreSQL's `_Cursor`); sqlite3 binds
    none."""
    return getattr(cur, "binds_arrays", False)


def ids_by_hash(cur, table: str, hashes: list[bytes]) -> dict[bytes, int]:
    """The ids of the rows of `table` (columns `id`, `hash`) that hold these hashes, 500 hashes a statement (on
    PostgreSQL one statement: the hashes as one text of hex, an array of them to the server, where the client wrote
    each out as an escaped literal, and psycopg dumps a list element by element in Python)."""
    if not hashes:
        return {}
    if binds_arrays(cur):
        listed = ",".join("\\x" + bytes(h).hex() for h in hashes)
        return {bytes(h): i for h, i in cur.execute(
            f"SELECT hash, id FROM {table} WHERE hash = ANY(string_to_array(?, ',')::bytea[])", (listed,)).fetchall()}
    found: dict[bytes, int] = {}
    for start in range(0, len(hashes), 500):
        chunk = hashes[start:start + 500]
        found.update((bytes(h), i) for h, i in cur.execute(
            f"SELECT hash, id FROM {table} WHERE hash IN ({', '.join('?' * len(chunk))})", chunk).fetchall())
    return found


# A quoted literal or identifier, whose `?` and `%` are text, not placeholders.
_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"")


def translate_placeholders(sql: str) -> str:
    """`sql` with sqlite3's `?` placeholders as psycopg's `%s` and every `%` escaped; a `?` or `%` inside a quoted
    literal or identifier stays as written (a literal's `%` is doubled, as psycopg reads it back)."""
    out, at = [], 0
    for quoted in _QUOTED.finditer(sql):
        out.append(sql[at:quoted.start()].replace("%", "%%").replace("?", "%s"))
        out.append(quoted.group().replace("%", "%%"))
        at = quoted.end()
    out.append(sql[at:].replace("%", "%%").replace("?", "%s"))
    return "".join(out)
