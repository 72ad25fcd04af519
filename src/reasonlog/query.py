"""Questions people ask of a store: the conversation of a session, statistics, what changed between calls."""
from __future__ import annotations

import difflib
import re
from collections import defaultdict, deque
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import orjson

from . import accounting, providers
from .parts import Part, parts_of, searchable_text
from .store import SessionFilter, StoreReader
from .store.usage_sql import PAIR, STAT_KEYS, median_of
from .wire.api import (
    DiffJSON,
    DiffMessageJSON,
    EditedJSON,
    ParamChangeJSON,
    SessionDetailJSON,
    StatKey,
    StatsRowJSON,
    ToolsDiffJSON,
)

TOKEN_FIELDS = accounting.TOKENS


# ---------------------------------------------------------------------------- timeline


def timeline(session: Mapping[str, Any]) -> list[dict]:
    """The session in order: system prompts, messages with their parts, a line per call, outcomes in place.

    Items: {"kind": "exchange"|"system"|"message"|"call"|"failed_call"|"outcome", ...}. A call's
    item comes just before its reply (see `call_item`). A tool_use part carries its `result` (from
    the agent's recorded tool result, else from the tool_result sent back in a later message); a
    message made only of results already shown that way is left out.
    """
    results = _results_by_tool_use(session)
    by_name = _ids_by_name(results)
    xml_tags = session.get("xml_tool_tags") or ()
    shown: set[str] = set()
    items: list[dict] = []
    outcomes = defaultdict(list)
    for o in session["outcomes"]:
        outcomes[o["message_idx"]].append(o)
    entries = _entries(session)
    pending = _calls_by_anchor(session["calls"], entries)
    exchanges_by_call = {c["id"]: c["exchange_id"] for c in session["calls"]}
    exchanges = {e["id"]: e for e in session["exchanges"]}
    current_exchange = None
    for m in entries:
        items += [_outcome_item(o) for o in outcomes.pop(m["idx"], ())]
        ex_id = exchanges_by_call.get(m["call_id"])
        if ex_id and ex_id != current_exchange and ex_id in exchanges:
            current_exchange = ex_id
            items.append({"kind": "exchange", **exchanges[ex_id]})
        while pending and pending[0][0] <= m["idx"]:
            items.append(call_item(pending.pop(0)[1]))
        if m["role"] == "system prompt":
            items.append({"kind": "system", "idx": m["idx"], "call_id": m["call_id"], "at": m["at"],
                          "text": strip_controls(_system_text(m["content"]))})
            continue
        message = _message_item(m, xml_tags, results, shown, by_name)
        if message is not None:
            items.append(message)
    tail = [call_item(c) for _, c in pending] + [_outcome_item(o) for idx in sorted(outcomes) for o in outcomes[idx]]
    return _with_unpaired_results(items + sorted(tail, key=lambda item: item.get("ended_at") or item["at"]),
                                  session, shown)


def _with_unpaired_results(items: list[dict], session: Mapping[str, Any], shown: set[str]) -> list[dict]:
    """Recorded tool results that no tool call of the timeline names, each where it was recorded."""
    paired = shown | {p.get("tool_use_id") for i in items if i["kind"] == "message" for p in i["parts"]}
    for t in session["tool_results"]:
        if t["tool_use_id"] in paired:
            continue
        item = {"kind": "tool_result", "idx": t["message_idx"], "at": t["at"], "tool_use_id": t["tool_use_id"],
                "name": t["name"], "is_error": t["is_error"], "duration_ms": t["duration_ms"],
                "content": _result_text(t["content"])}
        at = next((n for n, i in enumerate(items) if i.get("idx") is not None and i["kind"] != "call"
                   and i["idx"] >= t["message_idx"]), len(items))
        items.insert(at, item)
    return items


def _entries(session: Mapping[str, Any]) -> list[dict]:
    """Messages and system prompts (role `system prompt`) in timeline order."""
    prompts = [{**p, "role": "system prompt"} for p in session.get("system_prompts", ())]
    return sorted([*session["messages"], *prompts], key=lambda m: m["idx"])


