"""What each dashboard page shows, gathered from the query functions and the StoreReader protocol (no SQL here).

The same functions feed the served pages and `reasonlog export --format html`."""
from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from markupsafe import Markup, escape

from ... import providers, query, titles
from ...semantic import search as semantic
from ...store import SearchStore, SessionFilter, StoreReader
from ...store.annotation import ScoreTest
from ...store.keywords import words_of
from ...wire import SessionJSON
from . import charts, over_time, timeline, tools

PAGE = 200  # timeline entries a session page shows
SIMILAR = 5  # "sessions like this one" a session page lists
# Context windows, for the fullness bar; a model not listed shows its tokens without a share.

@dataclass(frozen=True)
class Filters:
    run: str | None = None
    agent: str | None = None
    model: str | None = None
    status: str | None = None
    source: str | None = None
    since: str | None = None
    until: str | None = None
    q: str | None = None
    mode: str | None = None  # how `q` is searched (reasonlog.semantic.search.MODES); None: the default here
    score: str | None = None  # a score test, `task_done<0.5` (docs/review.md)
    has_note: str | None = None  # "1": only sessions with a note

    def session_filter(self, limit: int | None, after=None) -> SessionFilter:
        return SessionFilter(run=self.run, agent=self.agent, model=self.model, status=self.status,
                             labels={"source": self.source} if self.source else {}, since=self.since,
                             until=self.until, limit=limit, after=after, text=self.q,
                             scores=(ScoreTest.parse(self.score),) if self.score else (),
                             has_note=bool(self.has_note))

    def query(self, **more: Any) -> dict[str, str]:
        """The filters (and `more`) as URL parameters, empty ones left out: filters stay in the URL."""
        values = {**self.__dict__, **more}
        return {k: str(v) for k, v in values.items() if v not in (None, "")}


SORTS = {"started": None, "cost": "cost_usd", "tokens": "tokens", "calls": "call_count", "errors": "error_count"}


def sessions(store: SearchStore, f: Filters, sort: str, cursor: tuple[str, str] | None, limit: int = 50) -> dict:
    mode = (f.mode or semantic.default_mode(store)) if f.q else None
    if f.q and mode != "text":
        return {**_ranked_sessions(store, f, mode or "hybrid", sort, limit), "mode": mode}
    rows: list[dict[Any, Any]] = [dict(r) for r in store.list_sessions(f.session_filter(limit + 1, cursor))]
    more = len(rows) > limit
    rows = rows[:limit]
    _decorate(store, rows)
    if SORTS.get(sort):  # within the page: the cursor walks the list newest first
        rows.sort(key=lambda s: s.get(SORTS[sort]) or 0, reverse=True)
    hits: dict[str, list[Markup]] = {}
    if f.q and rows:
        for h in store.search(f.q, f.session_filter(None), limit=500):
            if len(hits.setdefault(h["session_id"], [])) < 3:
                hits[h["session_id"]].append(highlight(h["snippet"], f.q))
    nxt = f"{rows[-1]['started_at']}|{rows[-1]['id']}" if more and rows else None
    return {"sessions": rows, "hits": hits, "next": nxt, "mode": mode, "modes": semantic.MODES}


def review(store: StoreReader, at: int, limit: int = 50) -> dict:
    """The review queue (docs/review.md): sessions no person reviewed yet, failing and low-scored first; `at` is
    the row chosen (after a review, the one that took the reviewed session's place)."""
    rows = store.review_queue(limit)
    _decorate(store, rows)
    return {"sessions": rows, "at": min(max(at, 0), max(len(rows) - 1, 0))}


def _ranked_sessions(store: SearchStore, f: Filters, mode: str, sort: str, limit: int) -> dict:
    """The sessions of a ranked search's hits, in the order of each one's best hit (one page: ranks have no cursor),
    with up to three hits each."""
    found = semantic.search(store, f.q or "", mode, f.session_filter(None), RANKED_HITS)
    hits: dict[str, list[Markup]] = {}
    for h in found:
        if len(hits.setdefault(h["session_id"], [])) < 3:
            hits[h["session_id"]].append(highlight(h["snippet"], f.q or "", words_of(f.q or "")))
    rows: list[dict[Any, Any]] = [dict(store.session_row(sid)) for sid in list(hits)[:limit]]
    _decorate(store, rows)
    if SORTS.get(sort):
        rows.sort(key=lambda s: s.get(SORTS[sort]) or 0, reverse=True)
    return {"sessions": rows, "hits": hits, "next": None, "modes": semantic.MODES}


RANKED_HITS = 500  # hits a ranked search of the sessions page reads


