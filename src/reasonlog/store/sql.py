"""What the SQL stores share: batches in one transaction, the readers, transfer, imports and API keys.

`SQLiteStore` and `PostgresStore` differ in how they connect, migrate, begin a transaction, store a content
and index text; everything here speaks DB-API with `?` placeholders through the modules beside it
(reading, writing, search, transfer, imported, keys, ids), which hold the SQL.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, Concatenate, Literal, ParamSpec, TypeVar

from ..model import Event
from ..wire.api import OutcomeJSON, ReasoningRecordJSON, SessionDetailJSON, SessionJSON
from ..wire.rules import RecordError
from . import ids, imported, kept, keys, mirrored, overview, reading, records, search, usage
from .answers import CallDetail
from .content import Dictionaries
from .dbapi import Cursor, ids_by_hash
from .reviews import AnnotationStore
from .semantic import SemanticStore
from .targets import safe_target
from .terms import ReadOnlyDatabase, SessionFilter

log = logging.getLogger("reasonlog")
P = ParamSpec("P")
T = TypeVar("T")

if TYPE_CHECKING:
    from ..pricing import PriceTable
    from ..redact import Redactor
    from .rollups import DayUsage
    from .writing import Applier


class SQLStore(SemanticStore, AnnotationStore):
    """The dialect-neutral part of a reasonlog store. One connection, guarded by a lock.

    A subclass sets `_conn`, `url`, `index` (its full-text index, see store/search.py) and `DATA_ERRORS`
    (errors that say an event's own data cannot be stored, as opposed to the store failing), and provides
    the content backend (`find_content`, `insert_content`, `insert_dictionary`, `latest_dictionary`).
    """

    url: str
    read_only: bool = False  # opened for reading: every write is refused with ReadOnlyDatabase
    _conn: Any
    index: Any = search.BLOCKS
    DATA_ERRORS: ClassVar[tuple[type[BaseException], ...]] = (TypeError, ValueError, OverflowError, RecordError)
    BEGIN_WRITE = "BEGIN"
    BEGIN_READ = "BEGIN"
    # Whether a batch stores its new contents, and finds the sessions it starts that the store lacks, in a few
    # statements before its events are applied (see `Applier.prepare`); else each content is looked up as it comes,
    # which costs SQLite nothing. Either way a batch's possible twins are read once, before its events.
    bulk: bool = False

    def _setup_writer(self, price_table: PriceTable | None, redactor: Redactor | Literal[False] | None) -> None:
        self._lock = threading.RLock()
        self._dicts = Dictionaries()
        self._writer_of: tuple[PriceTable | None, Redactor | Literal[False] | None] = (price_table, redactor)
        self._writer: Applier | None = None
        self.rejected_events = 0  # events this store object left out of committed batches (their data's fault)

    @property
    def _applier(self) -> Applier:
        """The writer, made on first use: a store opened to read never imports the write path (store/writing.py, the
        redactor), which was a quarter of the CPU of a search from the command line (docs/performance.md)."""
        if self._writer is None:
            from .contents import ContentWriter
            from .writing import Applier

            price_table, redactor = self._writer_of
            self._writer = Applier(ContentWriter(self, redactor, self._dicts), price_table)  # type: ignore[arg-type]
        return self._writer

    # ------------------------------------------------------------ the dialect's part

    def _cursor(self) -> Cursor:
        return self._conn.cursor()

    def _in_transaction(self) -> bool:
        return self._conn.in_transaction

    def _follow_prunes(self, cur: Cursor) -> None:
        """A prune elsewhere may have freed content ids the writer cached: forget them (see maintenance.py)."""

    def _lock_sessions(self, cur: Cursor, events: list[Event]) -> None:
        """Serialise writers of the same sessions across processes, where BEGIN alone does not."""

    def _abandon(self) -> None:
        """After a failed transaction, make the database and the writer's caches agree again."""
        try:
            if self._in_transaction():
                self._conn.execute("ROLLBACK")
        except Exception:  # noqa: BLE001 - the error that brought us here is the one worth raising
            pass
        finally:
            self._applier.reset()

    @staticmethod
    def find_content(cur: Cursor, digest: bytes) -> int | None:
        row = cur.execute("SELECT id FROM contents WHERE hash = ?", (digest,)).fetchone()
        return row[0] if row else None

    def add_content(self, cur: Cursor, digest: bytes, size: int, kind: str, codec: int, dict_id: int | None,
                    blob: bytes) -> tuple[int, bool]:
        """The id of the content of `digest`, inserted from these columns unless the store holds it; and whether it
        was inserted. A lookup, then an insert (an INSERT that meets a stored hash would use up an identity value)."""
        cid = self.find_content(cur, digest)
        if cid is not None:
            return cid, False
        return self.insert_content(cur, digest, size, kind, codec, dict_id, blob), True  # type: ignore[attr-defined]

    @staticmethod
    def find_contents(cur: Cursor, digests: list[bytes]) -> dict[bytes, int]:
        """The ids of the contents of these digests that the store holds."""
        return ids_by_hash(cur, "contents", digests)

    def insert_contents(self, cur: Cursor, rows: list[tuple[bytes, int, str, int, int | None, bytes]]) -> list[int]:
        """Insert contents (digest, size, kind, codec, dict_id, data) in order; their ids."""
        return [self.insert_content(cur, digest, size, kind, codec, dict_id, blob)  # type: ignore[attr-defined]
                for digest, size, kind, codec, dict_id, blob in rows]

    def index_texts(self, cur: Cursor, rows: list[tuple[int, str]]) -> None:
        search.index_contents(cur, rows, self.index)

    # ------------------------------------------------------------ writing

    def write_batch(self, events: list[Event], counters: dict[str, int] | None = None, *,
                    batch_id: str | None = None, rejections: list[tuple[int, str]] | None = None) -> bool:
        """Apply events in order in one transaction; on a store error roll back and raise. False when
        `batch_id` names a batch written already (nothing is written again), else True.

        An import's progress travels as `FileImported` events in the batch of the events it made of the file
        (see `io/importing.py`), so the two commit together.

        An event whose own data cannot be stored (not JSON, a duplicate id) must not take its
        batch with it, nor every batch after it: the batch is then written again with each event
        in a savepoint, and the events that fail are counted as rejected and left out; `rejections`,
        when given, gets (the event's index, why) for each (the server tells its client).
        """
        if self.read_only:
            raise ReadOnlyDatabase(self.shown_target())
        try:
            return self._write_batch(events, counters, batch_id, isolate=False)
        except self.DATA_ERRORS:
            return self._write_batch(events, counters, batch_id, isolate=True, rejections=rejections)

    def _write_batch(self, events: list[Event], counters: dict[str, int] | None, batch_id: str | None,
                     isolate: bool, rejections: list[tuple[int, str]] | None = None) -> bool:
        with self._lock:
            cur = self._cursor()
            cur.execute(self.BEGIN_WRITE)
            masked = self._applier.redactor.masked
            try:
                if batch_id is not None and not imported.claim_batch(cur, batch_id, len(events)):
                    cur.execute("COMMIT")
                    return False  # this batch was written already: a retry adds nothing
                self._lock_sessions(cur, events)
                self._follow_prunes(cur)  # after the sessions' locks: the order a prune takes its locks in
                counters = dict(counters or {})
                self._applier.completed.clear()
                self._applier.take_records()  # what an abandoned batch noted is not this one's
                self._applier.prepare(cur, events, bulk=self.bulk and not isolate)
                rejected = 0
                for index, event in enumerate(events):
                    if isolate:
                        reason = self._apply_alone(cur, event)
                        rejected += reason is not None
                        if reason is not None and rejections is not None:
                            rejections.append((index, reason))
                    else:
                        self._applier.apply(cur, event)
                counters["rejected"] = counters.get("rejected", 0) + rejected
                counters["isolated_batches"] = counters.get("isolated_batches", 0) + int(isolate)
                self._applier.finish(cur)
                search.index_records(cur, self._applier.take_records(), self.index)
                search.drop_held_reasoning(cur, self._applier.completed, self.index)
                counters["redacted"] = counters.get("redacted", 0) + self._applier.redactor.masked - masked
                self._add_counters(cur, counters)
                cur.execute("COMMIT")
            except BaseException:
                self._applier.redactor.masked = masked
                self._abandon()
                raise
            self.rejected_events += rejected
        return True

    def _apply_alone(self, cur: Cursor, event: Event) -> str | None:
        """Apply one event in a savepoint; why it was rejected, or None."""
        mark = self._applier.checkpoint()
        cur.execute("SAVEPOINT event")
        try:
            self._applier.apply(cur, event)
            self._applier.flush_rows(cur)  # inside the savepoint, so a duplicate id fails this event alone
        except self.DATA_ERRORS as exc:
            if not self._in_transaction():  # the database gave up the whole transaction: the batch fails
                raise
            cur.execute("ROLLBACK TO SAVEPOINT event")
            cur.execute("RELEASE SAVEPOINT event")
            self._applier.rollback_to(mark, getattr(event, "session_id", None))
            reason = self._applier.redactor.text(f"{type(exc).__name__}: {exc}")
            log.warning("reasonlog rejected a %s event it could not store: %s", event.kind, reason)
            return reason
        cur.execute("RELEASE SAVEPOINT event")
        return None

    def add_counters(self, counters: dict[str, int]) -> None:
        self._write(self._add_counters, counters)

    @staticmethod
    def _add_counters(cur: Cursor, counters: dict[str, int] | None) -> None:
        for name, value in (counters or {}).items():
            if value:
                cur.execute("INSERT INTO counters (name, value) VALUES (?, ?)"
                            " ON CONFLICT (name) DO UPDATE SET value = counters.value + excluded.value",
                            (name, value))

    def shown_target(self) -> str:
        """The database as messages name it: the file, or the URL without its password."""
        path = getattr(self, "path", None)
        return str(path) if path is not None else safe_target(self.url)

    def _write(self, fn: Callable[Concatenate[Cursor, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        if self.read_only:
            raise ReadOnlyDatabase(self.shown_target())
        with self._lock:
            cur = self._cursor()
            cur.execute(self.BEGIN_WRITE)
            try:
                result = fn(cur, *args, **kwargs)
                cur.execute("COMMIT")
            except BaseException:
                self._abandon()
                raise
            return result

    # ------------------------------------------------------------ reading

    def _read(self, fn: Callable[Concatenate[Cursor, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        with self._lock:
            cur = self._cursor()
            cur.execute(self.BEGIN_READ)
            try:
                return fn(cur, *args, **kwargs)
            finally:
                cur.execute("COMMIT")

    def list_sessions(self, flt: SessionFilter) -> list[SessionJSON]:
        if flt.text is None:
            return self._read(reading.list_sessions, flt)

        def found(cur: Cursor) -> list[SessionJSON]:
            ids = search.matching_sessions(cur, self._dicts, flt, self.index)
            return reading.list_sessions(cur, SessionFilter(limit=None), ids) if ids else []
        return self._read(found)

    def list_outcomes(self, flt: SessionFilter, kind: str | None = None,
                      session_id: str | list[str] | None = None) -> list[OutcomeJSON]:
        """Outcomes (a trade, a move) of the sessions `flt` selects (and `session_id`: one id, or a list of ids),
        newest first; at most `flt.limit`."""
        return self._read(reading.list_outcomes, flt, kind, session_id)

    def session_row(self, session_id: str) -> SessionJSON:
        """The session's row with its totals, as `list_sessions` gives it: no timeline, no calls."""
        return self._read(reading.session_row, session_id)

    def get_session(self, session_id: str, page: tuple[int, int] | None = None) -> SessionDetailJSON:
        """The session; with `page` (first, end), only its timeline entries with idx in [first, end)."""
        return self._read(reading.get_session, session_id, self._dicts, page)

    def in_timeline(self, session_ids: Iterable[str], content_ids: Iterable[int]) -> set[int]:
        """Which of these contents (a call's `context_ids`) are entries of these sessions' timelines."""
        return self._read(reading.in_timeline, list(session_ids), list(content_ids))

    def count_messages(self, session_ids: Iterable[str]) -> dict[str, int]:
        """Messages (timeline entries whose role is not system) of each of these sessions."""
        return self._read(reading.count_messages, list(session_ids))

    def get_call(self, call_id: str) -> CallDetail:
        return self._read(reading.get_call, call_id, self._dicts)

    def call_details(self, call_ids: Sequence[str]) -> list[CallDetail]:
        """`get_call` of each, in the order asked: each session's chain of contexts decoded once, so a session's
        every call costs one pass over it, not one per call (replay, export)."""
        return self._read(reading.call_details, list(call_ids), self._dicts)

    def first_prompts(self, session_ids: Iterable[str]) -> dict[str, object]:
        """Each session's first user message as stored, by session id (see store/overview.py)."""
        return self._read(overview.first_prompts, self._dicts, list(session_ids))

    def get_spans(self, session_id: str, page: tuple[int, int]) -> dict:
        """The session's calls in `page` as time spans, with recorded tool runs and the sub-agents they spawned,
        nested (see store/overview.py): what a timeline draws, read without the session's messages."""
        return self._read(overview.session_spans, self._dicts, session_id, page)

    def get_calls(self, session_id: str, page: tuple[int, int]) -> list[dict]:
        """The session's calls whose idx is in `page` [first, end), each with its reply (`response`), read without
        the session's timeline or any context (see store/overview.py)."""
        return self._read(overview.session_calls, self._dicts, session_id, page)

    def replay_call(self, call_id: str) -> dict:
        return self.get_call(call_id)["request"]

    def call_rows(self, flt: SessionFilter) -> Iterator[dict]:
        return iter(self._read(lambda cur: list(reading.iter_call_rows(cur, flt))))

    def usage_groups(self, by: str, flt: SessionFilter, latencies: bool = True) -> dict[str | None, dict]:
        """Totals grouped by day, model, agent, run or source, by the accounting rule (see store/usage.py)."""
        return self._read(usage.stats_groups, by, flt, latencies)

    def usage_series(self, split: str, flt: SessionFilter, names: list[str]) -> list[DayUsage]:
        """The usage chart's days by model or agent, `names` a column each and the rest one (store/usage.py's
        `series_groups`)."""
        return self._read(usage.series_groups, split, flt, names)

    def mirror_fingerprints(self, since: str | None = None) -> tuple[dict[str, tuple[str, str | None]],
                                                                     tuple[str | None, str]]:
        """Every session's fingerprint and parent (or, `since` an instant, those of the sessions open or written
        since), and the record's mark, in one snapshot (store/mirrored.py)."""
        return self._read(lambda cur: (mirrored.fingerprints(cur, since), mirrored.mark(cur)))

    def mirror_mark(self) -> tuple[str | None, str]:
        """The record's newest instant, and a mark that changes with every session or call added or removed."""
        return self._read(mirrored.mark)

    def mirror_rows(self, session_ids: list[str]) -> dict:
        """What a ClickHouse mirror holds of these sessions (store/mirrored.py), in one snapshot."""
        return self._read(mirrored.session_rows, self._dicts, list(session_ids))

    def recount_usage(self) -> None:
        """Rebuild the usage kept as calls are written (`reasonlog db recount`)."""
        self._write(kept.recount)

    def search(self, text: str, flt: SessionFilter, limit: int | None = 50) -> list[dict]:
        """Messages, tool results and outcomes whose text contains `text` (see store/search.py); None: all."""
        return self._read(search.search, self._dicts, text, flt, limit, self.index)

    def resolve_id(self, kind: str, prefix: str) -> str:
        """A full session or call id from an id, a unique prefix, an external id (sessions) or `SESSION#N` (calls).

        An ambiguous prefix raises a StoreError that lists the candidates (see store/ids.py)."""
        return self._read(ids.resolve_id, kind, prefix)

    def count_sessions(self, flt: SessionFilter) -> int:
        """How many sessions the filter selects, its limit aside: `list_sessions` shows at most `flt.limit`."""
        if flt.text is not None:
            return len(self._read(search.matching_sessions, self._dicts, replace(flt, limit=None), self.index))
        return self._read(reading.count_sessions, flt)

    def record_counts(self) -> dict[str, int]:
        """Rows of each kind of record: what an import reports as added."""
        return self._read(lambda cur: {t: cur.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                                       for t in ("sessions", "calls", "messages", "tool_results", "outcomes")})

    def list_reasoning_records(self, session_id: str | None = None, group: str | None = None,
                               phase: str | None = None, record_id: str | None = None,
                               include_held: bool = True) -> list[ReasoningRecordJSON]:
        """Reasoning records in the order they were saved (see store/records.py)."""
        return self._read(records.list_records, session_id, group, phase, record_id, include_held)

    def settle_reasoning(self, session_id: str, failed: bool, group: str | None = None) -> int:
        """The outcome of a session (or of one group in it) for its held records: kept if it failed, else
        dropped. Returns how many records it settled."""
        def settle(cur: Cursor) -> int:
            if not failed:
                return search.drop_held_reasoning(cur, [session_id], self.index, group)
            where = "session_id = ? AND state = 'held'" + (" AND group_name = ?" if group is not None else "")
            args = (session_id, group) if group is not None else (session_id,)
            return cur.execute(f"UPDATE reasoning_records SET state = 'kept' WHERE {where}", args).rowcount
        return self._write(settle)

    # ------------------------------------------------------------ transfer

    def export_records(self, session_ids: Iterable[str] | None = None) -> Iterator[dict]:
        from . import transfer  # loaded on first use: `reason save` never needs it

        return iter(self._read(lambda cur: list(transfer.export_records(cur, session_ids, self._dicts))))

    def import_records(self, records: Iterable[dict]) -> dict:
        """Import export records in one transaction, committed only once every session reads back."""
        from . import transfer

        def run(cur: Cursor) -> dict:
            self._follow_prunes(cur)
            self._applier.take_records()
            masked = self._applier.redactor.masked
            importer = transfer.Importer(cur, self._applier)
            n = importer.run(records)
            kept.recount(cur, list(importer.sessions))  # imported calls were inserted as rows, not counted
            self._add_counters(cur, {"redacted": self._applier.redactor.masked - masked})
            self._applier.finish(cur)
            search.index_records(cur, self._applier.take_records(), self.index)
            importer.verify(self._dicts)
            return n

        with self._lock:
            n = self._write(run)
            self._applier.reset()
            return n

    # ------------------------------------------------------------ imports (see io/importing.py)

    def import_file(self, path: str) -> dict | None:
        """What earlier imports consumed of the file at `path` (absolute), or None."""
        return self._read(imported.load_file, path)

    def import_files(self) -> list[dict]:
        """Every file imported so far, newest import first."""
        return self._read(imported.list_files)

    def replay_links(self, session_id: str) -> dict:
        """{"replay_of": the session this one replays or None, "replays": sessions replaying its calls}."""
        from . import replays

        return self._read(replays.replay_links, session_id)

    def last_call_id(self, session_id: str) -> str | None:
        """The id of the session's last call, or None (an importer going on from it)."""
        return self._read(imported.last_call, session_id)

    def existing_ids(self, kind: str, ids: Iterable[str]) -> set[str]:
        """Which of `ids` (of sessions, calls, tool_results or outcomes) the store holds."""
        return self._read(imported.existing_ids, kind, list(ids))

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

    # ------------------------------------------------------------ summaries (see store/summaries.py)

    def save_summaries(self, rows: list[dict]) -> int:
        """Write summary rows in one transaction: a success replaces the row, a failure keeps its text."""
        from . import summaries

        return self._write(summaries.save, rows)

    def list_summaries(self, session_ids: Iterable[str]) -> list[dict]:
        """Every summary row (ok or failed) of these sessions."""
        from . import summaries

        return self._read(summaries.for_sessions, list(session_ids))

    def summary_counts(self) -> dict[str, dict[str, int]]:
        """Summaries by kind and status: {"session": {"ok": n, "failed": m}, "exchange": ..., "message": ...}."""
        from . import summaries

        return self._read(summaries.counts)