def _calls_by_anchor(calls: list[dict], entries: list[dict]) -> list[tuple[float, dict]]:
    """Each call with the timeline position its line goes before: its reply, else just after its last input."""
    last = {m["call_id"]: m["idx"] for m in entries}
    anchored, at = [], -1.0
    for c in calls:
        after_inputs = max(at + 0.001, last.get(c["id"], -1) + 0.5)
        at = c["response_idx"] if c.get("response_idx") is not None else after_inputs
        anchored.append((at, c))
    return sorted(anchored, key=lambda pair: pair[0])


def call_item(call: dict) -> dict:
    """One call as a line: short id (`#idx`), model, tokens, cost, latency, stop reason, window change."""
    item = {"kind": "failed_call" if call["status"] == "error" else "call", "call_id": call["id"],
            "ref": f"#{call['idx']}", "at": call["started_at"], "ended_at": _ended_at(call)}
    keys = ("idx", "model", "status", "stop_reason", "error", "latency_ms", "cost_usd", *TOKEN_FIELDS, "window")
    twin = {"counted_in": call["counted_in"]} if call.get("counted_in") else {}  # the same call, billed there
    return {**item, **{k: call.get(k) for k in keys}, **twin}


def _message_item(m: dict, xml_tags, results: dict, shown: set[str], by_name: dict[str, deque]) -> dict | None:
    parts = parts_of(m["content"], xml_tags, m["call_id"])
    if parts and all(p.kind == "tool_result" and p.tool_use_id in shown for p in parts):
        return None
    rendered = []
    for p in parts:
        part = _part_dict(p)
        if p.kind == "tool_use":
            found = p.tool_use_id if p.tool_use_id in results else _unnamed_result(p.name, by_name, shown)
            if found is not None:
                part["result"] = {k: v for k, v in results[found].items() if k != "name"}
                shown.add(found)
        rendered.append(part)
    # a result given in the message of its own call (a web search the API ran) is shown with the call only
    rendered = [r for r in rendered if r["kind"] != "tool_result" or r["tool_use_id"] not in
                {q.get("tool_use_id") for q in rendered if "result" in q}]
    return {"kind": "message", "idx": m["idx"], "role": m["role"], "call_id": m["call_id"], "at": m["at"],
            "parts": rendered}


def _ids_by_name(results: dict[str, dict]) -> dict[str, deque]:
    """The ids of the results of each tool, in order."""
    out: dict[str, deque] = defaultdict(deque)
    for k, r in results.items():
        if r.get("name"):
            out[r["name"]].append(k)
    return out


def _unnamed_result(name: str | None, by_name: dict[str, deque], shown: set[str]) -> str | None:
    """The result of a tool call the model gave no id: Gemini pairs calls and responses by name, in order (a
    client such as Gemini CLI makes ids for its responses), so the first result of that name not yet shown."""
    queue = by_name.get(name or "")
    while queue and queue[0] in shown:
        queue.popleft()
    return queue.popleft() if queue else None


def _ended_at(call: dict) -> str:
    try:
        ended = datetime.fromisoformat(call["started_at"].replace("Z", "+00:00")) + timedelta(
            milliseconds=call["latency_ms"] or 0)
    except (OverflowError, ValueError):  # past the year 9999, or an instant an import brought that does not parse
        return call["started_at"]
    return ended.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _outcome_item(outcome: dict) -> dict:
    return {**outcome, "kind": "outcome", "outcome_kind": outcome["kind"]}


def _results_by_tool_use(session: Mapping[str, Any]) -> dict[str, dict]:
    found: dict[str, dict] = {}
    for m in session["messages"]:
        for p in parts_of(m["content"]):
            if p.kind == "tool_result" and p.tool_use_id:
                found.setdefault(p.tool_use_id, {"content": strip_controls(p.text), "is_error": p.is_error,
                                                 "duration_ms": None, "name": p.name})
    for t in session["tool_results"]:  # what the agent recorded itself knows the duration: it wins
        if t["tool_use_id"]:
            found[t["tool_use_id"]] = {"content": _result_text(t["content"]), "is_error": t["is_error"],
                                       "duration_ms": t["duration_ms"], "name": t.get("name")}
    return found


