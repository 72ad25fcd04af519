"""Record every Messages call of one `anthropic.Anthropic` / `anthropic.AsyncAnthropic` client.

`instrument_anthropic(client)` wraps that client's `messages.create` (plain and `stream=True`) and
`messages.stream(...)`. Each call records the request body as sent, the assistant message
(`{"role": "assistant", "content": [blocks]}`, every block dumped as the SDK sends it back),
stop reason, usage, request id (`Message._request_id`, which the SDK documents as public, or
the `request-id` header of a stream's public `response`), latency, time to first token and the
payload. A stream the caller leaves early is recorded as partial; API errors as failed calls.
"""
from __future__ import annotations

import json
import time
from typing import Any

from ..model import Usage
from ._patching import (
    AsyncStreamProxy,
    Handle,
    Router,
    StreamProxy,
    Tap,
    install,
    materialise,
    record,
    record_error,
    request_body,
)
from .recorder import Recorder, SessionRecorder

PROVIDER = "anthropic"


def instrument_anthropic(client: Any, recorder: Recorder | None = None, *,
                         session: SessionRecorder | None = None) -> Handle:
    """Record the Messages calls of this client; returns a handle whose `undo()` restores it.

    Calls land in `session` if given, else in the session of the enclosing `with rec.session()`,
    else in a session started for this client on its first call (agent "anthropic-client").
    Without `recorder`, that automatic session goes to the default database.
    """
    import anthropic  # imported here: reasonlog installs and imports without the SDK

    router = Router(recorder, session, "anthropic-client", PROVIDER)
    is_async = isinstance(client, anthropic.AsyncAnthropic)

    def patch(handle: Handle) -> None:
        messages = client.messages
        handle.patch(messages, "create", lambda f: _wrap_async_create(f, router) if is_async
                     else _wrap_create(f, router))
        handle.patch(messages, "stream", lambda f: _wrap_stream(f, router, is_async))

    return install(client, router, patch)


# ---------------------------------------------------------------------- create


def _prepare(kwargs: dict) -> dict:
    materialise(kwargs, "messages")
    return request_body(kwargs)


def _wrap_create(create, router: Router):
    def create_recorded(*args, **kwargs):
        request = _prepare(kwargs)
        start = time.perf_counter()
        try:
            result = create(*args, **kwargs)
        except Exception as exc:
            record_error(router, request, start, exc, PROVIDER)
            raise
        return _observe(result, router, request, start, StreamProxy)

    create_recorded.__wrapped__ = create
    return create_recorded


def _wrap_async_create(create, router: Router):
    async def create_recorded(*args, **kwargs):
        request = _prepare(kwargs)
        start = time.perf_counter()
        try:
            result = await create(*args, **kwargs)
        except Exception as exc:
            record_error(router, request, start, exc, PROVIDER)
            raise
        return _observe(result, router, request, start, AsyncStreamProxy)

    create_recorded.__wrapped__ = create
    return create_recorded


def _observe(result: Any, router: Router, request: dict, start: float, proxy: type) -> Any:
    """Record a finished message now; wrap a stream so it is recorded when it ends."""
    import anthropic

    if isinstance(result, anthropic.types.Message):
        record(router, _message_fields(result, request, start))
        return result
    if isinstance(result, (anthropic.Stream, anthropic.AsyncStream)):
        return proxy(result, MessageTap(router, request, start, _header_request_id(result)))
    return result  # a raw-response wrapper (`with_raw_response`) or something newer: pass it through


def _message_fields(message: Any, request: dict, start: float) -> dict:
    # The SDK's objects go to the recorder as they are: the writer thread dumps them to JSON
    # (model.jsonable), so the agent's thread pays for no model_dump.
    return {"request": request, "response": {"role": "assistant", "content": list(message.content or ())},
            "model": message.model or request.get("model"), "provider": PROVIDER,
            "stop_reason": message.stop_reason, "usage": Usage.from_anthropic(message.usage) if message.usage else None,
            "latency_ms": (time.perf_counter() - start) * 1000, "provider_message_id": message.id,
            "request_id": getattr(message, "_request_id", None), "raw": message}


def _header_request_id(stream: Any) -> str | None:
    response = getattr(stream, "response", None)
    return None if response is None else response.headers.get("request-id")


# ---------------------------------------------------------------------- streams


