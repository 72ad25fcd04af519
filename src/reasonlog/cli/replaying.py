"""`reasonlog replay CALL --send` and `replay SESSION --send`: send recorded requests again, record the answers in
the run `replays`, and print them beside the recorded ones. Recorded text is printed as text."""
from __future__ import annotations

import sys
from collections import Counter

import click
import orjson
from rich.table import Table
from rich.text import Text

from ..store import NotFound
from .group import console, emit_json
from .tables import Column, print_table

PROVIDERS = ("anthropic", "openai", "gemini")


def replay_options(command):
    """The options of `replay --send`, outermost first in --help."""
    for option in reversed([
        click.option("--send", is_flag=True, help="Send the request again (to a SESSION: each of its calls)."),
        click.option("--model", metavar="M", help="Send to this model (default: the recorded one)."),
        click.option("--provider", type=click.Choice(PROVIDERS), help="Send in this provider's protocol"
                     " (default: the recorded one); the request is translated, and what cannot be is named."),
        click.option("--base-url", metavar="URL", help="Send to this server (default: the provider's API)."),
        click.option("--concurrency", type=click.IntRange(1, 64), default=4, show_default=True,
                     help="Calls of a session in flight at once."),
        click.option("--max-cost", type=click.FloatRange(min=0), metavar="USD",
                     help="Refuse (or, on a terminal, ask) when the price table's estimate is more.")]):
        command = option(command)
    return command


def send_replay(obj, target: str, as_json: bool, model, provider, base_url, concurrency, max_cost) -> None:
    """Plan, price, send, record and compare; errors are one line and exit 1."""
    from ..replay import ReplayError  # loaded only to send: every other command starts without it

    try:
        _send_replay(obj, target, as_json, model, provider, base_url, concurrency, max_cost)
    except ReplayError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


def _send_replay(obj, target, as_json, model, provider, base_url, concurrency, max_cost) -> None:
    from ..replay import ReplayError
    from ..replay import session as replaying

    store = obj.writable
    call_ids, session = _calls_of(store, target)
    destination, planned = replaying.plan(store, call_ids, provider=provider, model=model, base_url=base_url)
    _check_budget(replaying.estimate(planned), max_cost, len(planned), model or session.get("model"))
    _print_notices([p.prepared.notices for p in planned])
    recorded = _send_with_progress(store, planned, destination, session, concurrency)
    if recorded.spilled:
        raise ReplayError(f"the database could not be written ({recorded.error}): the replay, session"
                          f" {recorded.session_id}, waits in spill files beside it and is written by the next"
                          " recorder or `reasonlog db upgrade` (`reasonlog db status` counts them)")
    outcomes, replay_ids = recorded.outcomes, recorded.ids
    result = replaying.report(store, outcomes, replay_ids)
    replay_session = store.get_call(replay_ids[0])["session_id"]
    if as_json:
        emit_json({"original_session": session["id"], "replay_session": replay_session,
                   "estimate_usd": replaying.estimate(planned), **result})
    else:
        _print_report(result, single=len(call_ids) == 1 and target != session["id"])
        console.print(Text(f"recorded as session {replay_session} (run replays); compare it in the dashboard"
                           f" at /compare?a={session['id']}&b={replay_session}", style="dim"))
    failed = [o.error for o in outcomes if o.error]
    if failed:
        raise ReplayError(f"{len(failed)} of {len(outcomes)} sends failed (recorded as errors); the first: {failed[0]}")


def _calls_of(store, target: str) -> tuple[list[str], dict]:
    """The calls to send (one call, or every call of a session, in order) and the session they belong to."""
    try:
        call_id = store.resolve_id("call", target)
    except NotFound:
        session = store.get_session(store.resolve_id("session", target))
        return [c["id"] for c in session["calls"]], session
    return [call_id], store.get_session(store.get_call(call_id)["session_id"], page=(0, 0))


def _check_budget(estimate: float | None, max_cost: float | None, calls: int, model: str | None) -> None:
    """Go on, ask (on a terminal) or refuse, by the estimate against --max-cost."""
    what = f"{calls} call{'s' if calls != 1 else ''} to {model or 'the recorded model'}"
    if estimate is None:
        click.echo(f"estimated cost of {what}: unknown ({model} has no price in the table)", err=True)
    else:
        click.echo(f"estimated cost of {what}: ${estimate:,.6f}", err=True)
    if max_cost is None or (estimate is not None and estimate <= max_cost):
        return
    over = f"more than --max-cost ${max_cost:,.6f}" if estimate is not None else "not known to be within --max-cost"
    if sys.stdin.isatty() and click.confirm(f"the estimate is {over}; send anyway?", default=False, err=True):
        return
    from ..replay import ReplayError

    raise ReplayError(f"the estimated cost of {what} is {over}; nothing was sent")


