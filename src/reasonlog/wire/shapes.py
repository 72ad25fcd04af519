"""The wire contract's shapes: the JSON form of what reasonlog sends and keeps outside a database.

One place for every shape that leaves the process: the events a recorder spills or sends (their
`to_dict()` form, see `model.Event`), and the records of `reasonlog export` (version 3), which the
HTTP API's bodies reuse. Values are parsed JSON (`labels` is an object, `context` a list), never
SQLite columns with JSON inside strings. No I/O here.

Version 3 of the export differs from version 2 only in that: v2 carried `labels_json` as text,
v3 carries `labels` as an object. Version 4 is version 3 with `annotation` records after each session's other
records. `row_of` and `record_of` convert between a record and the
row form the store writes; an import of a version 2 file skips the conversion.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

try:  # pydantic (the server's response models) reads only typing_extensions' TypedDict before Python 3.12
    from typing import NotRequired

    from typing_extensions import TypedDict
except ImportError:  # the base install has no pydantic, and the typing module's serves
    from typing import NotRequired, TypedDict  # type: ignore[assignment]

import orjson

from .rules import (
    AMOUNT,
    AS_GIVEN,
    CONTEXT,
    COUNT,
    COUNTERS,
    FLAG,
    HASH,
    HASHES,
    ID,
    INSTANT,
    TAGS,
    Defaulted,
    Rule,
    is_amount,
)

EXPORT_VERSION = 4


# ------------------------------------------------------------------------------------ events
# Each event is the dataclass of the same name in `model.py` (its fields, with an `event` key naming its kind);
# `model.check_event` checks an event against these shapes, and a test holds the two to the same fields.

STATUS = Literal["completed", "failed", "interrupted"]
CALL_STATUS = Literal["ok", "error", "partial"]
STATS = Rule(lambda v: isinstance(v, dict) and is_amount(v.get("cost_usd")),
             "a dict whose cost_usd is a non-negative number")  # readers add up a reported cost_usd
Id = Annotated[str, ID]
Instant = Annotated[str, INSTANT]
Amount = Annotated[float | None, AMOUNT]


class UsageJSON(TypedDict):
    """A call's tokens by kind, disjoint (model.Usage): where the token names are declared."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cache_write_1h_tokens: int
    reasoning_tokens: int


# The token names, in one place: the usage tables' columns, the accounting rule's sums, every body's counters.
TOKENS: tuple[str, ...] = tuple(UsageJSON.__annotations__)


class CountedJSON(TypedDict):
    """UsageJSON's counters as a stored call or session carries them: null where nothing was reported (a test
    holds the names to UsageJSON's)."""

    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    cache_write_1h_tokens: int | None
    reasoning_tokens: int | None


class SessionStartedJSON(TypedDict):
    event: Literal["session_started"]
    session_id: Id
    started_at: Instant
    agent: str | None
    run: str | None
    model: str | None
    provider: str | None
    labels: dict[str, Any]
    parent_session_id: str | None
    parent_call_id: str | None
    external_id: str | None
    host: str | None
    pid: Annotated[int | None, COUNT]
    xml_tool_tags: Annotated[list[str] | None, TAGS]
    live_token: str | None


class SessionEndedJSON(TypedDict):
    event: Literal["session_ended"]
    session_id: Id
    ended_at: Instant
    status: STATUS
    summary: str | None
    error: dict[str, Any] | None


class SessionTitledJSON(TypedDict):
    """A title given to a session after it started (a rename read by `watch`): its label `title` becomes it."""

    event: Literal["session_titled"]
    session_id: Id
    title: Id


class ExchangeStartedJSON(TypedDict):
    event: Literal["exchange_started"]
    exchange_id: Id
    session_id: Id
    started_at: Instant
    input: Any


class ExchangeEndedJSON(TypedDict):
    event: Literal["exchange_ended"]
    exchange_id: Id
    session_id: Id
    ended_at: Instant
    result: Any
    status: STATUS
    stats: Annotated[dict[str, Any] | None, STATS]


