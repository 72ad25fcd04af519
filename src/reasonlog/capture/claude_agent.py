"""Record a Claude Agent SDK session from the messages the SDK yields.

Feed `ClaudeAgentLogger.log` every message `query()` or `ClaudeSDKClient` yields (Python
dataclasses), or the same messages as JSON dicts from the TypeScript SDK. Mapping:

- `system`/`init` starts the session (model, cwd, tools, permission mode; the SDK's session id
  becomes `external_id`). The CLI repeats init at every turn; a later init with a known session
  id, from this logger or an earlier process, appends to that session.
- An SDK "turn" is a call. The SDK yields one message per content block, all sharing the API
  response's `message.id`; they are merged into one call. Messages without an id are merged
  while nothing comes between them in their thread (a new API request needs a user message).
- `user` tool results become tool results; `result` ends the exchange with its figures.
- Messages with `parent_tool_use_id` go to a child session linked to the spawning call.

`result.total_cost_usd` and `modelUsage` are totals for the CLI process so far (in streaming-
input mode one process serves every exchange; anthropics/claude-code#83239): an exchange's cost
and tokens are the difference from the previous result of the same process and SDK session,
never a sum of totals. Both come from `modelUsage` (tokens and `costUSD` per model); the other
figures (`total_cost_usd`, `usage`) are kept raw in the exchange's stats.
"""
from __future__ import annotations

import collections
import dataclasses
import logging
import os
from typing import TYPE_CHECKING, Any

from ..model import Usage
from ..wire.rules import RecordError

if TYPE_CHECKING:
    from .recorder import ExchangeRecorder

log = logging.getLogger("reasonlog")

PROVIDER = "anthropic"
_MODEL_FIELDS = {"inputTokens": "input_tokens", "outputTokens": "output_tokens",
                 "cacheReadInputTokens": "cache_read_tokens", "cacheCreationInputTokens": "cache_write_tokens",
                 "costUSD": "cost_usd"}


class _Thread:
    """One conversation thread: the main agent, or a subagent spawned by a tool call."""

    def __init__(self, session, model: str | None):
        self.session, self.model = session, model
        self.history: list[dict] = []  # the context as the agent's next request will carry it
        self.pending: dict | None = None  # the assistant response being assembled
        self.stream_id: str | None = None  # message id of the response being streamed
        # A subagent's one exchange: its prompt until its tool result.
        self.exchange: ExchangeRecorder | None = None


