"""Reading commands: sessions, show, stats, replay, diff, search. Recorded text is always printed as text."""
from __future__ import annotations

from dataclasses import replace

import click
import orjson
from rich.table import Table
from rich.text import Text

from .. import query
from ..store import SessionFilter
from .main import cli, console, emit_json, json_option

FOLD_CHARS = 700
FOLD_LINES = 14


def filter_options(fn):
    """The session filters every listing command accepts."""
    options = [
        click.option("--run", help="Only this run."),
        click.option("--agent", help="Only this agent."),
        click.option("--model", help="Only this model."),
        click.option("--status", type=click.Choice(["open", "completed", "failed", "interrupted"])),
        click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="Only sessions with this label."),
        click.option("--date", help="Only sessions started on this UTC day (YYYY-MM-DD)."),
        click.option("--since", help="Started on or after this day or instant."),
        click.option("--until", help="Started on or before this day (inclusive) or before this instant."),
        click.option("--limit", type=int, default=50, show_default=True, help="At most this many (0: all)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def make_filter(run, agent, model, status, labels, date, since, until, limit) -> SessionFilter:
    parsed = {}
    for item in labels:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r}: expected KEY=VALUE", param_hint="--label")
        parsed[key] = value
    if date:
        since = until = date
    return SessionFilter(run=run, agent=agent, model=model, status=status, labels=parsed, since=since, until=until,
                         limit=limit or None)


def _money(value) -> str:
    return "—" if value is None else f"${value:,.4f}"


@cli.command()
@filter_options
@json_option
@click.pass_obj
def sessions(obj, as_json, **filters):
    """List sessions, newest first."""
    rows = obj.store.list_sessions(make_filter(**filters))
    if as_json:
        return emit_json(rows)
    table = Table("started (UTC)", "session", "run", "agent", "model", "status", "calls", "err", "in", "out",
                  "cache r/w", "cost")
    table.columns[1].no_wrap = True
    for s in rows:
        table.add_row(s["started_at"][:19].replace("T", " "), Text(s["id"]), Text(s["run"] or ""),
                      Text(s["agent"] or ""), Text(s["model"] or ""), s["status"], str(s["call_count"]), str(s["error_count"]),
                      f"{s['input_tokens']:,}", f"{s['output_tokens']:,}",
                      f"{s['cache_read_tokens']:,}/{s['cache_write_tokens']:,}", _money(s["cost_usd"]))
    console.print(table)
    if not rows:
        console.print("no sessions match", style="dim")


@cli.command()
@click.argument("session")
@click.option("--full", is_flag=True, help="Do not fold long texts.")
@json_option
@click.pass_obj
def show(obj, session, full, as_json):
    """Show a session's conversation in order, tool calls paired with their results."""
    sid = obj.store.resolve_id("session", session)
    data = obj.store.get_session(sid)
    items = query.timeline(data)
    if as_json:
        return emit_json({"session": {k: v for k, v in data.items() if k not in ("messages",)}, "timeline": items})
    s = data
    console.print(Text(f"session {s['id']}  agent={s['agent']}  run={s['run']}  model={s['model']}  "
                       f"status={s['status']}  calls={s['call_count']}  cost={_money(s['cost_usd'])}", style="bold"))
    for item in items:
        _print_item(item, full)


def _print_item(item: dict, full: bool) -> None:
    if item["kind"] == "exchange":
        console.rule(Text(f"exchange {item['idx']}  {item['status']}"))
        return
    if item["kind"] == "failed_call":
        error = item["error"] or {}
        console.print(Text(f"✗ call {item['call_id']} failed: ", style="bold red")
                      + Text(f"{error.get('type', '')}: {error.get('message', '')}"))
        return
    if item["kind"] == "outcome":
        payload = orjson.dumps(item["payload"]).decode() if item["payload"] is not None else ""
        console.print(Text("◆ outcome ", style="magenta") + Text(f"{item['outcome_kind']} {payload}"))
        return
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
        args = orjson.dumps(part.get("input")).decode()
        console.print(Text(f"→ {part.get('name')}", style="yellow") + Text(f" {_fold(args, full)}  ({part['tool_use_id']})"))
        result = part.get("result")
        if result is not None:
            style = "red" if result["is_error"] else "green"
            took = f" {result['duration_ms']:.0f} ms" if result.get("duration_ms") is not None else ""
            label = "error" if result["is_error"] else "result"
            console.print(Text(f"  ← {label}{took}: ", style=style) + Text(_fold(result["content"] or "", full)))
    elif kind == "tool_result":
        style = "red" if part.get("is_error") else "green"
        console.print(Text(f"← result ({part.get('tool_use_id')}): ", style=style)
                      + Text(_fold(part.get("text", ""), full)))
    else:
        console.print(Text(f"[{kind}] ", style="dim") + Text(_fold(orjson.dumps(part.get("data")).decode(), full)))