class CallRecordedJSON(TypedDict):
    event: Literal["call"]
    call_id: Id
    session_id: Id
    exchange_id: str | None
    started_at: Annotated[str | float, AS_GIVEN]  # ISO text or epoch seconds: the store normalises it
    request: dict[str, Any]          # the request body; messages, system and tools are stored by reference
    response: dict[str, Any] | None  # the assistant message
    model: str | None
    provider: str | None
    stop_reason: str | None
    usage: UsageJSON | None
    cost_usd: Amount                 # only when the provider reported it
    latency_ms: Amount
    ttft_ms: Amount
    provider_message_id: str | None
    request_id: str | None
    raw: Any
    error: dict[str, Any] | None
    status: CALL_STATUS
    context_facts: dict[str, Any] | None
    stable_history: bool
    replay_of: str | None            # the recorded call this one re-sent (`reasonlog replay --send`)


class ToolResultJSON(TypedDict):
    event: Literal["tool_result"]
    tool_result_id: Id
    session_id: Id
    at: Instant
    tool_use_id: str | None
    content: Any
    name: str | None
    input: Any
    is_error: bool
    duration_ms: Amount


class OutcomeJSON(TypedDict):
    event: Literal["outcome"]
    outcome_id: Id
    session_id: Id
    at: Instant
    outcome_kind: Id
    payload: Any
    call_id: str | None


class ReasoningJSON(TypedDict):
    event: Literal["reasoning"]
    record_id: Id
    session_id: Id
    at: Instant
    phase: Id
    compact: dict[str, Any]
    agent: str | None
    group: str | None
    details: str | None
    artifact_path: str | None
    details_tokens: Annotated[int | None, COUNT]
    compact_tokens: Annotated[int | None, COUNT]
    tokenizer: str | None
    redacted: bool
    confidence: str | None
    references: list[Any] | None
    state: Literal["kept", "held"]


class FileImportedJSON(TypedDict):
    """What an import consumed of one file, in the batch of the events it made of it (`import_files`'s row)."""

    event: Literal["file_imported"]
    path: Id
    format: Id
    size: Annotated[int, COUNT]
    mtime_ns: int
    consumed: Annotated[int, COUNT]
    tail_hash: str | None
    state: dict[str, Any] | None
    sessions: list[str]
    skipped: Annotated[int, COUNT]
    imported_at: Instant


EVENTS: dict[str, type] = {
    "session_started": SessionStartedJSON, "session_ended": SessionEndedJSON, "session_titled": SessionTitledJSON,
    "exchange_started": ExchangeStartedJSON, "exchange_ended": ExchangeEndedJSON, "call": CallRecordedJSON,
    "tool_result": ToolResultJSON, "outcome": OutcomeJSON, "reasoning": ReasoningJSON,
    "file_imported": FileImportedJSON,
}


# ------------------------------------------------------------------------------------ export records
# `store/transfer_checks.py` checks each record against these shapes (in their row form, for version 2).

Hash = Annotated[str, HASH]
Json = Annotated[Any, Rule(lambda v: True, "any JSON value")]  # present and not null


class HeaderRecord(TypedDict):
    type: Literal["reasonlog"]
    version: int


class SessionFields(TypedDict):
    """A session as every body carries it: an export record, an API answer."""

    id: str
    run: str | None
    agent: str | None
    model: str | None
    provider: str | None
    labels: Annotated[dict[str, Any], Defaulted()]
    parent_session_id: str | None
    parent_call_id: str | None
    external_id: str | None
    host: str | None
    pid: int | None
    started_at: str
    ended_at: str | None
    status: Annotated[str, Defaulted()]
    summary: str | None
    error: Any
    xml_tool_tags: Annotated[list[str] | None, TAGS]


class SessionRecord(SessionFields):
    type: Literal["session"]


class ExchangeRecord(TypedDict):
    type: Literal["exchange"]
    id: str
    session_id: str
    idx: int
    input: Any
    result: Any
    status: Annotated[str, Defaulted()]
    stats: dict[str, Any] | None
    started_at: str
    ended_at: str | None


class CallFields(CountedJSON):
    """A call as every body carries it: an export record, an API answer."""

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
    cost_usd: float | None
    cost_source: str | None
    provider_message_id: str | None
    request_id: str | None
    params: dict[str, Any]
    context_len: int
    context_facts: dict[str, Any] | None