def _result_text(content: Any) -> str:
    """A tool's result as a person reads it: text as it is, text blocks joined, any other JSON as JSON (keys kept)."""
    if content is None or isinstance(content, str):
        return strip_controls(content or "")
    if isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return strip_controls("\n".join(str(b.get("text", "")) for b in content))
    return strip_controls(orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS).decode())


# Terminal control sequences (CSI colours, OSC titles and links) and the other C0/C1 controls but tab and
# newline: recorded terminal output carries them, and neither a page nor a person's terminal should run them.
_CONTROLS = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?"
                       r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def strip_controls(text: str) -> str:
    """`text` without terminal escape sequences and control characters (tab and newline kept)."""
    return _CONTROLS.sub("", text) if ("\x1b" in text or not text.isprintable()) else text


def _system_text(content: Any) -> str:
    return content if isinstance(content, str) else searchable_text(content)


def _part_dict(p: Part) -> dict:
    out: dict[str, Any] = {"kind": p.kind}
    if p.text:
        out["text"] = strip_controls(p.text)
    if p.kind in ("tool_use", "tool_result"):
        out["tool_use_id"] = p.tool_use_id
    if p.kind == "tool_use":
        out.update(name=p.name, input=p.input)
    if p.kind == "tool_result":
        out["is_error"] = p.is_error
    if p.kind in ("opaque", "image", "redacted_thinking"):
        out["data"] = p.data
    return out


# ---------------------------------------------------------------------------- stats


def stats(store: StoreReader, by: str, flt: SessionFilter, latency: bool = True) -> list[StatsRowJSON]:
    """Calls, errors, tokens by kind, cost and latency, grouped by day (UTC), model, agent or run.

    Tokens and cost follow `reasonlog.accounting`: an exchange's SDK-reported figures replace its calls'.
    `latency=False` leaves the median out (None). The median is the middle call's latency bucket (usage_sql.EDGES:
    2.2 % wide) answered by its geometric middle: within 1.1 % of the exact median whenever the two middle calls of
    an even count share a bucket, and the lower middle's bucket otherwise.
    """
    key_of = _STAT_KEY.get(by)
    if key_of is None:
        raise ValueError(f"by: expected one of {', '.join(STAT_KEYS)}, got {by!r}")
    groups = store.usage_groups(by, flt, latency)
    return [_summarise(key_of, key, t) for key, t in sorted(groups.items(), key=lambda kv: str(kv[0]))]


_STAT_KEY: dict[str, StatKey] = {"day": "day", "model": "model", "agent": "agent", "run": "run", "source": "source"}


def stats_each(store: StoreReader, bys: tuple[str, ...], flt: SessionFilter) -> dict[str, list[StatsRowJSON]]:
    """`stats(store, by, flt, latency=False)` for each of `bys` (model, agent, source: keys with few values), from one
    read grouped by all of them at once, each group's totals then added by each key alone: the usage page's tables
    read the kept rows once, not once a table. Costs are added in another order than one SQL sum a key: equal
    to 1e-12 dollar, as the kept rows' sums are (store/rollups.py)."""
    folded: dict[str, dict[Any, dict]] = {by: {} for by in bys}
    for key, t in store.usage_groups("+".join(bys), flt, False).items():
        for by, part in zip(bys, str(key).split(PAIR), strict=True):
            _add(folded[by].setdefault(part or None, {}), t)
    return {by: [_summarise(_STAT_KEY[by], key, t) for key, t in sorted(groups.items(), key=lambda kv: str(kv[0]))]
            for by, groups in folded.items()}