class MessageTap(Tap):
    """Folds Messages stream events into the message the non-streamed call would have returned.

    Follows the SDK's own accumulation: a `message_delta`'s usage counts are running totals
    that overwrite, and a count it leaves out keeps its `message_start` value.
    """

    provider = PROVIDER

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.message: dict | None = None
        self.json_parts: dict[int, list[str]] = {}

    def add(self, event: Any) -> None:
        kind = getattr(event, "type", None)
        if kind == "content_block_delta":
            self._delta(event.index, event.delta)
        elif kind == "content_block_start" and self.message is not None:
            self.message["content"].append(event.content_block.model_dump(mode="json", exclude_unset=True, warnings=False))
            self.first_at = self.first_at or time.perf_counter()
        elif kind == "message_start":
            self.message = event.message.model_dump(mode="json", exclude_unset=True, warnings=False)
            self.message["content"] = []
        elif kind == "message_delta" and self.message is not None:
            self._message_delta(event)
        elif kind == "content_block_stop":
            self._parse_input(event.index)
        elif kind == "message_stop":
            self.ended = True

    def _delta(self, index: int, delta: Any) -> None:
        if self.message is None or index >= len(self.message["content"]):
            return
        block, kind = self.message["content"][index], delta.type
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta.text
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.thinking
        elif kind == "signature_delta":
            block["signature"] = delta.signature
        elif kind == "input_json_delta":
            self.json_parts.setdefault(index, []).append(delta.partial_json)
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta.citation.model_dump(mode="json", exclude_unset=True, warnings=False))

    def _parse_input(self, index: int) -> None:
        text = "".join(self.json_parts.pop(index, ()))
        if text and self.message is not None and index < len(self.message["content"]):
            self.message["content"][index]["input"] = _parse_json(text)

    def _message_delta(self, event: Any) -> None:
        delta = event.delta.model_dump(mode="json", exclude_unset=True, warnings=False)
        self.message.update({k: v for k, v in delta.items() if v is not None or k.startswith("stop_")})
        usage = self.message.setdefault("usage", {})
        for key, value in event.usage.model_dump(mode="json", exclude_unset=True, warnings=False).items():
            if value is not None:
                usage[key] = value

    def fields(self) -> dict:
        for index in list(self.json_parts):
            self._parse_input(index)
        msg = self.message
        if msg is None:
            return {}
        return {"response": {"role": "assistant", "content": msg["content"]}, "model": msg.get("model"),
                "stop_reason": msg.get("stop_reason"), "usage": Usage.from_anthropic(msg.get("usage") or {}),
                "provider_message_id": msg.get("id"), "raw": msg}


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:  # cut off mid-way: keep what arrived, parsed as far as it goes, as the SDK does
        from jiter import from_json  # a dependency of the anthropic SDK itself

        try:
            return from_json(text.encode(), partial_mode=True)
        except ValueError:
            return {}


# ---------------------------------------------------------------------- messages.stream(...)


def _wrap_stream(stream, router: Router, is_async: bool):
    def stream_recorded(*args, **kwargs):
        request = {**_prepare(kwargs), "stream": True}
        manager = stream(*args, **kwargs)
        return (AsyncManagerProxy if is_async else ManagerProxy)(manager, router, request)

    stream_recorded.__wrapped__ = stream
    return stream_recorded


class ManagerProxy:
    """Stands in for `MessageStreamManager`: the request starts on enter, as in the SDK."""

    def __init__(self, manager: Any, router: Router, request: dict):
        self._manager, self._router, self._request = manager, router, request
        self._stream: HelperStreamProxy | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._manager, name)

    def __enter__(self):
        start = time.perf_counter()
        try:
            inner = self._manager.__enter__()
        except Exception as exc:
            record_error(self._router, self._request, start, exc, PROVIDER)
            raise
        tap = MessageTap(self._router, self._request, start, getattr(inner, "request_id", None))
        self._stream = HelperStreamProxy(inner, tap)
        return self._stream

    def __exit__(self, *exc_info):
        if self._stream is not None:
            self._stream._tap.finish(False)  # an error while reading was recorded where it was raised
        return self._manager.__exit__(*exc_info)


class HelperStreamProxy(StreamProxy):
    """`MessageStream` seen through a tap; its helpers read the stream through the proxy too."""

    def __init__(self, inner: Any, tap: Tap):
        super().__init__(inner, tap)
        self.text_stream = self._text()

    def _text(self):
        for event in self:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                yield event.delta.text

    def until_done(self) -> None:
        for _ in self:
            pass

    def get_final_message(self):
        self.until_done()
        return self._inner.get_final_message()

    def get_final_text(self) -> str:
        self.until_done()
        return self._inner.get_final_text()


class AsyncManagerProxy(ManagerProxy):
    """Stands in for `AsyncMessageStreamManager`."""

    async def __aenter__(self):
        start = time.perf_counter()
        try:
            inner = await self._manager.__aenter__()
        except Exception as exc:
            record_error(self._router, self._request, start, exc, PROVIDER)
            raise
        tap = MessageTap(self._router, self._request, start, getattr(inner, "request_id", None))
        self._stream = AsyncHelperStreamProxy(inner, tap)
        return self._stream

    async def __aexit__(self, *exc_info):
        if self._stream is not None:
            self._stream._tap.finish(False)
        return await self._manager.__aexit__(*exc_info)


class AsyncHelperStreamProxy(AsyncStreamProxy):
    """`AsyncMessageStream` seen through a tap."""

    def __init__(self, inner: Any, tap: Tap):
        super().__init__(inner, tap)
        self.text_stream = self._text()

    async def _text(self):
        async for event in self:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                yield event.delta.text

    async def until_done(self) -> None:
        async for _ in self:
            pass

    async def get_final_message(self):
        await self.until_done()
        return await self._inner.get_final_message()

    async def get_final_text(self) -> str:
        await self.until_done()
        return await self._inner.get_final_text()
