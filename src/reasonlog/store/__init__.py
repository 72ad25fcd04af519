"""The `Store` seam: where recorded events go and where every reader gets them back.

Two implementations share one contract: SQLite (embedded default) and PostgreSQL (`postgresql://` URLs).
Capture hands batches of events to `write_batch`; query, io, server and cli read through the
other methods and never hold SQL themselves.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, TypedDict, Unpack

from ..model import Event

if TYPE_CHECKING:  # the maintenance module imports this one
    import threading

    from ..pricing import PriceTable
    from ..redact import Redactor
    from .annotation import ScoreTest
    from .maintenance import PruneCriteria


class StoreError(RuntimeError):
    """The store cannot do what was asked. Its kinds below say why, so each surface answers once by kind (HTTP
    status, CLI exit code) and never by the words of the message."""


class NotFound(StoreError):
    """No session, call or record has that id (or prefix)."""


class Ambiguous(StoreError):
    """A prefix matches several ids; the message lists them."""


class Invalid(StoreError):
    """What was given cannot be stored or read as asked (a bad record, a bad value); the message names it."""


class Unavailable(StoreError):
    """The database cannot be used now (away, locked past its timeout, damaged); asking again later may work."""


class ReadOnly(StoreError):
    """What was asked writes, and the store cannot write."""


def failure_of(exc: BaseException) -> StoreError | None:
    """The kind of an error a database driver raised past the store (a file damaged past what opening checks, a
    server gone mid-command): Unavailable, with the driver's first line; None when `exc` is no driver's."""
    module = type(exc).__module__
    if module.startswith(("sqlite3", "psycopg")) or module == "_sqlite3":
        return Unavailable(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    return None


class ReadOnlyDatabase(ReadOnly):
    """What was asked writes, and the database cannot be written (a read-only file or folder, or a store
    opened for reading)."""

    def __init__(self, target: object):
        super().__init__(f"{target}: read-only (the file or its folder cannot be written), so nothing can be"
                         " written to it; reading commands and `reasonlog serve` read it as it is")


@dataclass(frozen=True)
class SessionFilter:
    """Which sessions a reader wants. Empty fields do not filter; `limit=None` means no limit.

    `model`, `since` and `until` match what the calls did as well as the session's own model and
    start: a session that used two models, or crossed midnight, is found under each.
    """

    run: str | None = None
    agent: str | None = None
    model: str | None = None
    status: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    since: str | None = None   # ISO date or instant, inclusive
    until: str | None = None   # ISO date or instant, inclusive when a date
    limit: int | None = 50
    # A page's cursor: sessions strictly after this (started_at, id) in the list's order (newest first).
    # Keyset, not offset, so pages stay right while sessions are being written.
    after: tuple[str, str] | None = None
    # Only the sub-agent sessions this session spawned.
    parent: str | None = None
    # Only sessions whose recorded text (messages, tool results, outcomes) contains this, as `search` finds it.
    text: str | None = None
    # Annotations (docs/review.md): sessions where each test holds for a score on it or on anything in it
    # (`store.annotation.ScoreTest`), and, with has_note, sessions with a note on them or anything in them.
    scores: tuple[ScoreTest, ...] = ()
    has_note: bool = False


class StoreWriter(Protocol):
    """What a writer needs: a sink, an import, the ingest route.

    `write_batch` applies a list of events in order in ONE transaction: all of them are
    written or none is, and it raises on failure (the writer then spills the batch).
    """

    url: str
    read_only: bool  # opened for reading: a write raises ReadOnly
    rejected_events: int  # events this store object left out of the batches it committed (their data's fault)

    def write_batch(self, events: list[Event], counters: dict[str, int] | None = None, *,
                    imports: list[dict] | None = None, batch_id: str | None = None,
                    rejections: list[tuple[int, str]] | None = None) -> bool: ...
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
                 source: str = "human", replace: bool = False) -> list[dict]: ...
    # Search by meaning (store/semantic.py): the background embedding's side, never a recorder's.
    def cut_units(self, progress: Callable[[int, int], None] | None = None) -> int: ...
    def unit_backlog(self, model: str, limit: int, after: int = 0) -> list[tuple[int, str]]: ...
    def save_vectors(self, model: str, rows: list[tuple[int, bytes]]) -> int: ...
    def fill_vector_index(self, stop: threading.Event | None = None) -> int: ...
    def refresh_session_vectors(self, model: str) -> int: ...
    def close(self) -> None: ...


class StoreReader(Protocol):
    """What a reader needs: the CLI's reading commands, the API, the dashboard. Narrow reads first: a session's
    row (`session_row`), a page of its timeline (`get_session(page=)`), a range of its calls with their replies
    (`get_calls`), one call (`get_call`); a whole session (`get_session` without a page) only where the whole is
    shown or exported.
    Readers return plain dicts and lists in the JSON form of `wire/api.py`."""

    url: str
    read_only: bool

    def list_sessions(self, flt: SessionFilter) -> list[dict]: ...
    def count_sessions(self, flt: SessionFilter) -> int: ...
    def session_row(self, session_id: str) -> dict: ...
    def list_outcomes(self, flt: SessionFilter, kind: str | None = None,
                      session_id: str | list[str] | None = None) -> list[dict]: ...
    def get_session(self, session_id: str, page: tuple[int, int] | None = None) -> dict: ...
    def count_messages(self, session_ids: Iterable[str]) -> dict[str, int]: ...
    def in_timeline(self, session_ids: Iterable[str], content_ids: Iterable[int]) -> set[int]: ...
    def get_call(self, call_id: str) -> dict: ...
    def get_calls(self, session_id: str, page: tuple[int, int]) -> list[dict]: ...
    def first_prompts(self, session_ids: Iterable[str]) -> dict[str, object]: ...
    def get_spans(self, session_id: str, page: tuple[int, int]) -> dict: ...
    def replay_call(self, call_id: str) -> dict: ...
    def search(self, text: str, flt: SessionFilter, limit: int | None = 50) -> list[dict]: ...
    def keyword_search(self, text: str, flt: SessionFilter, limit: int = 50) -> list[dict]: ...
    def vector_search(self, query: bytes, model: str, flt: SessionFilter, limit: int = 50) -> list[dict]: ...
    def warm_vectors(self, model: str, dim: int) -> None: ...
    def similar_sessions(self, session_id: str, model: str, limit: int = 10) -> list[dict]: ...
    def semantic_counts(self, model: str | None = None, sessions: bool = False) -> dict[str, int]: ...
    def has_vectors(self, model: str) -> bool: ...
    def call_rows(self, flt: SessionFilter) -> Iterator[dict]: ...
    def usage_groups(self, by: str, flt: SessionFilter, latencies: bool = True) -> dict[str | None, dict]: ...
    def mirror_fingerprints(self) -> tuple[dict[str, tuple[str, str | None]], tuple[str | None, str]]: ...
    def mirror_rows(self, session_ids: list[str]) -> dict: ...
    def mirror_mark(self) -> tuple[str | None, str]: ...
    def resolve_id(self, kind: str, prefix: str) -> str: ...
    def export_records(self, session_ids: Iterable[str] | None = None) -> Iterator[dict]: ...
    def import_files(self) -> list[dict]: ...
    def record_counts(self) -> dict[str, int]: ...
    def replay_links(self, session_id: str) -> dict: ...
    def list_reasoning_records(self, session_id: str | None = None, group: str | None = None,
                               phase: str | None = None, record_id: str | None = None,
                               include_held: bool = True) -> list[dict]: ...
    def list_summaries(self, session_ids: Iterable[str]) -> list[dict]: ...
    def list_annotations(self, target: str | None = None) -> list[dict]: ...
    def review_queue(self, limit: int = 50) -> list[dict]: ...
    def summary_counts(self) -> dict[str, dict[str, int]]: ...
    def api_key_scope(self, secret: str) -> str | None: ...
    def has_api_keys(self) -> bool: ...
    def change_marker(self) -> object: ...
    def close(self) -> None: ...


class StoreAdmin(Protocol):
    """What the operator's commands need (`reasonlog db`, `keys`, `prune`). A backend that cannot do one
    (PostgreSQL's backups and integrity check belong to its own tools) raises `Unavailable` saying which tool."""

    def delete_sessions(self, session_ids: Iterable[str], forget_file: str | None = None) -> int: ...
    def recount_usage(self) -> None: ...
    def create_api_key(self, scope: str, name: str | None = None) -> dict: ...
    def list_api_keys(self) -> list[dict]: ...
    def revoke_api_key(self, key: str) -> int: ...
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


class Store(StoreWriter, StoreReader, StoreAdmin, Protocol):
    """What every backend provides: the three parts. Code that needs one part takes that part."""


def default_db_path() -> Path:
    """$REASONLOG_DB, else `reasonlog.db` in the per-user data folder."""
    env = os.environ.get("REASONLOG_DB")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("reasonlog", appauthor=False)) / "reasonlog.db"


