"""`reasonlog show`: a session's conversation, one line per call, tool calls paired with their results."""
from __future__ import annotations

import click
import orjson
from rich.text import Text

from .. import query
from ..store import NotFound, StoreError
from .group import cli, console, emit_json, json_option

FOLD_CHARS = 700
FOLD_LINES = 14


@cli.command()
@click.argument("ref", metavar="SESSION|CALL")
@click.option("--full", is_flag=True, help="Do not fold long texts.")
@click.option("--no-summaries", "summaries", is_flag=True, flag_value=False, default=True,
              help="Leave out the session's and the exchanges' summaries (reasonlog summarize).")
@json_option
@click.pass_obj
def show(obj, ref, full, summaries, as_json):
    """Show a session's conversation in order, tool calls paired with their results, one line per call.

    Each call's line starts with its number in the session, `#N`: `SESSION#N` names that call in
    `show`, `replay` and `diff`. Given a call, show prints only what that call added and its reply.
    The session's summary and each exchange's (made by `reasonlog summarize`) head them.
    """
    sid, call_id = _session_or_call(obj.store, ref)
    data = obj.store.get_session(sid)
    items = query.timeline(data)
    if call_id is not None:
        items = [i for i in items if i.get("call_id") == call_id]
    texts = query.summary_texts(obj.store, [sid])
    data = {**data, "summary": texts.get(("session", sid)) or data.get("summary"),
            "exchanges": [{**e, "summary": texts.get(("exchange", e["id"]))} for e in data["exchanges"]]}
    items = [{**i, "summary": texts.get(("exchange", i["id"]))} if i["kind"] == "exchange" else i for i in items]
    if as_json:
        hidden = ("messages", "system_prompts")
        return emit_json({"session": {k: v for k, v in data.items() if k not in hidden}, "timeline": items})
    _print_header(data, summaries)
    _print_annotations(data["annotations"], call_id)
    for item in items:
        _print_item(item, full)
        if summaries and item["kind"] == "exchange":
            _print_summary(item["summary"])


def _session_or_call(store, ref: str) -> tuple[str, str | None]:
    """(session id, None) for a session; (its session id, call id) for a call: `SESSION#N` or a call id."""
    if "#" not in ref:
        try:
            return store.resolve_id("session", ref), None
        except NotFound as exc:
            try:
                call_id = store.resolve_id("call", ref)
            except StoreError:
                raise exc from None
            return store.get_call(call_id)["session_id"], call_id
    call_id = store.resolve_id("call", ref)
    return store.get_call(call_id)["session_id"], call_id


def _print_header(s: dict, summaries: bool) -> None:
    model = s["model"] or next((c["model"] for c in s["calls"] if c.get("model")), None)
    said = [f"{name}={value}" for name, value in (("agent", s["agent"]), ("run", s["run"]), ("model", model))
            if value is not None]
    fields = [f"session {s['id']}", *said, f"status={s['status']}", f"calls={s['call_count']}",
              f"cost={money(s['cost_usd'])}"]
    console.print(Text(fitted(fields, console.width), style="bold"))
    console.print(Text(f"calls: #N is {s['id']}#N in show, replay and diff", style="dim"))
    if summaries:
        _print_summary(s["summary"])


def _print_annotations(annotations: list[dict], call_id: str | None) -> None:
    shown = [a for a in annotations if call_id is None or a["call_id"] == call_id]
    if shown:
        console.print(Text("annotations:", style="bold"))
    for a in shown:
        console.print(annotation_line(a))


def annotation_line(a: dict) -> Text:
    """One annotation as `show` prints it: what it is about, what it says, who gave it and when."""
    about = "call " + a["call_id"] if a["call_id"] else "exchange " + a["exchange_id"] if a["exchange_id"] \
        else "session"
    said = a["value"] if a["kind"] == "note" else f"{a['name']}={a['value']}"
    who = f"{a['by'] or '?'} ({a['source']}), {a['created_at'][:16].replace('T', ' ')}"
    return Text(f"  {a['kind']} on {about}: ") + Text(str(said)) + Text(f"  by {who}", style="dim")


def _print_summary(text: str | None) -> None:
    if text:
        console.print(Text("summary: ", style="italic") + Text(text, style="italic"))


def money(value) -> str:
    return "—" if value is None else f"${value:,.4f}"


def call_line(item: dict) -> str:
    """`#3 gpt-5  in 1,200  out 34  cache 5,000/700  $0.0123  1,240 ms  tool_use  +1 message, 2 trimmed`."""
    return "  ".join(call_fields(item))