class ClaudeAgentLogger:
    """Records one Claude Agent SDK session: `log(message)` for each message, `close()` at the end."""

    def __init__(self, recorder, *, run: str | None = None, labels: dict | None = None, agent: str | None = None):
        self.recorder, self.run, self.labels, self.agent = recorder, run, dict(labels or {}), agent
        self.main: _Thread | None = None
        self.external_id: str | None = None
        self._threads: dict[str, _Thread] = {}  # parent_tool_use_id -> subagent thread
        self._tool_uses: dict[str | None, tuple[_Thread, str | None, dict]] = {}  # id -> (thread, call id, block)
        self._inputs: collections.deque = collections.deque()
        self._exchange: ExchangeRecorder | None = None
        self._totals = _Totals()
        self._resumed_history: list | None = None
        self._closed = False

    # ------------------------------------------------------------------ public

    def log(self, message: Any) -> None:
        """Record one SDK message (a dataclass from `claude_agent_sdk` or its JSON dict)."""
        if self._closed:
            return
        try:
            data = message_dict(message)
            handler = getattr(self, "_on_" + str(data.get("type")), None)
            if handler is not None:
                handler(data)
        except (RecordError, KeyError, TypeError, ValueError, AttributeError) as exc:
            # Capture never breaks the agent: count and log, unless the recorder is strict.
            self.recorder.reject(RecordError(f"claude agent message: {exc!r}"))

    def log_user_input(self, text: Any) -> None:
        """Start an exchange with what the user sent (call before or after sending it to the SDK).

        The exchange opens with the next message the SDK yields, so that a prompt the CLI answers
        in a new SDK session (fork, `/clear`) goes to that session, not to the one before.
        """
        self._inputs.append(text)

    def close(self, error: BaseException | None = None) -> None:
        """Write what was seen and end the session; an open exchange ends as interrupted (or failed)."""
        if self._closed:
            return
        self._closed = True
        if self.main is not None:
            self._end_main(error)
            self.recorder.flush(timeout=10.0)

    def _end_main(self, error: BaseException | None) -> None:
        for thread in self._all_threads():
            self._flush(thread)
        status = "failed" if error is not None else "interrupted"
        for key in list(self._threads):
            self._end_child(key, None, status)
        if self._exchange is not None:
            self._exchange.end(status=status)
            self._exchange = None
        self._require_main().session.end("failed" if error is not None else "completed", error=error)
        self.main = None

    def __enter__(self) -> "ClaudeAgentLogger":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(exc)

    # ------------------------------------------------------------------ system / init

    def _on_system(self, data: dict) -> None:
        subtype = data.get("subtype")
        if subtype == "init":
            self._on_init(data)
        elif subtype == "compact_boundary" and self.main is not None:
            self.main.history = []  # the CLI rewrote the window; what follows starts a new context

    def _on_init(self, data: dict) -> None:
        external = data.get("session_id")
        self._totals.see(data.get("messaging_socket_path"), external)
        if self.main is not None and external == self.external_id:
            self.main.model = data.get("model") or self.main.model
            return
        if self.main is not None:  # a different session in the same stream (fork, /clear)
            self._end_main(None)
        self.external_id = external
        self.main = _Thread(self._open_session(data, external), data.get("model"))
        if self._inputs:
            self._start_exchange()

    def _open_session(self, data: dict, external: str | None):
        labels = {"cwd": data.get("cwd"), "permission_mode": data.get("permissionMode"),
                  "tools": ",".join(data.get("tools") or ()), "claude_code_version": data.get("claude_code_version")}
        labels = {k: v for k, v in labels.items() if v} | self.labels
        existing, self._resumed_history = self._find_session(external)
        return self.recorder.session(agent=self.agent, run=self.run, model=data.get("model"), provider=PROVIDER,
                                     labels=labels, external_id=external, id=existing)

    def _find_session(self, external: str | None) -> tuple[str | None, list | None]:
        """The reasonlog session an SDK session id was recorded as, and its timeline, if any."""
        if not external or not os.path.exists(self.recorder.db_path):
            return None, None
        from ..store import open_store

        # The recorder has no lookup of its own (yet): read the database it writes to.
        self.recorder.flush(timeout=10.0)
        try:
            store = open_store(self.recorder.db_path, upgrade=False)
            try:
                session_id = store.resolve_id("session", external)
                messages = store.get_session(session_id)["messages"]
            finally:
                store.close()
        except Exception:  # no such session, or a store not created yet: a new session
            return None, None
        return session_id, [m["content"] for m in messages if m["role"] in ("user", "assistant")]

    # ------------------------------------------------------------------ exchanges

    def _start_exchange(self) -> ExchangeRecorder:
        if self._exchange is not None:
            return self._exchange
        text = self._inputs.popleft() if self._inputs else None
        main = self._require_main()
        self._exchange = exchange = main.session.exchange(text)
        if self._resumed_history is not None:
            main.history, self._resumed_history = self._resumed_history, None
        if text is not None:
            main.history.append({"role": "user", "content": text})
        return exchange

    def _ensure_exchange(self) -> ExchangeRecorder:
        """The open exchange, started if need be."""
        self._require_main()
        return self._start_exchange()

    def _require_main(self) -> _Thread:
        if self.main is None:
            raise RecordError("a message came before system/init; log every message the SDK yields")
        return self.main

    def _on_result(self, data: dict) -> None:
        exchange = self._ensure_exchange()
        for thread in self._all_threads():
            self._flush(thread, stop_reason=data.get("stop_reason"))
        stats = self._totals.exchange_stats(data)
        status = "failed" if data.get("is_error") else "completed"
        exchange.end(data.get("result"), status=status, stats=stats)
        self._exchange = None
        if self._inputs:
            self._start_exchange()

    # ------------------------------------------------------------------ assistant / user / stream

    def _on_assistant(self, data: dict) -> None:
        self._ensure_exchange()
        thread = self._thread(data.get("parent_tool_use_id"), data["message"].get("model"))
        inner = data["message"]
        mid = inner.get("id")
        if thread.pending is not None and mid != thread.pending["id"]:
            self._flush(thread)
        if thread.pending is None:
            thread.pending = {"id": mid, "model": inner.get("model") or thread.model, "content": [], "usage": {},
                              "stop_reason": None, "raw": []}
        pending = thread.pending
        pending["content"].extend(inner.get("content") or ())
        pending["usage"] = _max_usage(pending["usage"], inner.get("usage"))
        pending["stop_reason"] = inner.get("stop_reason") or pending["stop_reason"]
        pending["raw"].append(data)

    def _on_stream_event(self, data: dict) -> None:
        if self.main is None:
            return
        thread = self._thread(data.get("parent_tool_use_id"), None)
        event = data.get("event") or {}
        if event.get("type") == "message_start":
            thread.stream_id = (event.get("message") or {}).get("id")
        elif event.get("type") == "message_delta" and thread.pending and thread.pending["id"] == thread.stream_id:
            # The assistant messages carry message_start's usage; the final output count comes here.
            thread.pending["usage"] = _max_usage(thread.pending["usage"], event.get("usage"))
            thread.pending["stop_reason"] = (event.get("delta") or {}).get("stop_reason")

    def _on_user(self, data: dict) -> None:
        self._ensure_exchange()
        thread = self._thread(data.get("parent_tool_use_id"), None)
        self._flush(thread)
        content = data["message"].get("content")
        blocks = content if isinstance(content, list) else []
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        thread.history.append({"role": "user", "content": content})
        for block in results:
            self._record_tool_result(thread, block)

    def _record_tool_result(self, thread: _Thread, block: dict) -> None:
        tool_use_id = block.get("tool_use_id")
        entry = self._tool_uses.get(tool_use_id)
        use = entry[2] if entry is not None else {}
        thread.session.tool_result(tool_use_id, block.get("content"), name=use.get("name"), input=use.get("input"),
                                   is_error=bool(block.get("is_error")))
        if tool_use_id in self._threads:
            self._end_child(tool_use_id, block.get("content"), "failed" if block.get("is_error") else "completed")

    # ------------------------------------------------------------------ calls

    def _flush(self, thread: _Thread, stop_reason: str | None = None) -> None:
        """Record the assembled response of a thread as one call."""
        pending, thread.pending = thread.pending, None
        if pending is None:
            return
        response = {"role": "assistant", "content": pending["content"]}
        uses = [b for b in pending["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
        # The CLI's assistant messages leave stop_reason null (they are written mid-stream);
        # a response whose tool calls were run stopped for them.
        stop = pending["stop_reason"] or ("tool_use" if uses else stop_reason)
        call_id = thread.session.call(request={"model": pending["model"], "messages": thread.history},
                                      response=response, model=pending["model"], provider=PROVIDER,
                                      stop_reason=stop, usage=Usage.from_anthropic(pending["usage"]),
                                      provider_message_id=pending["id"], raw=pending["raw"])
        thread.history.append(response)
        for block in uses:
            self._tool_uses[block.get("id")] = (thread, call_id, block)

    def _thread(self, parent_tool_use_id: str | None, model: str | None) -> _Thread:
        if parent_tool_use_id is None:
            return self._require_main()
        thread = self._threads.get(parent_tool_use_id)
        if thread is None:
            thread = self._threads[parent_tool_use_id] = self._open_child(parent_tool_use_id, model)
        return thread

    def _open_child(self, tool_use_id: str, model: str | None) -> _Thread:
        for thread in self._all_threads():  # the spawning response is complete once its tool runs
            if thread.pending and any(b.get("id") == tool_use_id for b in thread.pending["content"]):
                self._flush(thread)
        entry = self._tool_uses.get(tool_use_id)
        parent, call_id, use = entry if entry is not None else (self._require_main(), None, {})
        spec = use.get("input")
        if not isinstance(spec, dict):
            spec = {}
        session = self.recorder.session(agent=spec.get("subagent_type") or "subagent", run=self.run,
                                        model=model or parent.model, provider=PROVIDER, labels=self.labels,
                                        parent=parent.session, parent_call=call_id)
        child = _Thread(session, model or parent.model)
        child.exchange = session.exchange(spec.get("prompt"))
        return child

    def _end_child(self, tool_use_id: str, result: Any, status: str) -> None:
        child = self._threads.pop(tool_use_id)
        self._flush(child)
        if child.exchange is not None:  # always set for a child (see _open_child)
            child.exchange.end(result, status=status)
        child.session.end(status)

    def _all_threads(self) -> list[_Thread]:
        return [t for t in (self.main, *self._threads.values()) if t is not None]


class _Totals:
    """Turns the running totals of result messages into per-exchange figures.

    Tokens and cost come from one source: the per-model figures (`model_usage_since_last_result`
    when the CLI writes it, else the difference of `modelUsage`), with `costUSD` beside the
    tokens it prices. Only without them: the difference of `total_cost_usd`, and `usage`.
    Running totals are differenced only within one CLI process and one SDK session id.
    """

    def __init__(self):
        self.key: tuple | None = None
        self.cost = 0.0
        self.models: dict[str, dict] = {}

    def see(self, process: str | None, session: str | None) -> None:
        if (process, session) != self.key:  # a new process or a new session starts from zero
            self.key, self.cost, self.models = (process, session), 0.0, {}

    def exchange_stats(self, data: dict) -> dict:
        total = data.get("total_cost_usd")
        models = data.get("modelUsage") or data.get("model_usage") or {}
        if data.get("result_index") == 0 or (total is not None and total < self.cost) or _shrank(models, self.models):
            self.cost, self.models = 0.0, {}
        stats = {k: data.get(k) for k in ("num_turns", "duration_ms", "duration_api_ms", "is_error", "subtype",
                                          "stop_reason")}
        since = data.get("model_usage_since_last_result")
        by_model = _by_model(since, {}) if since else _by_model(models, self.models) if models else None
        if by_model is not None:
            stats |= _sum_models(by_model) | {"by_model": by_model}
        else:
            stats |= _usage_tokens(data.get("usage") or {})
            stats["cost_usd"] = None if total is None else round(total - self.cost, 12)
        stats |= {"total_cost_usd": total, "usage": data.get("usage"), "model_usage": models or None}
        if total is not None:
            self.cost = total
        if models:
            self.models = models
        return stats


def _shrank(now: dict, before: dict) -> bool:
    """True when a running total went down or a model disappeared: a new process."""
    for model, old in before.items():
        new = now.get(model)
        if new is None or any((new.get(k) or 0) < (old.get(k) or 0) for k in _MODEL_FIELDS):
            return True
    return False


_STAT_TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def _by_model(now: dict, before: dict) -> dict[str, dict]:
    """Per-model tokens and cost of this exchange: `now` less `before` (both in modelUsage's shape)."""
    out = {}
    for model, figures in now.items():
        old = before.get(model) or {}
        delta = {name: (figures.get(key) or 0) - (old.get(key) or 0) for key, name in _MODEL_FIELDS.items()}
        delta["cost_usd"] = round(delta["cost_usd"], 12) if figures.get("costUSD") is not None else None
        if any(delta.values()):
            out[model] = delta
    return out


def _sum_models(by_model: dict[str, dict]) -> dict:
    out: dict = {name: sum(m[name] for m in by_model.values()) for name in _STAT_TOKENS}
    costs = [m["cost_usd"] for m in by_model.values()]
    out["cost_usd"] = None if None in costs else round(sum(costs), 12)
    return out


def _usage_tokens(usage: dict) -> dict:
    u = Usage.from_anthropic(usage)
    return {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
            "cache_read_tokens": u.cache_read_tokens, "cache_write_tokens": u.cache_write_tokens}


def _max_usage(old: dict, new: dict | None) -> dict:
    """Field-wise largest counters: the SDK repeats a response's usage, with output still growing."""
    if not new:
        return old
    merged = dict(old)
    for key, value in new.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            merged[key] = max(value, merged.get(key) or 0)
        elif key not in merged:
            merged[key] = value
    return merged


# ---------------------------------------------------------------------------------- messages


def message_dict(message: Any) -> dict:
    """A `claude_agent_sdk` message as the JSON the CLI wrote (dicts pass through unchanged)."""
    if isinstance(message, dict):
        return message
    if not dataclasses.is_dataclass(message):
        raise TypeError(f"expected a Claude Agent SDK message or dict, got {type(message).__name__}")
    return _sdk_message_dict(message)


def _sdk_message_dict(message: Any) -> dict:
    """The JSON of a `claude_agent_sdk` dataclass, told by its class name (the SDK is not imported)."""
    name = type(message).__name__
    if hasattr(message, "subtype") and isinstance(getattr(message, "data", None), dict):
        return message.data  # SystemMessage and its subclasses keep the CLI's dict whole
    if name == "AssistantMessage":
        return {"type": "assistant", "parent_tool_use_id": message.parent_tool_use_id,
                "session_id": message.session_id, "uuid": message.uuid, "error": message.error,
                "message": {"id": message.message_id, "role": "assistant", "model": message.model,
                            "content": [_block(b) for b in message.content], "usage": message.usage,
                            "stop_reason": message.stop_reason}}
    if name == "UserMessage":
        content = message.content if isinstance(message.content, str) else [_block(b) for b in message.content]
        return {"type": "user", "parent_tool_use_id": message.parent_tool_use_id, "uuid": message.uuid,
                "tool_use_result": message.tool_use_result, "message": {"role": "user", "content": content}}
    if name == "ResultMessage":
        data = {k: v for k, v in dataclasses.asdict(message).items() if k != "model_usage"}
        return {"type": "result", **data, "modelUsage": message.model_usage}
    if name == "StreamEvent":
        return {"type": "stream_event", "event": message.event, "session_id": message.session_id,
                "parent_tool_use_id": message.parent_tool_use_id, "uuid": message.uuid}
    return {"type": name}  # other SDK messages (rate limits, ...) carry nothing to record


_BLOCK_TYPES = {"TextBlock": "text", "ThinkingBlock": "thinking", "ToolUseBlock": "tool_use",
                "ToolResultBlock": "tool_result", "ServerToolUseBlock": "server_tool_use"}


def _block(block: Any) -> dict:
    if isinstance(block, dict):
        return block
    kind = _BLOCK_TYPES.get(type(block).__name__)
    data = {k: v for k, v in dataclasses.asdict(block).items() if v is not None}
    if kind is None:
        return {"type": "opaque", "data": data}
    return {"type": kind, **data}
