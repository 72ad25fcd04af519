"""Reading commands: sessions, stats, replay, diff, search (show is in show.py). Recorded text is printed as text."""
from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import date
from typing import Any

import click
import orjson
from rich.text import Text

from .. import query, titles
from ..model import format_instant
from ..semantic.search import MODES, default_mode
from ..semantic.search import search as semantic_search
from ..store import SessionFilter, StoreError
from ..store.annotation import ScoreTest
from ..store.search import Query
from ..wire.rules import RecordError
from .group import HOW_TO_START, cli, console, emit_json, json_option
from .reason import session_names
from .replaying import replay_options, send_replay
from .show import money
from .tables import Column, print_table


class When(click.ParamType):
    """A UTC day `YYYY-MM-DD`, or (unless `day_only`) an ISO-8601 instant; anything else is a usage error."""

    name = "when"

    def __init__(self, day_only: bool = False):
        self.day_only = day_only

    def convert(self, value, param, ctx):
        expected = "YYYY-MM-DD" if self.day_only else "YYYY-MM-DD or an ISO-8601 instant"
        try:
            if len(value) == 10:
                return date.fromisoformat(value).isoformat()
            if not self.day_only and len(value) > 10 and value[10] == "T":
                return format_instant(value)
        except (ValueError, RecordError):
            pass
        self.fail(f"{value!r} is not a valid date; expected {expected}", param, ctx)


def filter_options(fn=None, *, limit: int = 50, model_flag: str = "--model"):
    """The session filters every listing command accepts. As `@filter_options(limit=0, model_flag=...)`, a
    command chooses its default limit (0: all) and renames `--model` when it has a model of its own."""
    if fn is None:
        return lambda f: filter_options(f, limit=limit, model_flag=model_flag)
    options = [
        click.option("--run", help="Only this run."),
        click.option("--agent", help="Only this agent."),
        click.option(model_flag, "model", help="Only this model."),
        click.option("--status", type=click.Choice(["open", "completed", "failed", "interrupted"])),
        click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="Only sessions with this label."),
        click.option("--date", type=When(day_only=True), help="Only sessions started on this UTC day (YYYY-MM-DD)."),
        click.option("--since", type=When(), help="Started on or after this day or instant."),
        click.option("--until", type=When(), help="Started on or before this day (inclusive) or before this instant."),
        click.option("--limit", type=int, default=limit, show_default=True, help="At most this many (0: all)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def review_options(fn):
    """The filters on annotations (docs/review.md), for the sessions list."""
    fn = click.option("--has-note", is_flag=True, help="Only sessions with a note on them or on their calls.")(fn)
    return click.option("--score", "scores", multiple=True, metavar="TEST",
                        help="Only sessions with a score that passes TEST: task_done<0.5, verdict=pass;"
                             " repeatable.")(fn)


def make_filter(run, agent, model, status, labels, date, since, until, limit, scores=(),
                has_note=False) -> SessionFilter:
    parsed = {}
    for item in labels:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r}: expected KEY=VALUE", param_hint="--label")
        parsed[key] = value
    if date:
        since = until = date
    try:
        tests = tuple(ScoreTest.parse(t) for t in scores)
    except StoreError as exc:
        raise click.BadParameter(str(exc), param_hint="--score") from None
    return SessionFilter(run=run, agent=agent, model=model, status=status, labels=parsed, since=since, until=until,
                         limit=limit or None, scores=tests, has_note=has_note)


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


@cli.command()
@click.argument("text")
@click.option("--mode", type=click.Choice(MODES), help="text: where TEXT occurs as written, in timeline order;"
              " keywords: ranked by the words of TEXT each holds; semantic: ranked by meaning; hybrid: both ranks"
              " fused. Default: hybrid once `reasonlog embed` has run (the semantic extra), else text.")
@filter_options
@json_option
@click.pass_obj
def search(obj, text, mode, as_json, limit, **filters):
    """Find TEXT in every message, tool result and outcome; prints where each is. By default as written (any part
    of a word, any case); --mode keywords, semantic or hybrid rank what comes closest to TEXT, best first."""
    if not text.strip():
        raise click.UsageError("nothing to search for: give some text, e.g. reasonlog search \"timed out\"")
    mode = mode or default_mode(obj.store)
    if mode != "text":
        return _ranked_search(obj, text, mode, as_json, limit, filters)
    try:
        Query.parse(text)
    except StoreError as exc:
        raise click.UsageError(str(exc)) from None
    hits = semantic_search(obj.store, text, "text", make_filter(limit=None, **filters), None)  # all: a count
    shown = hits[:limit] if limit else hits
    if as_json:
        return emit_json(shown)
    more = f"; showing the first {len(shown)} (--limit 0 shows all)" if len(shown) < len(hits) else ""
    _print_hits(obj, shown, f"no message, tool result or outcome contains {text!r}",
                f"{len(hits)} match{'es' if len(hits) != 1 else ''}{more}")


RANKED_ALL = 1000  # --limit 0 in a ranked mode: this many hits


def _ranked_search(obj, text: str, mode: str, as_json: bool, limit: int, filters: dict) -> None:
    hits = semantic_search(obj.store, text, mode, make_filter(limit=None, **filters), limit or RANKED_ALL)
    if as_json:
        return emit_json(hits)
    _print_hits(obj, hits, f"nothing found for {text!r} ({mode})",
                f"{len(hits)} hit{'s' if len(hits) != 1 else ''}, best first ({mode})")


def _print_hits(obj, hits: Sequence[Mapping[str, Any]], none: str, count: str) -> None:
    """Each hit under its session's name, then `count`; `none` when there is no hit."""
    if not hits:
        console.print(Text(none), style="dim")
        return
    names = session_names(obj.store, {h["session_id"] for h in hits})
    for h in hits:
        _print_hit(h, names[h["session_id"]])
    console.print(count, style="dim")


def _print_hit(h: Mapping[str, Any], session: str) -> None:
    """Two lines a hit: where it is (the session whole, by the id its agent gave it where there is one), then the
    call's id (whole) and the snippet on one line."""
    at = "" if h["message_idx"] is None else f"  at {h['message_idx']}"
    where = Text(session, style="bold") + Text(f"{at}  {h['kind']}")
    if h["name"] or h["role"]:
        where += Text(f"  {h['name'] or h['role']}")
    if h.get("score") is not None:
        where += Text(f"  {h['score']:.4f}", style="dim")
    console.print(where)
    call = Text(f"  call {h['call_id']}: ", style="dim") if h["call_id"] else Text("  ")
    console.print(call + Text(" ".join(h["snippet"].split())), no_wrap=True, overflow="ellipsis")