def sqlite_path(target: str | os.PathLike | None) -> Path:
    """The database file a target names: a path, `sqlite:///path`, or None for the default.

    Other URLs are refused rather than taken for file names: `postgresql://` is not a file, `https://` is a
    server, and anything else is not a database reasonlog knows."""
    if target is None:
        return default_db_path()
    text = os.fspath(target)
    if text.startswith("sqlite:///"):
        return Path(text[len("sqlite:///"):]).expanduser()
    scheme = text.split("://", 1)[0] if "://" in text else None
    if scheme in ("http", "https"):
        raise StoreError(f"{text}: a reasonlog serve URL is for recorders (Recorder(url)); read it through its"
                         " HTTP API, or open the server's database file")
    if scheme in ("postgresql", "postgres"):
        raise StoreError(f"{scheme}:// is a PostgreSQL database, not a file")
    if scheme is not None:
        raise StoreError(f"{text}: {scheme}:// is not a database reasonlog knows; use a file path, sqlite:///path"
                         " or postgresql://…")
    return Path(text).expanduser()


def database_target(target: str | os.PathLike | None) -> str | Path:
    """What a recorder or command writes to: a `postgresql://` URL as given, else the SQLite file's absolute
    path (the default when None, which $REASONLOG_DB may set to either)."""
    if target is None and is_postgres(os.environ.get("REASONLOG_DB")):
        return os.environ["REASONLOG_DB"]
    if is_postgres(target):
        return str(target)
    return Path(os.path.abspath(sqlite_path(target)))


def safe_target(target: str | os.PathLike) -> str:
    """A database target as messages may show it: a URL loses its password."""
    if is_postgres(target):
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(str(target))
        if parts.password is not None:
            netloc = f"{parts.username}:***@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
            return urlunsplit(parts._replace(netloc=netloc))
    return os.fspath(target)


def is_postgres(target: str | os.PathLike | None) -> bool:
    """Whether `target` names a PostgreSQL database (`postgresql://…` or `postgres://…`)."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


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
