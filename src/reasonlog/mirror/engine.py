"""The one place that knows which ClickHouse it talks to: how to reach it, and what its version allows.

Two engines are proven by the tests: a ClickHouse server reached over its native TCP protocol with
`clickhouse-driver` (`clickhouse://HOST:PORT/DATABASE`; Debian 12's 18.16 and any current server), and `chdb`,
ClickHouse inside this process over a data folder (`chdb:///PATH`; engine 26.x; one process per folder).
`clickhouse-driver` is chosen because it speaks the native protocol that every server since 2016 answers, is kept
(releases through 2025) and needs no server-side feature that 18.16 lacks (`clickhouse-connect` asks the HTTP
interface for the `readonly` setting and fails on 18.16 with `Unknown identifier: readonly`).

The SQL the mirror sends is written once for both (String instants, Nullable columns, ReplacingMergeTree with a
version column, FINAL, arrays, LIKE). What differs by version is here: `Dialect` (LowCardinality, and the n-gram
skip index of the searched text).
"""
from __future__ import annotations

import datetime as dt
import logging
import tempfile
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import parse_qsl, unquote, urlsplit


class MirrorError(Exception):
    """The mirror cannot be reached or used: the message says what and where."""


@dataclass(frozen=True)
class Dialect:
    """What the engine's version allows."""

    version: tuple[int, ...]

    @property
    def label(self) -> str:
        """The type of a short repeated text (an agent, a model, a status): LowCardinality where it exists and
        is no longer experimental (19.9 on), else a plain String."""
        return "LowCardinality(String)" if self.version >= (19, 9) else "String"

    @property
    def nullable_label(self) -> str:
        """The same, where it may be NULL."""
        return "LowCardinality(Nullable(String))" if self.version >= (19, 9) else "Nullable(String)"

    @property
    def text_index(self) -> str:
        """The skip index of a searched text (`low`) where the engine has skip indexes without asking (21.x on;
        18.16 has none): a bloom filter of its 3-byte n-grams a granule, so that a search for a rare text reads
        the granules that may hold it and not every row."""
        return ", INDEX low_grams low TYPE ngrambf_v1(3, 16384, 2, 0) GRANULARITY 1" if self.version >= (21, 1) else ""

    @staticmethod
    def table_settings(granule: int = 8192) -> str:
        """Settings a table gets: 18.16 wants its index granularity said (newer engines default to 8,192 rows)."""
        return f" SETTINGS index_granularity = {int(granule)}"


