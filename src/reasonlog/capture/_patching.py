"""Shared machinery of the SDK adapters: one patch point per client, undo handles, session routing, stream taps.

Both SDKs send every API call of a client through the client object's public `request` method
(`SyncAPIClient.request` / `AsyncAPIClient.request`): `create`, `with_raw_response`, the `beta`
resources, `parse` and the stream helpers alike. An adapter replaces `request` on one client
*instance*, never on a class or a module, so other clients in the process are untouched. The
SDKs' `copy` / `with_options` build a new client; those are patched on the instance too, so a
copy made after instrumenting records into the same place.

Our own code runs inside `try`; what fails there goes to `log_internal_error` (logged and
counted, or re-raised under the test suite), never into the agent.
"""
from __future__ import annotations

import inspect
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from .internal import log_internal_error
from .recorder import Recorder, SessionRecorder, current_session

_ABSENT = object()
_handles: "weakref.WeakKeyDictionary[Any, Handle]" = weakref.WeakKeyDictionary()
_handles_lock = threading.Lock()
_SCALARS = (str, int, float, bool, type(None))


class Router:
    """Chooses where a call lands: the session given, else the current one, else one per client."""

    def __init__(self, recorder: Recorder | None, session: SessionRecorder | None, agent: str, provider: str,
                 labels: dict | None = None):
        self.recorder, self.fixed, self.agent, self.provider = recorder, session, agent, provider
        self.labels = labels
        self.auto: SessionRecorder | None = None
        self._lock = threading.Lock()

    def session(self, model: str | None = None) -> SessionRecorder:
        """The session for a call; an automatic one is labelled with the model of its first call."""
        return self.fixed or current_session() or self._auto_session(model)

    def _auto_session(self, model: str | None) -> SessionRecorder:
        auto = self.auto
        if auto is not None and not auto.ended:
            return auto
        with self._lock:
            if self.auto is None or self.auto.ended:
                if self.recorder is None:
                    self.recorder = Recorder()
                self.auto = self.recorder.session(agent=self.agent, provider=self.provider, labels=self.labels,
                                                  model=model if isinstance(model, str) else None,
                                                  on_close="completed")
            return self.auto

    def error_recorder(self) -> Recorder | None:
        """Where an internal error is counted."""
        session = self.fixed or current_session() or self.auto
        return self.recorder or (session.recorder if session is not None else None)

    def end(self) -> None:
        if self.auto is not None:
            self.auto.end("completed")


class Handle:
    """Undo handle of one instrumented client: `undo()` puts back every attribute it replaced.

    Copies of the client made while it was instrumented (`with_options`) are undone with it. The handle is the
    value of a weak mapping keyed by the client, so it holds the client and what it patched weakly: a strong
    reference would keep every instrumented client (and its open connections) alive after the agent drops it.
    """

    def __init__(self, client: Any, router: Router, owns_router: bool = True):
        self.router, self.owns_router = router, owns_router
        self._client = weakref.ref(client)
        self._patches: list[tuple[weakref.ref, str, Any]] = []
        self._copies: "weakref.WeakSet[Any]" = weakref.WeakSet()

    @property
    def active(self) -> bool:
        return bool(self._patches)

    def adopt(self, copy: Any) -> None:
        """Undo `copy`'s patches with this client's (held weakly: a copy per call must not pile up)."""
        self._copies.add(copy)

    def patch(self, owner: Any, name: str, wrap: Callable[[Callable], Callable]) -> None:
        """Replace `owner.name` on this instance only with `wrap(original)`."""
        previous = vars(owner).get(name, _ABSENT)
        setattr(owner, name, wrap(getattr(owner, name)))
        self._patches.append((weakref.ref(owner), name, previous))

    def undo(self) -> None:
        """Restore the client (and its copies) as it was; calls recorded stay recorded. Safe to call twice."""
        while self._patches:
            owner_ref, name, previous = self._patches.pop()
            owner = owner_ref()
            if owner is None:
                continue
            if previous is _ABSENT:
                vars(owner).pop(name, None)
            else:
                setattr(owner, name, previous)
        for copy in list(self._copies):
            copy_handle = _handles.get(copy)
            if copy_handle is not None:
                copy_handle.undo()
        with _handles_lock:
            client = self._client()
            if client is not None and _handles.get(client) is self:
                del _handles[client]
        if self.owns_router:  # a copy's undo leaves the automatic session to the client it came from
            self.router.end()


def install(client: Any, router: Router, patch: Callable[[Handle], None], owns_router: bool = True) -> Handle:
    """Instrument `client` once; a second call returns the first handle and changes nothing."""
    with _handles_lock:
        handle = _handles.get(client)
        if handle is None:
            handle = Handle(client, router, owns_router)
            patch(handle)
            _handles[client] = handle
    return handle


