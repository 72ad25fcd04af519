"""What gets summarised, read off a session as `Store.get_session` returns it: the session, its exchanges and
its assistant messages, each with the messages, tool calls, tool results and outcomes that belong to it."""
from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import orjson

from ..parts import Part, parts_of, searchable_text

KINDS = ("session", "exchange", "message")
MAX_TRANSCRIPT_CHARS = 48_000  # what an LLM summarizer is sent at most: the start and end of a longer one


@dataclass(frozen=True)
class ToolCall:
    name: str
    failed: bool | None  # None: no result was recorded


@dataclass(frozen=True)
class Target:
    """One thing to summarise and everything that belongs to it, in timeline order."""

    kind: str                 # session | exchange | message
    id: str                   # the session's id, the exchange's id, or "<session id>:<idx>"
    session_id: str
    model: str | None         # the model that produced the session (for "the same model")
    messages: list[dict]      # timeline messages (system prompts left out)
    outcomes: list[dict]
    tool_calls: list[ToolCall]
    calls: int = 0
    failed_calls: int = 0
    input: Any = None         # an exchange's input
    result: Any = None        # an exchange's result
    source_hash: str = ""     # ids and states of what it holds: a summary made from another is outdated


def message_target_id(session_id: str, idx: int) -> str:
    return f"{session_id}:{idx}"


def targets_of(session: Mapping[str, Any], kinds: tuple[str, ...] = ("session", "exchange")) -> list[Target]:
    """The session's targets of the asked kinds: the session, then its exchanges, then its assistant messages."""
    out: list[Target] = []
    messages = [m for m in session["messages"] if m["role"] != "system"]
    results = _results(session)
    if "session" in kinds:
        out.append(_target("session", session["id"], session, messages, session["outcomes"], session["calls"],
                           results))
    if "exchange" in kinds:
        out += [_exchange(session, ex, messages, results) for ex in session["exchanges"]]
    if "message" in kinds:
        for m in messages:
            if m["role"] == "assistant":
                outcomes = [o for o in session["outcomes"] if o["call_id"] == m["call_id"]]
                calls = [c for c in session["calls"] if c["id"] == m["call_id"]]
                out.append(_target("message", message_target_id(session["id"], m["idx"]), session, [m], outcomes,
                                   calls, results))
    return out


def _exchange(session: Mapping[str, Any], ex: dict, messages: list[dict], results: dict) -> Target:
    calls = [c for c in session["calls"] if c["exchange_id"] == ex["id"]]
    ids = {c["id"] for c in calls}
    outcomes = [o for o in session["outcomes"] if o["call_id"] in ids]
    target = _target("exchange", ex["id"], session, [m for m in messages if m["call_id"] in ids], outcomes, calls,
                     results)
    return replace(target, input=ex.get("input"), result=ex.get("result"),
                   source_hash=_hash(target.source_hash, ex.get("status"), ex.get("ended_at")))


def _target(kind: str, ident: str, session: Mapping[str, Any], messages: list[dict], outcomes: list[dict],
            calls: list[dict], results: dict) -> Target:
    tools = [ToolCall(p.name or "unnamed tool", results.get(p.tool_use_id))
             for m in messages if m["role"] == "assistant" for p in parts_of(m["content"]) if p.kind == "tool_use"]
    if kind != "message":  # results recorded without the call that asked for them (imported logs)
        shown = {p.tool_use_id for m in messages for p in parts_of(m["content"]) if p.kind == "tool_use"}
        indexes = {m["idx"] for m in messages}
        tools += [ToolCall(t["name"] or "unnamed tool", bool(t["is_error"])) for t in session["tool_results"]
                  if t["tool_use_id"] not in shown and (kind == "session" or t["message_idx"] in indexes)]
    source: list[Any] = [[m["idx"] for m in messages], [o["id"] for o in outcomes],
                         [(c["id"], c["status"]) for c in calls], [(t.name, t.failed) for t in tools]]
    if kind == "session":
        source += [session["status"], session.get("ended_at")]
    return Target(kind=kind, id=ident, session_id=session["id"], model=session.get("model"), messages=messages,
                  outcomes=outcomes, tool_calls=tools, calls=len(calls),
                  failed_calls=sum(c["status"] == "error" for c in calls), source_hash=_hash(*source))


