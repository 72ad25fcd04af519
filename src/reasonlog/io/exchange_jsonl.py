"""Export a session as exchange-based JSONL: a `session_start` line, one `exchange` line per
exchange, a `session_end` line.

The field names follow the session loggers people write for the Claude Agent SDK (for example
d-gangz/claude-agents-ts `lib/session-logger.ts`), so the file drops in where such logs are read:

    {"type": "session_start", "session_id", "ts", "model", "cwd", "tools_available", "permission_mode"}
    {"type": "exchange", "session_id", "exchange": 1, "ts_start", "ts_end", "user_input",
     "messages": [{"source": "assistant", "type": "text" | "tool_use", ...},
                  {"source": "tool", "type": "result", "tool_use_id", "is_error", "output", "ts"}],
     "stats": {"num_turns", "duration_ms", "duration_api_ms", "tokens_in", "tokens_out",
               "cache_creation", "cache_read", "cost_usd"}}
    {"type": "session_end", "session_id", "ts", "total_exchanges", "total_duration_ms",
     "total_duration_api_ms", "total_cost_usd", "total_tokens": {...}, "tools_used": {name: count}}

Tokens and cost follow `reasonlog.accounting`, the rule every reader uses: an exchange counts
the figures its SDK reported (the Claude Agent SDK logger stores them per exchange), else its
calls'. `session_end` carries the session's own totals, as `reasonlog sessions` shows them.
"""
from __future__ import annotations

import collections
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import orjson

from ..parts import parts_of

_TOKENS = (("tokens_in", "input_tokens"), ("tokens_out", "output_tokens"),
           ("cache_creation", "cache_write_tokens"), ("cache_read", "cache_read_tokens"))
_OUTSIDE = ""  # the exchange key of calls recorded outside any exchange (SDK adapters)
_TOTALS = (("input", "input_tokens"), ("output", "output_tokens"), ("cache_creation", "cache_write_tokens"),
           ("cache_read", "cache_read_tokens"))


def export_exchange_jsonl(store, session_id: str) -> Iterator[str]:
    """The session's lines, each a JSON object ending in a newline."""
    session = store.get_session(session_id)
    for record in exchange_records(session, tools_sent(store, session)):
        yield orjson.dumps(record).decode() + "\n"


def tools_sent(store, session: dict) -> list[str]:
    """The names of the tools the session's calls offered the model, in the order first offered."""
    names: dict[str, None] = {}
    offering = [c["id"] for c in session["calls"] if c["idx"] == 0 or (c.get("window") or {}).get("tools_changed")]
    for call in store.call_details(offering):
        for tool in call["request"].get("tools") or ():
            name = tool.get("name") or (tool.get("function") or {}).get("name") if isinstance(tool, dict) else None
            if isinstance(name, str):
                names.setdefault(name)
    return list(names)


def exchange_records(session: dict, tools: list[str] | None = None) -> Iterator[dict]:
    """The records of the export, from a session as `StoreReader.get_session` returns it (`tools`: the names of the
    tools its calls sent, else those its `tools` label names)."""
    sid = session.get("external_id") or session["id"]
    labels = session.get("labels") or {}
    model = session.get("model") or next((c["model"] for c in session["calls"] if c.get("model")), None)
    named = [t for t in (labels.get("tools") or "").split(",") if t]
    yield {"type": "session_start", "session_id": sid, "ts": session["started_at"], "model": model,
           "cwd": labels.get("cwd"), "tools_available": tools or named,
           "permission_mode": labels.get("permission_mode", "default")}
    items = _items_by_exchange(session)
    tools_used: collections.Counter = collections.Counter()
    exchanges = []
    for number, exchange in enumerate(_exchanges(session), 1):
        messages = items.get(exchange["id"], [])
        tools_used.update(m["name"] for m in messages if m["type"] == "tool_use")
        record = {"type": "exchange", "session_id": sid, "exchange": number, "ts_start": exchange["started_at"],
                  "ts_end": exchange["ended_at"], "user_input": _text(exchange.get("input")),
                  "messages": messages, "stats": _stats(exchange, session["calls"])}
        exchanges.append(record)
        yield record
    yield _session_end(session, sid, exchanges, tools_used)


def _session_end(session: dict, sid: str, exchanges: list[dict], tools_used: collections.Counter) -> dict:
    # Totals are the session's own (reasonlog.accounting), so they match `reasonlog sessions`,
    # also for calls outside any exchange and for sub-agents billed in their parent's cost.
    stats = [e["stats"] for e in exchanges]
    return {"type": "session_end", "session_id": sid, "ts": session.get("ended_at") or session.get("last_call_at"),
            "total_exchanges": len(exchanges),
            "total_duration_ms": _sum(s["duration_ms"] for s in stats),
            "total_duration_api_ms": _sum(s["duration_api_ms"] for s in stats),
            "total_cost_usd": session.get("cost_usd"),
            "total_tokens": {name: session.get(column) or 0 for name, column in _TOTALS},
            "tools_used": dict(tools_used)}


