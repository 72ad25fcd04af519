"""Record LangChain chat-model calls and tool runs through a callback handler, `ReasonlogCallback`.

LangChain reports each run to its callback handlers: a chat model's start (the messages and the
invocation parameters, tools included), its tokens, its end (the `AIMessage`) or error, and a
tool's start, end or error. The handler turns each finished run into the same records the SDK
adapters write: one call with the context sent, the assistant message, stop reason, disjoint
usage, model, latency, provider message id and raw metadata; one tool result per tool run.

Messages are stored in the OpenAI Chat shape, converted by LangChain's own public
`convert_to_openai_messages`, whatever the provider: the assistant message a call returns is
converted by the same function as the copy of it the agent sends back in its next context, so
the two hash alike and the store keeps one. (Provider content blocks such as Anthropic thinking
pass through that conversion unchanged.)

This module imports `langchain_core` at its top: only `reasonlog.langchain` imports it, so
`import reasonlog` works without LangChain installed.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ToolMessage,
    convert_to_openai_messages,
)

from ..model import Usage
from ._patching import error_info, plain
from .recorder import Recorder, SessionRecorder, current_session

# Invocation parameters that configure LangChain's client rather than the request body.
_CLIENT_PARAMS = frozenset({"model_name", "max_retries", "default_request_timeout", "request_timeout", "timeout",
                            "streaming", "stream_usage", "default_headers", "default_query", "http_client"})
_TYPE_PROVIDERS: dict[str | None, str] = {"openai-chat": "openai", "azure-openai-chat": "azure",
                                           "anthropic-chat": "anthropic"}


@dataclass
class _ModelRun:
    session: SessionRecorder
    request: dict
    provider: str | None
    model: str | None
    started_at: float  # epoch seconds, for the record
    start: float  # perf_counter, for the latency
    first_token: float | None = None


@dataclass
class _ToolRun:
    session: SessionRecorder
    name: str | None
    input: Any
    tool_call_id: str | None
    start: float


class ReasonlogCallback(BaseCallbackHandler):
    """A LangChain callback handler that records chat-model calls and tool runs into reasonlog.

    Pass it in `callbacks=[...]` (of a model, a tool, an agent or one `invoke`'s config). Runs land
    in `session` if given, else in the session of the enclosing `with recorder.session()` when the
    run starts, else in a session this handler opens on first use (with `agent`, `run`, `labels`)
    and ends on `close()`. Without `recorder`, that session goes to the default database.
    LangChain may call a handler from several threads; runs are kept apart by their `run_id`.
    """

    run_inline = True  # cheap work (building one event); keeps calls in order under asyncio
    # Chains, retrievers and custom events are not recorded. (Tool events are gated by
    # `ignore_agent` in langchain-core's callback manager, so that one must stay False.)
    ignore_chain = ignore_retriever = ignore_retry = ignore_custom_event = True

    def __init__(self, recorder: Recorder | None = None, *, session: SessionRecorder | None = None,
                 agent: str | None = "langchain", run: str | None = None, labels: dict | None = None):
        self.recorder = recorder or (session.recorder if session is not None else None)
        self.session, self.agent, self.run, self.labels = session, agent, run, labels
        # A strict recorder wants bad input raised; LangChain only raises handler errors when told so.
        self.raise_error = bool(self.recorder is not None and self.recorder.strict)
        self._own: SessionRecorder | None = None
        self._owns_recorder = recorder is None and session is None
        self._runs: dict[UUID, _ModelRun | _ToolRun] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ sessions

    def _session_for(self, provider: str | None, model: str | None) -> SessionRecorder:
        return self.session or current_session() or self._own_session(provider, model)

    def _own_session(self, provider: str | None, model: str | None) -> SessionRecorder:
        with self._lock:
            if self._own is None or self._own.ended:
                if self.recorder is None:
                    self.recorder = Recorder()
                self._own = self.recorder.session(agent=self.agent, run=self.run, labels=self.labels,
                                                  provider=provider, model=model)
            return self._own

    def close(self, timeout: float | None = 10.0) -> None:
        """End the session this handler opened (if any); close the recorder too if the handler made it."""
        with self._lock:
            own, self._own, self._runs = self._own, None, {}
        if own is not None:
            own.end("completed")
        if self._owns_recorder and self.recorder is not None:
            self.recorder.close(timeout)

    def __enter__(self) -> "ReasonlogCallback":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _put(self, run_id: UUID, run: _ModelRun | _ToolRun) -> None:
        with self._lock:
            self._runs[run_id] = run

    def _pop(self, run_id: UUID, kind: type) -> Any:
        with self._lock:
            run = self._runs.get(run_id)
            return self._runs.pop(run_id) if isinstance(run, kind) else None

    # ------------------------------------------------------------------ chat models

    def on_chat_model_start(self, serialized: dict, messages: list[list[BaseMessage]], *, run_id: UUID,
                            metadata: dict | None = None, invocation_params: dict | None = None,
                            **kwargs: Any) -> None:
        params = invocation_params or {}
        provider = (metadata or {}).get("ls_provider") or _TYPE_PROVIDERS.get(params.get("_type"))
        model = params.get("model") or params.get("model_name") or (metadata or {}).get("ls_model_name")
        request = request_body(messages[0] if messages else [], params)
        self._put(run_id, _ModelRun(self._session_for(provider, model), request, provider, model, time.time(),
                                    time.perf_counter()))

    def on_llm_new_token(self, token: str | list[str | dict[str, Any]], *, run_id: UUID, **kwargs: Any) -> None:
        run = self._runs.get(run_id)  # a read without the lock: only this run's own thread writes it
        if isinstance(run, _ModelRun) and run.first_token is None:
            run.first_token = time.perf_counter()

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        run = self._pop(run_id, _ModelRun)
        if run is None:
            return  # a plain (non-chat) LLM, or a run that started before this handler was attached
        generation = response.generations[0][0] if response.generations and response.generations[0] else None
        message = getattr(generation, "message", None)
        fields = response_fields(message, generation, run.provider) if isinstance(message, AIMessage) else {}
        run.session.call(request=run.request, provider=run.provider, model=fields.pop("model", None) or run.model,
                         started_at=run.started_at, **_timing(run), **fields)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        run = self._pop(run_id, _ModelRun)
        if run is not None:  # LangChain re-raises the error to the caller itself
            run.session.call(request=run.request, provider=run.provider, model=run.model, started_at=run.started_at,
                             error=error_info(error), request_id=getattr(error, "request_id", None), **_timing(run))

    # ------------------------------------------------------------------ tools

    def on_tool_start(self, serialized: dict, input_str: str, *, run_id: UUID, inputs: dict | None = None,
                      tool_call_id: str | None = None, name: str | None = None, **kwargs: Any) -> None:
        tool_name = (serialized or {}).get("name") or name
        tool_input = plain(inputs) if inputs is not None else input_str
        session = self._session_for(None, None)
        self._put(run_id, _ToolRun(session, tool_name, tool_input, tool_call_id, time.perf_counter()))

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        run = self._pop(run_id, _ToolRun)
        if run is None:
            return
        content, is_error = tool_output(output)
        tool_call_id = run.tool_call_id or (output.tool_call_id if isinstance(output, ToolMessage) else None)
        run.session.tool_result(tool_call_id, content, name=run.name, input=run.input, is_error=is_error,
                                duration_ms=_elapsed_ms(run.start))

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        run = self._pop(run_id, _ToolRun)
        if run is not None:  # the same text `SessionRecorder.tool()` records for a failed tool
            run.session.tool_result(run.tool_call_id or kwargs.get("tool_call_id"),
                                    f"{type(error).__name__}: {error}", name=run.name, input=run.input,
                                    is_error=True, duration_ms=_elapsed_ms(run.start))


# ---------------------------------------------------------------------- conversion


def message_dict(message: BaseMessage) -> dict:
    """One LangChain message as an OpenAI Chat message dict, with reasoning text where LangChain kept it."""
    try:
        out = convert_to_openai_messages(message)
    except Exception:  # content LangChain cannot convert: keep it as it is rather than lose the message
        out = {"role": message.type, "content": plain(message.content)}
    if out.get("role") == "tool":
        out.pop("name", None)  # an OpenAI Chat tool message has no name; langchain-openai drops it too
    if out.get("tool_calls") and not out.get("content"):
        out["content"] = None  # OpenAI Chat's "no text" beside tool calls, as langchain-openai sends it
    # langchain-deepseek, -xai and -groq keep the reasoning text beside the content, not in it.
    reasoning = message.additional_kwargs.get("reasoning_content") if isinstance(message, AIMessage) else None
    if isinstance(reasoning, str) and reasoning:
        out["reasoning_content"] = reasoning
    return out


def request_body(messages: list[BaseMessage], params: dict) -> dict:
    """The request as LangChain would send it: body parameters, tools, then the converted messages."""
    body: dict = {}
    for key, value in params.items():
        if value is None or key.startswith("_") or key in _CLIENT_PARAMS:
            continue
        if key == "model_kwargs" and isinstance(value, dict):
            body.update(plain(value))  # extra body parameters, sent beside the others
        else:
            body[key] = value.__name__ if isinstance(value, type) else plain(value)  # a schema class
    body["messages"] = [message_dict(m) for m in messages]
    return body


def response_fields(message: AIMessage, generation: Any, provider: str | None) -> dict:
    """The recorded fields of a finished call, from the AIMessage LangChain built."""
    meta = dict(message.response_metadata or {})
    info = getattr(generation, "generation_info", None) or {}
    headers = meta.get("headers") or {}  # only with ChatOpenAI(include_response_headers=True)
    raw = {**meta, "usage_metadata": dict(message.usage_metadata)} if message.usage_metadata else meta
    return {"response": message_dict(message), "usage": usage_of(message, provider),
            "stop_reason": meta.get("finish_reason") or meta.get("stop_reason") or info.get("finish_reason"),
            "model": meta.get("model_name") or meta.get("model"), "provider_message_id": meta.get("id"),
            "request_id": headers.get("x-request-id") or headers.get("request-id"), "raw": plain(raw)}


def usage_of(message: AIMessage, provider: str | None) -> Usage | None:
    """Disjoint usage: the provider's own counts when LangChain kept them, else its `usage_metadata`.

    The provider's counts go first because only they tell how a server counted reasoning
    (xAI counts it beside the completion tokens, DeepSeek inside); streamed calls carry only
    `usage_metadata`.
    """
    meta = message.response_metadata or {}
    if isinstance(meta.get("token_usage"), dict):
        return Usage.from_openai(meta["token_usage"])
    if provider == "anthropic" and isinstance(meta.get("usage"), dict):
        return Usage.from_anthropic(meta["usage"])
    return Usage.from_langchain(message.usage_metadata) if message.usage_metadata else None


def tool_output(output: Any) -> tuple[Any, bool]:
    """What a tool returned, and whether it reported an error (a ToolMessage with status "error")."""
    if isinstance(output, ToolMessage):
        return plain(output.content), output.status == "error"
    return plain(output), False


def _timing(run: _ModelRun) -> dict:
    ttft = None if run.first_token is None else round((run.first_token - run.start) * 1000, 3)
    return {"latency_ms": _elapsed_ms(run.start), "ttft_ms": ttft}


def _elapsed_ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)
