"""Shared machinery of the SDK adapters: undo handles, session routing, request bodies, stream taps.

Adapters patch one client *instance* (attributes set on its resource objects), never a class or a
module, so other clients in the process and other libraries that share the SDK are untouched.
"""
from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Any, Callable

from .recorder import Recorder, SessionRecorder, current_session

log = logging.getLogger("reasonlog")
_ABSENT = object()
_handles: "weakref.WeakKeyDictionary[Any, Handle]" = weakref.WeakKeyDictionary()
_handles_lock = threading.Lock()
# Keyword arguments that shape the HTTP exchange, not the model's input; `extra_body` is merged instead.
_TRANSPORT_KWARGS = frozenset({"extra_headers", "extra_query", "extra_body", "timeout"})
_SCALARS = (str, int, float, bool, type(None))


class Router:
    """Chooses where a call lands: the session given, else the current one, else one per client."""

    def __init__(self, recorder: Recorder | None, session: SessionRecorder | None, agent: str, provider: str,
                 labels: dict | None = None):
        self.recorder, self.fixed, self.agent, self.provider = recorder, session, agent, provider
        self.labels = labels
        self.auto: SessionRecorder | None = None
        self._lock = threading.Lock()

    def session(self) -> SessionRecorder:
        return self.fixed or current_session() or self._auto_session()

    def _auto_session(self) -> SessionRecorder:
        auto = self.auto
        if auto is not None and not auto.ended:
            return auto
        with self._lock:
            if self.auto is None or self.auto.ended:
                if self.recorder is None:
                    self.recorder = Recorder()
                self.auto = self.recorder.session(agent=self.agent, provider=self.provider, labels=self.labels,
                                                  on_close="completed")
            return self.auto

    def end(self) -> None:
        if self.auto is not None:
            self.auto.end("completed")


class Handle:
    """Undo handle of one instrumented client: `undo()` puts back every attribute it replaced."""

    def __init__(self, client: Any, router: Router):
        self.router = router
        self._client = weakref.ref(client)
        self._patches: list[tuple[Any, str, Any]] = []

    @property
    def active(self) -> bool:
        return bool(self._patches)

    def patch(self, owner: Any, name: str, wrap: Callable[[Callable], Callable]) -> None:
        """Replace `owner.name` on this instance only with `wrap(original)`."""
        previous = vars(owner).get(name, _ABSENT)
        setattr(owner, name, wrap(getattr(owner, name)))
        self._patches.append((owner, name, previous))

    def undo(self) -> None:
        """Restore the client as it was; calls already recorded stay recorded. Safe to call twice."""
        while self._patches:
            owner, name, previous = self._patches.pop()
            if previous is _ABSENT:
                vars(owner).pop(name, None)
            else:
                setattr(owner, name, previous)
        with _handles_lock:
            client = self._client()
            if client is not None and _handles.get(client) is self:
                del _handles[client]
        self.router.end()


def install(client: Any, router: Router, patch: Callable[[Handle], None]) -> Handle:
    """Instrument `client` once; a second call returns the first handle and changes nothing."""
    with _handles_lock:
        handle = _handles.get(client)
        if handle is None:
            handle = Handle(client, router)
            patch(handle)
            _handles[client] = handle
    return handle


# ---------------------------------------------------------------------- request bodies


def materialise(kwargs: dict, key: str) -> None:
    """Turn a one-shot iterable argument into a list, so the SDK and the recorder both see it whole."""
    value = kwargs.get(key)
    if value is not None and not isinstance(value, (list, str, dict)):
        kwargs[key] = list(value)


def request_body(kwargs: dict) -> dict:
    """The request body as sent, SDK sentinels and transport options dropped.

    SDK objects inside (a reply appended to the history) stay as they are: the store turns them
    into JSON on the writer thread (`model.jsonable`), so long histories cost no walk here.
    """
    body = {k: v for k, v in kwargs.items() if k not in _TRANSPORT_KWARGS and not _is_sentinel(v)}
    extra = kwargs.get("extra_body")
    if isinstance(extra, dict):
        body.update(plain(extra))
    return body


def _is_sentinel(value: Any) -> bool:
    return type(value).__name__ in ("NotGiven", "Omit")


def plain(value: Any) -> Any:
    """A JSON-ready copy of `value`, sharing whatever is already plain (histories are long).

    SDK models are dumped as the SDKs put them on the wire (`exclude_unset`), so an assistant
    message appended to the history as SDK objects hashes like the response we recorded.
    """
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, dict):
        out = None
        for k, v in value.items():
            p = plain(v)
            if p is not v:
                out = dict(value) if out is None else out
                out[k] = p
        return value if out is None else out
    if isinstance(value, (list, tuple)):
        items = [plain(v) for v in value]
        same = type(value) is list and all(a is b for a, b in zip(items, value))
        return value if same else items
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        return dump(mode="json", exclude_unset=True, warnings=False)  # SDK models hold block types newer than their unions
    return str(value)


