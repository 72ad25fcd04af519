"""One rule for tokens and money, used by every reader: session lists, a session, stats, exports.

The rule:

- A call counts its own tokens and cost (reported by the provider, or priced from the table).
- An exchange whose stats carry a `cost_usd` reported by the agent's SDK (the Claude Agent SDK
  does) counts that cost, and the tokens stated beside it, *instead of* its calls' figures: the
  SDK saw every request, the calls may not have (partial usage, requests the logger never saw).
- Sessions spawned from a call inside such an exchange (sub-agents, at any depth) are billed in
  it too: their calls keep their count, latency and errors, but their tokens and cost are
  already in the parent's reported figures and are not added again.

`ledger` turns call rows and exchange rows into *entries*: one per call (its figures zeroed when
an exchange reports for it) and one per reported exchange and model. Summing entries in any
grouping (by session, exchange, day, model, agent, run) therefore counts every billed token
and dollar exactly once. Pure functions: the store supplies the rows.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .wire.shapes import TOKENS


def reported_cost(stats: Mapping | None) -> float | None:
    """The cost an exchange's stats say the SDK reported, or None."""
    cost = (stats or {}).get("cost_usd")
    return cost if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None


def covering(parents: Iterable[tuple[str, str | None, str | None]], reporting: set[str]) -> dict[str, str]:
    """Session id -> the reported exchange whose figures include that session's calls.

    `parents` holds (session id, parent call's session id, parent call's exchange id) for every
    session spawned from a call; `reporting` the ids of exchanges with a reported cost.
    """
    up = {sid: (parent, exchange) for sid, parent, exchange in parents}
    found: dict[str, str] = {}
    for sid in up:
        seen: set[str] = set()
        node: str | None = sid
        while node is not None and node in up and node not in seen:  # walk to the nearest reporting ancestor exchange
            seen.add(node)
            parent, exchange = up[node]
            if exchange in reporting:
                found[sid] = exchange
                break
            node = parent
    return found


def ledger(calls: Iterable[dict], exchanges: Iterable[dict], cover: Mapping[str, str]) -> list[dict]:
    """Entries that count every billed token and dollar once (see the module's rule).

    `calls`: rows with session_id, exchange_id, model, started_at, the TOKENS and cost_usd (any
    other keys are kept). `exchanges`: rows with id, session_id, started_at, model (a fallback
    for the entry's model) and stats, for the exchanges of the same sessions.
    """
    exchanges = list(exchanges)
    reporting = {e["id"] for e in exchanges if reported_cost(e.get("stats")) is not None}
    entries: list[dict] = []
    last_model: dict[str, str | None] = {}
    for call in calls:
        billed_in = cover.get(call["session_id"]) or (call["exchange_id"] if call["exchange_id"] in reporting else None)
        entries.append(_call_entry(call, billed_in))
        if call.get("exchange_id"):
            last_model[call["exchange_id"]] = call.get("model") or last_model.get(call["exchange_id"])
    for e in exchanges:
        if e["id"] in reporting and e["session_id"] not in cover:
            entries += _reported_entries(e, last_model.get(e["id"]) or e.get("model"))
    return entries


def _call_entry(call: dict, billed_in: str | None) -> dict:
    entry = {**call, "kind": "call", "billed_in": billed_in}
    if billed_in is not None:  # the reporting exchange's entry carries these figures
        entry.update(dict.fromkeys(TOKENS, 0), cost_usd=0.0)
    return entry


def _reported_entries(exchange: dict, model: str | None) -> list[dict]:
    """One entry per model the exchange's stats break down, else one for the whole exchange."""
    stats = exchange["stats"]
    parts = stats.get("by_model") or {model: stats}
    return [{"kind": "reported", "session_id": exchange["session_id"], "exchange_id": exchange["id"],
             "started_at": exchange["started_at"], "model": name, "status": None, "latency_ms": None,
             "run": exchange.get("run"), "agent": exchange.get("agent"), "source": exchange.get("source"),
             "billed_in": None,
             **{t: int(figures.get(t) or 0) for t in TOKENS}, "cost_usd": reported_cost(figures) or 0.0}
            for name, figures in parts.items()]


def totals(entries: Iterable[dict]) -> dict[str, Any]:
    """Calls, errors, tokens and cost of some entries; cost is None when none of them is priced."""
    out: dict[str, Any] = {"calls": 0, "errors": 0, **dict.fromkeys(TOKENS, 0), "cost_usd": None,
                           "calls_without_cost": 0}
    for e in entries:
        if e["kind"] == "call":
            out["calls"] += 1
            out["errors"] += e.get("status") == "error"
            out["calls_without_cost"] += e["cost_usd"] is None and e.get("input_tokens") is not None
        for t in TOKENS:
            out[t] += e.get(t) or 0
        if e["cost_usd"] is not None:
            out["cost_usd"] = (out["cost_usd"] or 0.0) + e["cost_usd"]
    if out["cost_usd"] is not None:
        out["cost_usd"] = round(out["cost_usd"], 12)
    return out