def _decorate(store: StoreReader, rows: list[dict]) -> None:
    """What the sessions table shows of each row besides its columns: tokens, source, title, project."""
    prompts = store.first_prompts([s["id"] for s in rows if not (s.get("labels") or {}).get("title")])
    for s in rows:
        s["tokens"] = sum(s.get(k) or 0 for k in query.TOKEN_FIELDS if k != "reasoning_tokens")
        s["source"] = (s.get("labels") or {}).get("source", "recorded")
        s["title"] = titles.title_of(s, prompts.get(s["id"]))
        s["project"] = project_of(s)


def project_of(session: dict) -> dict[str, str]:
    """Where the session worked, short and in full: its working directory's last folder, else its run."""
    cwd = (session.get("labels") or {}).get("cwd")
    if isinstance(cwd, str) and cwd.strip("/\\"):
        return {"short": re.split(r"[/\\]", cwd.rstrip("/\\"))[-1], "full": cwd}  # POSIX or Windows
    run = session.get("run") or ""
    return {"short": run, "full": run}


def highlight(text: str, q: str, words: list[str] | None = None) -> Markup:
    """`text` escaped, with each query term (or each of `words`, when given) marked."""
    terms = [t.strip('"-*').lower() for t in re.findall(r'"[^"]*"|\S+', q) if t != "OR" and not t.startswith("-")]
    terms = words if words is not None else [t for t in terms if t] or [q.lower()]
    if not terms:
        return Markup(escape(text))
    out, low, i = [], text.lower(), 0
    pattern = re.compile("|".join(re.escape(t) for t in sorted(set(terms), key=len, reverse=True)))
    for m in pattern.finditer(low):
        out += [escape(text[i:m.start()]), Markup("<mark>"), escape(text[m.start():m.end()]), Markup("</mark>")]
        i = m.end()
    out.append(escape(text[i:]))
    return Markup("").join(out)


def session(store: SearchStore, session_id: str, view: str, offset: int, limit: int = PAGE) -> dict:
    """A page of the session's timeline (`limit` entries from `offset`); `limit=0`: all of it."""
    s: dict[str, Any] = dict(query.with_summaries(store, store.get_session(
        session_id, page=(offset, offset + limit) if limit else None)))
    s["title"] = titles.title_of(s, None if (s.get("labels") or {}).get("title") else
                                 store.first_prompts([s["id"]]).get(s["id"]))
    shown = {m["idx"] for m in s["messages"]} | {p["idx"] for p in s.get("system_prompts", ())}
    first, end = (offset, offset + limit) if limit else (0, 1 << 62)
    s["calls"] = [c for c in s["calls"] if _anchor(c, shown, first, end)]
    s["outcomes"] = [o for o in s["outcomes"] if first <= o["message_idx"] < end or not limit]
    items = query.timeline(s)
    by_call = {c["id"]: c for c in s["calls"]}
    for item in items:
        for part in item.get("parts", ()):
            if part["kind"] == "tool_use":
                part["line"] = tools.tool_line(part.get("name"), part.get("input"), part.get("result"))
        if item["kind"] in ("call", "failed_call"):
            call = by_call[item["call_id"]]
            item["facts"] = call.get("context_facts") or {}
            item["cost_source"] = call.get("cost_source")
            item["latency_ms"] = call.get("latency_ms")
            item["bar"] = charts.fullness(_window_tokens(call), window_of(call.get("model")))
    children = store.list_sessions(SessionFilter(parent=s["id"], limit=None))
    spawned: dict[str, list[SessionJSON]] = {}
    for child in children:
        spawned.setdefault(child.get("parent_call_id") or "", []).append(child)
    _, similar = semantic.similar_sessions(store, s["id"], SIMILAR)
    shown_similar: list[dict[Any, Any]] = [dict(r) for r in similar]
    _decorate(store, shown_similar)
    return {"session": s, "items": items, "view": view, "offset": offset, "limit": limit, "similar": shown_similar,
            "total": s["message_count"], "records": store.list_reasoning_records(s["id"]), "spawned": spawned,
            "summaries": {m["idx"]: m.get("summary") for m in s["messages"]}}


def session_timeline(store: StoreReader, session_id: str, offset: int) -> dict:
    """A page of the session's timeline chart: PAGE calls from `offset`, their tool runs and sub-agents nested."""
    spans = store.get_spans(session_id, (offset, offset + timeline.PAGE))
    rows = timeline.rows_of(spans)
    return {"session": spans["session"], "chart": timeline.svg(rows), "offset": offset, "page": timeline.PAGE,
            "total": spans["total_calls"], "shown": len(spans["calls"]), "spent": timeline.spent(rows)}


def _anchor(call: Mapping[str, Any], shown: set[int], first: int, end: int) -> bool:
    at = call.get("response_idx")
    return first <= at < end if at is not None else any(first <= i < end for i in shown)


