"""The embedded default store: one SQLite file (stdlib sqlite3, WAL; searched text in blocks: store/text_blocks.py)."""
from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from . import imported, liveness, opening
from .dbapi import Cursor
from .schema import SQLITE_MIGRATIONS, Migration
from .search_pending import PendingBlocks
from .sql import SQLStore
from .terms import StoreError
from .vectors import VectorReader

if TYPE_CHECKING:
    from ..model import Event
    from ..pricing import PriceTable
    from ..redact import Redactor
    from . import maintenance
    from .terms import SessionFilter

MIGRATIONS_TABLE = "_reasonlog_migrations"
PAGE_SIZE = 16384
CACHE_KIB = 32768
ANALYSIS_ROWS = 2000  # rows of each index `PRAGMA optimize` reads at close (see `close`)
WAL_BOUND = 1 << 20  # bytes of WAL a run of migrations leaves before it is copied into the file


def _bind_as_given() -> None:
    """Bind `bytes` and None without asking sqlite3's adapter registry about each one.

    sqlite3 binds an int, a float, a str or a bytearray as it is, and looks every other value up in its registry of
    adapters; for bytes and None the lookup fails through a formatted AttributeError (PrepareProtocol has no
    `__adapt__`), 1.5 % of the instructions of an import or a write (`budget.py`), a third of an INSERT of a
    content (hash and blob). An adapter that returns the value itself is found at once, and binds what was bound:
    bytes as a BLOB, None as NULL. The registry is the process's: one a program registered first is kept."""
    if (bytes, sqlite3.PrepareProtocol) not in sqlite3.adapters:
        sqlite3.register_adapter(bytes, bytes)  # bytes(b) is b
    if (type(None), sqlite3.PrepareProtocol) not in sqlite3.adapters:
        none: dict[None, None] = {}
        sqlite3.register_adapter(type(None), none.get)  # {}.get(None) is None: a call in C


_bind_as_given()


def spill_dir(db_path: Path) -> Path:
    """The folder beside the database where batches that could not be written wait: the database's own file, counted
    in its size and its status. Where else a recorder spills (the user's data folder) is capture's
    (`capture.spillfiles.spill_dirs`)."""
    return db_path.with_name(db_path.name + ".spill")