def _print_notices(per_call: list[list[str]]) -> None:
    """Each thing left out of the sent requests, once, with how many of the calls it was left out of."""
    counts = Counter(n for notices in per_call for n in notices)
    for notice, calls in counts.items():
        where = f" (in {calls} of {len(per_call)} calls)" if len(per_call) > 1 else ""
        click.echo(f"notice: not sent as recorded: {notice}{where}", err=True)


def _send_with_progress(store, planned, destination, session, concurrency):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from ..replay import session as replaying

    progress = Progress(TextColumn("replaying"), BarColumn(), MofNCompleteColumn(),
                        console=Console(stderr=True), disable=len(planned) < 2 or not sys.stderr.isatty(),
                        transient=True)
    with progress:
        task = progress.add_task("replaying", total=len(planned))
        return replaying.send_and_record(store, planned, destination, session, concurrency,
                                         lambda: progress.advance(task))


def _print_report(result: dict, single: bool) -> None:
    for row in result["calls"] if single else []:
        _print_side_by_side(row)
    if not single:
        _print_session_table(result)


def _print_side_by_side(row: dict) -> None:
    a, b = row["original"], row["replay"]
    table = Table(show_header=True, header_style="bold", show_lines=True)
    table.add_column("")
    table.add_column(f"original ({a['model'] or '?'})", overflow="fold")
    table.add_column(f"replay ({b['model'] or '?'})", overflow="fold")
    for label, cells in (("text", [Text(a["text"]), Text(b["error"] and f"error: {b['error']}" or b["text"])]),
                         ("tool calls", [_tools(a), _tools(b)]),
                         ("stop reason", [_stop(a), _stop(b)]),
                         ("tokens", [_tokens(a), _tokens(b)]),
                         ("cost", [_usd(a["cost_usd"]), _usd(b["cost_usd"])]),
                         ("latency", [_ms(a["latency_ms"]), _ms(b["latency_ms"])])):
        table.add_row(label, *cells)
    console.print(table)
    console.print(Text(f"same tool: {_yes(row['same_tool'])}  same arguments: {_yes(row['same_arguments'])}"
                       f"  same stop reason: {_yes(row['same_stop_reason'])}"
                       f"  text similarity: {_similarity(row['text_similarity'])}"))
    for line in row["text_diff"]:
        console.print(Text(line, style="green" if line.startswith("+") else "red" if line.startswith("-") else ""))


def _print_session_table(result: dict) -> None:
    columns = [Column("call"), Column("tools", keep=3), Column("same tool"), Column("same args"),
               Column("stop", keep=2), Column("similarity", numeric=True), Column("cost", numeric=True, keep=1),
               Column("latency", numeric=True, keep=1)]
    rows: list[list[str | Text]] = [_session_row(r) for r in result["calls"]]
    t = result["totals"]
    n = t["calls"] - t["errors"]
    similarity = "—" if t["mean_text_similarity"] is None else f"{t['mean_text_similarity']:.3f} mean"
    print_table(columns, rows, ["total", f"{t['errors']} errors" if t["errors"] else "", f"{t['same_tool']}/{n}",
                                f"{t['same_arguments']}/{n}", f"{t['same_stop_reason']}/{n}", similarity,
                                _pair(t["cost_usd"], _usd), _pair(t["latency_ms"], _ms)])


def _session_row(r: dict) -> list[str | Text]:
    return [f"#{r['idx']}", Text(_names(r["original"]) + " → " + _names(r["replay"])), _yes(r["same_tool"]),
            _yes(r["same_arguments"]), " → ".join(s or "—" for s in r["stop_reasons"]),
            "—" if r["text_similarity"] is None else f"{r['text_similarity']:.3f}", _pair(r["cost_usd"], _usd),
            _pair(r["latency_ms"], _ms)]


def _tools(answer: dict) -> Text:
    return Text("\n".join(f"{t['name']}({orjson.dumps(t['arguments']).decode()})" for t in answer["tools"]) or "—")


def _names(answer: dict) -> str:
    return ", ".join(t["name"] or "?" for t in answer["tools"]) or "—"


def _stop(answer: dict) -> str:
    return str(answer["stop_reason"]) if answer["stop_reason"] is not None else "—"


def _tokens(answer: dict) -> str:
    t = answer["tokens"]
    cache = (t["cache_read_tokens"] or 0, t["cache_write_tokens"] or 0)
    counts = f"in {_count(t['input_tokens'])}  out {_count(t['output_tokens'])}"
    return counts + (f"  cache {cache[0]:,}/{cache[1]:,}" if any(cache) else "")


def _count(value) -> str:
    return "—" if value is None else f"{value:,}"


def _usd(value) -> str:
    return "—" if value is None else f"${value:,.6f}"


def _ms(value) -> str:
    return "—" if value is None else f"{value:,.0f} ms"


def _pair(values: list, show) -> str:
    return f"{show(values[0])} → {show(values[1])}"


def _similarity(value: float | None) -> str:
    return "— (a call failed)" if value is None else f"{value:.3f}"


def _yes(value: bool) -> str:
    return "yes" if value else "no"

