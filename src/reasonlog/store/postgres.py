"""The team store: PostgreSQL through psycopg 3, with the same behaviour as the SQLite file.

The SQL modules speak DB-API with `?` placeholders; `_Cursor` turns them into psycopg's and binds values on
the client (psycopg's `ClientCursor`), so the same statements run on both. What differs lives here: how a
transaction begins, how contents are inserted (`RETURNING id`), the full-text index (store/pg_search.py),
migrations under an advisory lock, and locks that serialise writers of one session across server processes.
"""
from __future__ import annotations

import contextlib
import functools
import os
import re
import socket
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Concatenate, Literal

import psycopg

from ..model import Event
from . import liveness, pg_prune, pg_vectors
from .dbapi import Cursor, translate_placeholders
from .pg_search import TRIGRAMS, index_words_where_missing
from .schema_pg import PG_MIGRATIONS
from .sql import P, SQLStore, T
from .targets import safe_target
from .terms import StoreError, Unavailable

if TYPE_CHECKING:
    from ..pricing import PriceTable
    from ..redact import Redactor
    from .maintenance import PruneCriteria
    from .terms import SessionFilter

MIGRATIONS_TABLE = "_reasonlog_migrations"
MIGRATION_LOCK = 0x7265_6173_6F6E  # "reason": the advisory lock key every migrating process takes
GENERATION = "content_generation"  # a counter bumped whenever contents are deleted (see `_follow_prunes`)
TABLES = ("sessions", "session_labels", "exchanges", "calls", "messages", "tool_results", "outcomes", "contents",
          "contents_search", "tool_results_search", "outcomes_search", "zstd_dicts", "counters",
          "import_files", "api_keys", "ingested_batches", "summaries", "reasoning_records",
          "reasoning_records_search", "usage_rollup", "usage_daily", "latency_daily", "latency_buckets", "unit_texts",
          "search_units", "unit_vectors", "session_vectors", "unit_marks", "annotations", MIGRATIONS_TABLE)
RECONNECT_EVERY_S = 1.0  # while the server is away, how often a use of the store tries to connect again
LIVE = "reasonlog-live:"  # + a process's token: the advisory lock each store a recording process writes through holds


class _Cursor:
    """A psycopg cursor that takes `?` placeholders, as sqlite3 does."""

    _translated: dict[str, str] = {}
    binds_arrays = True  # a list given for one `?` is an array (dbapi.binds_arrays)

    def __init__(self, conn: psycopg.Connection):
        self._conn = conn
        self._cur = psycopg.ClientCursor(conn)

    @classmethod
    def _sql(cls, sql: str) -> str:
        out = cls._translated.get(sql)
        if out is None:
            out = cls._translated[sql] = translate_placeholders(sql)
        return out

    def execute(self, sql: str, params: Iterable[object] | None = None) -> _Cursor:
        if params is None:
            self._cur.execute(sql)  # type: ignore[arg-type]
        else:
            self._cur.execute(self._sql(sql), list(params))  # type: ignore[arg-type]
        return self

    def executemany(self, sql: str, rows: Iterable[Iterable[object]]) -> _Cursor:
        """A plain INSERT of many rows is one `COPY` (`plain_insert`); any other statement is pipelined: one round trip
        for every row, bound on the server (parsed and planned once, the values sent apart, bytes as bytes), where
        `execute` binds on the client."""
        listed = [list(r) for r in rows]
        if not listed:
            return self
        target = plain_insert(sql)
        if target is not None and len(listed) > 1:
            self.copy_rows(*target, listed)
            return self
        with self._conn.cursor() as cur:
            cur.executemany(self._sql(sql), listed)  # type: ignore[arg-type]
        return self

    def executemany_returning(self, sql: str, rows: list[list[object]]) -> list[tuple | None]:
        """Run `sql` once per row, pipelined (one round trip for them all); each run's first returned row or None."""
        if not rows:
            return []
        with self._conn.cursor() as cur:  # bound on the server, as `executemany`: the blobs go as bytes
            cur.executemany(self._sql(sql), rows, returning=True)  # type: ignore[arg-type]
            return [cur.fetchone() for _ in cur.results()]

    def copy_rows(self, table: str, columns: tuple[str, ...], rows: Iterable[Sequence[object]],
                  types: Sequence[str] | None = None) -> None:
        """Insert rows with one `COPY ... FROM STDIN`: one statement for them all. With the columns' `types`, in
        PostgreSQL's binary format (bytes sent as they are)."""
        binary = " (FORMAT BINARY)" if types else ""
        # A cursor of its own, as `executemany`'s: the rows this one holds stay readable.
        with self._conn.cursor() as cur, \
                cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN{binary}") as copy:  # type: ignore[arg-type]
            if types:
                copy.set_types(list(types))
            for row in rows:
                copy.write_row(row)

    def fetchone(self):
        return self._cur.fetchone()

    def fetchall(self):
        return self._cur.fetchall()

    def __iter__(self):
        return iter(self._cur.fetchall() if self._cur.description is not None else ())

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount

    @property
    def connection(self) -> _Connection:
        return _Connection(self._conn)


