"""The wire contract: the JSON form of what reasonlog sends and keeps outside a database.

One place for every shape that leaves the process: the events a recorder spills or sends (their
`to_dict()` form, see `model.Event`), and the records of `reasonlog export` (version 3), which the
HTTP API's bodies reuse. Values are parsed JSON (`labels` is an object, `context` a list), never
SQLite columns with JSON inside strings. No I/O here.

Version 3 of the export differs from version 2 only in that: v2 carried `labels_json` as text,
v3 carries `labels` as an object. `row_of` and `record_of` convert between a record and the
row form the store writes; an import of a version 2 file skips the conversion.
"""
from __future__ import annotations

from typing import Any, Literal

try:  # pydantic (the server's response models) reads only typing_extensions' TypedDict before Python 3.12
    from typing import NotRequired

    from typing_extensions import TypedDict
except ImportError:  # the base install has no pydantic, and the typing module's serves
    from typing import NotRequired, TypedDict  # type: ignore[assignment]

import orjson

EXPORT_VERSION = 3


# ------------------------------------------------------------------------------------ events


class UsageJSON(TypedDict):
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cache_write_1h_tokens: int
    reasoning_tokens: int


class SessionStartedJSON(TypedDict):
    event: Literal["session_started"]
    session_id: str
    started_at: str
    agent: str | None
    run: str | None
    model: str | None
    provider: str | None
    labels: dict[str, Any]
    parent_session_id: str | None
    parent_call_id: str | None
    external_id: str | None
    host: str | None
    pid: int | None
    xml_tool_tags: list[str] | None
    live_token: str | None


class CallRecordedJSON(TypedDict):
    event: Literal["call"]
    call_id: str
    session_id: str
    exchange_id: str | None
    started_at: str
    request: dict[str, Any]          # the request body; messages, system and tools are stored by reference
    response: dict[str, Any] | None  # the assistant message
    model: str | None
    provider: str | None
    stop_reason: str | None
    usage: UsageJSON | None
    cost_usd: float | None           # only when the provider reported it
    latency_ms: float | None
    ttft_ms: float | None
    provider_message_id: str | None
    request_id: str | None
    raw: Any
    error: dict[str, Any] | None
    status: Literal["ok", "error", "partial"]
    context_facts: dict[str, Any] | None
    stable_history: bool


# The other events (`session_ended`, `session_titled`, `exchange_started`, `exchange_ended`, `tool_result`,
# `outcome`) are the fields of their dataclasses in `model.py` with an `event` key; `model.check_event` checks each
# field's type.


# ------------------------------------------------------------------------------------ export records


class SessionFields(TypedDict):
    """A session as every body carries it: an export record, an API answer."""

    id: str
    run: str | None
    agent: str | None
    model: str | None
    provider: str | None
    labels: dict[str, Any]
    parent_session_id: str | None
    parent_call_id: str | None
    external_id: str | None
    host: str | None
    pid: int | None
    started_at: str
    ended_at: str | None
    status: str
    summary: str | None
    error: Any
    xml_tool_tags: list[str] | None


class SessionRecord(SessionFields):
    type: Literal["session"]


class ExchangeRecord(TypedDict):
    type: Literal["exchange"]
    id: str
    session_id: str
    idx: int
    input: Any
    result: Any
    status: str
    stats: dict[str, Any] | None
    started_at: str
    ended_at: str | None


class CallRecord(TypedDict):
    type: Literal["call"]
    id: str
    session_id: str
    idx: int
    exchange_id: str | None
    started_at: str
    model: str | None
    status: str
    params: dict[str, Any]
    shape: dict[str, Any] | None
    context: list[str | list[int]]   # content hashes, and [start, end] runs into the previous call's context
    context_len: int
    tools: list[str] | None          # content hashes
    system_id: str | None            # a content hash
    response_id: str | None          # a content hash
    context_facts: dict[str, Any] | None
    window: NotRequired[dict[str, Any] | None]  # how the context follows from the previous call's (schema 12)
    error: Any
    raw: NotRequired[str | None]
    raw_format: NotRequired[Literal["skeleton", "bytes"] | None]
    raw_encoding: NotRequired[Literal["base64"]]  # present when `raw` is base64 of bytes that are not UTF-8
    # and the measurements: provider, latency_ms, ttft_ms, stop_reason, the token counts, cost_usd, cost_source,
    # provider_message_id, request_id


class MessageRecord(TypedDict):
    type: Literal["message"]
    session_id: str
    idx: int
    role: str | None
    content: str                     # a content hash
    call_id: str | None
    at: str


class ToolResultRecord(TypedDict):
    type: Literal["tool_result"]
    id: str
    session_id: str
    tool_use_id: str | None
    name: str | None
    input: Any
    content: Any
    is_error: int
    duration_ms: float | None
    at: str
    message_idx: int


class OutcomeRecord(TypedDict):
    type: Literal["outcome"]
    id: str
    session_id: str
    kind: str
    payload: Any
    call_id: str | None
    at: str
    message_idx: int


class ContentRecord(TypedDict):
    type: Literal["content"]
    hash: str                        # BLAKE2b-128 of the value's canonical JSON, hex
    kind: Literal["message", "system", "tool"]
    value: Any


