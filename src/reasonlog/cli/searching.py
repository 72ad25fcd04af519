"""`reasonlog search`: its own module, holding only what a search needs, so the command (run once a query, often by
an agent) loads neither the other reading commands nor rich when it prints JSON (cli/entry.py, docs/performance.md).
Recorded text is printed as text."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import click

from ..semantic.search import MODES, default_mode
from ..semantic.search import search as semantic_search
from ..store import StoreError
from ..store.search import Query
from .filters import filter_options, make_filter
from .group import cli, console, emit_json, json_option


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
    if as_json:  # no count printed: the search stops at the limit (a common word has thousands of hits to check)
        return emit_json(semantic_search(obj.store, text, "text", make_filter(limit=None, **filters), limit or None))
    hits = semantic_search(obj.store, text, "text", make_filter(limit=None, **filters), None)  # all: a count
    shown = hits[:limit] if limit else hits
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
    from rich.text import Text

    from .reason import session_names

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
    from rich.text import Text

    at = "" if h["message_idx"] is None else f"  at {h['message_idx']}"
    where = Text(session, style="bold") + Text(f"{at}  {h['kind']}")
    if h["name"] or h["role"]:
        where += Text(f"  {h['name'] or h['role']}")
    if h.get("score") is not None:
        where += Text(f"  {h['score']:.4f}", style="dim")
    console.print(where)
    call = Text(f"  call {h['call_id']}: ", style="dim") if h["call_id"] else Text("  ")
    console.print(call + Text(" ".join(h["snippet"].split())), no_wrap=True, overflow="ellipsis")
