"""Live updates (docs/dashboard.md, "Live"): server-sent events that say what changed as calls land.

Whichever process writes (a recorder elsewhere, the proxy, an import, ingestion), the database changes, so one
poller per server process asks the store for its change marker (`StoreReader.change_marker`: SQLite's
`data_version`, PostgreSQL's current snapshot) once per `interval_s`, for all listeners together. When the marker
moved, it reads the digest once (the open sessions and the newest ones, each with its status, calls, cost and
last call) and, when the digest differs from the last one, hands it to every listener. A listener's queue holds
a few digests; a slow one loses the older ones (a digest is the whole state, so the newest suffices), and the
count of those drops is kept. No listener, no polling: the poller starts with the first and ends with the last.
"""
from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool

from ..store import SessionFilter, StoreReader

INTERVAL_S = 0.25  # how often the poller looks at the change marker
HEARTBEAT_S = 15.0  # an SSE comment this often keeps proxies from closing a quiet stream
LIFETIME_S = 30.0  # a stream ends after this long; the browser reconnects (see `events`)
QUEUE = 4  # digests a listener may have waiting
NEWEST = 50  # the newest sessions a digest carries besides the open ones
OPEN = 200  # open sessions a digest carries at most


def digest_of(store: StoreReader) -> dict[str, dict]:
    """{session id: its status, calls, errors, cost and last call} of the open sessions and the newest ones."""
    rows = store.list_sessions(SessionFilter(status="open", limit=OPEN))
    rows += store.list_sessions(SessionFilter(limit=NEWEST))
    return {r["id"]: {"status": r["status"], "calls": r.get("call_count") or 0, "errors": r.get("error_count") or 0,
                      "cost_usd": r.get("cost_usd"), "last_call_at": r.get("last_call_at"), "agent": r.get("agent")}
            for r in rows}


class PageCache:
    """Pages rendered at the database's current change marker, by address: when a change reaches 100 open copies
    of a page, they all fetch it again, and one render serves them all. A page is kept only under the marker it
    was rendered at (read before the page, so a change meanwhile makes the key stale, never the page newer than
    its key), and only while pages listen; at most `max_bytes` of them, the oldest forgotten first."""

    def __init__(self, max_bytes: int = 16 << 20) -> None:
        self.max_bytes, self.hits, self.misses = max_bytes, 0, 0
        self._pages: OrderedDict[tuple[object, str], str] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[object, str] | None) -> str | None:
        with self._lock:
            found = self._pages.get(key) if key is not None else None
            self.hits += found is not None
            self.misses += found is None and key is not None
            return found

    def put(self, key: tuple[object, str] | None, body: str) -> None:
        if key is None or len(body) > self.max_bytes // 4:
            return
        with self._lock:
            for old in [k for k in self._pages if k[0] != key[0]]:
                self._bytes -= len(self._pages.pop(old))  # rendered before the last change: stale
            if key not in self._pages:
                self._pages[key] = body
                self._bytes += len(body)
            while self._bytes > self.max_bytes:
                self._bytes -= len(self._pages.popitem(last=False)[1])


class Hub:
    """One poller shared by every listener of a server process; `listen()` yields the digests as they change."""

    def __init__(self, get_store: Callable[[], StoreReader], interval_s: float = INTERVAL_S,
                 queue: int = QUEUE) -> None:
        self.get_store, self.interval_s, self.queue = get_store, interval_s, queue
        self.listeners: set[asyncio.Queue] = set()
        self.generation = 0  # digests handed out so far
        self.dropped = 0  # digests a slow listener lost to newer ones
        self.polls = 0  # change markers read
        self.digest: dict[str, dict] | None = None
        self.pages = PageCache()
        self._marker: object = None
        self._task: asyncio.Task | None = None
        self._closed = False

    def page_key(self, store: StoreReader, address: str) -> tuple[object, str] | None:
        """The key of `address` in `pages`: the store's change marker now and the address; None while no page
        listens (a page then is fetched by a person, not by 100 live copies at once)."""
        return (store.change_marker(), address) if self.listeners else None

    @contextlib.asynccontextmanager
    async def listen(self) -> AsyncIterator[asyncio.Queue]:
        """A queue of digests (the current one first), removed when the listener leaves."""
        q: asyncio.Queue = asyncio.Queue(maxsize=self.queue)
        if self.digest is None:
            await self._look()
        q.put_nowait((self.generation, self.digest))
        self.listeners.add(q)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._poll())
        try:
            yield q
        finally:
            self.listeners.discard(q)

    async def _poll(self) -> None:
        while self.listeners and not self._closed:
            await asyncio.sleep(self.interval_s)
            try:
                await self._look()
            except Exception:  # noqa: BLE001 - a database away for a moment: look again next time
                self._marker = None
        self.digest = None  # no one listens: the next listener reads afresh

    async def _look(self) -> None:
        marker = await run_in_threadpool(self._marker_now)
        self.polls += 1
        if marker == self._marker and self.digest is not None:
            return
        digest = await run_in_threadpool(digest_of, self.get_store())
        self._marker = marker
        if digest != self.digest:
            self.digest = digest
            self.generation += 1
            self._broadcast((self.generation, digest))

    def _marker_now(self) -> object:
        return self.get_store().change_marker()

    def _broadcast(self, item: tuple[int, dict]) -> None:
        for q in list(self.listeners):
            if q.full():
                q.get_nowait()
                self.dropped += 1
            q.put_nowait(item)

    def close(self) -> None:
        """End the poller and every stream (the server is stopping)."""
        self._closed = True
        for q in list(self.listeners):
            if q.full():
                q.get_nowait()
            q.put_nowait(None)
        if self._task is not None:
            self._task.cancel()


async def events(hub: Hub, is_disconnected: Callable[[], Any], heartbeat_s: float = HEARTBEAT_S,
                 lifetime_s: float = LIFETIME_S) -> AsyncIterator[bytes]:
    """The `text/event-stream` of one listener: a `change` event per digest, a comment as heartbeat. It ends
    after `lifetime_s` (the browser comes back at once, and is sent the current digest): uvicorn waits for open
    responses when it stops, and a stream that never ends would hold the server up for its whole grace."""
    yield b"retry: 500\n\n"
    loop = asyncio.get_running_loop()
    end = loop.time() + lifetime_s
    async with hub.listen() as q:
        while (left := end - loop.time()) > 0:
            try:
                item = await asyncio.wait_for(q.get(), timeout=min(heartbeat_s, left))
            except TimeoutError:
                if await is_disconnected():
                    return
                yield b": heartbeat\n\n"
                continue
            if item is None:
                return
            generation, digest = item
            body = orjson.dumps({"generation": generation, "sessions": digest})
            yield b"id: %d\nevent: change\ndata: %s\n\n" % (generation, body)
