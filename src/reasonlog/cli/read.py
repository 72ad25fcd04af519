"""Reading commands: sessions, stats, replay, diff (show is in show.py, search in searching.py). Recorded text is
printed as text."""
from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import click
import orjson
from rich.text import Text

from .. import query, titles
from ..store import SessionFilter
from .filters import filter_options, make_filter, review_options
from .group import HOW_TO_START, cli, console, emit_json, json_option
from .replaying import replay_options, send_replay
from .show import money
from .tables import Column, print_table

# A person reads a list by its titles: the title is the last column to go at a narrow width.
SESSION_COLUMNS = [Column("started (UTC)", keep=8), Column("session", whole=True), Column("title", keep=10, shrink=24),
                   Column("run", keep=2),
                   Column("agent", keep=7), Column("model", keep=5), Column("status", keep=4),
                   Column("calls", keep=6, numeric=True), Column("err", keep=1, numeric=True),
                   Column("in", keep=3, numeric=True), Column("out", keep=3, numeric=True),
                   Column("cache r/w", keep=0, numeric=True), Column("cost", keep=9, numeric=True)]


@cli.command()
@filter_options
@review_options
@json_option
@click.pass_obj
def sessions(obj, as_json, **filters):
    """List sessions, newest first; says "showing N of M" when --limit leaves some out."""
    flt = make_filter(**filters)
    rows = obj.store.list_sessions(flt)
    if as_json:
        return emit_json(_with_summaries(obj.store, rows))
    print_sessions(obj.store, rows)
    if not rows and flt == SessionFilter(limit=flt.limit):
        console.print(Text(f"no sessions yet. {HOW_TO_START}"), style="dim")
    elif not rows:
        console.print("no sessions match", style="dim")
    elif flt.limit is not None and len(rows) == flt.limit:
        _say_how_many_of(len(rows), obj.store.count_sessions(flt))


def print_sessions(store, rows: list[dict]) -> None:
    """The sessions table: each row titled as its agent titled it, else by its first prompt."""
    prompts = store.first_prompts([s["id"] for s in rows if not (s.get("labels") or {}).get("title")])
    print_table(SESSION_COLUMNS, [_session_row(s, titles.title_of(s, prompts.get(s["id"]))) for s in rows])


def _with_summaries(store, rows: list[dict]) -> list[dict]:
    """Each session's `summary`: the stored one (`reasonlog summarize`), else what the session itself said."""
    texts = query.summary_texts(store, [s["id"] for s in rows]) if rows else {}
    return [{**s, "summary": texts.get(("session", s["id"])) or s.get("summary")} for s in rows]


def _session_row(s: dict, title: str) -> list:
    return [s["started_at"][:16].replace("T", " "), Text(s["id"]), Text(titles.shorten(title, 48)),
            Text(s["run"] or ""), Text(s["agent"] or ""),
            Text(s["model"] or ""), s["status"], str(s["call_count"]), str(s["error_count"]),
            f"{s['input_tokens']:,}", f"{s['output_tokens']:,}",
            f"{s['cache_read_tokens']:,}/{s['cache_write_tokens']:,}", money(s["cost_usd"])]


def _say_how_many_of(shown: int, total: int) -> None:
    if total > shown:
        console.print(f"showing {shown} of {total} (--limit 0 shows all)", style="dim")


STAT_COLUMNS = [Column("calls", keep=9, numeric=True), Column("errors", keep=4, numeric=True),
                Column("input", keep=8, numeric=True), Column("output", keep=7, numeric=True),
                Column("reasoning", keep=2, numeric=True), Column("cache read", keep=6, numeric=True),
                Column("cache write", keep=5, numeric=True), Column("cost", keep=10, numeric=True),
                Column("latency p50", keep=1, numeric=True)]
SUMMED = ("calls", "errors", "input_tokens", "output_tokens", "reasoning_tokens", "cache_read_tokens",
          "cache_write_tokens", "calls_without_cost")


