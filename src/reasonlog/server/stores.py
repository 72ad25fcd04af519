"""The server's two stores: a writer for ingestion and a reader for everything else, each opened on first use.

Reads never wait behind a write: a store is one connection behind one lock, so with one store a batch
waiting for a locked SQLite file (up to its busy timeout) held every page and every key check behind it.
A second connection, read-only, reads the last committed state meanwhile (SQLite in WAL mode lets readers
run beside a writer; PostgreSQL always has). The writer is opened first, so its migrations are done before
the reader, which never migrates, looks at the schema.

What the database says when it cannot be used (down, restarting, locked, full) is told apart here from a
request's own mistakes, so that the app answers 503 with Retry-After rather than 500 (see `guards.py`).
"""
from __future__ import annotations

import threading
from collections.abc import Callable

from starlette.requests import Request

from ..store import Store


class Unavailable(Exception):
    """The database cannot be used now (it may be restarting, locked or full): trying again later may work."""


class LazyStore:
    """A store, opened on first use and kept; while it cannot be opened each use says so (and tries again)."""

    def __init__(self, opener: Callable[[], Store], after: LazyStore | None = None):
        self._opener, self._after, self._lock = opener, after, threading.Lock()
        self._store: Store | None = None

    def get(self) -> Store:
        store = self._store
        if store is not None:
            return store
        if self._after is not None:
            try:
                self._after.get()  # the writer migrates before the reader first reads the schema
            except Unavailable:
                pass  # a locked writer need not keep a current database from being read
        with self._lock:
            if self._store is None:
                try:
                    self._store = self._opener()
                except Exception as exc:  # noqa: BLE001 - whatever stops opening, the database cannot be used
                    raise Unavailable(first_line(exc)) from None
            return self._store

    def opened(self) -> Store | None:
        return self._store

    def close(self) -> None:
        with self._lock:
            store, self._store = self._store, None
        if store is not None:
            store.close()


def first_line(exc: BaseException) -> str:
    """What a message may show of `exc`: its first line (a driver's next lines may quote a statement)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class Stores:
    """The writer and the reader (the same store when no reader opener is given)."""

    def __init__(self, open_writer: Callable[[], Store], open_reader: Callable[[], Store] | None = None):
        self.writer = LazyStore(open_writer)
        self.reader = self.writer if open_reader is None else LazyStore(open_reader, after=self.writer)

    def failed(self, exc: BaseException) -> bool:
        """Whether `exc` says the database cannot be used now, rather than that a request was wrong."""
        if isinstance(exc, Unavailable):
            return True
        for lazy in (self.writer, self.reader):
            store = lazy.opened()
            check = getattr(store, "is_store_failure", None)
            if check is not None and check(exc):
                return True
        return False

    def close(self) -> None:
        for lazy in {id(self.writer): self.writer, id(self.reader): self.reader}.values():
            lazy.close()


def reader_of(request: Request) -> Store:
    """The store a route that only reads is given (`Depends(reader_of)`): the app's read-only one when it has one."""
    return request.app.state.stores.reader.get()


def writer_of(request: Request) -> Store:
    """The store a route that writes is given (`Depends(writer_of)`)."""
    return request.app.state.stores.writer.get()
