"""The wire shapes (`wire/api.py`) built from the store's rows, with keywords: what the readers hand out is the
JSON a client reads, and mypy checks each key between the row and the answer (no `cast` at the edge).

Rows come in the order of the column lists beside them (`SESSION_COLUMNS`, `OUTCOME_COLUMNS`, …) or as the dicts
`reading.row_dict` makes of a call's row. No SQL here.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

try:  # the wire's TypedDicts are typing_extensions' where pydantic is installed (wire/api.py): extend the same kind
    from typing_extensions import TypedDict
except ImportError:
    from typing import TypedDict  # type: ignore[assignment]

from ..wire.api import (
    AnnotationJSON,
    CallDetailJSON,
    MessageJSON,
    OutcomeJSON,
    ReasoningRecordJSON,
    SessionCallJSON,
    SessionTotalsJSON,
    WindowJSON,
)
from ..wire.shapes import CallFields, CountedJSON, SessionFields

SESSION_COLUMNS = ("id", "run", "agent", "model", "provider", "labels_json", "parent_session_id", "parent_call_id",
                   "external_id", "host", "pid", "started_at", "ended_at", "status", "summary", "error_json",
                   "xml_tool_tags_json")
OUTCOME_COLUMNS = ("id", "session_id", "kind", "payload_json", "call_id", "at", "message_idx")


class ReplayLink(TypedDict):
    """What the store's calls say beyond the API's (which leaves it out: the dashboard reads `replay_links`)."""

    replay_of: str | None  # the recorded call this one re-sent (`reasonlog replay --send`)


class SessionCall(SessionCallJSON, ReplayLink):
    """A call as `get_session` lists it."""


class CallDetail(CallDetailJSON, ReplayLink):
    """`get_call`'s answer: the API's call, what it replays, and the content ids its context decodes to (the diff and
    the import's check read them; the API leaves them out)."""

    context_ids: list[int]


def loads(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)


def row_dict(columns: tuple[str, ...], row) -> dict:
    """A row as a dict, with `*_json` columns parsed and renamed without the suffix; a call's `counted_in` only
    when set (store/twins.py). The form the store's own work reads; answers are built from it below."""
    out = {}
    for name, value in zip(columns, row, strict=True):
        if name == "counted_in" and value is None:
            continue
        if name.endswith("_json"):
            out[name[:-5]] = loads(value)
        else:
            out[name] = value
    return out


def session_fields(r) -> SessionFields:
    """A session's own fields from its row (SESSION_COLUMNS)."""
    return SessionFields(id=r[0], run=r[1], agent=r[2], model=r[3], provider=r[4], labels=loads(r[5]),
                         parent_session_id=r[6], parent_call_id=r[7], external_id=r[8], host=r[9], pid=r[10],
                         started_at=r[11], ended_at=r[12], status=r[13], summary=r[14], error=loads(r[15]),
                         xml_tool_tags=loads(r[16]))


def counted(t: Mapping[str, Any]) -> CountedJSON:
    """The token counters of a call's row or of the accounting rule's totals."""
    return CountedJSON(input_tokens=t["input_tokens"], output_tokens=t["output_tokens"],
                       cache_read_tokens=t["cache_read_tokens"], cache_write_tokens=t["cache_write_tokens"],
                       cache_write_1h_tokens=t["cache_write_1h_tokens"], reasoning_tokens=t["reasoning_tokens"])


def session_totals(t: Mapping[str, Any], last_call_at: str | None) -> SessionTotalsJSON:
    """A session's totals from `accounting.totals` (or the kept sums of store/usage.py)."""
    return SessionTotalsJSON(**counted(t), call_count=t["calls"], error_count=t["errors"], cost_usd=t["cost_usd"],
                             calls_without_cost=t["calls_without_cost"], last_call_at=last_call_at)


def call_fields(c: Mapping[str, Any]) -> CallFields:
    """The fields every body gives a call, from its row as `reading.row_dict` reads it."""
    return CallFields(**counted(c), id=c["id"], session_id=c["session_id"], idx=c["idx"], exchange_id=c["exchange_id"],
                      provider=c["provider"], model=c["model"], started_at=c["started_at"],
                      latency_ms=c["latency_ms"], ttft_ms=c["ttft_ms"], status=c["status"],
                      stop_reason=c["stop_reason"], error=c["error"], cost_usd=c["cost_usd"],
                      cost_source=c["cost_source"], provider_message_id=c["provider_message_id"],
                      request_id=c["request_id"], params=c["params"], context_len=c["context_len"],
                      context_facts=c["context_facts"])


def session_call(c: Mapping[str, Any], response_idx: int | None) -> SessionCall:
    """A call as a session lists it: its window worked out (session_calls.py) and where its reply stands."""
    out = SessionCall(**call_fields(c), window=c["window"], response_idx=response_idx, replay_of=c["replay_of"])
    _links(out, c)
    return out


def call_detail(c: Mapping[str, Any], context_ids: list[int], request: dict[str, Any], response: Any, raw: Any,
                window_slots: list[Any] | None) -> CallDetail:
    """A call with what `get_call` rebuilt: its request as sent, its reply, its raw payload."""
    out = CallDetail(**call_fields(c), window=shown_window(c["window"]), request=request, response=response, raw=raw,
                     raw_format=c["raw_format"], window_slots=window_slots, context_ids=context_ids,
                     replay_of=c["replay_of"])
    _links(out, c)
    return out


def shown_window(stored: Any) -> WindowJSON | None:
    """A stored window (parsed JSON) as bodies show it: without the slot map and the reply's layout, which only
    `window_slots` reads."""
    if stored is None:
        return None
    shown: Any = {k: v for k, v in stored.items() if k not in ("map", "reply")}  # JSON: its keys are WindowJSON's
    return shown


def _links(out: SessionCall | CallDetail, c: Mapping[str, Any]) -> None:
    """The call that bills this one, present only when set (store/twins.py)."""
    if c.get("counted_in") is not None:
        out["counted_in"] = c["counted_in"]


def message(idx: int, role: str | None, call_id: str | None, at: str, content: Any) -> MessageJSON:
    return MessageJSON(idx=idx, role=role, call_id=call_id, at=at, content=content)


def outcome(r) -> OutcomeJSON:
    """An outcome from its row (OUTCOME_COLUMNS)."""
    return OutcomeJSON(id=r[0], session_id=r[1], kind=r[2], payload=loads(r[3]), call_id=r[4], at=r[5],
                       message_idx=r[6])


def annotation(row: Mapping[str, Any]) -> AnnotationJSON:
    """The API form of a stored annotation: `value` a number for a numeric score, `by` for the author."""
    numeric = row["kind"] == "score" and row["number"] is not None
    return AnnotationJSON(id=row["id"], session_id=row["session_id"], exchange_id=row["exchange_id"],
                          call_id=row["call_id"], kind=row["kind"], name=row["name"],
                          value=row["number"] if numeric else row["value"], by=row["author"], source=row["source"],
                          created_at=row["created_at"])


def reasoning_record(r) -> ReasoningRecordJSON:
    """A reasoning record from its row (records.COLUMNS)."""
    return ReasoningRecordJSON(id=r[0], session_id=r[1], agent=r[2], group=r[3], phase=r[4], state=r[5],
                               compact=orjson.loads(r[6]), details=r[7], artifact_path=r[8], details_tokens=r[9],
                               compact_tokens=r[10], tokenizer=r[11], redacted=bool(r[12]), confidence=r[13],
                               references=loads(r[14]), at=r[15])