def _window_tokens(call: Mapping[str, Any]) -> int:
    return sum(call.get(k) or 0 for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens"))


def window_of(model: str | None) -> int | None:
    """The model's context window, as its listing in the price table says (`providers.context_window`)."""
    return providers.context_window(model)


def call(store: StoreReader, call_id: str, against: str | None) -> dict:
    c = store.get_call(call_id)
    near = _calls_near(store, c["session_id"], c["idx"])
    previous = next((x["id"] for x in near if x["idx"] == c["idx"] - 1), None)
    request = c["request"]
    body = orjson.dumps(request, option=orjson.OPT_INDENT_2).decode()
    return {"call": c, "calls": near, "request_json": body,
            "curl": _curl(c, body), "python": _python(c, body),
            "since_previous": query.diff_calls(store, previous, c["id"]) if previous else None,
            "against": query.diff_calls(store, against, c["id"]) if against else None, "against_id": against,
            "bar": charts.fullness(_window_tokens(c), window_of(c.get("model"))),
            "annotations": store.list_annotations(c["id"])}


def _calls_near(store: StoreReader, session_id: str, idx: int, around: int = 25) -> list[dict]:
    """The session's calls within `around` of call `idx` (by `SESSION#N`: a huge session is never read whole)."""
    from ...store import StoreError

    near = []
    for n in range(max(0, idx - around), idx + around + 1):
        try:
            near.append({"idx": n, "id": store.resolve_id("call", f"{session_id}#{n}")})
        except StoreError:
            if n > idx:
                break
    return near


def _curl(c: Mapping[str, Any], body: str) -> str:
    """The call's request sent again with curl, to its protocol's endpoint."""
    protocol = providers.protocol_of(c.get("provider"), c["request"])
    quoted = shlex.quote(body)
    return protocol.curl(quoted, c.get("model") or "MODEL")


def _python(c: Mapping[str, Any], body: str) -> str:
    send = providers.protocol_of(c.get("provider"), c["request"]).python_call
    module = "google.genai" if send.startswith("google.") else send.split(".")[0]
    return f"import {module}, json\n\nrequest = json.loads({body!r})\n{send}(**request)"


SPLITS = ("model", "agent")  # what the bars over time are stacked by


def usage(store: StoreReader, since: str | None, until: str | None, split: str = "model") -> dict:
    """The usage page: tokens and cost over time stacked by `split`, then tables by day, model, agent and source.
    Days whose calls recorded no tokens and no cost (an import without usage) are folded into one line."""
    split = split if split in SPLITS else "model"
    flt = SessionFilter(since=since, until=until, limit=None)
    tables: dict[str, Sequence[Mapping[str, Any]]] = {
        "day": query.stats(store, "day", flt, latency=False),
        **query.stats_each(store, ("model", "agent", "source"), flt)}
    cache = sum(r["cache_read_tokens"] or 0 for r in tables["day"])
    prompt = sum((r["input_tokens"] or 0) + (r["cache_read_tokens"] or 0) + (r["cache_write_tokens"] or 0)
                 for r in tables["day"])
    quiet = [r for r in tables["day"] if not _tokens(r) and r["cost_usd"] is None]
    tables["day"] = [r for r in tables["day"] if r not in quiet]
    charts_of = {by: {"tokens": charts.bars([(str(r[by]), _tokens(r)) for r in rows]),
                      "cost": charts.bars([(str(r[by]), r["cost_usd"]) for r in rows], "$")}
                 for by, rows in tables.items() if by != "day"}
    days, names = over_time.days_of(store.usage_series(split, flt))
    return {"tables": tables, "charts": charts_of, "since": since, "until": until, "split": split,
            "splits": SPLITS, "over_time": over_time.chart(days, names), "legend": over_time.legend(names),
            "quiet": {"days": [r["day"] for r in quiet], "calls": sum(r["calls"] for r in quiet)},
            "cache": {"read": cache, "prompt": prompt, "share": cache / prompt if prompt else 0.0,
                      "saved_usd": _cache_savings(tables["model"])}}


def _cache_savings(by_model: Sequence[Mapping[str, Any]]) -> float | None:
    """What the cache reads would have cost as fresh input, less what they cost: over the models priced."""
    from ...pricing import load_price_table

    table, saved, priced = load_price_table(), 0.0, False
    for row in by_model:
        price = table.get(str(row["model"])) if row["model"] else None
        if price is not None and row["cache_read_tokens"]:
            saved += row["cache_read_tokens"] * (price.input - price.cache_read)
            priced = True
    return saved if priced else None


def _tokens(row: Mapping[str, Any]) -> float:
    return float(sum(row.get(k) or 0 for k in ("input_tokens", "output_tokens", "cache_read_tokens",
                                               "cache_write_tokens")))


def usage_csv(store: StoreReader, by: str, since: str | None, until: str | None) -> str:
    import csv
    import io

    rows = query.stats(store, by, SessionFilter(since=since, until=until, limit=None), latency=False)
    out = io.StringIO()
    fields = [by, "calls", "errors", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
              "reasoning_tokens", "cost_usd"]
    writer = csv.DictWriter(out, fields, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
