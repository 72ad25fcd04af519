"""The bodies of the HTTP API: each route's response model, so /openapi.json describes every answer and a
field not here is not sent. Token counts are disjoint (model.Usage). Sessions and calls share
`shapes.SessionFields` and `shapes.CallFields` with the export, token names `shapes.UsageJSON`: each field is
declared once."""
from __future__ import annotations

from typing import Any, Literal

try:  # pydantic (the server's response models) reads only typing_extensions' TypedDict before Python 3.12
    from typing import NotRequired

    from typing_extensions import TypedDict
except ImportError:  # the base install has no pydantic, and the typing module's serves
    from typing import NotRequired, TypedDict  # type: ignore[assignment]

from .shapes import CallFields, CountedJSON, OutcomeFields, SessionFields, UsageJSON

# ------------------------------------------------------------------------------------ sessions and calls


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


class SessionTotalsJSON(CountedJSON):
    """A session's totals, by the accounting rule (reasonlog.accounting)."""

    call_count: int
    error_count: int
    cost_usd: float | None
    calls_without_cost: int
    last_call_at: str | None


class SessionJSON(SessionFields, SessionTotalsJSON):
    """A session with its totals."""


class AnnotationJSON(TypedDict):
    """A note, a label or a score given after recording (docs/review.md). `value`: the note's text, the label's
    value, a numeric score's number or a categorical score's text. exchange_id / call_id null: about the session."""

    id: str
    session_id: str
    exchange_id: str | None
    call_id: str | None
    kind: Literal["note", "label", "score"]
    name: str | None
    value: str | float
    by: str | None
    source: Literal["human", "code", "llm"]
    created_at: str


class AnnotationsJSON(TypedDict):
    annotations: list[AnnotationJSON]


class SessionsPageJSON(TypedDict):
    sessions: list[SessionJSON]
    next_cursor: str | None


class CallJSON(CallFields):
    counted_in: NotRequired[str]  # the call that bills this one: the same call, recorded by another path
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


class SessionDetailJSON(SessionJSON):
    """A session with its timeline (or one page of it) and what is anchored in it."""

    message_count: int
    messages: list[MessageJSON]
    system_prompts: list[dict[str, Any]]
    calls: list[SessionCallJSON]
    exchanges: list[dict[str, Any]]
    tool_results: list[dict[str, Any]]
    outcomes: list[dict[str, Any]]
    annotations: list[AnnotationJSON]
    session_summary: NotRequired[str | None]


class SessionPageJSON(SessionDetailJSON):
    """A session with one page of its timeline and what is anchored in it."""

    next_offset: int | None


class CallDetailJSON(CallJSON):
    """A call with its request as sent (replay), its reply, its raw payload and the timeline entries its context
    stands for (`window_slots`: an entry, or [entry, item] for one item of a reply made of items)."""

    request: dict[str, Any]
    response: Any
    raw: Any
    raw_format: str | None
    window_slots: list[Any] | None


# ------------------------------------------------------------------------------------ the other routes

RequestBody = dict[str, Any]  # a request exactly as the provider takes it (its own shape, per provider)


class Tokens(UsageJSON):
    calls: int
    errors: int
    cost_usd: float | None
    calls_without_cost: int
    latency_ms_p50: float | None
    latency_ms_mean: float | None


StatKey = Literal["day", "model", "agent", "run", "source"]  # what statistics are grouped by


class StatsRowJSON(Tokens, total=False):
    """One group's totals; the group's key is the one asked for (`by`)."""

    day: str
    model: str | None
    agent: str | None
    run: str | None
    source: str  # where the sessions came from: an importer's format (claude-code, codex, …), otlp, or recorded


class StatsJSON(TypedDict):
    by: StatKey
    rows: list[StatsRowJSON]


class RunsJSON(TypedDict):
    runs: list[StatsRowJSON]


class DiffMessageJSON(TypedDict):
    index: int
    role: str | None
    text: str


class EditedJSON(TypedDict):
    index_a: int
    index_b: int
    role: str | None
    diff: list[str]


class ParamChangeJSON(TypedDict):
    a: Any
    b: Any