class CallRecord(CallFields):
    type: Literal["call"]
    shape: dict[str, Any] | None
    system_id: Annotated[str | None, HASH]       # a content hash
    tools: Annotated[list[str] | None, HASHES]   # content hashes
    context: Annotated[list[str | list[int]], CONTEXT]  # content hashes, and [start, end] runs into the
    #                                                     previous call's context
    response_id: Annotated[str | None, HASH]     # a content hash
    window: NotRequired[dict[str, Any] | None]   # how the context follows from the previous call's (schema 12)
    replay_of: NotRequired[str | None]  # the recorded call this one re-sent; present when set (schema 14)
    counted_in: NotRequired[str | None]  # the call that bills this one (the same call by another path; schema 16)
    raw: NotRequired[str | None]
    raw_format: NotRequired[Literal["skeleton", "bytes"] | None]
    raw_encoding: NotRequired[Literal["base64"] | None]  # set when `raw` is base64 of bytes that are not UTF-8


class MessageRecord(TypedDict):
    type: Literal["message"]
    session_id: str
    idx: int
    role: str | None
    content: Hash
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
    is_error: Annotated[int, FLAG, Defaulted()]
    duration_ms: float | None
    at: str
    message_idx: int


class OutcomeFields(TypedDict):
    """An outcome as every body carries it: an export record, an API answer."""

    id: str
    session_id: str
    kind: str
    payload: Any
    call_id: str | None
    at: str
    message_idx: int


class OutcomeRecord(OutcomeFields):
    type: Literal["outcome"]


class ContentRecord(TypedDict):
    type: Literal["content"]
    hash: Hash                       # BLAKE2b-128 of the value's canonical JSON, hex
    kind: Literal["message", "system", "tool"]
    value: Json


class AnnotationRecord(TypedDict):
    """A note, a label or a score given after recording (version 4; see docs/review.md)."""

    type: Literal["annotation"]
    id: Id
    session_id: Id
    exchange_id: str | None
    call_id: str | None
    kind: Literal["note", "label", "score"]
    name: str | None
    value: str                       # the note's text, the label's value, the score as given
    number: float | None             # a numeric score's number; null for a note, a label, a category
    author: str | None
    source: Literal["human", "code", "llm"]
    created_at: Instant


class CountersRecord(TypedDict):
    type: Literal["counters"]
    values: Annotated[dict[str, int], COUNTERS]


class EndRecord(TypedDict):
    type: Literal["end"]
    records: int
    counts: Annotated[dict[str, int], COUNTERS]


RECORDS: dict[str, type] = {
    "reasonlog": HeaderRecord, "session": SessionRecord, "exchange": ExchangeRecord, "call": CallRecord,
    "message": MessageRecord, "tool_result": ToolResultRecord, "outcome": OutcomeRecord, "content": ContentRecord,
    "annotation": AnnotationRecord, "counters": CountersRecord, "end": EndRecord,
}


# Record type -> {field: row column}: the fields whose row form (versions 1 and 2, and the store) is JSON text.
PARSED: dict[str, dict[str, str]] = {
    "session": {"labels": "labels_json", "error": "error_json", "xml_tool_tags": "xml_tool_tags_json"},
    "exchange": {"input": "input_json", "result": "result_json", "stats": "stats_json"},
    "call": {"error": "error_json", "params": "params_json", "shape": "shape_json", "tools": "tools_json",
             "context": "context_json", "context_facts": "context_facts_json", "window": "window_json"},
    "tool_result": {"input": "input_json", "content": "content_json"},
    "outcome": {"payload": "payload_json"},
}
_COLUMN = {kind: {column: name for name, column in fields.items()} for kind, fields in PARSED.items()}


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
    """The row form of a version 3 record (its types are checked in that form, by `store/transfer_checks.py`);
    raises WireError for a row column name (which only versions 1 and 2 carry) or a value JSON cannot hold."""
    fields = PARSED.get(kind)
    if not fields:
        return record
    out = {}
    for key, value in record.items():
        if key in _COLUMN[kind]:
            raise WireError(key, f"a version 2 name; version 3 writes {_COLUMN[kind][key]!r}")
        column = fields.get(key)
        if column is None:
            out[key] = value
            continue
        try:
            out[column] = None if value is None else orjson.dumps(value).decode()
        except TypeError as exc:  # integers past 64 bits
            raise WireError(key, f"cannot be stored ({exc})") from None
    return out