_PLAIN_INSERT = re.compile(r"INSERT INTO (\w+) \(([\w, ]+)\) VALUES \((\?(?:, ?\?)*)\)")


@functools.lru_cache(maxsize=64)
def plain_insert(sql: str) -> tuple[str, tuple[str, ...]] | None:
    """(table, columns) of an INSERT of one row of `?`s and nothing else (no ON CONFLICT, no RETURNING), else None.

    Many rows of it are one `COPY` (store/postgres.py `_Cursor.executemany`): a batch's messages, calls and exchanges.
    Measured on the medium workload against a pipelined `executemany` (10,200 messages in 156 batches): client CPU
    0.13 -> 0.03 s, server 0.09 -> 0.03 s. The rows, triggers and errors are the INSERTs' (a COPY fires the same
    row triggers, and a statement trigger once, where each pipelined INSERT fired it once)."""
    m = _PLAIN_INSERT.fullmatch(sql.strip())
    if m is None:
        return None
    columns = tuple(c.strip() for c in m.group(2).split(","))
    return (m.group(1), columns) if len(columns) == m.group(3).count("?") else None


class _Connection:
    """What the SQL modules ask of `cursor.connection`: another cursor."""

    def __init__(self, conn: psycopg.Connection):
        self._conn = conn

    def cursor(self) -> _Cursor:
        return _Cursor(self._conn)


