"""The embedded default store: one SQLite file (stdlib sqlite3, WAL, FTS5)."""
from __future__ import annotations

import logging
import os
import socket
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..model import Event
from ..parts import RecordError
from . import SessionFilter, StoreError, ids, imported, keys, liveness, maintenance, opening, reading, search, transfer
from .content import Dictionaries
from .contents import ContentWriter
from .schema import SQLITE_MIGRATIONS
from .writing import Applier

MIGRATIONS_TABLE = "_reasonlog_migrations"
# Errors that say an event's own data cannot be stored, as opposed to the store failing.
DATA_ERRORS = (TypeError, ValueError, OverflowError, RecordError, sqlite3.IntegrityError)
log = logging.getLogger("reasonlog")
PAGE_SIZE = 16384
CACHE_KIB = 32768


def spill_dir(db_path: Path) -> Path:
    """Where batches that could not be written wait for the next open."""
    return db_path.with_name(db_path.name + ".spill")


def spill_dirs(db_path: Path) -> list[Path]:
    """The spill folder beside the database, then one in the user's data folder for when the database's
    own folder cannot be written (read-only, or the disk is full): both are replayed, in name order."""
    import hashlib

    import platformdirs

    absolute = os.path.abspath(db_path)
    key = hashlib.blake2b(absolute.encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()
    fallback = Path(platformdirs.user_data_dir("reasonlog", appauthor=False)) / "spill" / f"{db_path.name}-{key}"
    return [spill_dir(Path(absolute)), fallback]


class SQLiteStore:
    """A reasonlog database in one SQLite file. One connection, guarded by a lock."""

    def __init__(self, path: Path, *, busy_timeout_ms: int = 5000, upgrade: bool = True, price_table: Any = None,
                 redactor: Any = None, max_page_count: int | None = None, read_only: bool = False):
        """`read_only`: never create, migrate or write (reading commands); the file must be a current
        reasonlog database. `max_page_count` caps the file at that many pages: a test seam for a full disk."""
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}"
        self.read_only = read_only
        opening.check_path(self.path, create=not read_only)
        self._lock = threading.RLock()
        self._conn = opening.connect(self.path, read_only=read_only, timeout_s=busy_timeout_ms / 1000)
        self._dicts = Dictionaries()
        self._applier = Applier(ContentWriter(self, redactor, self._dicts), price_table)
        self._generation: int | None = None  # the content generation the caches hold (see maintenance.py)
        try:
            opening.check_reasonlog(self._conn, self.path, SQLITE_MIGRATIONS[-1].number, read_only=read_only)
        except StoreError:
            self._conn.close()
            raise
        if read_only:
            self._conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
            return
        self._configure(max_page_count)
        if upgrade:
            self.upgrade()
            self.mark_interrupted()

    def _configure(self, max_page_count: int | None) -> None:
        # Contents are blobs of a few KB: larger pages waste less of each page. Only a new file can choose.
        self._conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
        # `prune` hands freed pages back with incremental_vacuum; like page_size, only a new file takes this
        # at once (an older one on its first VACUUM).
        self._conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")  # the full-text index's merges stay in memory
        self._conn.execute("PRAGMA foreign_keys=OFF")
        if max_page_count is not None:
            self._conn.execute(f"PRAGMA max_page_count={int(max_page_count)}")

    # ------------------------------------------------------------ migrations

    def schema_version(self) -> int:
        exists = self._conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (MIGRATIONS_TABLE,)).fetchone()
        if not exists:
            return 0
        return self._conn.execute(f"SELECT COALESCE(MAX(number), 0) FROM {MIGRATIONS_TABLE}").fetchone()[0]

    def upgrade(self) -> list[int]:
        """Apply pending migrations, each in its own transaction with its bookkeeping row."""
        applied = []
        with self._lock:
            self._conn.execute(f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} (number INTEGER PRIMARY KEY,"
                               " name TEXT NOT NULL, applied_at TEXT NOT NULL)")
            current = self.schema_version()
            latest = SQLITE_MIGRATIONS[-1].number
            if current > latest:
                raise StoreError(f"{self.path}: schema {current} is newer than this reasonlog knows ({latest});"
                                 " upgrade reasonlog")
            for m in SQLITE_MIGRATIONS:
                if m.number <= current:
                    continue
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    if self.schema_version() >= m.number:  # another process got there first
                        self._conn.execute("ROLLBACK")
                        continue
                    for statement in _statements(m.sql):
                        self._conn.execute(statement)
                    if m.python is not None:
                        m.python(self._conn.cursor())
                    self._conn.execute(f"INSERT INTO {MIGRATIONS_TABLE} VALUES (?, ?, strftime('%Y-%m-%dT%H:%M:%fZ'))",
                                       (m.number, m.name))
                    self._conn.execute("COMMIT")
                except BaseException:
                    self._abandon()  # a full disk has rolled back already: raise its error, not ROLLBACK's
                    raise
                applied.append(m.number)
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
            rows = self._conn.execute("SELECT id, host, pid, live_token FROM sessions WHERE status = 'open'").fetchall()
            dead = [(sid,) for sid, host, pid, token in rows if _gone(self.path, host, pid, token)]
            if dead:
                try:
                    self._conn.executemany("UPDATE sessions SET status = 'interrupted'"
                                           " WHERE id = ? AND status = 'open'", dead)
                except sqlite3.OperationalError:  # read-only or locked: the next writer's open does it
                    return 0
        return len(dead)

    # ------------------------------------------------------------ writing

    def write_batch(self, events: list[Event], counters: dict[str, int] | None = None,
                    imports: list[dict] | None = None, batch_id: str | None = None) -> bool:
        """Apply events in order in one transaction; on a store error roll back and raise. False when
        `batch_id` names a batch written already (nothing is written again), else True.

        `imports`: rows of `import_files` (see `io/importing.py`) written in the same transaction, so
        that what an importer consumed of a file and the events it made of it commit together.

        An event whose own data cannot be stored (not JSON, a duplicate id) must not take its
        batch with it, nor every batch after it: the batch is then written again with each event
        in a savepoint, and the events that fail are counted as rejected and left out.
        """
        try:
            return self._write_batch(events, counters, imports, batch_id, isolate=False)
        except DATA_ERRORS:
            return self._write_batch(events, counters, imports, batch_id, isolate=True)

    def _write_batch(self, events: list[Event], counters: dict[str, int] | None, imports: list[dict] | None,
                     batch_id: str | None, isolate: bool) -> bool:
        with self._lock:
            cur = self._conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            if batch_id is not None and not imported.claim_batch(cur, batch_id, len(events)):
                cur.execute("COMMIT")
                return False  # this batch was written already: a retry adds nothing
            self._follow_prunes(cur)
            masked = self._applier.redactor.masked
            counters = dict(counters or {})
            try:
                marks = search.record_marks(cur)
                for event in events:
                    if isolate:
                        counters["rejected"] = counters.get("rejected", 0) + self._apply_alone(cur, event)
                    else:
                        self._applier.apply(cur, event)
                self._applier.finish(cur)
                search.index_records_since(cur, marks)
                counters["redacted"] = counters.get("redacted", 0) + self._applier.redactor.masked - masked
                self._add_counters(cur, counters)
                for row in imports or ():
                    imported.save_file(cur, row)
                cur.execute("COMMIT")
            except BaseException:
                self._applier.redactor.masked = masked
                self._abandon()
                raise
        return True

    def _abandon(self) -> None:
        """After a failed transaction, make the database and the writer's caches agree again.

        SQLite has already rolled back after SQLITE_FULL (and some I/O errors), so a ROLLBACK then
        fails; the caches must be forgotten all the same, or later calls would refer to contents
        and contexts that were never stored.
        """
        try:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the error that brought us here is the one worth raising
        finally:
            self._applier.reset()

    def _follow_prunes(self, cur) -> None:
        """A prune, here or in another process, frees content ids this writer may have cached: forget them."""
        generation = cur.execute("PRAGMA user_version").fetchone()[0]
        if generation != self._generation:
            self._applier.reset()
            self._generation = generation

    def _apply_alone(self, cur, event: Event) -> int:
        """Apply one event in a savepoint; 1 if it was rejected, else 0."""
        mark = self._applier.checkpoint()
        cur.execute("SAVEPOINT event")
        try:
            self._applier.apply(cur, event)
            self._applier.flush_rows(cur)  # inside the savepoint, so a duplicate id fails this event alone
        except DATA_ERRORS as exc:
            if not self._conn.in_transaction:  # SQLite gave up the whole transaction: the batch fails
                raise
            cur.execute("ROLLBACK TO event")
            cur.execute("RELEASE event")
            self._applier.rollback_to(mark, getattr(event, "session_id", None))
            log.warning("reasonlog rejected a %s event it could not store: %s",
                        event.kind, self._applier.redactor.text(f"{type(exc).__name__}: {exc}"))
            return 1
        cur.execute("RELEASE event")
        return 0

    def add_counters(self, counters: dict[str, int]) -> None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._add_counters(self._conn, counters)
                self._conn.execute("COMMIT")
            except BaseException:
                self._abandon()  # else the open transaction would make every later BEGIN fail
                raise

    @staticmethod
    def _add_counters(cur, counters: dict[str, int] | None) -> None:
        for name, value in (counters or {}).items():
            if value:
                cur.execute("INSERT INTO counters (name, value) VALUES (?, ?)"
                            " ON CONFLICT (name) DO UPDATE SET value = value + excluded.value", (name, value))

    # The dialect's part of writing contents (see store/contents.py: ContentBackend).

    @staticmethod
    def find_content(cur, digest: bytes) -> int | None:
        row = cur.execute("SELECT id FROM contents WHERE hash = ?", (digest,)).fetchone()
        return row[0] if row else None

    @staticmethod
    def insert_content(cur, digest: bytes, size: int, kind: str, codec: int, dict_id: int | None,
                       blob: bytes) -> int:
        cur.execute("INSERT INTO contents (hash, kind, size, codec, dict_id, data) VALUES (?,?,?,?,?,?)",
                    (digest, kind, size, codec, dict_id, blob))
        return cur.lastrowid

    @staticmethod
    def index_texts(cur, rows: list[tuple[int, str]]) -> None:
        search.index_contents(cur, rows)

    @staticmethod
    def insert_dictionary(cur, data: bytes) -> int:
        cur.execute("INSERT INTO zstd_dicts (data, trained_at) VALUES (?, strftime('%Y-%m-%dT%H:%M:%fZ'))",
                    (data,))
        return cur.lastrowid

    @staticmethod
    def latest_dictionary(cur) -> int | None:
        return cur.execute("SELECT MAX(id) FROM zstd_dicts").fetchone()[0]

    # ------------------------------------------------------------ reading

    def _read(self, fn, *args):
        with self._lock:
            cur = self._conn.cursor()
            cur.execute("BEGIN")
            try:
                return fn(cur, *args)
            finally:
                cur.execute("COMMIT")

    def list_sessions(self, flt: SessionFilter) -> list[dict]:
        return self._read(reading.list_sessions, flt)

    def list_outcomes(self, flt: SessionFilter, kind: str | None = None, session_id: str | None = None) -> list[dict]:
        """Outcomes (a trade, a move) of the sessions `flt` selects, newest first; at most `flt.limit`."""
        return self._read(reading.list_outcomes, flt, kind, session_id)

    def get_session(self, session_id: str) -> dict:
        return self._read(reading.get_session, session_id, self._dicts)

    def get_call(self, call_id: str) -> dict:
        return self._read(reading.get_call, call_id, self._dicts)

    def replay_call(self, call_id: str) -> dict:
        return self.get_call(call_id)["request"]

    def call_rows(self, flt: SessionFilter) -> Iterator[dict]:
        return iter(self._read(lambda cur: list(reading.iter_call_rows(cur, flt))))

    def search(self, text: str, flt: SessionFilter, limit: int | None = 50) -> list[dict]:
        """Messages, tool results and outcomes whose text contains `text` (see store/search.py); None: all."""
        return self._read(search.search, self._dicts, text, flt, limit)

    def resolve_id(self, kind: str, prefix: str) -> str:
        """A full session or call id from an id, a unique prefix, an external id (sessions) or `SESSION#N` (calls).

        An ambiguous prefix raises a StoreError that lists the candidates (see store/ids.py)."""
        return self._read(ids.resolve_id, kind, prefix)

    def count_sessions(self, flt: SessionFilter) -> int:
        """How many sessions the filter selects, its limit aside: `list_sessions` shows at most `flt.limit`."""
        return self._read(reading.count_sessions, flt)

    # ------------------------------------------------------------ transfer

    def export_records(self, session_ids: Iterable[str] | None = None) -> Iterator[dict]:
        return iter(self._read(lambda cur: list(transfer.export_records(cur, session_ids, self._dicts))))

    def import_records(self, records: Iterable[dict]) -> dict:
        """Import export records in one transaction, committed only once every session reads back."""
        with self._lock:
            cur = self._conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                marks = search.record_marks(cur)
                importer = transfer.Importer(cur, self._applier)
                n = importer.run(records)
                self._applier.finish(cur)
                search.index_records_since(cur, marks)
                importer.verify(self._dicts)
                cur.execute("COMMIT")
            except BaseException:
                self._abandon()
                raise
            self._applier.reset()
            return n

    # ------------------------------------------------------------ imports (see io/importing.py)

    def import_file(self, path: str) -> dict | None:
        """What earlier imports consumed of the file at `path` (absolute), or None."""
        return self._read(imported.load_file, path)

    def import_files(self) -> list[dict]:
        """Every file imported so far, newest import first."""
        return self._read(imported.list_files)

    def last_call_id(self, session_id: str) -> str | None:
        """The id of the session's last call, or None (an importer going on from it)."""
        with self._lock:
            return imported.last_call(self._conn, session_id)

    def existing_ids(self, kind: str, ids: Iterable[str]) -> set[str]:
        """Which of `ids` (of sessions, calls, tool_results or outcomes) the store holds."""
        with self._lock:  # one SELECT a chunk: no transaction around it (importers ask once a call)
            return imported.existing_ids(self._conn, kind, list(ids))

    def record_counts(self) -> dict[str, int]:
        """Rows of each kind of record: what an import reports as added."""
        with self._lock:
            return {t: self._conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                    for t in ("sessions", "calls", "messages", "tool_results", "outcomes")}

    def delete_sessions(self, session_ids: Iterable[str], forget_file: str | None = None) -> int:
        """Delete sessions and the contents only they used (a rewritten file is imported again);
        `forget_file` also drops that file's import row, in the same transaction."""
        def delete(cur) -> int:
            n = maintenance.choose_sessions_by_id(cur, list(session_ids))
            maintenance.prune(cur, self._dicts)
            if forget_file is not None:
                cur.execute("DELETE FROM import_files WHERE path = ?", (forget_file,))
            return n

        with self._lock:
            n = self._write(delete)
            self._applier.reset()  # the contents it removed may be in the writer's caches
        return n

    # ------------------------------------------------------------ API keys (see store/keys.py)

    def create_api_key(self, scope: str, name: str | None = None) -> dict:
        """A new key for `reasonlog serve`: its record and its secret, which is shown once and never stored."""
        return self._write(keys.create, scope, name)

    def list_api_keys(self) -> list[dict]:
        return self._read(keys.list_keys)

    def revoke_api_key(self, key: str) -> int:
        return self._write(keys.revoke, key)

    def api_key_scope(self, secret: str) -> str | None:
        """The scope of a working key, or None for a wrong, unknown or revoked one."""
        return self._read(keys.scope_of, secret)

    def has_api_keys(self) -> bool:
        """Whether any key was ever made (revoked ones too): then requests need a working key."""
        return self._read(keys.any_made)

    def _write(self, fn, *args):
        with self._lock:
            cur = self._conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                result = fn(cur, *args)
                cur.execute("COMMIT")
            except BaseException:
                self._abandon()
                raise
            return result

    # ------------------------------------------------------------ status

    def status(self) -> dict:
        with self._lock:
            counts = {t: self._conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                      for t in ("sessions", "calls", "messages", "contents", "outcomes")}
            counters = dict(self._conn.execute("SELECT name, value FROM counters").fetchall())
            content_bytes = self._conn.execute("SELECT COALESCE(SUM(size), 0) FROM contents").fetchone()[0]
            room = maintenance.space(self._conn, self.path)
        files = [self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")]
        folders = [d for d in spill_dirs(self.path) if d.exists()]
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
            "redacted_secrets": counters.get("redacted", 0),
            "spilled_batches": counters.get("spilled_batches", 0) + len(pending),
            "replayed_batches": counters.get("replayed_batches", 0),
            "pending_spill_files": [str(p) for p in pending],
            "unreadable_spill_files": [str(p) for p in unreadable],
            **room,  # free_bytes: pages a prune freed that the file still holds; wal_bytes
            "set_aside_records": counters.get("set_aside", 0),
            "set_aside_file": ", ".join(map(str, asides)) or None,
        }

    # ------------------------------------------------------------ care (see store/maintenance.py)

    def backup(self, dest: Path, force: bool = False) -> int:
        """A consistent copy of the database at `dest`, taken while others may write; returns its bytes."""
        with self._lock:
            return maintenance.backup(self._conn, Path(dest), force)

    def check(self) -> dict:
        """SQLite's integrity check and reasonlog's invariants: {"ok", "problems", "counts", ...}."""
        return self._read(maintenance.check, self._dicts)

    def plan_prune(self, criteria: maintenance.PruneCriteria) -> dict:
        """What `prune` would remove, removing nothing."""
        return self._read(maintenance.plan_prune, criteria)

    def prune(self, criteria: maintenance.PruneCriteria) -> dict:
        """Delete the chosen sessions and the contents only they used, then give the space back."""
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
                self._conn.execute("PRAGMA optimize")
            except sqlite3.Error:
                pass
            self._conn.close()


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


def _gone(db_path: Path, host: str | None, pid: int | None, token: str | None) -> bool:
    if token:
        return not liveness.is_held(db_path, token)
    return host == socket.gethostname() and bool(pid) and not _alive(pid)  # type: ignore[arg-type]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