def _exchanges(session: dict) -> list[dict]:
    """The session's exchanges; calls recorded outside any (an SDK adapter's) make one more, in time order."""
    outside = [c for c in session["calls"] if c["exchange_id"] is None]
    if not outside:
        return session["exchanges"]
    first_user = next((m for m in session["messages"] if m["role"] == "user"), None)
    extra = {"id": _OUTSIDE, "started_at": outside[0]["started_at"], "ended_at": None,
             "input": None if first_user is None else (first_user["content"] or {}).get("content"),
             "totals": {k: _sum(c.get(k) for c in outside) for k in (*(col for _, col in _TOKENS), "cost_usd")}}
    return sorted([*session["exchanges"], extra], key=lambda e: e["started_at"] or "")


def _sum(values: Any) -> Any:
    """The sum of the figures that were recorded; None when none was (never a zero beside a real figure)."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _stats(exchange: dict, calls: list[dict]) -> dict:
    recorded = exchange.get("stats") or {}
    mine = [c for c in calls if (c["exchange_id"] or _OUTSIDE) == exchange["id"]]
    # with no end recorded, the time of its calls is what is known of its duration
    wall_ms = _duration_ms(exchange) if exchange["ended_at"] else _api_ms(mine)
    out = {"num_turns": recorded.get("num_turns", len(mine)),
           "duration_ms": recorded.get("duration_ms", wall_ms),
           "duration_api_ms": recorded.get("duration_api_ms", _api_ms(mine))}
    totals = exchange.get("totals") or {}  # the accounting rule's figures, as every reader counts them
    for name, column in _TOKENS:
        out[name] = totals.get(column) or 0
    out["cost_usd"] = totals.get("cost_usd")
    return out


def _items_by_exchange(session: dict) -> dict[str, list[dict]]:
    """Assistant text and tool calls, and tool results, grouped by the exchange they happened in."""
    exchange_of_call = {c["id"]: c["exchange_id"] or _OUTSIDE for c in session["calls"]}
    call_at = {m["idx"]: m["call_id"] for m in session["messages"]}
    timeline: list[tuple[int, int, str | None, dict]] = []
    recorded = {t["tool_use_id"] for t in session["tool_results"]}
    for m in session["messages"]:
        exchange = exchange_of_call.get(m["call_id"])
        if m["role"] == "assistant":
            timeline += [(m["idx"], 0, exchange, item) for item in _assistant_items(m)]
        else:  # results sent back in the conversation (role user or tool), unless the agent recorded them
            timeline += [(m["idx"], 1, exchange, item) for item in _sent_results(m) if item["tool_use_id"]
                         not in recorded]
    for t in session["tool_results"]:
        # A tool result follows the message before it in the timeline, so it joins that message's exchange.
        before = t["message_idx"] - 1
        exchange = exchange_of_call.get(call_at.get(before))
        timeline.append((before, 1, exchange, {"source": "tool", "type": "result", "tool_use_id": t["tool_use_id"],
                                               "is_error": t["is_error"], "output": _text(t["content"]),
                                               "ts": t["at"]}))
    grouped: dict[str, list[dict]] = collections.defaultdict(list)
    for _, _, exchange, item in sorted(timeline, key=lambda x: (x[0], x[1], x[3]["ts"])):
        if exchange is not None:
            grouped[exchange].append(item)
    return grouped


def _assistant_items(message: dict) -> list[dict]:
    """Text and tool calls of an assistant message, in any provider's shape (`parts_of`)."""
    out = []
    for p in parts_of(message["content"]):
        if p.kind == "text" and p.text:
            out.append({"source": "assistant", "type": "text", "text": p.text, "ts": message["at"]})
        elif p.kind == "tool_use":
            out.append({"source": "assistant", "type": "tool_use", "tool_use_id": p.tool_use_id,
                        "name": p.name, "input": p.input, "ts": message["at"]})
    return out


def _sent_results(message: dict) -> list[dict]:
    return [{"source": "tool", "type": "result", "tool_use_id": p.tool_use_id, "is_error": bool(p.is_error),
             "output": p.text, "ts": message["at"]} for p in parts_of(message["content"]) if p.kind == "tool_result"]


def _text(value: Any) -> Any:
    """Text content as a string; structured content as JSON text, as the loggers write it."""
    if value is None or isinstance(value, str):
        return value if value is not None else ""
    if isinstance(value, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in value):
        return "\n".join(b.get("text", "") for b in value)
    return orjson.dumps(value).decode()


def _duration_ms(exchange: dict) -> int | None:
    if not exchange.get("started_at") or not exchange.get("ended_at"):
        return None
    start, end = (datetime.fromisoformat(exchange[k].replace("Z", "+00:00")) for k in ("started_at", "ended_at"))
    return round((end - start).total_seconds() * 1000)


def _api_ms(calls: list[dict]) -> int | None:
    latencies = [c["latency_ms"] for c in calls if c["latency_ms"] is not None]
    return round(sum(latencies)) if latencies else None
