"""Keyword ranking: the records that hold the most of a query's words, rarer words weighing more.

The substring search of store/search.py answers "where does this text occur"; a question in words ("the agent gave
up on the migration") occurs nowhere as written. This ranks every message, tool result and outcome by the words of
the query it holds (stopwords and words of one or two letters dropped; a word matches inside a longer one, so
"migrat" finds "migrations"), each word weighing its inverse document frequency, ln(1 + N / df). It reads the
trigram indexes search.py keeps (FTS5 on SQLite, pg_trgm on PostgreSQL), so it needs nothing more stored: each word's
candidates come from its trigrams, and the stored text of the best candidates decides which words they hold.
System prompts are left out, as they are from search by meaning.
"""
from __future__ import annotations

import math
import re
from dataclasses import replace

from . import SessionFilter, StoreError, reading
from .content import Dictionaries
from .search import Query, grams_of, record_text, snippet_of

STOPWORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before being below between
both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each few for from
further had hadn't has hasn't have haven't having he her here hers herself him himself his how i if in into is isn't
it it's its itself let's me more most mustn't my myself no nor not of off on once only or other ought our ours
ourselves out over own same she should shouldn't so some such than that that's the their theirs them themselves then
there there's these they this those through to too under until up very was wasn't we were weren't what what's when
where which while who whom why with won't would wouldn't you your yours yourself yourselves also just did get got
""".split())
_WORD = re.compile(r"[\w']+")
PAGE = 200  # candidates verified at a time
# A word the index finds in more than CAP records of a table is *common*: its records are not listed as candidates
# (at 500,000 messages "price" is in most of them, and listing them took seconds), it weighs as if it were in CAP,
# and a candidate found by a rarer word still scores it when its text holds it. When every word is common, the
# first CAP records of each are the candidates. At most VERIFIED candidates are read and checked a query.
CAP = 5000
VERIFIED = 2000
TABLES = (("contents", "contents_search"), ("tool_results", "tool_results_search"), ("outcomes", "outcomes_search"))


def words_of(text: str) -> list[str]:
    """The words of a query that rank: lowercased, stopwords and words the index cannot look up dropped, each once."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        word = word.strip("'")
        if word and word not in STOPWORDS and word not in out and grams_of(word) is not None:
            out.append(word)
    return out


def keyword_search(cur, dicts: Dictionaries, text: str, flt: SessionFilter, limit: int, index) -> list[dict]:
    """The `limit` best hits for the words of `text`, best first, each with its `score` (the idf of the words held)."""
    words = words_of(text)
    if not words or limit <= 0:
        return []
    holders, weight = _candidates(cur, words, index)
    bound = sorted(holders, key=lambda key: (-sum(weight[w] for w in holders[key]), key))
    reader = reading.ContentReader(cur.connection.cursor(), dicts)
    hits: list[dict] = []
    bound = bound[:VERIFIED]
    for start in range(0, len(bound), PAGE):
        page = bound[start:start + PAGE]
        if len(hits) >= limit and sum(weight[w] for w in holders[page[0]]) < hits[limit - 1]["score"]:
            break  # no candidate left can reach the hits kept
        hits = _ranked(hits + _verified(cur, reader, page, holders, weight, flt))
        reader.memo.clear()
    for h in hits:
        del h["order"]
    return hits[:limit]


def _ranked(hits: list[dict]) -> list[dict]:
    """Best score first; among equal scores the newest session first, then the timeline's order (a tool result or
    outcome before the message at its position, as text search has them)."""
    hits.sort(key=lambda h: (h["order"][2], h["kind"] == "message"))
    hits.sort(key=lambda h: h["order"][:2], reverse=True)
    hits.sort(key=lambda h: -h["score"])
    return hits