class Api:
    """One model API of a provider: where its context goes in the body, how a result becomes a call.

    `fields(result)` reads the SDK's response object, `fields_of_json(dict)` the payload as JSON
    (a raw response), and `tap` folds a stream of its events.
    """

    def __init__(self, context_key: str, fields: Callable, fields_of_json: Callable, tap: "type[Tap]"):
        self.context_key, self.fields, self.fields_of_json, self.tap = context_key, fields, fields_of_json, tap


class Adapter:
    """What one SDK needs: its provider name, the APIs by request path, its stream classes and request-id header."""

    def __init__(self, provider: str, apis: dict[str, Api], streams: tuple, request_id_header: str):
        self.provider, self.apis, self.streams, self.request_id_header = provider, apis, streams, request_id_header


def hook_client(handle: Handle, client: Any, adapter: Adapter, is_async: bool) -> None:
    """Patch `client.request` (every API call) and `copy` / `with_options` (copies record too)."""
    wrap = _wrap_async_request if is_async else _wrap_request
    handle.patch(client, "request", lambda f: wrap(f, handle.router, adapter))
    for name in ("copy", "with_options"):
        handle.patch(client, name, lambda f: _wrap_copy(f, handle, adapter, is_async))


def _wrap_copy(copy: Callable, handle: Handle, adapter: Adapter, is_async: bool) -> Callable:
    def copy_recorded(*args, **kwargs):
        new = copy(*args, **kwargs)
        try:
            install(new, handle.router, lambda h: hook_client(h, new, adapter, is_async), owns_router=False)
            handle.adopt(new)
        except Exception:
            log_internal_error(handle.router.error_recorder(), "instrumenting a client copy")
        return new

    copy_recorded.__wrapped__ = copy  # type: ignore[attr-defined]
    return copy_recorded


def _wrap_request(request: Callable, router: Router, adapter: Adapter) -> Callable:
    def request_recorded(*args, **kwargs):
        call = Call.begin(router, adapter, args, kwargs)
        if call is None:
            return request(*args, **kwargs)
        try:
            result = request(*args, **kwargs)
        except Exception as exc:
            call.failed(exc)
            raise
        return call.observe(result, StreamProxy)

    request_recorded.__wrapped__ = request  # type: ignore[attr-defined]
    return request_recorded


def _wrap_async_request(request: Callable, router: Router, adapter: Adapter) -> Callable:
    async def request_recorded(*args, **kwargs):
        call = Call.begin(router, adapter, args, kwargs)
        if call is None:
            return await request(*args, **kwargs)
        try:
            result = await request(*args, **kwargs)
        except Exception as exc:
            call.failed(exc)
            raise
        return call.observe(result, AsyncStreamProxy)

    request_recorded.__wrapped__ = request  # type: ignore[attr-defined]
    return request_recorded


# ---------------------------------------------------------------------- one call


class Call:
    """One model call on its way through the SDK's `request`: recorded once it has a result."""

    __slots__ = ("router", "adapter", "api", "request", "start")

    def __init__(self, router: Router, adapter: Adapter, api: Api, request: dict):
        self.router, self.adapter, self.api, self.request = router, adapter, api, request
        self.start = time.perf_counter()

    @classmethod
    def begin(cls, router: Router, adapter: Adapter, args: tuple, kwargs: dict) -> "Call | None":
        """A `Call` for a model API's request (`request(cast_to, options, ...)`); None for any other."""
        try:
            options = args[1] if len(args) > 1 else kwargs["options"]
            api = adapter.apis.get(options.url)
            if api is None or options.method.lower() != "post":
                return None
            return cls(router, adapter, api, request_of(options, api))
        except Exception:
            log_internal_error(router.error_recorder(), f"{adapter.provider} request")
            return None

    def failed(self, exc: BaseException) -> None:
        try:
            record_error(self.router, self.request, self.start, exc, self.adapter.provider)
        except Exception:
            log_internal_error(self.router.error_recorder(), f"{self.adapter.provider} error")

    def observe(self, result: Any, proxy: type) -> Any:
        """Record a finished response now; hand back a stream or raw response that records as it is read."""
        try:
            if isinstance(result, self.adapter.streams):
                return proxy(result, self.tap(getattr(result, "response", None)))
            if hasattr(result, "http_response") and hasattr(result, "parse"):
                return self._raw(result, proxy)
            if hasattr(result, "model_dump"):
                self.finish(self.api.fields(result), getattr(result, "_request_id", None))
        except Exception:
            log_internal_error(self.router.error_recorder(), f"{self.adapter.provider} response")
        return result

    def _raw(self, raw: Any, proxy: type) -> Any:
        """`with_raw_response` (body read: recorded now) or a stream / `with_streaming_response` (on parse)."""
        http = raw.http_response
        if http.is_closed and not self.request.get("stream"):
            self.finish(self.api.fields_of_json(http.json()), http.headers.get(self.adapter.request_id_header))
            return raw
        return RawResponseProxy(raw, self, proxy)

    def tap(self, response: Any) -> "Tap":
        request_id = None if response is None else response.headers.get(self.adapter.request_id_header)
        return self.api.tap(self.router, self.request, self.start, request_id)

    def finish(self, fields: dict, request_id: str | None) -> None:
        fields.update(request=self.request, provider=self.adapter.provider, request_id=request_id,
                      latency_ms=(time.perf_counter() - self.start) * 1000)
        fields["model"] = fields.get("model") or self.request.get("model")
        record(self.router, fields)