class SQLiteStore(SQLStore):
    """A reasonlog database in one SQLite file. One connection, guarded by a lock."""

    DATA_ERRORS = (*SQLStore.DATA_ERRORS, sqlite3.IntegrityError)
    BEGIN_WRITE = "BEGIN IMMEDIATE"

    def __init__(self, path: Path, *, busy_timeout_ms: int = 5000, upgrade: bool = True,
                 price_table: PriceTable | None = None, redactor: Redactor | Literal[False] | None = None,
                 max_page_count: int | None = None, read_only: bool = False, bulk: bool = False):
        """`read_only`: never create, migrate or write (reading commands); the file must be a current
        reasonlog database. `max_page_count` caps the file at that many pages: a test seam for a full disk.
        `bulk` is PostgreSQL's (see `PostgresStore`): a SQLite statement is no round trip, so it is ignored."""
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}"
        self.read_only = read_only
        opening.check_path(self.path, create=not read_only)
        self._setup_writer(price_table, redactor)
        self._conn = opening.connect(self.path, read_only=read_only, timeout_s=busy_timeout_ms / 1000)
        self._vectors = VectorReader(self.path)  # sqlite-vec's connection, opened by the first vector search
        self._generation: int | None = None  # the content generation the caches hold (see maintenance.py)
        self._checked: dict[str, int] = {}  # session id -> PRAGMA data_version when its state was last checked
        self.index = PendingBlocks()  # text written to blocks in bulk (store/search_pending.py)
        self._seen_version: int | None = None  # PRAGMA data_version at this object's last write
        try:
            opening.check_reasonlog(self._conn, self.path, SQLITE_MIGRATIONS[-1].number, read_only=read_only)
        except StoreError:
            self._conn.close()
            raise
        if read_only:
            self._conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
            self._show_interrupted()
            return
        self._configure(max_page_count)
        if upgrade:
            self.upgrade()
        # After the upgrade: a new file makes its schema through a rollback journal, which writes each page once, into
        # the file. Through the WAL, every page went into the WAL, then again into the file: a new file's one
        # transaction needed twice its size of disk (tests/test_store_faults.py's small disk refused it), and the copy
        # its CPU.
        self._conn.execute("PRAGMA journal_mode=WAL")
        if upgrade:
            self.mark_interrupted()

    def _configure(self, max_page_count: int | None) -> None:
        # Contents are blobs of a few KB: larger pages waste less of each page. Only a new file can choose.
        self._conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
        # `prune` hands freed pages back with incremental_vacuum; like page_size, only a new file takes this
        # at once (an older one on its first VACUUM).
        self._conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")  # a batch's hot pages (tables, indexes) stay in memory
        self._conn.execute("PRAGMA foreign_keys=OFF")
        if max_page_count is not None:
            self._conn.execute(f"PRAGMA max_page_count={int(max_page_count)}")

    # ------------------------------------------------------------ migrations

    def schema_version(self) -> int:
        exists = self._conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (MIGRATIONS_TABLE,)).fetchone()
        if not exists:
            return 0
        return self._conn.execute(f"SELECT COALESCE(MAX(number), 0) FROM {MIGRATIONS_TABLE}").fetchone()[0]

    def change_marker(self) -> tuple[int, int]:
        """What changes whenever the database does: SQLite's `data_version` (another connection committed) and
        this connection's own count of changed rows (a store that both writes and reads sees its own writes)."""
        with self._lock:
            return self._conn.execute("PRAGMA data_version").fetchone()[0], self._conn.total_changes

    def _bound_wal(self) -> None:
        """Copy what the WAL holds into the file once it passes `WAL_BOUND` bytes, so that the next transaction
        writes the WAL from its start again: every migration rewrites the schema's pages, and a run of them (26, when a
        new file made its schema through the WAL) wrote 3.4 MB of WAL for a file of 1.4 MB."""
        try:
            big = os.path.getsize(f"{self.path}-wal") > WAL_BOUND
        except OSError:
            return
        if big:
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()  # never waits for a reader

    def upgrade(self) -> list[int]:
        """Apply pending migrations, each in its own transaction with its bookkeeping row; a new file takes them all
        in one (`_migrate`)."""
        applied: list[int] = []
        with self._lock:
            self._conn.execute(f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} (number INTEGER PRIMARY KEY,"
                               " name TEXT NOT NULL, applied_at TEXT NOT NULL)")
            current = self.schema_version()
            latest = SQLITE_MIGRATIONS[-1].number
            if current > latest:
                raise StoreError(f"{self.path}: schema {current} is newer than this reasonlog knows ({latest});"
                                 " upgrade reasonlog")
            pending = [m for m in SQLITE_MIGRATIONS if m.number > current]
            for group in [pending] if current == 0 else [[m] for m in pending]:
                applied += self._migrate(group)
                self._bound_wal()
            if applied and self._conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2:
                # What a migration dropped (migration 26: the trigram tables, a new file's included) goes back to the
                # file system; executescript steps the pragma to its end.
                self._conn.executescript("PRAGMA incremental_vacuum;")
        return applied

    def _migrate(self, migrations: list[Migration]) -> list[int]:
        """Apply `migrations` in one transaction, each with its bookkeeping row, but those another process applied
        first. A new file takes all of them at once: it holds nothing a migration could take long over, and a commit
        for each (an fsync, the schema's pages written again) cost more than the migrations themselves; a file that
        fails half way is still new."""
        applied = []
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            current = self.schema_version()
            for m in migrations:
                if m.number <= current:  # another process got there first
                    continue
                for statement in _statements(m.sql):
                    self._conn.execute(statement)
                if m.python is not None:
                    m.python(self._conn.cursor())
                self._conn.execute(f"INSERT INTO {MIGRATIONS_TABLE} VALUES (?, ?, strftime('%Y-%m-%dT%H:%M:%fZ'))",
                                   (m.number, m.name))
                applied.append(m.number)
            self._conn.execute("COMMIT")
        except BaseException:
            self._abandon()  # a full disk has rolled back already: raise its error, not ROLLBACK's
            raise
        return applied

    @staticmethod
    def is_store_failure(exc: BaseException) -> bool:
        """Whether `exc` says the database failed (locked, read-only, full, schema), not an event's data."""
        return isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.IntegrityError)

    def mark_interrupted(self) -> int:
        """Mark open sessions whose recording process is gone as interrupted.

        A session with a liveness token is alive while its lock is held (on any host or pid
        namespace sharing this file system); one without (before schema 5) while its pid lives
        on this host. A read-only database is left as it is.
        """
        with self._lock:
            dead = [(sid,) for sid in self._dead_sessions()]
            if dead:
                try:
                    self._conn.executemany("UPDATE sessions SET status = 'interrupted'"
                                           " WHERE id = ? AND status = 'open'", dead)
                except sqlite3.OperationalError:  # read-only or locked: the next writer's open does it
                    return 0
        return len(dead)

    def _dead_sessions(self) -> list[str]:
        """The open sessions whose recording process is gone (each process's lock is tried once)."""
        rows = self._conn.execute("SELECT id, host, pid, live_token FROM sessions WHERE status = 'open'").fetchall()
        gone: dict[tuple, bool] = {}
        for _sid, host, pid, token in rows:
            if (host, pid, token) not in gone:
                gone[host, pid, token] = _gone(self.path, host, pid, token, clean=not self.read_only)
        return [sid for sid, host, pid, token in rows if gone[host, pid, token]]

    def _show_interrupted(self) -> None:
        """Show a reader the sessions of dead recorders as interrupted, writing nothing.

        A reader may not mark them, so this connection gets a temporary view named `sessions` that says
        `interrupted` for them: temporary objects live in the connection's own memory, and SQLite looks
        a name up in `temp` before `main`, so every read (filters by status included) sees the view.
        """
        dead = self._dead_sessions()
        if not dead:
            return
        columns = [row[1] for row in self._conn.execute("PRAGMA main.table_info(sessions)")]
        shown = ", ".join(_INTERRUPTED_IF_DEAD if c == "status" else f'"{c}"' for c in columns)
        self._conn.execute("CREATE TEMP TABLE dead_sessions (id TEXT PRIMARY KEY)")
        self._conn.executemany("INSERT INTO temp.dead_sessions VALUES (?)", [(sid,) for sid in dead])
        self._conn.execute(f"CREATE TEMP VIEW sessions AS SELECT {shown} FROM main.sessions")

    # ------------------------------------------------------------ writing

    @contextlib.contextmanager
    def exclusive(self, name: str) -> Iterator[None]:
        """Hold `<db>.<name>.lock` (waiting for it): one process at a time does the work it guards."""
        with open(f"{self.path}.{name}.lock", "a+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _follow_prunes(self, cur: Cursor) -> None:
        generation = cur.execute("PRAGMA user_version").fetchone()[0]
        if generation != self._generation:
            self._applier.reset()
            self._generation = generation
            self.index.forget()
        version = cur.execute("PRAGMA data_version").fetchone()[0]
        if version != self._seen_version:  # another connection wrote: what waits to be indexed may have changed
            self.index.forget()
            self._seen_version = version

    def _abandon(self) -> None:
        self.index.forget()
        super()._abandon()

    def _lock_sessions(self, cur: Cursor, events: list[Event]) -> None:
        """BEGIN IMMEDIATE already serialises writers. A writer whose memory of a session another connection has
        since extended reads it again (`Applier.revalidate`), else its rows collide with that connection's and its
        batch is written again event by event; asked only of the sessions checked before another connection's last
        commit (`PRAGMA data_version` moves only then), so a lone writer asks nothing."""
        version = cur.execute("PRAGMA data_version").fetchone()[0]
        touched = {sid for ev in events if isinstance(sid := getattr(ev, "session_id", None), str)}
        stale = sorted(sid for sid in touched if self._checked.get(sid) != version)
        if not stale:
            return
        self._applier.revalidate(cur, stale)
        if len(self._checked) > 100_000:  # sessions long ended: checking one again costs one query
            self._checked.clear()
        self._checked.update(dict.fromkeys(stale, version))

    # The dialect's part of writing contents (see store/contents.py: ContentBackend).

    @staticmethod
    def insert_content(cur: sqlite3.Cursor, digest: bytes, size: int, kind: str, codec: int, dict_id: int | None,
                       blob: bytes) -> int:
        cur.execute("INSERT INTO contents (hash, kind, size, codec, dict_id, data) VALUES (?,?,?,?,?,?)",
                    (digest, kind, size, codec, dict_id, blob))
        return _inserted(cur)

    def add_content(self, cur: sqlite3.Cursor, digest: bytes, size: int, kind: str,  # type: ignore[override]
                    codec: int, dict_id: int | None, blob: bytes) -> tuple[int, bool]:
        """`SQLStore.add_content` in one statement when the content is new (as it nearly always is when asked):
        a row not inserted uses up no rowid, so the ids are those of a lookup and an insert."""
        cur.execute("INSERT INTO contents (hash, kind, size, codec, dict_id, data) VALUES (?,?,?,?,?,?)"
                    " ON CONFLICT (hash) DO NOTHING", (digest, kind, size, codec, dict_id, blob))
        if cur.rowcount == 1:
            return _inserted(cur), True
        stored = self.find_content(cur, digest)  # the conflict: a row holds this hash
        assert stored is not None
        return stored, False

    @staticmethod
    def insert_dictionary(cur: sqlite3.Cursor, data: bytes) -> int:
        cur.execute("INSERT INTO zstd_dicts (data, trained_at) VALUES (?, strftime('%Y-%m-%dT%H:%M:%fZ'))",
                    (data,))
        return _inserted(cur)

    @staticmethod
    def latest_dictionary(cur: Cursor) -> int | None:
        return cur.execute("SELECT MAX(id) FROM zstd_dicts").fetchone()[0]

    def _write_batch(self, events: list[Event], counters: dict[str, int] | None, batch_id: str | None,
                     isolate: bool, rejections: list[tuple[int, str]] | None = None) -> bool:
        """A batch with its statement journals in memory. A calls row is inserted by a statement that may abort
        after its trigger wrote (`latency_daily_insert`), so SQLite keeps the pages it changes in a statement
        journal, in a temporary file past 64 KiB: four of our 16 KiB pages. Every calls row wrote about 86 KB
        there (231 MB for a 34 MB import, a fifth of its system CPU). Only around the batch: a VACUUM or a large
        read's temporary tables stay on disk."""
        with self._lock:
            memory = not self._conn.in_transaction  # (temp_store cannot change inside a transaction)
            if memory:
                self._conn.execute("PRAGMA temp_store=MEMORY")
            try:
                return super()._write_batch(events, counters, batch_id, isolate, rejections)
            finally:
                if memory and not self._conn.in_transaction:
                    self._conn.execute("PRAGMA temp_store=DEFAULT")

    # ------------------------------------------------------------ imports: the hot reads, without a transaction

    def last_call_id(self, session_id: str) -> str | None:
        """The id of the session's last call, or None (an importer going on from it)."""
        with self._lock:
            return imported.last_call(self._conn, session_id)

    def existing_ids(self, kind: str, ids: Iterable[str]) -> set[str]:
        """Which of `ids` (of sessions, calls, tool_results or outcomes) the store holds."""
        with self._lock:  # one SELECT a chunk: no transaction around it (importers ask once a call)
            return imported.existing_ids(self._conn, kind, list(ids))

    def delete_sessions(self, session_ids: Iterable[str], forget_file: str | None = None) -> int:
        """Delete sessions and the contents only they used (a rewritten file is imported again);
        `forget_file` also drops that file's import row, in the same transaction."""
        from . import maintenance

        def delete(cur: Cursor) -> int:
            n = maintenance.choose_sessions_by_id(cur, list(session_ids))
            maintenance.prune(cur, self._dicts)
            if forget_file is not None:
                cur.execute("DELETE FROM import_files WHERE path = ?", (forget_file,))
            return n

        with self._lock:
            n = self._write(delete)
            self._applier.reset()  # the contents it removed may be in the writer's caches
        return n

    # ------------------------------------------------------------ status

    def status(self) -> dict:
        from . import maintenance

        with self._lock:
            counts = {t: self._conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                      for t in ("sessions", "calls", "messages", "contents", "outcomes")}
            counters = dict(self._conn.execute("SELECT name, value FROM counters").fetchall())
            content_bytes = self._conn.execute("SELECT COALESCE(SUM(size), 0) FROM contents").fetchone()[0]
            room = maintenance.space(self._conn, self.path)
        files = [self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")]
        folders = [d for d in [spill_dir(self.path)] if d.exists()]
        pending = sorted((p for d in folders for p in d.glob("*.spill")), key=lambda p: p.name)
        unreadable = sorted(p for d in folders for p in d.glob("*.bad"))
        asides = [d / "set-aside.jsonl" for d in folders if (d / "set-aside.jsonl").exists()]
        return {
            "path": str(self.path), "url": self.url,
            "schema_version": self.schema_version(), "latest_schema_version": SQLITE_MIGRATIONS[-1].number,
            "bytes_on_disk": (sum(f.stat().st_size for f in files if f.exists())
                              + sum(p.stat().st_size for p in pending)),
            "unique_content_bytes": content_bytes, "counts": counts,
            "dropped_records": counters.get("dropped", 0), "rejected_records": counters.get("rejected", 0),
            "isolated_batches": counters.get("isolated_batches", 0),
            "redacted_secrets": counters.get("redacted", 0),
            "spilled_batches": counters.get("spilled_batches", 0) + len(pending),
            "replayed_batches": counters.get("replayed_batches", 0),
            "pending_spill_files": [str(p) for p in pending],
            "unreadable_spill_files": [str(p) for p in unreadable],
            **room,  # free_bytes: pages a prune freed that the file still holds; wal_bytes
            "set_aside_records": counters.get("set_aside", 0),
            "set_aside_file": ", ".join(map(str, asides)) or None,
        }

    def _rank(self, table: str, model: str, query: bytes, flt: SessionFilter, limit: int,
              exclude: str | None = None) -> list[tuple[int | str, float]]:
        return self._vectors.rank(table, model, query, flt, limit, exclude)

    # ------------------------------------------------------------ care (see store/maintenance.py)

    def backup(self, dest: Path, force: bool = False) -> int:
        """A consistent copy of the database at `dest`, taken while others may write; returns its bytes."""
        from . import maintenance

        with self._lock:
            return maintenance.backup(self._conn, Path(dest), force)

    def check(self) -> dict:
        """SQLite's integrity check and reasonlog's invariants: {"ok", "problems", "counts", ...}."""
        from . import maintenance

        return self._read(maintenance.check, self._dicts)

    def plan_prune(self, criteria: maintenance.PruneCriteria) -> dict:
        """What `prune` would remove, removing nothing."""
        from . import maintenance

        return self._read(maintenance.plan_prune, criteria)

    def prune(self, criteria: maintenance.PruneCriteria) -> dict:
        """Delete the chosen sessions and the contents only they used, then give the space back."""
        from . import maintenance

        with self._lock:
            before = maintenance.settle(self._conn)
            cur = self._conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                plan = maintenance.plan_prune(cur, criteria)
                maintenance.prune(cur, self._dicts)
                cur.execute("COMMIT")
            except BaseException:
                self._abandon()
                raise
            self._applier.reset()
            plan["reclaimed_by"] = maintenance.reclaim(self._conn)
        return {**plan, "file_bytes_before": before, "file_bytes_after": self.path.stat().st_size}

    def checkpoint(self) -> None:
        """Fold the WAL into the database file (so its size on disk is the data's)."""
        with self._lock:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        with self._lock:
            try:
                self._index_waiting()
                # `optimize` runs ANALYZE on the tables this connection searched whose statistics are missing or 25
                # times out of date: on a large file a scan of every index of `calls`, `contents`... at close. A limit
                # makes each index's statistics a sample of about that many rows (https://sqlite.org/lang_analyze.html,
                # section 1; SQLite 3.46 sets 2000 for `optimize` itself).
                self._conn.execute(f"PRAGMA analysis_limit={ANALYSIS_ROWS}")
                self._conn.execute("PRAGMA optimize")
            except sqlite3.Error:
                pass
            self._conn.close()
            self._vectors.close()

    def _index_waiting(self) -> None:
        """Write what this object left waiting to blocks (store/search_pending.py): a file closed by its only writer
        leaves nothing waiting."""
        if self.read_only or not self.index.texts:
            return

        def index(cur: Cursor) -> int:
            self._follow_prunes(cur)
            return self.index.catch_up(cur)

        try:
            self._write(index)
        except (StoreError, sqlite3.Error):
            self.index.forget()  # read only on disk, full, locked: what waits is still found, indexed by a later write


def _inserted(cur: sqlite3.Cursor) -> int:
    """The rowid the INSERT just run on `cur` gave its row (sqlite3 types it as maybe None: before any INSERT)."""
    rowid = cur.lastrowid
    assert rowid is not None
    return rowid


def _statements(sql: str) -> list[str]:
    """Split a migration into statements, letting SQLite say where each one is complete."""
    out, pending = [], ""
    for line in sql.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            out.append(pending.strip())
            pending = ""
    if pending.strip() and not all(ln.strip().startswith("--") or not ln.strip() for ln in pending.splitlines()):
        raise StoreError(f"migration ends with an incomplete statement: {pending.strip()[:80]}")
    return out


_INTERRUPTED_IF_DEAD = ("CASE WHEN status = 'open' AND id IN (SELECT id FROM temp.dead_sessions)"
                        " THEN 'interrupted' ELSE status END AS status")


def _gone(db_path: Path, host: str | None, pid: int | None, token: str | None, clean: bool = True) -> bool:
    if token:
        return not liveness.is_held(db_path, token, clean)
    return host == socket.gethostname() and bool(pid) and not liveness.pid_alive(pid)  # type: ignore[arg-type]