@cli.command()
@click.option("--by", type=click.Choice(query.STAT_KEYS), default="day", show_default=True)
@filter_options
@json_option
@click.pass_obj
def stats(obj, by, as_json, **filters):
    """Calls, errors, tokens by kind, cost and latency, grouped by day, model, agent or run, with a totals row."""
    flt = make_filter(**filters)
    rows: Sequence[Mapping[str, Any]] = query.stats(obj.store, by, replace(flt, limit=None))
    if as_json:
        return emit_json(rows)
    totals: dict[str, Any] = {k: sum(r[k] for r in rows) for k in SUMMED}
    costs = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    totals.update({by: "total", "cost_usd": sum(costs) if costs else None, "latency_ms_p50": None})
    print_table([Column(by), *STAT_COLUMNS], [_stat_row(by, r) for r in rows], _stat_row(by, totals) if rows else None)


def _stat_row(by: str, r: Mapping[str, Any]) -> list:
    cost = money(r["cost_usd"]) + (f" (+{r['calls_without_cost']} unpriced)" if r["calls_without_cost"] else "")
    return [Text(str(r[by])), f"{r['calls']:,}", f"{r['errors']:,}", f"{r['input_tokens']:,}",
            f"{r['output_tokens']:,}", f"{r['reasoning_tokens']:,}", f"{r['cache_read_tokens']:,}",
            f"{r['cache_write_tokens']:,}", cost,
            "—" if r["latency_ms_p50"] is None else f"{r['latency_ms_p50']:,.0f} ms"]


@cli.command()
@click.argument("call", metavar="CALL")
@json_option
@replay_options
@click.pass_obj
def replay(obj, call, as_json, send, **options):
    """Print the exact request a call sent (CALL: an id, a prefix, or SESSION#N as `show` prints it).

    Piped, or with --json, it is canonical JSON, byte for byte what was recorded; on a terminal it is indented.
    With --send it sends the request again (CALL may then be a SESSION: every call of it) and compares the answers.
    """
    from ..wire.codec import canonical

    if send:
        return send_replay(obj, call, as_json, **options)
    if any(value is not None for name, value in options.items() if name != "concurrency"):
        raise click.UsageError("--model, --provider, --base-url and --max-cost go with --send")
    call_id = obj.store.resolve_id("call", call)
    request = obj.store.replay_call(call_id)
    window = obj.store.get_call(call_id).get("window") or {}
    if window.get("held"):  # a chained request: the server held the conversation it names
        click.echo(f"this request continues {window.get('chain')}: the server held {window['held']} messages of"
                   f" the conversation (see `reasonlog show {call}`); below is what was sent", err=True)
    if as_json or not sys.stdout.isatty():
        return click.echo(canonical(request).decode())
    emit_json(request)


@cli.command()
@click.argument("call_a")
@click.argument("call_b")
@json_option
@click.pass_obj
def diff(obj, call_a, call_b, as_json):
    """What changed in the context window between two calls (ids, prefixes or SESSION#N; CALL_B may be #N alone,
    in CALL_A's session)."""
    a = obj.store.resolve_id("call", call_a)
    if call_b.startswith("#"):
        call_b = obj.store.get_call(a)["session_id"] + call_b
    result = query.diff_calls(obj.store, a, obj.store.resolve_id("call", call_b))
    if as_json:
        return emit_json(result)
    _print_diff(result)


def _print_diff(result: Mapping[str, Any]) -> None:
    sizes = f"{result['messages_a']} → {result['messages_b']} messages; {result['kept']} kept"
    console.print(Text(sizes, style="bold"))
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
    for key, change in result["params"].items():  # JSON values: null, true, "text"
        values = [orjson.dumps(change[side]).decode() for side in ("a", "b")]
        console.print(Text(f"param {key}: {values[0]} → {values[1]}", style="yellow"))