class ToolsDiffJSON(TypedDict):
    added: list[str]
    removed: list[str]
    changed: list[str]


class DiffJSON(TypedDict):
    call_a: str
    call_b: str
    messages_a: int
    messages_b: int
    kept: int
    added: list[DiffMessageJSON]
    trimmed: list[DiffMessageJSON]
    edited: list[EditedJSON]
    system_changed: bool
    system_diff: list[str] | None  # unified diff lines
    tools: ToolsDiffJSON
    params: dict[str, ParamChangeJSON]


SearchMode = Literal["text", "keywords", "semantic", "hybrid"]


class SearchHitJSON(TypedDict):
    """Where a search found something: a message, tool result, outcome or reasoning record at its timeline position,
    or a session's summary (`message_idx` null). `score`: the mode's ranking score (null in text mode); `snippet`:
    the text around the match, or the start of the unit found by meaning."""

    kind: Literal["message", "tool_result", "outcome", "reasoning", "summary"]
    session_id: str
    message_idx: int | None
    role: str | None
    call_id: str | None
    at: str | None
    tool_use_id: str | None
    name: str | None
    snippet: str
    score: float | None
    mode: SearchMode


class SearchJSON(TypedDict):
    mode: SearchMode
    hits: list[SearchHitJSON]


class SimilarSessionJSON(SessionJSON):
    score: float  # the cosine similarity of the two sessions' mean unit vectors


class SimilarSessionsJSON(TypedDict):
    model: str | None  # the embedding model compared; null: search by meaning is not available here
    sessions: list[SimilarSessionJSON]


class OutcomeJSON(OutcomeFields):
    """An outcome as the API gives it: the fields of its export record but the record's type."""


class OutcomesJSON(TypedDict):
    outcomes: list[OutcomeJSON]


class ReasoningRecordJSON(TypedDict):
    id: str
    session_id: str
    agent: str | None
    group: str | None
    phase: str
    state: Literal["kept", "held"]
    compact: dict[str, Any]
    details: str | None
    artifact_path: str | None
    details_tokens: int | None
    compact_tokens: int | None
    tokenizer: str | None
    redacted: bool
    confidence: str | None
    references: list[Any] | None
    at: str


class ReasoningRecordsJSON(TypedDict):
    records: list[ReasoningRecordJSON]


class SavedRecordJSON(TypedDict):
    receipt: str
    record: ReasoningRecordJSON | None  # None when the policy skips the phase


class PositionJSON(TypedDict):
    action_id: Any
    action_type: str | None
    symbol: str | None
    amount: Any
    price: Any
    cash_after: Any
    portfolio_value: Any


class ConversationItemJSON(TypedDict):
    message_index: int
    role: str | None
    content: str
    summary: str | None
    tool_name: str | None
    tool_input: Any
    timestamp: str


class ModelDayJSON(TypedDict):
    session_id: str
    job_id: str | None
    date: str
    model: str | None
    session_summary: str | None
    started_at: str
    completed_at: str | None
    total_messages: int
    positions: list[PositionJSON]
    conversation: list[ConversationItemJSON] | None


class ModelDaysJSON(TypedDict):
    sessions: list[ModelDayJSON]
    count: int
    deployment_mode: str


class HealthJSON(TypedDict):
    status: Literal["ok"]


class ReadyJSON(TypedDict):
    status: Literal["ready"]
    schema_version: int


class IngestLimitsJSON(TypedDict):
    max_bytes: int
    format: str


class RejectedJSON(TypedDict):
    line: int
    reason: str


class IngestAnswerJSON(TypedDict):
    batch_id: str | None
    events: int
    duplicate: bool
    rejected: list[RejectedJSON]


def otlp_answer_schema(rejected: str) -> dict[str, Any]:
    """The JSON form of an OTLP Export*ServiceResponse (its protobuf form is OpenTelemetry's own): empty when all
    was taken, else `partialSuccess` with the count left out (a string, as OTLP/JSON writes 64-bit integers)."""
    return {"type": "object", "properties": {"partialSuccess": {
        "type": "object", "properties": {rejected: {"type": "string"}, "errorMessage": {"type": "string"}}}}}