def _candidates(cur, words: list[str], index) -> tuple[dict[tuple[str, int], set[str]], dict[str, float]]:
    """For each record whose index entry may hold a word, the words it may hold; and each word's weight. A common
    word (more than CAP records in a table) lists no candidates of its own unless every word is common, and every
    candidate may hold it."""
    total = sum(cur.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] for table, _ in TABLES) or 1
    found: dict[str, list[tuple[str, int]]] = {}
    common: list[str] = []
    weight: dict[str, float] = {}
    for word in words:
        argument = index.argument(cur, Query(((word,),)))
        if argument is None:
            continue
        rows: list[tuple[str, int]] = []
        for table, name in TABLES:
            listed = cur.execute(f"SELECT rowid FROM {name} WHERE {index.matches(name)} LIMIT {CAP + 1}",
                                 (argument,)).fetchall()
            if len(listed) > CAP:
                common.append(word)
            rows += [(table, rowid) for (rowid,) in listed[:CAP]]
        found[word] = rows
        weight[word] = math.log(1 + total / max(len(rows) + (CAP if word in common else 0), 1))
    listing = [w for w in found if w not in common and found[w]] or [w for w in found if found[w]]
    holders: dict[tuple[str, int], set[str]] = {}
    for word in listing:
        for key in found[word]:
            holders.setdefault(key, set()).add(word)
    for key in holders:
        holders[key].update(common)
    return holders, weight


def _verified(cur, reader, page: list[tuple[str, int]], holders, weight, flt: SessionFilter) -> list[dict]:
    """The hits of a page of candidates: each record's occurrences in the sessions `flt` selects, scored by the words
    its text really holds."""
    where, args = reading.filter_sql(replace(flt, limit=None, text=None))
    out: list[dict] = []
    contents = [rowid for table, rowid in page if table == "contents"]
    if contents:
        reader.load(contents)
        marks = ", ".join("?" * len(contents))
        for sid, idx, role, call_id, at, cid, started in cur.execute(
                f"SELECT m.session_id, m.idx, m.role, m.call_id, m.at, m.content_id, s.started_at FROM messages m"
                f" JOIN sessions s ON s.id = m.session_id WHERE m.content_id IN ({marks})"
                f" AND (m.role IS NULL OR m.role != 'system') AND {where}", [*contents, *args]).fetchall():
            text = _text_of(reader, cid)
            hit = _scored(text, holders[("contents", cid)], weight)
            if hit is not None:
                out.append({"kind": "message", "session_id": sid, "message_idx": idx, "role": role, "call_id": call_id,
                            "at": at, "tool_use_id": None, "name": None, **hit, "order": (started, sid, idx)})
    for table, kind in (("tool_results", "tool_result"), ("outcomes", "outcome")):
        rowids = [rowid for t, rowid in page if t == table]
        if rowids:
            out += _records(cur, table, kind, rowids, holders, weight, where, args)
    return out


def _records(cur, table: str, kind: str, rowids: list[int], holders, weight, where: str, args: list) -> list[dict]:
    columns = ("r.tool_use_id, r.name, r.input_json, r.content_json, (SELECT call_id FROM messages p WHERE"
               " p.session_id = r.session_id AND p.idx = r.message_idx - 1)" if table == "tool_results" else
               "NULL, r.kind, NULL, r.payload_json, r.call_id")
    out = []
    for rowid, sid, idx, at, started, tool_use_id, name, input_json, body, call_id in cur.execute(
            f"SELECT r.rowid, r.session_id, r.message_idx, r.at, s.started_at, {columns} FROM {table} r"
            f" JOIN sessions s ON s.id = r.session_id WHERE r.rowid IN ({', '.join('?' * len(rowids))}) AND {where}",
            [*rowids, *args]).fetchall():
        hit = _scored(record_text(name, input_json, body), holders[(table, rowid)], weight)
        if hit is not None:
            out.append({"kind": kind, "session_id": sid, "message_idx": idx, "role": "tool" if kind == "tool_result"
                        else None, "call_id": call_id, "at": at, "tool_use_id": tool_use_id, "name": name, **hit,
                        "order": (started, sid, idx)})
    return out


def _text_of(reader, cid: int) -> str | None:
    from ..parts import searchable_text

    try:
        return searchable_text(reader.get(cid))
    except StoreError:  # pruned meanwhile
        return None


def _scored(text: str | None, maybe: set[str], weight: dict[str, float]) -> dict | None:
    """The score and snippet of a text for the words it may hold; None when it holds none."""
    if text is None:
        return None
    low = text.lower()
    held = [w for w in maybe if w in low]
    if not held:
        return None
    rarest = max(held, key=lambda w: (weight[w], w))
    return {"score": round(sum(weight[w] for w in held), 6), "snippet": snippet_of(text, rarest) or ""}