class RawResponseProxy:
    """Stands in for a raw response whose body is read later: what `parse()` gives is recorded once."""

    def __init__(self, inner: Any, call: Call, proxy: type):
        self._inner, self._call, self._proxy = inner, call, proxy
        self._parsed: Any = _ABSENT

    @property  # type: ignore[misc]
    def __class__(self):  # noqa: D401 - mimics the wrapped response for isinstance()
        return type(self._inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def parse(self, *args, **kwargs) -> Any:
        parsed = self._inner.parse(*args, **kwargs)
        if inspect.isawaitable(parsed):  # the async SDK's APIResponse.parse is a coroutine
            return self._parse_later(parsed)
        return self._seen(parsed)

    async def _parse_later(self, pending: Any) -> Any:
        return self._seen(await pending)

    def _seen(self, parsed: Any) -> Any:
        if self._parsed is _ABSENT:
            self._parsed = self._call.observe(parsed, self._proxy)
        return self._parsed


# ---------------------------------------------------------------------- request bodies


def request_of(options: Any, api: Api) -> dict:
    """The body as the SDK will send it: its own dict, sentinels dropped, `extra_body` merged.

    SDK objects inside (a reply appended to the history) stay as they are: the store turns them
    into JSON on the writer thread (`model.jsonable`), so long histories cost no walk here.
    """
    body = options.json_data
    if not isinstance(body, dict):
        return {}
    materialise(body, api.context_key)  # the SDK built this dict for this call; a generator must be read once
    out = {k: v for k, v in body.items() if not _is_sentinel(v)}
    extra = getattr(options, "extra_json", None)
    if isinstance(extra, dict):
        out.update(plain(extra))
    return out


def materialise(kwargs: dict, key: str) -> None:
    """Turn a one-shot iterable argument into a list, so the SDK and the recorder both see it whole."""
    value = kwargs.get(key)
    if value is not None and not isinstance(value, (list, str, dict)):
        kwargs[key] = list(value)


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
        same = type(value) is list and all(a is b for a, b in zip(items, value, strict=False))
        return value if same else items
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        # warnings off: SDK models hold block types newer than their unions
        return dump(mode="json", exclude_unset=True, warnings=False)
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


def record(router: Router, fields: dict, session: SessionRecorder | None = None) -> None:
    """Record one call in `session` (default: the router's session now); reasonlog's own failures go to
    `log_internal_error`, never into the agent."""
    try:
        (session or router.session(fields.get("model"))).call(**fields)
    except Exception:
        log_internal_error(router.error_recorder(), "recording a call")


def session_of(router: Router, model: str | None) -> SessionRecorder | None:
    """The router's session now, or None (then `record` asks again) if finding it failed."""
    try:
        return router.session(model)
    except Exception:
        log_internal_error(router.error_recorder(), "finding the session of a call")
        return None


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
        # The session is the one current when the request was sent: a stream dropped unread is recorded when
        # it is collected, and by then another session (another test, task or request) may be current.
        self.session = session_of(router, request.get("model"))
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
            log_internal_error(self.router.error_recorder(), f"{self.provider} stream event")

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
            log_internal_error(self.router.error_recorder(), f"{self.provider} stream content")
            fields = {}
        fields.setdefault("model", self.request.get("model"))
        fields.update(request=self.request, provider=self.provider, request_id=self.request_id,
                      latency_ms=(now - self.start) * 1000,
                      ttft_ms=None if self.first_at is None else (self.first_at - self.start) * 1000,
                      partial=not (exhausted or self.ended))
        if error is not None:
            fields["error"] = error_info(error)
        record(self.router, fields, self.session)


# ---------------------------------------------------------------------- stream proxies


class StreamProxy:
    """Stands in for an SDK stream: the caller gets the same events while a `Tap` watches them.

    The call is recorded when the stream ends, fails, is closed, or is dropped unread (partial).
    `__class__` answers with the wrapped stream's class so `isinstance` checks keep working.
    """

    def __init__(self, inner: Any, tap: Tap):
        self._inner, self._tap = inner, tap

    @property  # type: ignore[misc]
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

    async def close(self) -> None:  # type: ignore[override]
        try:
            await self._inner.close()
        finally:
            self._tap.finish(False)