def _fold(text: str, full: bool) -> str:
    if full:
        return text
    lines = text.splitlines()
    if len(text) <= FOLD_CHARS and len(lines) <= FOLD_LINES:
        return text
    kept = "\n".join(lines[:FOLD_LINES])[:FOLD_CHARS]
    return f"{kept}… [{len(text) - len(kept):,} more characters; --full shows all]"


@cli.command()
@click.option("--by", type=click.Choice(query.STAT_KEYS), default="day", show_default=True)
@filter_options
@json_option
@click.pass_obj
def stats(obj, by, as_json, **filters):
    """Calls, errors, tokens by kind, cost and latency, grouped by day, model, agent or run."""
    flt = make_filter(**filters)
    rows = query.stats(obj.store, by, replace(flt, limit=None))
    if as_json:
        return emit_json(rows)
    table = Table(by, "calls", "errors", "input", "output", "reasoning", "cache read", "cache write", "cost",
                  "latency p50")
    for r in rows:
        cost = _money(r["cost_usd"]) + (f" (+{r['calls_without_cost']} unpriced)" if r["calls_without_cost"] else "")
        table.add_row(Text(str(r[by])), str(r["calls"]), str(r["errors"]), f"{r['input_tokens']:,}",
                      f"{r['output_tokens']:,}", f"{r['reasoning_tokens']:,}", f"{r['cache_read_tokens']:,}",
                      f"{r['cache_write_tokens']:,}", cost,
                      "—" if r["latency_ms_p50"] is None else f"{r['latency_ms_p50']:,.0f} ms")
    console.print(table)


@cli.command()
@click.argument("call")
@click.pass_obj
def replay(obj, call):
    """Print the exact request a call sent, as canonical JSON."""
    from ..store.content import canonical

    request = obj.store.replay_call(obj.store.resolve_id("call", call))
    click.echo(canonical(request).decode())


@cli.command()
@click.argument("call_a")
@click.argument("call_b")
@json_option
@click.pass_obj
def diff(obj, call_a, call_b, as_json):
    """What changed in the context window between two calls."""
    result = query.diff_calls(obj.store, obj.store.resolve_id("call", call_a), obj.store.resolve_id("call", call_b))
    if as_json:
        return emit_json(result)
    console.print(Text(f"{result['messages_a']} → {result['messages_b']} messages; {result['kept']} kept", style="bold"))
    for m in result["trimmed"]:
        console.print(Text(f"- trimmed [{m['index']}] {m['role']}: ", style="red") + Text(m["text"]))
    for m in result["edited"]:
        console.print(Text(f"~ edited [{m['index_a']}→{m['index_b']}] {m['role']}", style="yellow"))
        for line in m["diff"]:
            console.print(Text("    " + line))
    for m in result["added"]:
        console.print(Text(f"+ added [{m['index']}] {m['role']}: ", style="green") + Text(m["text"]))
    if result["system_changed"]:
        console.print(Text("system prompt changed:", style="yellow"))
        for line in result["system_diff"]:
            console.print(Text("    " + line))
    tools = result["tools"]
    for what in ("added", "removed", "changed"):
        if tools[what]:
            console.print(Text(f"tools {what}: {', '.join(tools[what])}", style="yellow"))
    for key, change in result["params"].items():
        console.print(Text(f"param {key}: {change['a']!r} → {change['b']!r}", style="yellow"))


@cli.command()
@click.argument("text")
@filter_options
@json_option
@click.pass_obj
def search(obj, text, as_json, limit, **filters):
    """Find TEXT in every message, tool result and outcome (any part of a word, any case); prints where each is."""
    if not text.strip():
        raise click.UsageError("nothing to search for: give some text, e.g. reasonlog search \"timed out\"")
    hits = obj.store.search(text, make_filter(limit=None, **filters), limit=None)  # all: the count is of matches
    shown = hits[:limit] if limit else hits
    if as_json:
        return emit_json(shown)
    if not hits:
        console.print(Text(f"no message, tool result or outcome contains {text!r}"), style="dim")
        return
    table = Table("session", "at", "kind", "role / name", "call", "snippet")
    for h in shown:
        table.add_row(Text(h["session_id"]), str(h["message_idx"]), h["kind"], Text(h["name"] or h["role"] or ""),
                      Text(h["call_id"] or ""), Text(h["snippet"]))
    console.print(table)
    more = f"; showing the first {len(shown)} (--limit 0 shows all)" if len(shown) < len(hits) else ""
    console.print(f"{len(hits)} match{'es' if len(hits) != 1 else ''}{more}", style="dim")