def error_info(exc: BaseException) -> dict:
    """What a failed call records: the exception's type and message, and the HTTP status and body."""
    info: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    for attr in ("status_code", "body"):
        value = getattr(exc, attr, None)
        if value is not None:
            info[attr] = plain(value)
    return info


# ---------------------------------------------------------------------- recording


def record(router: Router, fields: dict) -> None:
    """Record one call; capture errors are logged, never raised into the agent (unless strict)."""
    session = None
    try:
        session = router.session()
        session.call(**fields)
    except Exception as exc:
        if session is None:
            log.warning("reasonlog could not open a session for a call: %s", type(exc).__name__)
            return
        session.recorder.reject(exc)  # counted, logged with secrets masked; raised in strict mode


def record_error(router: Router, request: dict, start: float, exc: BaseException, provider: str) -> None:
    record(router, {"request": request, "provider": provider, "model": request.get("model"),
                    "latency_ms": (time.perf_counter() - start) * 1000, "error": error_info(exc),
                    "request_id": getattr(exc, "request_id", None)})


class Tap:
    """Watches one streamed call go by and records it once: complete, partial, or failed.

    Subclasses fold events into their state in `add` (setting `first_at` on the first token and
    `ended` on the stream's own terminal event) and return the call's fields from `fields()`.
    """

    provider = ""

    def __init__(self, router: Router, request: dict, start: float, request_id: str | None = None):
        self.router, self.request, self.start, self.request_id = router, request, start, request_id
        self.first_at: float | None = None
        self.ended = False
        self.done = False

    def add(self, event: Any) -> None:
        raise NotImplementedError

    def watch(self, event: Any) -> None:
        """`add`, but an event we cannot read never reaches the caller as an error."""
        try:
            self.add(event)
        except Exception:
            log.warning("reasonlog could not read a stream event %r", getattr(event, "type", None), exc_info=True)

    def fields(self) -> dict:
        raise NotImplementedError

    def finish(self, exhausted: bool, error: BaseException | None = None) -> None:
        """Record the call: `exhausted` says the caller read the stream to its end."""
        if self.done:
            return
        self.done = True
        now = time.perf_counter()
        try:
            fields = self.fields()
        except Exception:  # a stream cut anywhere must still leave a record
            log.warning("reasonlog could not read a stream's content", exc_info=True)
            fields = {}
        fields.setdefault("model", self.request.get("model"))
        fields.update(request=self.request, provider=self.provider, request_id=self.request_id,
                      latency_ms=(now - self.start) * 1000,
                      ttft_ms=None if self.first_at is None else (self.first_at - self.start) * 1000,
                      partial=not (exhausted or self.ended))
        if error is not None:
            fields["error"] = error_info(error)
        record(self.router, fields)


# ---------------------------------------------------------------------- stream proxies


class StreamProxy:
    """Stands in for an SDK stream: the caller gets the same events while a `Tap` watches them.

    The call is recorded when the stream ends, fails, is closed, or is dropped unread (partial).
    `__class__` answers with the wrapped stream's class so `isinstance` checks keep working.
    """

    def __init__(self, inner: Any, tap: Tap):
        self._inner, self._tap = inner, tap

    @property
    def __class__(self):  # noqa: D401 - mimics the wrapped stream for isinstance()
        return type(self._inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __iter__(self):
        return self

    def __next__(self):
        try:
            event = next(self._inner)
        except StopIteration:
            self._tap.finish(True)
            raise
        except Exception as exc:
            self._tap.finish(False, exc)
            raise
        self._tap.watch(event)
        return event

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._tap.finish(False)

    def __del__(self) -> None:
        tap = self.__dict__.get("_tap")
        if tap is not None and not tap.done:
            tap.finish(False)


class AsyncStreamProxy(StreamProxy):
    """`StreamProxy` for the SDKs' async streams."""

    def __aiter__(self):
        return self

    async def __anext__(self):
        try:
            event = await self._inner.__anext__()
        except StopAsyncIteration:
            self._tap.finish(True)
            raise
        except Exception as exc:
            self._tap.finish(False, exc)
            raise
        self._tap.watch(event)
        return event

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    async def close(self) -> None:
        try:
            await self._inner.close()
        finally:
            self._tap.finish(False)