class PostgresStore(pg_vectors.PgVectorStore, SQLStore):
    """A reasonlog database in a PostgreSQL database (or the schema the URL's `options` put first on the
    search path). Several processes may open it at once: migrations wait for each other, and writers of
    the same session take turns."""

    index = TRIGRAMS
    # Whatever the server's default: the contents lock's guarantee rests on each statement seeing what committed
    # before it (store/pg_prune.py).
    BEGIN_WRITE = "BEGIN ISOLATION LEVEL READ COMMITTED"
    DATA_ERRORS = (*SQLStore.DATA_ERRORS, psycopg.errors.IntegrityError, psycopg.DataError)

    def __init__(self, url: str, *, upgrade: bool = True, price_table: PriceTable | None = None,
                 redactor: Redactor | Literal[False] | None = None, read_only: bool = False,
                 connect_timeout_s: int = 10, busy_timeout_ms: int | None = None, bulk: bool = True,
                 **_ignored: object):
        """`busy_timeout_ms`: how long a statement waits for a lock another connection holds before it fails (as
        SQLite's busy timeout: a writer then spills its batch); None waits as long as it takes.

        `bulk=False` writes each event with its own statements, as a batch rejected for one event's data always is:
        a test seam (tests/test_pg_bulk.py checks that both paths store the same), not a setting."""
        self.bulk = bulk
        self.url = url
        self._busy_timeout_ms = busy_timeout_ms
        self.path = safe_target(url)  # what messages name; never the password
        self.read_only = read_only
        self._setup_writer(price_table, redactor)
        self._generation: int | None = None
        self._holds_live = False  # whether this connection holds the process's liveness lock
        self._connect_timeout_s, self._closed, self._retry_at = connect_timeout_s, False, 0.0
        try:
            self._connection = self._connect()
        except psycopg.Error as exc:
            raise StoreError(f"{self.path}: cannot connect ({_first_line(exc)})") from None
        try:
            if upgrade and not read_only:
                with self._migrating():  # what another process migrates meanwhile is not half seen
                    self._check(read_only)
                    self.upgrade()
                self.mark_interrupted()
            else:
                self._check(read_only)
        except BaseException:
            self._connection.close()
            raise

    def _connect(self) -> psycopg.Connection:
        # Keepalives let a connection whose server vanished without a word (a host gone) be found broken.
        conn = psycopg.connect(self.url, autocommit=True, connect_timeout=self._connect_timeout_s,
                               keepalives=1, keepalives_idle=30, keepalives_interval=10, keepalives_count=3)
        pg_vectors.register(conn)
        if self._busy_timeout_ms is not None:  # set here, not in the URL's `options`, which may name a schema
            conn.execute("SELECT set_config('lock_timeout', %s, false)", (f"{int(self._busy_timeout_ms)}ms",))
        return conn

    @property
    def _conn(self) -> psycopg.Connection:
        """The connection, replaced by a new one once it broke (the server restarted or went away meanwhile;
        psycopg closes a connection it finds broken).

        While no new one can be made, each use raises psycopg's OperationalError (a store failure: the writer
        spills, the server answers 503); attempts are a second apart, so requests fail fast meanwhile."""
        conn = self._connection
        if not conn.closed or self._closed:
            return conn
        with self._lock:
            if self._connection.closed:
                self._replace_connection()
            return self._connection

    def _replace_connection(self) -> None:
        now = time.monotonic()
        if now < self._retry_at:
            raise psycopg.OperationalError(f"{self.path}: the database is away (the last attempt to reconnect"
                                           " failed less than a second ago)")
        self._retry_at = now + RECONNECT_EVERY_S
        self._connection = self._connect()  # its OperationalError says why, while the server is away
        self._retry_at = 0.0
        self._applier.reset()  # what the writer remembers may be what a lost transaction wrote
        if self._holds_live:  # the lost connection's lock went with it
            self._hold_live(_Cursor(self._connection))

    def _read(self, fn: Callable[Concatenate[Cursor, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        """A read; once more on a new connection when the one it found had broken unnoticed (a read is safe
        to repeat, and the first request after a restart need not fail)."""
        try:
            return super()._read(fn, *args, **kwargs)
        except psycopg.OperationalError:
            if self._closed or not self._connection.closed or time.monotonic() < self._retry_at:
                raise
        return super()._read(fn, *args, **kwargs)

    def change_marker(self) -> str:
        """What changes whenever a transaction anywhere on the server takes a write id or commits: the current
        snapshot (its xmin, xmax and transactions in progress). Other databases move it too: a marker that moved
        only says "look again"."""
        return self._read(lambda cur: cur.execute("SELECT pg_current_snapshot()::text").fetchone()[0])

    def _check(self, read_only: bool) -> None:
        version = self.schema_version()
        latest = PG_MIGRATIONS[-1].number
        if version == 0 and self._has_table("sessions"):
            raise StoreError(f"{self.path}: not a reasonlog database (it has no {MIGRATIONS_TABLE} table)")
        if version > latest:
            raise StoreError(f"{self.path}: schema {version} is newer than this reasonlog knows ({latest});"
                             " upgrade reasonlog")
        if read_only and version < latest:
            raise StoreError(f"{self.path}: schema {version} is older than this reasonlog reads ({latest}); "
                             "run `reasonlog db upgrade` first (reading commands never migrate)")

    def _has_table(self, name: str) -> bool:
        return self._conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()[0]  # type: ignore[index]

    def _cursor(self) -> _Cursor:
        return _Cursor(self._conn)

    def _in_transaction(self) -> bool:
        conn = self._connection  # a broken one holds no transaction, and asking must not reconnect
        return not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    @staticmethod
    def is_store_failure(exc: BaseException) -> bool:
        """Whether `exc` says the database failed (down, full, schema), not an event's data."""
        return isinstance(exc, psycopg.Error) and not isinstance(exc, PostgresStore.DATA_ERRORS)

    # ------------------------------------------------------------ migrations

    def schema_version(self) -> int:
        if not self._has_table(MIGRATIONS_TABLE):
            return 0
        return self._conn.execute(f"SELECT COALESCE(MAX(number), 0) FROM {MIGRATIONS_TABLE}").fetchone()[0]  # type: ignore[index]

    def upgrade(self) -> list[int]:
        """Apply pending migrations, each in its own transaction with its bookkeeping row. Every process takes
        the same advisory lock first, so servers started together migrate once, one after the other."""
        applied = []
        with self._migrating():
            self._conn.execute(f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} (number INTEGER PRIMARY KEY,"
                               " name TEXT NOT NULL, applied_at TEXT NOT NULL)")
            current = self.schema_version()
            for m in PG_MIGRATIONS:
                if m.number <= current:
                    continue
                with self._conn.transaction():
                    cur = self._cursor()
                    if m.sql.strip():
                        self._conn.execute(m.sql.encode())  # several statements: one simple query
                    if m.python is not None:
                        m.python(cur)
                    cur.execute(f"INSERT INTO {MIGRATIONS_TABLE} VALUES (?, ?, ?)",
                                (m.number, m.name, _now()))
                applied.append(m.number)
            if current >= 20:  # a database that recorded main's placeholder 20 gets the blocks now (pg_search.py)
                with self._conn.transaction():
                    index_words_where_missing(self._cursor())
        return applied

    @contextlib.contextmanager
    def _migrating(self) -> Iterator[None]:
        """Hold the migration lock (every reasonlog process takes the same one; held twice, released twice)."""
        with self._lock:
            self._conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
            try:
                yield
            finally:
                self._conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))

    def mark_interrupted(self) -> int:
        """Mark open sessions whose recording process is gone as interrupted: a session with a liveness token is
        alive while a connection holds its lock (from any host); one without (recorded through `reasonlog serve`,
        or before liveness by lock) while its pid lives on this host."""
        with self._lock:
            rows = self._conn.execute("SELECT id, host, pid, live_token FROM sessions WHERE status = 'open'").fetchall()
            gone: dict[tuple, bool] = {}
            for _sid, host, pid, token in rows:
                if (host, pid, token) not in gone:
                    gone[host, pid, token] = self._gone(host, pid, token)
            dead = [(sid,) for sid, host, pid, token in rows if gone[host, pid, token]]
            if dead:
                with self._conn.cursor() as cur:
                    cur.executemany("UPDATE sessions SET status = 'interrupted' WHERE id = %s AND status = 'open'",
                                    dead)
        return len(dead)

    def _gone(self, host: str | None, pid: int | None, token: str | None) -> bool:
        if not token:
            return host == socket.gethostname() and bool(pid) and not liveness.pid_alive(pid)  # type: ignore[arg-type]
        if token == liveness.process_token():
            return False  # this process is alive (and this connection may hold the lock itself)
        free = self._conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 7))", (LIVE + token,)).fetchone()
        if free and free[0]:  # nobody holds it: let it go at once, so a writer's shared hold never waits long
            self._conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 7))", (LIVE + token,))
        return bool(free and free[0])

    def _hold_live(self, cur: Cursor) -> None:
        """Hold this process's liveness lock while the connection lives: a session recorded with the process's
        token is open while some connection holds it. Shared, so every store of the process may hold it."""
        cur.execute("SELECT pg_advisory_lock_shared(hashtextextended(?, 7))", (LIVE + liveness.process_token(),))
        self._holds_live = True
        _HOLDING.add(self)

    # ------------------------------------------------------------ writing

    @contextlib.contextmanager
    def exclusive(self, name: str) -> Iterator[None]:
        """Hold the advisory lock named `name` (waiting for it): one process at a time does the work it guards."""
        with self._lock:
            self._conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 7))", (f"reasonlog:{name}",))
        try:
            yield
        finally:
            with self._lock:
                self._conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 7))", (f"reasonlog:{name}",))

    def _follow_prunes(self, cur: Cursor) -> None:
        """Hold the contents lock shared until the transaction ends, then read the content generation: a prune
        deletes no content while this writer may be naming it, and one that finished since the last batch is seen
        (store/pg_prune.py). Called after the sessions' locks (`_write_batch`), the order a prune takes them in."""
        pg_prune.hold_contents_shared(cur)
        row = cur.execute("SELECT value FROM counters WHERE name = ?", (GENERATION,)).fetchone()
        generation = row[0] if row else 0
        if generation != self._generation:
            self._applier.reset()
            self._generation = generation

    def _lock_sessions(self, cur: Cursor, events: list[Event]) -> None:
        """Writers of one session take turns (in id order, so two batches never wait for each other), and a
        writer whose memory of a session another process has since extended reads it again. A store that writes
        holds its process's liveness lock from its first batch on."""
        if not self._holds_live:
            self._hold_live(cur)
        touched = sorted({sid for ev in events if isinstance(sid := getattr(ev, "session_id", None), str)})
        # One pipelined round trip; the locks are still taken one after the other, in order.
        cur.executemany("SELECT pg_advisory_xact_lock(hashtextextended(?, 7))", [(sid,) for sid in touched])
        self._applier.revalidate(cur, touched)

    def _lock_units(self, cur: Cursor, session_id: str) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(?, 7))", (f"units:{session_id}",))

    def _rank(self, table: str, model: str, query: bytes, flt: SessionFilter, limit: int,
              exclude: str | None = None) -> list[tuple[int | str, float]]:
        from .vectors import rank_scan

        with self._lock:
            return rank_scan(self._conn, table, model, query, flt, limit, exclude)

    @staticmethod
    def insert_content(cur: Cursor, digest: bytes, size: int, kind: str, codec: int, dict_id: int | None,
                       blob: bytes) -> int:
        # Another process may be storing the same content: its row wins, and this one reads it back.
        row = cur.execute("INSERT INTO contents (hash, kind, size, codec, dict_id, data) VALUES (?,?,?,?,?,?)"
                          " ON CONFLICT (hash) DO NOTHING RETURNING id",
                          (digest, kind, size, codec, dict_id, blob)).fetchone()
        if row is None:
            row = cur.execute("SELECT id FROM contents WHERE hash = ?", (digest,)).fetchone()
        return row[0]

    @staticmethod
    def insert_contents(cur: _Cursor, rows: list[tuple[bytes, int, str, int, int | None, bytes]]) -> list[int]:  # type: ignore[override]
        """Every row in one binary `COPY`, with ids taken first from the column's sequence in the rows' order (the ids
        one INSERT a row would give them). The batch looked the digests up first, so only a content another process
        stores meanwhile stops the COPY: then, back at a savepoint, the rows go as INSERTs that leave that one to the
        other process and read its id back (`_insert_contents_racing`). Against a pipelined INSERT a row (10,200
        contents in batches of 65): client CPU 0.16-0.17 -> 0.05-0.08 s, server 0.15-0.16 -> 0.10-0.13 s."""
        ids = [i for (i,) in cur.execute(_NEW_CONTENT_IDS, (len(rows),)).fetchall()]
        cur.execute("SAVEPOINT contents")
        try:
            cur.copy_rows("contents", ("id", "hash", "kind", "size", "codec", "dict_id", "data"),
                          ((cid, digest, kind, size, codec, dict_id, blob)
                           for cid, (digest, size, kind, codec, dict_id, blob) in zip(ids, rows, strict=True)),
                          ("int8", "bytea", "text", "int8", "int4", "int8", "bytea"))
        except psycopg.errors.UniqueViolation:
            cur.execute("ROLLBACK TO SAVEPOINT contents")
            cur.execute("RELEASE SAVEPOINT contents")
            return PostgresStore._insert_contents_racing(cur, rows)
        cur.execute("RELEASE SAVEPOINT contents")
        return ids

    @staticmethod
    def _insert_contents_racing(cur: _Cursor, rows: list[tuple[bytes, int, str, int, int | None, bytes]]) -> list[int]:
        """Every row in one pipelined round trip; a content another process stored meanwhile is read back."""
        got = cur.executemany_returning(
            "INSERT INTO contents (hash, kind, size, codec, dict_id, data) VALUES (?,?,?,?,?,?)"
            " ON CONFLICT (hash) DO NOTHING RETURNING id",
            [[digest, kind, size, codec, dict_id, blob] for digest, size, kind, codec, dict_id, blob in rows])
        lost = [row[0] for row, new in zip(rows, got, strict=True) if new is None]
        theirs = PostgresStore.find_contents(cur, lost) if lost else {}
        return [new[0] if new is not None else theirs[row[0]] for row, new in zip(rows, got, strict=True)]

    @staticmethod
    def insert_dictionary(cur: Cursor, data: bytes) -> int:
        return cur.execute("INSERT INTO zstd_dicts (data, trained_at) VALUES (?, ?) RETURNING id",
                           (data, _now())).fetchone()[0]

    @staticmethod
    def latest_dictionary(cur: Cursor) -> int | None:
        return cur.execute("SELECT MAX(id) FROM zstd_dicts").fetchone()[0]

    def delete_sessions(self, session_ids: Iterable[str], forget_file: str | None = None) -> int:
        """Delete sessions and the contents only they used (a rewritten file is imported again);
        `forget_file` also drops that file's import row, in the same transaction."""
        with self._lock:
            n = self._write(pg_prune.delete_sessions, list(session_ids), forget_file)
            self._applier.reset()
        return n

    # ------------------------------------------------------------ status

    def status(self) -> dict:
        def read(cur: Cursor) -> dict:
            counts = {t: cur.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                      for t in ("sessions", "calls", "messages", "contents", "outcomes")}
            counters = dict(cur.execute("SELECT name, value FROM counters").fetchall())
            content_bytes = cur.execute("SELECT COALESCE(SUM(size), 0)::bigint FROM contents").fetchone()[0]
            return {"counts": counts, "counters": counters, "content_bytes": content_bytes}

        got = self._read(read)
        counters = got["counters"]
        return {
            "path": self.path, "url": self.path,
            "schema_version": self.schema_version(), "latest_schema_version": PG_MIGRATIONS[-1].number,
            "bytes_on_disk": self._bytes_on_disk(), "unique_content_bytes": got["content_bytes"],
            "counts": got["counts"],
            "dropped_records": counters.get("dropped", 0), "rejected_records": counters.get("rejected", 0),
            "isolated_batches": counters.get("isolated_batches", 0),
            "redacted_secrets": counters.get("redacted", 0),
            "spilled_batches": counters.get("spilled_batches", 0),
            "replayed_batches": counters.get("replayed_batches", 0),
            "pending_spill_files": [], "unreadable_spill_files": [], "free_bytes": 0, "wal_bytes": 0,
            "set_aside_records": counters.get("set_aside", 0), "set_aside_file": None,
        }

    def checkpoint(self) -> None:
        """Nothing to fold: PostgreSQL manages its own write-ahead log."""

    def backup(self, dest: Path, force: bool = False) -> int:
        raise Unavailable(f"{self.path}: back up a PostgreSQL database with its own tools (pg_dump), or copy"
                         " its sessions with `reasonlog export`")

    def check(self) -> dict:
        raise Unavailable(f"{self.path}: `db check` reads SQLite files; PostgreSQL checks its own pages"
                         " (amcheck, pg_checksums)")

    def plan_prune(self, criteria: PruneCriteria) -> dict:
        """What `prune` would remove now, removing nothing."""
        return self._read(pg_prune.plan, criteria)

    def prune(self, criteria: PruneCriteria, batch: int = pg_prune.BATCH) -> dict:
        """Remove the sessions the criteria take, `batch` sessions a transaction, while writers keep writing
        (store/pg_prune.py). PostgreSQL keeps the freed pages for new rows (autovacuum): the database does not
        shrink."""
        before = self._bytes_on_disk()
        done, after = pg_prune.Removed(), ""
        while batch_ids := self._read(pg_prune.chosen_sessions, criteria, after, batch):
            with self._lock:
                done.add(self._write(pg_prune.delete_batch, batch_ids, criteria))
                self._applier.reset()
            after = batch_ids[-1]
        return {**done.to_dict(), "file_bytes_before": before, "file_bytes_after": self._bytes_on_disk(),
                "reclaimed_by": "autovacuum"}

    def _bytes_on_disk(self) -> int:
        return self._read(lambda cur: sum(cur.execute("SELECT pg_total_relation_size(to_regclass(?))",
                                                      (t,)).fetchone()[0] or 0 for t in TABLES))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._connection.close()


_NEW_CONTENT_IDS = ("SELECT nextval(q.seq) FROM (SELECT pg_get_serial_sequence('contents', 'id')::regclass AS seq) q,"
                    " generate_series(1, ?)")
_HOLDING: weakref.WeakSet[PostgresStore] = weakref.WeakSet()  # stores whose connection holds a liveness lock


def _let_go_in_child() -> None:
    """A forked child shares its parent's connections: their sockets become /dev/null in the child (the number
    stays taken, so no file of the child's gets it), so that the parent's death ends them and frees its lock."""
    for store in list(_HOLDING):
        with contextlib.suppress(Exception):
            fd = store._connection.pgconn.socket
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, fd)
            os.close(null)
        store._holds_live = False
    _HOLDING.clear()


os.register_at_fork(after_in_child=_let_go_in_child)


def _now() -> str:
    from ..model import utc_now

    return utc_now()


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