def call_fields(item: dict) -> list[str]:
    """The fields of a call's line, each one a person reads whole."""
    fields = [f"{item['ref']} {item['model'] or '?'}"]
    if item["kind"] == "failed_call":
        error = item["error"] or {}
        fields.append(f"✗ failed: {error.get('type', '')}: {error.get('message', '')}")
    else:
        fields += [f"in {item['input_tokens'] or 0:,}", f"out {item['output_tokens'] or 0:,}",
                   f"cache {item['cache_read_tokens'] or 0:,}/{item['cache_write_tokens'] or 0:,}",
                   money(item["cost_usd"])]
    if item["latency_ms"] is not None:
        fields.append(f"{item['latency_ms']:,.0f} ms")
    if item["stop_reason"]:
        fields.append(item["stop_reason"])
    if item.get("counted_in"):  # the same model call came by another path too: billed once, there
        fields.append(f"counted in call {item['counted_in']}")
    return [f for f in [*fields, window_change(item["window"])] if f]


def fitted(fields: list[str], width: int, indent: str = "    ") -> str:
    """The fields two spaces apart, broken between fields (never inside one) into lines of at most `width`;
    lines after the first are indented."""
    lines = [fields[0]]
    for field in fields[1:]:
        if len(lines[-1]) + 2 + len(field) <= width:
            lines[-1] += "  " + field
        else:
            lines.append(indent + field)
    return "\n".join(lines)


def readable_json(value) -> str:
    """JSON with a space after each comma and colon: a narrow terminal breaks it between values, not inside one."""
    import json

    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def window_change(w: dict | None) -> str:
    """How a call's window changed since the previous call, in words."""
    if not w:
        return ""
    said = [f"+{w['added']} message{'s' if w['added'] != 1 else ''}"] if w["added"] else []
    said += [f"{w['trimmed']} trimmed"] if w["trimmed"] else []
    said += [f"{w['edited']} edited"] if w.get("edited") else []
    said += [f"{w['held']} held by the server"] if w.get("held") else []
    said += [name for key, name in (("compacted", "compacted"), ("system_changed", "system changed"),
                                    ("tools_changed", "tools changed")) if w.get(key)]
    return ", ".join(said) or "same window"


def _print_item(item: dict, full: bool) -> None:
    kind = item["kind"]
    if kind == "exchange":
        console.rule(Text(f"exchange {item['idx']}  {item['status']}"))
    elif kind in ("call", "failed_call"):
        console.print(Text(fitted(call_fields(item), console.width), style="bold red" if kind == "failed_call"
                           else "bold"))
    elif kind == "system":
        console.print(Text(f"[{item['idx']}] system prompt", style="bold cyan"))
        console.print(Text(_fold(item["text"], full), style="dim"))
    elif kind == "tool_result":  # a recorded result that no tool call of the conversation names
        style = "red" if item["is_error"] else "green"
        label = f"← {item['name'] or 'tool'} {'error' if item['is_error'] else 'result'} ({item['tool_use_id']})"
        console.print(Text(label + ": ", style=style) + Text(_fold(item["content"], full)))
    elif kind == "outcome":
        payload = readable_json(item["payload"]) if item["payload"] is not None else ""
        console.print(Text("◆ outcome ", style="magenta") + Text(f"{item['outcome_kind']} {payload}"))
    else:
        console.print(Text(f"[{item['idx']}] {item['role']}", style="bold cyan"))
        for part in item["parts"]:
            _print_part(part, full)


def _print_part(part: dict, full: bool) -> None:
    kind = part["kind"]
    if kind == "text":
        console.print(Text(_fold(part.get("text", ""), full)))
    elif kind == "thinking":
        console.print(Text("thinking: ", style="italic dim") + Text(_fold(part.get("text", ""), full), style="dim"))
    elif kind == "tool_use":
        _print_tool_use(part, full)
    elif kind == "tool_result":
        style = "red" if part.get("is_error") else "green"
        console.print(Text(f"← result ({part.get('tool_use_id')}): ", style=style)
                      + Text(_fold(part.get("text", ""), full)))
    else:
        console.print(Text(f"[{kind}] ", style="dim") + Text(_fold(orjson.dumps(part.get("data")).decode(), full)))


def _print_tool_use(part: dict, full: bool) -> None:
    given = part.get("input")
    args = given if isinstance(given, str) else readable_json(given)  # a freeform tool's input as written
    console.print(Text(f"→ {part.get('name')}", style="yellow")
                  + Text(f" {_fold(args, full)}  ({part['tool_use_id']})"))
    result = part.get("result")
    if result is not None:
        style = "red" if result["is_error"] else "green"
        took = f" {result['duration_ms']:.0f} ms" if result.get("duration_ms") is not None else ""
        label = "error" if result["is_error"] else "result"
        console.print(Text(f"  ← {label}{took}: ", style=style) + Text(_fold(result["content"] or "", full)))


def _fold(text: str, full: bool) -> str:
    if full:
        return text
    lines = text.splitlines()
    if len(text) <= FOLD_CHARS and len(lines) <= FOLD_LINES:
        return text
    kept = "\n".join(lines[:FOLD_LINES])[:FOLD_CHARS]
    return f"{kept}… [{len(text) - len(kept):,} more characters; --full shows all]"
