"""The `Store` seam: where recorded events go and where every reader gets them back.

Two implementations share one contract: SQLite (embedded default) and PostgreSQL (`postgresql://` URLs).
Capture hands batches of events to `write_batch`; query, io, server and cli read through the
other methods and never hold SQL themselves.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, TypedDict, Unpack

from ..model import Event
from .targets import database_target, default_db_path, is_postgres, safe_target, sqlite_path
from .terms import (
    Ambiguous,
    Invalid,
    NotFound,
    ReadOnly,
    ReadOnlyDatabase,
    ScoreTest,
    SessionFilter,
    StoreError,
    Unavailable,
    failure_of,
)

if TYPE_CHECKING:  # the maintenance module imports this one
    import threading

    from ..pricing import PriceTable
    from ..redact import Redactor
    from ..wire.api import (
        AnnotationJSON,
        OutcomeJSON,
        ReasoningRecordJSON,
        SessionDetailJSON,
        SessionJSON,
        SimilarSessionJSON,
    )
    from .answers import CallDetail
    from .maintenance import PruneCriteria
    from .rollups import DayUsage

__all__ = ["Ambiguous", "Invalid", "KeyStore", "MirrorSource", "NotFound", "ReadOnly", "ReadOnlyDatabase", "ScoreTest",
           "SearchByMeaning", "SearchStore", "SessionFilter", "Store", "StoreAdmin", "StoreError", "StoreOptions",
           "StoreReader", "StoreWriter", "Unavailable", "annotate", "database_target", "default_db_path", "failure_of",
           "is_postgres", "open_store", "open_store_or_read_only", "safe_target", "sqlite_path"]


class StoreWriter(Protocol):
    """What a writer needs: a sink, an import, the ingest route.

    `write_batch` applies a list of events in order in ONE transaction: all of them are
    written or none is, and it raises on failure (the writer then spills the batch).
    """

    url: str
    read_only: bool  # opened for reading: a write raises ReadOnly
    rejected_events: int  # events this store object left out of the batches it committed (their data's fault)

    def write_batch(self, events: list[Event], counters: dict[str, int] | None = None, *,
                    batch_id: str | None = None, rejections: list[tuple[int, str]] | None = None) -> bool: ...
    def is_store_failure(self, exc: BaseException) -> bool: ...
    def add_counters(self, counters: dict[str, int]) -> None: ...
    def existing_ids(self, kind: str, ids: Iterable[str]) -> set[str]: ...
    def last_call_id(self, session_id: str) -> str | None: ...
    def import_records(self, records: Iterable[dict]) -> dict: ...
    def import_file(self, path: str) -> dict | None: ...
    def settle_reasoning(self, session_id: str, failed: bool, group: str | None = None) -> int: ...
    def save_summaries(self, rows: list[dict]) -> int: ...
    def annotate(self, target: str, note: str | None = None, labels: dict[str, str] | None = None,
                 scores: dict[str, float | int | str] | None = None, by: str | None = None,
                 source: str = "human", replace: bool = False) -> list[AnnotationJSON]: ...
    def close(self) -> None: ...


class StoreReader(Protocol):
    """What a reader needs: the CLI's reading commands, the API, the dashboard. Narrow reads first: a session's
    row (`session_row`), a page of its timeline (`get_session(page=)`), a range of its calls with their replies
    (`get_calls`), one call (`get_call`); a whole session (`get_session` without a page) only where the whole is
    shown or exported.
    Readers return the TypedDicts of `wire/api.py`, built with keywords (store/answers.py): the JSON a client
    reads, checked by mypy from the row on."""

    url: str
    read_only: bool

    def list_sessions(self, flt: SessionFilter) -> list[SessionJSON]: ...
    def count_sessions(self, flt: SessionFilter) -> int: ...
    def session_row(self, session_id: str) -> SessionJSON: ...
    def list_outcomes(self, flt: SessionFilter, kind: str | None = None,
                      session_id: str | list[str] | None = None) -> list[OutcomeJSON]: ...
    def get_session(self, session_id: str, page: tuple[int, int] | None = None) -> SessionDetailJSON: ...
    def count_messages(self, session_ids: Iterable[str]) -> dict[str, int]: ...
    def in_timeline(self, session_ids: Iterable[str], content_ids: Iterable[int]) -> set[int]: ...
    def get_call(self, call_id: str) -> CallDetail: ...
    def call_details(self, call_ids: Sequence[str]) -> list[CallDetail]: ...
    def get_calls(self, session_id: str, page: tuple[int, int]) -> list[dict]: ...
    def first_prompts(self, session_ids: Iterable[str]) -> dict[str, object]: ...
    def get_spans(self, session_id: str, page: tuple[int, int]) -> dict: ...
    def replay_call(self, call_id: str) -> dict: ...
    def search(self, text: str, flt: SessionFilter, limit: int | None = 50) -> list[dict]: ...
    def keyword_search(self, text: str, flt: SessionFilter, limit: int = 50) -> list[dict]: ...
    def call_rows(self, flt: SessionFilter) -> Iterator[dict]: ...
    def usage_groups(self, by: str, flt: SessionFilter, latencies: bool = True) -> dict[str | None, dict]: ...
    def usage_series(self, split: str, flt: SessionFilter, names: list[str]) -> list[DayUsage]: ...
    def resolve_id(self, kind: str, prefix: str) -> str: ...
    def export_records(self, session_ids: Iterable[str] | None = None) -> Iterator[dict]: ...
    def import_files(self) -> list[dict]: ...
    def record_counts(self) -> dict[str, int]: ...
    def replay_links(self, session_id: str) -> dict: ...
    def list_reasoning_records(self, session_id: str | None = None, group: str | None = None,
                               phase: str | None = None, record_id: str | None = None,
                               include_held: bool = True) -> list[ReasoningRecordJSON]: ...
    def list_summaries(self, session_ids: Iterable[str]) -> list[dict]: ...
    def list_annotations(self, target: str | None = None) -> list[AnnotationJSON]: ...
    def review_queue(self, limit: int = 50) -> list[dict]: ...
    def summary_counts(self) -> dict[str, dict[str, int]]: ...
    def change_marker(self) -> object: ...
    def close(self) -> None: ...


class StoreAdmin(Protocol):
    """What the operator's commands need (`reasonlog db`, `keys`, `prune`). A backend that cannot do one
    (PostgreSQL's backups and integrity check belong to its own tools) raises `Unavailable` saying which tool."""

    def delete_sessions(self, session_ids: Iterable[str], forget_file: str | None = None) -> int: ...
    def recount_usage(self) -> None: ...
    def status(self) -> dict: ...
    def schema_version(self) -> int: ...
    def upgrade(self) -> list[int]: ...
    def checkpoint(self) -> None: ...
    def backup(self, dest: Path, force: bool = False) -> int: ...
    def check(self) -> dict: ...
    def plan_prune(self, criteria: PruneCriteria) -> dict: ...
    def prune(self, criteria: PruneCriteria) -> dict: ...
    def exclusive(self, name: str) -> AbstractContextManager[None]:
        """Hold the lock named `name` (waiting for it): one process at a time does the work it guards."""
        ...
    def close(self) -> None: ...


class SearchByMeaning(Protocol):
    """Search by meaning (store/semantic.py, docs/search.md): the background embedding cuts text into units and
    saves their vectors; readers search them. A backend without it leaves this part out; `semantic` asks for it."""

    url: str

    def vector_search(self, query: bytes, model: str, flt: SessionFilter, limit: int = 50) -> list[dict]: ...
    def warm_vectors(self, model: str, dim: int) -> None: ...
    def similar_sessions(self, session_id: str, model: str, limit: int = 10) -> list[SimilarSessionJSON]: ...
    def semantic_counts(self, model: str | None = None, sessions: bool = False) -> dict[str, int]: ...
    def has_vectors(self, model: str) -> bool: ...
    # the background embedding's side, never a recorder's
    def cut_units(self, progress: Callable[[int, int], None] | None = None) -> int: ...
    def unit_backlog(self, model: str, limit: int, after: int = 0) -> list[tuple[int, str]]: ...
    def save_vectors(self, model: str, rows: list[tuple[int, bytes]]) -> int: ...
    def fill_vector_index(self, stop: threading.Event | None = None) -> int: ...
    def refresh_session_vectors(self, model: str) -> int: ...
    def close(self) -> None: ...


class SearchStore(StoreReader, SearchByMeaning, Protocol):
    """A reader that also searches by meaning: what a search in any mode (semantic/search.py) asks of the store."""


class MirrorSource(Protocol):
    """What a mirror (mirror/push.py) reads to copy sessions into ClickHouse: each session's fingerprint, whole
    sessions' rows, and the mark the copy is current to."""

    def mirror_fingerprints(self, since: str | None = None) -> tuple[dict[str, tuple[str, str | None]],
                                                                     tuple[str | None, str]]: ...
    def mirror_rows(self, session_ids: list[str]) -> dict: ...
    def mirror_mark(self) -> tuple[str | None, str]: ...


class KeyStore(Protocol):
    """API keys (`reasonlog keys`, the server's authentication): their hashes are kept, never the secrets."""

    def api_key_scope(self, secret: str) -> str | None: ...
    def has_api_keys(self) -> bool: ...
    def create_api_key(self, scope: str, name: str | None = None) -> dict: ...
    def list_api_keys(self) -> list[dict]: ...
    def revoke_api_key(self, key: str) -> int: ...


class Store(StoreWriter, StoreReader, StoreAdmin, SearchByMeaning, MirrorSource, KeyStore, Protocol):
    """What every backend provides: the parts above. Code that needs one part takes that part."""


class StoreOptions(TypedDict, total=False):
    """How `open_store` opens a store (each backend takes the options it knows and ignores the others).

    `upgrade`: migrate a database of an older schema (default True); `read_only`: never create, migrate or write;
    `price_table` and `redactor` (False: no masking) for the writer; `busy_timeout_ms`: how long a write waits
    for another connection's lock; `max_page_count`: SQLite's file capped (a test seam for a full disk); `bulk`:
    False writes each PostgreSQL batch event by event, as before issue 35 (a test seam for the bulk path)."""

    upgrade: bool
    read_only: bool
    price_table: PriceTable | None
    redactor: Redactor | Literal[False] | None
    busy_timeout_ms: int
    max_page_count: int | None
    bulk: bool


def open_store_or_read_only(target: str | os.PathLike | None = None, **options: Unpack[StoreOptions]) -> Store:
    """The store for writing, or, when the database cannot be written, for reading: what a server serves
    (its pages read; what writes is refused with `ReadOnlyDatabase`)."""
    try:
        return open_store(target, **options)
    except ReadOnlyDatabase:
        options["read_only"] = True
        return open_store(target, **options)


def open_store(target: str | os.PathLike | None = None, **options: Unpack[StoreOptions]) -> Store:
    """Open a store from a path or URL (`sqlite:///path`, a bare path, `postgresql://…`, or None for the default).

    `read_only=True` opens an existing, current database without ever writing it (reading commands)."""
    if is_postgres(target):
        try:
            from .postgres import PostgresStore
        except ImportError:
            raise StoreError("PostgreSQL needs psycopg: pip install 'reasonlog[postgres]'") from None
        return PostgresStore(str(target), **options)
    from .sqlite import SQLiteStore

    return SQLiteStore(sqlite_path(target), **options)


def annotate(target: str, *, db: str | None = None, note: str | None = None, labels: dict[str, str] | None = None,
             scores: dict[str, float | int | str] | None = None, by: str | None = None,
             source: str = "human") -> list[AnnotationJSON]:
    """`reasonlog.annotate`: add a note, labels and scores to a session, an exchange or a call (`SESSION#N`) of
    the database `db` (a path or a postgresql:// URL; default: the user's); the annotations added."""
    store = open_store(db)
    try:
        return store.annotate(target, note=note, labels=labels, scores=scores, by=by, source=source)
    finally:
        store.close()