def _add(into: dict, t: dict) -> None:
    """Add totals `t` into `into`: a cost of None (no priced call) adds nothing, and stays None if none is priced;
    the numbers alone (a list of latencies is for a median, not asked here)."""
    for k, v in t.items():
        if k == "cost_usd":
            if v is not None:
                into[k] = round((into.get(k) or 0.0) + v, 12)
            else:
                into.setdefault(k, None)
        elif isinstance(v, int | float):  # not a list of latencies: no median is asked
            into[k] = into.get(k, 0) + v


def _summarise(by: StatKey, key: Any, t: dict) -> StatsRowJSON:
    out = StatsRowJSON(calls=t["calls"], errors=t["errors"], input_tokens=t["input_tokens"],
                       output_tokens=t["output_tokens"], cache_read_tokens=t["cache_read_tokens"],
                       cache_write_tokens=t["cache_write_tokens"], cache_write_1h_tokens=t["cache_write_1h_tokens"],
                       reasoning_tokens=t["reasoning_tokens"], cost_usd=t["cost_usd"],
                       calls_without_cost=t["calls_without_cost"], latency_ms_p50=median_of(t.get("histogram") or {}),
                       latency_ms_mean=round(t["latency_ms_sum"] / t["latency_count"], 3) if t["latency_count"]
                       else None)
    out[by] = key
    return out


# ---------------------------------------------------------------------------- diff


def diff_calls(store: StoreReader, call_a: str, call_b: str) -> DiffJSON:
    """What changed in the context window from call A to call B."""
    a, b = store.get_call(call_a), store.get_call(call_b)
    msgs_a, msgs_b = _messages(a), _messages(b)
    ops = difflib.SequenceMatcher(a=a["context_ids"], b=b["context_ids"], autojunk=False).get_opcodes()
    added: list[DiffMessageJSON] = []
    trimmed: list[DiffMessageJSON] = []
    edited: list[EditedJSON] = []
    recorded = _in_timeline(store, a, b) if any(op[0] == "replace" for op in ops) else set()
    for tag, i1, i2, j1, j2 in ops:
        if tag == "insert":
            added += [_brief(j, msgs_b[j]) for j in range(j1, j2)]
        elif tag == "delete":
            trimmed += [_brief(i, msgs_a[i]) for i in range(i1, i2)]
        elif tag == "replace":
            edited += _replacements((msgs_a, a["context_ids"]), (msgs_b, b["context_ids"]), (i1, i2, j1, j2), recorded,
                                    added, trimmed)
    system_a, system_b = _system_of(a), _system_of(b)
    return DiffJSON(
        call_a=a["id"], call_b=b["id"], messages_a=len(msgs_a), messages_b=len(msgs_b),
        kept=sum(i2 - i1 for tag, i1, i2, _, _ in ops if tag == "equal"),
        added=added, trimmed=trimmed, edited=edited,
        system_changed=system_a != system_b,
        system_diff=_text_diff(system_a, system_b) if system_a != system_b else None,
        tools=_tool_changes(a["request"].get("tools"), b["request"].get("tools")),
        params=_param_changes(a["params"], b["params"]),
    )


def _messages(call: Mapping[str, Any]) -> list:
    return providers.messages_of(call["request"])


def _system_of(call: Mapping[str, Any]) -> str:
    value = providers.system_of(call["request"])
    return "" if value is None else _system_text(value)


def _brief(index: int, message: Any) -> DiffMessageJSON:
    """A message in one line: its text, its tool calls as `→ name(args)`, its results as `← …`."""
    text = " ".join(_one_line(p) for p in parts_of(message) if _one_line(p))
    role = message.get("role") if isinstance(message, dict) else None
    return DiffMessageJSON(index=index, role=role, text=text[:200] + ("…" if len(text) > 200 else ""))


def _one_line(part: Part) -> str:
    if part.kind == "tool_use":
        return f"→ {part.name}({orjson.dumps(part.input).decode()})"
    if part.kind == "tool_result":
        return f"← {' '.join(part.text.split())}"
    if part.kind == "thinking":
        return f"(thinking: {' '.join(part.text.split())})"
    return " ".join(part.text.split())