# Record type -> {field: (row column, what the value must be)}: the fields whose row form is JSON text.
PARSED: dict[str, dict[str, tuple[str, str]]] = {
    "session": {"labels": ("labels_json", "object"), "error": ("error_json", "any"),
                "xml_tool_tags": ("xml_tool_tags_json", "list")},
    "exchange": {"input": ("input_json", "any"), "result": ("result_json", "any"), "stats": ("stats_json", "object")},
    "call": {"error": ("error_json", "any"), "params": ("params_json", "object"), "shape": ("shape_json", "object"),
             "tools": ("tools_json", "list"), "context": ("context_json", "list"),
             "context_facts": ("context_facts_json", "object"), "window": ("window_json", "object")},
    "tool_result": {"input": ("input_json", "any"), "content": ("content_json", "any")},
    "outcome": {"payload": ("payload_json", "any")},
}
_COLUMN = {kind: {column: name for name, (column, _) in fields.items()} for kind, fields in PARSED.items()}


# ------------------------------------------------------------------------------------ API bodies
# What `/v1/sessions`, `/v1/sessions/{id}` and `/v1/calls/{id}` answer (the routes' response models, so
# /openapi.json describes them and a field not here is not sent). Token counts are disjoint (model.Usage).


class WindowJSON(TypedDict, total=False):
    """How a call's context follows from the previous call's context and reply (docs/architecture.md)."""

    added: int
    trimmed: int
    edited: int
    compacted: bool
    unsent: int
    held: int
    system_changed: bool
    tools_changed: bool
    edits: list[list[int]]
    chain: str


class SessionJSON(SessionFields):
    """A session with its totals, by the accounting rule (reasonlog.accounting)."""

    call_count: int
    error_count: int
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    cache_write_1h_tokens: int | None
    reasoning_tokens: int | None
    cost_usd: float | None
    calls_without_cost: int
    last_call_at: str | None


class SessionsPageJSON(TypedDict):
    sessions: list[SessionJSON]
    next_cursor: str | None


class CallJSON(TypedDict):
    id: str
    session_id: str
    idx: int
    exchange_id: str | None
    provider: str | None
    model: str | None
    started_at: str
    latency_ms: float | None
    ttft_ms: float | None
    status: str
    stop_reason: str | None
    error: Any
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    cache_write_1h_tokens: int | None
    reasoning_tokens: int | None
    cost_usd: float | None
    cost_source: str | None
    provider_message_id: str | None
    request_id: str | None
    params: dict[str, Any]
    context_len: int
    context_facts: dict[str, Any] | None
    window: WindowJSON | None


class SessionCallJSON(CallJSON):
    response_idx: int | None  # the timeline position of the call's reply


class MessageJSON(TypedDict):
    idx: int
    role: str | None
    call_id: str | None
    at: str
    content: Any
    summary: NotRequired[str | None]


class SessionPageJSON(SessionJSON):
    """A session with one page of its timeline and what is anchored in it."""

    message_count: int
    messages: list[MessageJSON]
    system_prompts: list[dict[str, Any]]
    calls: list[SessionCallJSON]
    exchanges: list[dict[str, Any]]
    tool_results: list[dict[str, Any]]
    outcomes: list[dict[str, Any]]
    session_summary: NotRequired[str | None]
    next_offset: int | None


class CallDetailJSON(CallJSON):
    """A call with its request as sent (replay), its reply, its raw payload and the timeline entries its context
    stands for (`window_slots`: an entry, or [entry, item] for one item of a reply made of items)."""

    request: dict[str, Any]
    response: Any
    raw: Any
    raw_format: str | None
    window_slots: list[Any] | None


class WireError(ValueError):
    """A record whose parsed field has the wrong type; `field` names it as the file does."""

    def __init__(self, field: str, text: str):
        self.field = field
        super().__init__(f"field {field!r}: {text}")


def record_of(kind: str, row: dict) -> dict:
    """The export record of a store row: JSON-text columns parsed, under their names without `_json`."""
    columns = _COLUMN.get(kind)
    if not columns:
        return row
    return {columns.get(k, k): (orjson.loads(v) if k in columns and v is not None else v) for k, v in row.items()}


def row_of(kind: str, record: dict) -> dict:
    """The row form of a version 3 record; raises WireError for a parsed field of the wrong type or a row
    column name (which only versions 1 and 2 carry)."""
    fields = PARSED.get(kind)
    if not fields:
        return record
    out = {}
    for key, value in record.items():
        if key in _COLUMN[kind]:
            raise WireError(key, f"a version 2 name; version 3 writes {_COLUMN[kind][key]!r}")
        spec = fields.get(key)
        if spec is None:
            out[key] = value
            continue
        column, want = spec
        if value is not None and want != "any" and not isinstance(value, dict if want == "object" else list):
            raise WireError(key, f"expected {'an object' if want == 'object' else 'a list'} or null,"
                                 f" got {type(value).__name__}")
        try:
            out[column] = None if value is None else orjson.dumps(value).decode()
        except TypeError as exc:  # integers past 64 bits
            raise WireError(key, f"cannot be stored ({exc})") from None
    return out