def _hash(*values: Any) -> str:
    return hashlib.blake2b(orjson.dumps(values), digest_size=16).hexdigest()


def _results(session: Mapping[str, Any]) -> dict[str | None, bool]:
    """Whether each tool call failed, by tool_use id: the agent's recorded result wins over one sent back."""
    found: dict[str | None, bool] = {}
    for m in session["messages"]:
        for p in parts_of(m["content"]):
            if p.kind == "tool_result" and p.tool_use_id:
                found.setdefault(p.tool_use_id, bool(p.is_error))
    for t in session["tool_results"]:
        if t["tool_use_id"]:
            found[t["tool_use_id"]] = bool(t["is_error"])
    return found


# ---------------------------------------------------------------------------- words


def describe_outcome(outcome: dict) -> str:
    """An outcome in a few words: a trade as "bought 10 NVDA at 189.60", anything else as kind and payload."""
    p = outcome.get("payload")
    if isinstance(p, dict) and p.get("action") in ("buy", "sell") and p.get("symbol"):
        verb = "bought" if p["action"] == "buy" else "sold"
        amount = f"{_number(p['amount'])} " if p.get("amount") is not None else ""
        price = f" at {_price(p['price'])}" if isinstance(p.get("price"), int | float) else ""
        return f"{verb} {amount}{p['symbol']}{price}"
    if isinstance(p, dict) and p.get("action") == "no_trade":
        return "no trade"
    body = p if isinstance(p, str) else orjson.dumps(p, option=orjson.OPT_SORT_KEYS).decode()
    return f"{outcome.get('kind')}: {clip(' '.join(body.split()), 80)}"


def _price(value: float) -> str:
    two = f"{value:.2f}"
    return two if float(two) == value else _number(value)


def _number(value: Any) -> str:
    return str(value) if not isinstance(value, float) or not value.is_integer() else str(int(value))


def clip(text: str, limit: int) -> str:
    """`text` cut at a word boundary to at most `limit` characters, with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"


def message_text(message: dict) -> str:
    """A message's own words: its text parts, without thinking, tool calls or results."""
    return " ".join(p.text for p in parts_of(message["content"]) if p.kind == "text" and p.text)


def transcript(target: Target) -> str:
    """The target as plain lines for a model to read: who said what, the tools called and the outcomes.

    Longer than MAX_TRANSCRIPT_CHARS, its middle is left out (and says so): the model reads the start and end."""
    lines = []
    if target.input is not None:
        lines.append(f"[exchange input] {_plain(target.input)}")
    for m in target.messages:
        words = " ".join(filter(None, (_line(p) for p in parts_of(m["content"]))))
        if words:
            lines.append(f"[{m['role']}] {words}")
    lines += [f"[outcome] {describe_outcome(o)}" for o in target.outcomes]
    text = "\n".join(lines)
    if len(text) <= MAX_TRANSCRIPT_CHARS:
        return text
    half = MAX_TRANSCRIPT_CHARS // 2
    return f"{text[:half]}\n[… {len(text) - 2 * half} characters left out …]\n{text[-half:]}"


def _line(p: Part) -> str:
    if p.kind == "tool_use":
        return f"(called {p.name} with {orjson.dumps(p.input).decode()})"
    if p.kind == "tool_result":
        return f"(tool result{' [error]' if p.is_error else ''}: {p.text})"
    if p.kind == "thinking":
        return f"(thinking: {p.text})"
    return p.text or ""


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else searchable_text(value)