def _in_timeline(store: StoreReader, a: Mapping[str, Any], b: Mapping[str, Any]) -> set[int]:
    """The contents of both calls' contexts that are entries of their sessions' timelines."""
    return store.in_timeline(dict.fromkeys((a["session_id"], b["session_id"])), {*a["context_ids"], *b["context_ids"]})


def _replacements(side_a, side_b, span, recorded: set[int], added, trimmed) -> list[EditedJSON]:
    """Pair replaced messages as edits, unless both are messages of the conversation (a window that slid)."""
    (msgs_a, ids_a), (msgs_b, ids_b) = side_a, side_b
    i1, i2, j1, j2 = span
    edited: list[EditedJSON] = []
    for k in range(min(i2 - i1, j2 - j1)):
        old, new = msgs_a[i1 + k], msgs_b[j1 + k]
        if ids_a[i1 + k] in recorded and ids_b[j1 + k] in recorded:
            trimmed.append(_brief(i1 + k, old))
            added.append(_brief(j1 + k, new))
            continue
        edited.append(EditedJSON(index_a=i1 + k, index_b=j1 + k, role=_brief(j1 + k, new)["role"],
                                 diff=_text_diff(searchable_text(old), searchable_text(new))))
    pairs = min(i2 - i1, j2 - j1)
    trimmed += [_brief(i, msgs_a[i]) for i in range(i1 + pairs, i2)]
    added += [_brief(j, msgs_b[j]) for j in range(j1 + pairs, j2)]
    return edited


def _text_diff(a: str, b: str) -> list[str]:
    return [line for line in difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=1)][2:]


def _tool_changes(tools_a: list | None, tools_b: list | None) -> ToolsDiffJSON:
    def by_name(tools):
        return {(t.get("name") or (t.get("function") or {}).get("name") or str(i)): t
                for i, t in enumerate(tools or ()) if isinstance(t, dict)}
    a, b = by_name(tools_a), by_name(tools_b)
    return ToolsDiffJSON(added=sorted(set(b) - set(a)), removed=sorted(set(a) - set(b)),
                         changed=sorted(n for n in set(a) & set(b) if a[n] != b[n]))


def _param_changes(a: dict, b: dict) -> dict[str, ParamChangeJSON]:
    keys = sorted(set(a) | set(b))
    return {k: ParamChangeJSON(a=a.get(k), b=b.get(k)) for k in keys if a.get(k) != b.get(k)}


# ---------------------------------------------------------------------------- the reasoning view


class NotFound(LookupError):
    """No session matches: the message says which filters found nothing."""


def reasoning_sessions(store: StoreReader, job_id: str | None = None, date: str | None = None, model: str | None = None,
                       include_conversation: bool = False) -> list[dict]:
    """Model-days with their positions (and, asked, their conversation), ordered by date then model.

    The shape trading-simulator clients read from `GET /reasoning`: a session's `job_id` is its run, its `date`
    its `date` label, its positions its outcomes of kind `position`. `date` must be YYYY-MM-DD (ValueError)."""
    if date is not None:
        try:
            datetime.strptime(date, "%Y-%m-%d")
        except ValueError:
            raise ValueError(f"Invalid date format: {date}. Expected YYYY-MM-DD") from None
    flt = SessionFilter(run=job_id, model=model, labels={"date": date} if date else {}, limit=None)
    found = [s for s in store.list_sessions(flt) if (s.get("labels") or {}).get("date")]
    if not found and model is not None:  # agents do not case model names alike: `gpt-5` finds `GPT-5` too
        found = [s for s in store.list_sessions(replace(flt, model=None))
                 if (s.get("labels") or {}).get("date") and (s.get("model") or "").casefold() == model.casefold()]
    if not found:
        asked = ", ".join(f"{k}={v}" for k, v in (("job_id", job_id), ("date", date), ("model", model)) if v)
        raise NotFound(f"No reasoning sessions found{' for ' + asked if asked else ''}")
    found.sort(key=lambda s: (s["labels"]["date"], s.get("model") or s.get("agent") or "", s["started_at"]))
    texts = summary_texts(store, [s["id"] for s in found])
    if include_conversation:
        return [_reasoning_session(store.get_session(s["id"]), include_conversation, texts) for s in found]
    # Without the conversation, a few queries for every session at once (a whole day of models is many sessions).
    counts = store.count_messages([s["id"] for s in found])
    positions: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    ids = [s["id"] for s in found]
    mine = [o for start in range(0, len(ids), 500)
            for o in store.list_outcomes(SessionFilter(limit=None), kind="position", session_id=ids[start:start + 500])]
    for o in sorted(mine, key=lambda o: (o["message_idx"], o["at"], o["id"])):
        positions[o["session_id"]].append(o)
    return [_reasoning_session({**s, "outcomes": positions.get(s["id"], [])}, False, texts, counts[s["id"]])
            for s in found]