class Engine(Protocol):
    dialect: Dialect
    database: str

    def query(self, sql: str) -> list[tuple]: ...
    def command(self, sql: str) -> None: ...
    def insert(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None: ...
    def close(self) -> None: ...


def literal(value: Any) -> str:
    """A value as a ClickHouse literal (all the mirror's queries inline their values this way, for both engines)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dt.date):
        return f"toDate('{value.isoformat()}')"
    text = str(value).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{text}'"


class ServerEngine:
    """A ClickHouse server over its native TCP protocol (clickhouse-driver)."""

    def __init__(self, host: str, port: int, database: str, user: str, password: str):
        try:
            from clickhouse_driver import Client
            # The driver logs a refused connection with its traceback before raising; the error says it once.
            logging.getLogger("clickhouse_driver").setLevel(logging.CRITICAL)
        except ImportError:
            raise MirrorError("a ClickHouse mirror needs the mirror extra: pip install 'reasonlog[mirror]'") from None
        self.database = database
        self._client = Client(host=host, port=port, user=user, password=password, connect_timeout=5,
                              send_receive_timeout=300)
        self._lock = threading.Lock()
        version = self.query("SELECT version()")[0][0]
        self.dialect = Dialect(_version(version))
        self.command(f"CREATE DATABASE IF NOT EXISTS {database}")

    def query(self, sql: str) -> list[tuple]:
        with self._lock:
            return _guarded(lambda: self._client.execute(sql))

    def command(self, sql: str) -> None:
        self.query(sql)

    def insert(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        if rows:  # by column: the driver encodes each column at once instead of walking the rows
            data = [list(c) for c in zip(*rows, strict=True)]
            with self._lock:
                _guarded(lambda: self._client.execute(
                    f"INSERT INTO {self.database}.{table} ({', '.join(columns)}) VALUES", data, columnar=True))

    def close(self) -> None:
        self._client.disconnect()


_CHDB: dict[str, Any] = {}  # one chdb session per data folder in a process (chdb allows no second)
_CHDB_LOCK = threading.Lock()


class ChdbEngine:
    """ClickHouse inside this process over a data folder (chdb)."""

    def __init__(self, path: str, database: str = "reasonlog"):
        try:
            from chdb import session
        except ImportError:
            raise MirrorError("a chdb mirror needs chdb: pip install chdb") from None
        self.database = database
        with _CHDB_LOCK:
            if path not in _CHDB:
                if _CHDB:
                    raise MirrorError(f"chdb://{path}: this process already holds the chdb mirror at"
                                      f" {next(iter(_CHDB))}; chdb opens one folder per process")
                _CHDB[path] = _guarded(lambda: session.Session(path))
            self._session = _CHDB[path]
        self.dialect = Dialect(_version(self.query("SELECT version()")[0][0]))
        self.command(f"CREATE DATABASE IF NOT EXISTS {database}")

    def query(self, sql: str) -> list[tuple]:
        with _CHDB_LOCK:
            table = _guarded(lambda: self._session.query(sql, "ArrowTable"))
        columns = [c.to_pylist() for c in table.columns]
        return list(zip(*columns, strict=True)) if columns else []

    def command(self, sql: str) -> None:
        with _CHDB_LOCK:
            _guarded(lambda: self._session.query(sql))

    def insert(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """By column, as an Arrow stream the engine reads from a file (no text to format and parse per row)."""
        if not rows:
            return
        import pyarrow as pa
        import pyarrow.ipc as ipc

        types = self._arrow_types(table)
        data = pa.table({c: pa.array(v, type=types[c]) for c, v in zip(columns, zip(*rows, strict=True),
                                                                           strict=True)})
        with tempfile.NamedTemporaryFile(suffix=".arrow") as f:
            with ipc.new_stream(f, data.schema) as out:
                out.write_table(data)
            f.flush()
            with _CHDB_LOCK:
                _guarded(lambda: self._session.query(f"INSERT INTO {self.database}.{table} ({', '.join(columns)})"
                                                     f" SELECT * FROM file({literal(f.name)}, 'ArrowStream')"))

    def _arrow_types(self, table: str) -> dict[str, Any]:
        rows = self.query(f"SELECT name, type FROM system.columns WHERE database = {literal(self.database)}"
                          f" AND table = {literal(table)}")
        return {name: _arrow_type(kind) for name, kind in rows}

    def close(self) -> None:
        pass  # the session stays for the process: chdb cannot open a second one on the folder


def _arrow_type(kind: str) -> Any:
    """The Arrow type of a mirror column's ClickHouse type (the few the mirror's tables use)."""
    import pyarrow as pa

    for wrapper in ("LowCardinality(", "Nullable("):
        if kind.startswith(wrapper):
            return _arrow_type(kind[len(wrapper):-1])
    if kind.startswith("Array("):
        return pa.list_(_arrow_type(kind[len("Array("):-1]))
    return {"String": pa.string(), "UInt64": pa.uint64(), "UInt8": pa.uint8(), "Int32": pa.int32(),
            "Float64": pa.float64(), "Date": pa.date32()}[kind]


def connect(target: str) -> Engine:
    """The engine a TARGET names: `clickhouse://[USER[:PASSWORD]@]HOST[:PORT][/DATABASE]` or
    `chdb:///PATH[?database=NAME]` (database `reasonlog` unless named)."""
    parts = urlsplit(target)
    if parts.scheme == "chdb":
        if not parts.path:
            raise MirrorError(f"{target}: expected chdb:///PATH (a folder for the mirror's data)")
        return ChdbEngine(unquote(parts.path), _database(target, dict(parse_qsl(parts.query)).get("database")))
    if parts.scheme == "clickhouse":
        database = _database(target, parts.path.strip("/"))
        try:
            return ServerEngine(parts.hostname or "127.0.0.1", parts.port or 9000, database,
                                unquote(parts.username or "default"), unquote(parts.password or ""))
        except Exception as exc:  # noqa: BLE001 - whatever stops connecting, say where
            said = _first_line(exc).removeprefix("ClickHouse: ")
            raise MirrorError(f"{shown(target)}: cannot reach ClickHouse: {said}") from None
    raise MirrorError(f"{target!r}: expected clickhouse://HOST:PORT/DATABASE or chdb:///PATH")


def _database(target: str, name: str | None) -> str:
    database = name or "reasonlog"
    if not database.replace("_", "").isalnum():
        raise MirrorError(f"{shown(target)}: the database name {database!r} may hold letters, digits and _ only")
    return database


def shown(target: str) -> str:
    """The TARGET as it may be printed: its password masked."""
    parts = urlsplit(target)
    return target.replace(f":{parts.password}@", ":***@") if parts.password else target


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".")[:3] if p.isdigit())


def _guarded(run: Any) -> Any:
    try:
        return run()
    except MirrorError:
        raise
    except Exception as exc:  # noqa: BLE001 - the engine's own errors, said in one line
        raise MirrorError(f"ClickHouse: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def values(rows: Iterable[Sequence[Any]]) -> str:
    """Rows as a VALUES list of literals (small inserts that need no driver support)."""
    return ", ".join("(" + ", ".join(literal(v) for v in row) + ")" for row in rows)