def summary_texts(store: StoreReader, session_ids: list[str]) -> dict[tuple[str, str], str]:
    """The stored summaries of these sessions that have text, by (kind, target id); failed ones without text left out.

    A message's target id is `<session id>:<idx>` (see reasonlog.summaries)."""
    return {(r["target_kind"], r["target_id"]): r["text"] for r in store.list_summaries(session_ids)
            if r["text"] is not None}


def with_summaries(store: StoreReader, session: SessionDetailJSON) -> SessionDetailJSON:
    """`get_session`'s dict with `session_summary` (stored, else the session's own `summary`), and a `summary`
    on each exchange and message (None when there is none)."""
    texts = summary_texts(store, [session["id"]])
    sid = session["id"]
    return {**session, "session_summary": texts.get(("session", sid)) or session.get("summary"),
            "exchanges": [{**e, "summary": texts.get(("exchange", e["id"]))} for e in session["exchanges"]],
            "messages": [{**m, "summary": texts.get(("message", f"{sid}:{m['idx']}"))} for m in session["messages"]]}


def _reasoning_session(session: Mapping[str, Any], include_conversation: bool, texts: dict[tuple[str, str], str],
                       total: int | None = None) -> dict:
    messages = [m for m in session["messages"] if m["role"] != "system"] if total is None else []
    sid = session["id"]
    return {
        "session_id": sid, "job_id": session.get("run"), "date": session["labels"]["date"],
        "model": session.get("model") or session.get("agent"),
        "session_summary": texts.get(("session", sid)) or session.get("summary"),
        "started_at": session["started_at"], "completed_at": session.get("ended_at"),
        "total_messages": len(messages) if total is None else total,
        "positions": [_position(o["payload"]) for o in session["outcomes"] if o["kind"] == "position"],
        "conversation": ([_conversation_item(n, m, texts.get(("message", f"{sid}:{m['idx']}")))
                          for n, m in enumerate(messages)] if include_conversation else None),
    }


def _position(payload: Any) -> dict:
    p = payload if isinstance(payload, dict) else {}
    # The simulator's own logs say `action`; a client recording the API's shape says `action_type`.
    action = p["action_type"] if p.get("action_type") is not None else p.get("action")
    return {"action_id": p.get("action_id"), "action_type": action, "symbol": p.get("symbol"),
            "amount": p.get("amount"), "price": p.get("price"), "cash_after": p.get("cash_after"),
            "portfolio_value": p.get("portfolio_value")}


def _conversation_item(n: int, message: dict, summary: str | None) -> dict:
    parts = parts_of(message["content"])
    tool = next((p for p in parts if p.kind == "tool_use"), None)
    return {"message_index": n, "role": message["role"], "content": "".join(p.text for p in parts if p.text),
            "summary": summary, "tool_name": tool.name if tool else None, "tool_input": tool.input if tool else None,
            "timestamp": message["at"]}
