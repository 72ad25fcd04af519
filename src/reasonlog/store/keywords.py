"""Keyword ranking: the records that hold the most of a query's words, rarer words weighing more.

The substring search of store/search.py answers "where does this text occur"; a question in words ("the agent gave
up on the migration") occurs nowhere as written. This ranks every message, tool result and outcome by the words of
the query it holds (stopwords and words of one or two letters dropped; a word matches inside a longer one, so
"migrat" finds "migrations"), each word weighing its inverse document frequency, ln(1 + N / df). It reads what
search.py narrows a search with (SQLite's blocks of text, PostgreSQL's pg_trgm indexes), so it needs nothing more
stored: each word's candidates are found as a search for it finds them, and the stored text of the best candidates
decides which words they hold.
System prompts are left out, as they are from search by meaning.
"""
from __future__ import annotations

import math
import re
from dataclasses import replace

from . import reading, search_pending, text_blocks
from .content import Dictionaries
from .search import PENDING_KIND, Query, grams_of, record_text, snippet_of
from .terms import SessionFilter, StoreError

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
# first CAP records of each are the candidates. Candidates are read best bound first, the newest first among equal
# bounds; reading stops once no candidate left can score above the last hit kept, and after
# verified(limit) candidates in any case (reading one costs about 35 microseconds).
CAP = 2000
VERIFIED = 600
VERIFIED_PER_HIT = 10
RECOUNT_S = 30.0  # how often a searching process counts the records again (the idf's N)
TABLES = (("contents", "contents_search"), ("tool_results", "tool_results_search"), ("outcomes", "outcomes_search"))


def words_of(text: str) -> list[str]:
    """The words of a query that rank: lowercased, stopwords and words the index cannot look up dropped, each once."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        word = word.strip("'")
        if word and word not in STOPWORDS and word not in out and grams_of(word) is not None:
            out.append(word)
    return out


def records(cur) -> int:
    """How many records keyword ranking ranks (messages' contents, tool results, outcomes): the N of the idf. Counting
    500,000 contents takes 4 ms on SQLite; a searching process counts again every RECOUNT_S seconds."""
    return sum(cur.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] for table, _ in TABLES)


def keyword_search(cur, dicts: Dictionaries, text: str, flt: SessionFilter, limit: int, index, total: int
                   ) -> list[dict]:
    """The `limit` best hits for the words of `text`, best first, each with its `score` (the idf of the words held);
    `total` is `records(cur)`, as recently as the caller counted it."""
    words = words_of(text)
    if not words or limit <= 0:
        return []
    reader = reading.ContentReader(cur.connection.cursor(), dicts)
    found = _candidates(cur, words, index, total, _waiting(cur, index))
    where, args = reading.filter_sql(replace(flt, limit=None, text=None))
    hits: list[dict] = []
    bound = found.in_bound_order()[:verified(limit)]
    for start in range(0, len(bound), PAGE):
        page = bound[start:start + PAGE]
        if len(hits) >= limit and found.bound_of(page[0]) <= hits[limit - 1]["score"]:
            break  # no candidate left can score above the hits kept
        hits = _ranked(hits + _verified(cur, reader, page, found, where, args))[:limit]
        reader.memo.clear()
    for h in hits:
        text, rarest = h.pop("order")[3:]
        h["snippet"] = snippet_of(text, rarest) or ""
    return hits


def verified(limit: int) -> int:
    """How many candidates a query for `limit` hits reads at most."""
    return max(VERIFIED, VERIFIED_PER_HIT * limit)


def _ranked(hits: list[dict]) -> list[dict]:
    """Best score first; among equal scores the newest session first, then the timeline's order (a tool result or
    outcome before the message at its position, as text search has them)."""
    hits.sort(key=lambda h: (h["order"][2], h["kind"] == "message"))
    hits.sort(key=lambda h: h["order"][:2], reverse=True)
    hits.sort(key=lambda h: -h["score"])
    return hits


# A candidate is one int: its table's place in TABLES' alphabetical order times SPAN, plus its rowid, so that the
# candidates sort as (table, rowid) pairs would, and a word's holders are a dict of ints to bit masks.
SPAN = 1 << 48
_BY_NAME = sorted(table for table, _ in TABLES)


class Found:
    """The candidates of a query: for each, the bits of the words its index entry may hold (`holders`), every common
    word's bit (`common`) counted as held by all of them; and each word's weight."""

    def __init__(self, words: list[str]):
        self.words = words
        self.weight: dict[str, float] = {}
        self.holders: dict[int, int] = {}
        self.common = 0
        self._bounds: dict[int, float] = {}

    def held(self, mask: int) -> list[str]:
        """The words of these bits (with the common words), in the query's order."""
        mask |= self.common
        return [w for i, w in enumerate(self.words) if mask >> i & 1]

    def bound_of(self, key: int) -> float:
        """The best score this candidate can have: the weights of every word it may hold."""
        mask = self.holders[key]
        if mask not in self._bounds:
            self._bounds[mask] = round(sum(self.weight[w] for w in self.held(mask)), 6)  # as scores are
        return self._bounds[mask]

    def in_bound_order(self) -> list[int]:
        """The candidates, highest bound first, then the newest first (in (table, rowid) order, descending)."""
        by_mask: dict[int, list[int]] = {}
        for key, mask in self.holders.items():
            by_mask.setdefault(mask, []).append(key)
        buckets: dict[float, list[int]] = {}
        for keys in by_mask.values():
            buckets.setdefault(self.bound_of(keys[0]), []).extend(keys)
        return [key for b in sorted(buckets, reverse=True) for key in sorted(buckets[b], reverse=True)]


def _candidates(cur, words: list[str], index, total: int, waiting: dict[int, str]) -> Found:
    """The records whose index entry may hold a word of the query, and the words' weights. A common word (more than
    CAP records in a table) lists no candidates of its own unless every word is common, and every candidate may
    hold it. `waiting`: the index form of the records waiting (SQLite, store/search_pending.py), each a candidate for
    a word exactly when the index would find it there, so that nothing moves once they join it."""
    total = max(total, 1)
    out = Found(words)
    listed: dict[str, list[int]] = {}
    common: set[str] = set()
    for word, argument in zip(words, index.arguments_of(cur, [Query(((word,),)) for word in words]), strict=True):
        if argument is None:
            continue
        grams = grams_of(word) or []
        keys: list[int] = []
        for table, name in TABLES:
            with index.planned(cur):
                rows = cur.execute(f"SELECT {index.ids(name)} FROM {index.indexed(name)} WHERE"
                                   f" {index.matches(name, argument)} LIMIT {CAP + 1}",
                                   index.arguments(name, argument)).fetchall()
            base = _BY_NAME.index(table) * SPAN
            found = sorted([base + rowid for (rowid,) in rows] + [key for key, text in waiting.items() if
                                                                  key // SPAN == base // SPAN and
                                                                  all(g in text for g in grams)])[:CAP + 1]
            if len(found) > CAP:
                common.add(word)
            keys += found[:CAP]
        listed[word] = keys
        out.weight[word] = math.log(1 + total / max(len(keys) + (CAP if word in common else 0), 1))
    listing = [w for w in listed if w not in common and listed[w]] or [w for w in listed if listed[w]]
    holders = out.holders
    for word in listing:
        bit = 1 << words.index(word)
        for key in listed[word]:
            holders[key] = holders.get(key, 0) | bit
    out.common = sum(1 << words.index(w) for w in common)
    return out


def _waiting(cur, index) -> dict[int, str]:
    """The records of TABLES waiting to join the index (SQLite since schema 25), by candidate key, in its form."""
    if not isinstance(index, text_blocks.Blocks):
        return {}
    base = {PENDING_KIND[name]: _BY_NAME.index(table) * SPAN for table, name in TABLES}
    return {base[kind] + rid: text for (kind, rid), text in search_pending.waiting(cur).items()
            if kind in base and text}


def _verified(cur, reader, page: list[int], found: Found, where: str, args: list) -> list[dict]:
    """The hits of a page of candidates: each record's occurrences in the sessions `where` selects, scored by the
    words its text really holds. A hit's `order` carries its text and rarest word for the snippet, made once kept."""
    out: list[dict] = []
    by_table: dict[str, list[int]] = {}
    for key in page:
        by_table.setdefault(_BY_NAME[key // SPAN], []).append(key % SPAN)
    contents = by_table.get("contents", [])
    if contents:
        reader.load(contents)
        scored: dict[int, tuple | None] = {}
        marks = ", ".join("?" * len(contents))
        for sid, idx, role, call_id, at, cid, started in cur.execute(
                f"SELECT m.session_id, m.idx, m.role, m.call_id, m.at, m.content_id, s.started_at FROM messages m"
                f" JOIN sessions s ON s.id = m.session_id WHERE m.content_id IN ({marks})"
                f" AND (m.role IS NULL OR m.role != 'system') AND {where}", [*contents, *args]).fetchall():
            if cid not in scored:
                text = _text_of(reader, cid)
                scored[cid] = _scored(text, found.held(found.holders[cid]), found.weight)
            hit = scored[cid]
            if hit is not None:
                out.append({"kind": "message", "session_id": sid, "message_idx": idx, "role": role, "call_id": call_id,
                            "at": at, "tool_use_id": None, "name": None, "score": hit[0], "snippet": None,
                            "order": (started, sid, idx, *hit[1:])})
    for table, kind in (("tool_results", "tool_result"), ("outcomes", "outcome")):
        rowids = by_table.get(table)
        if rowids:
            base = _BY_NAME.index(table) * SPAN
            out += _records(cur, table, kind, rowids, base, found, where, args)
    return out


def _records(cur, table: str, kind: str, rowids: list[int], base: int, found: Found, where: str, args: list
             ) -> list[dict]:
    columns = ("r.tool_use_id, r.name, r.input_json, r.content_json, (SELECT call_id FROM messages p WHERE"
               " p.session_id = r.session_id AND p.idx = r.message_idx - 1)" if table == "tool_results" else
               "NULL, r.kind, NULL, r.payload_json, r.call_id")
    out = []
    for rowid, sid, idx, at, started, tool_use_id, name, input_json, body, call_id in cur.execute(
            f"SELECT r.rowid, r.session_id, r.message_idx, r.at, s.started_at, {columns} FROM {table} r"
            f" JOIN sessions s ON s.id = r.session_id WHERE r.rowid IN ({', '.join('?' * len(rowids))}) AND {where}",
            [*rowids, *args]).fetchall():
        hit = _scored(record_text(name, input_json, body), found.held(found.holders[base + rowid]), found.weight)
        if hit is not None:
            out.append({"kind": kind, "session_id": sid, "message_idx": idx, "role": "tool" if kind == "tool_result"
                        else None, "call_id": call_id, "at": at, "tool_use_id": tool_use_id, "name": name,
                        "score": hit[0], "snippet": None, "order": (started, sid, idx, *hit[1:])})
    return out


def _text_of(reader, cid: int) -> str | None:
    from ..parts import searchable_text

    try:
        return searchable_text(reader.get(cid))
    except StoreError:  # pruned meanwhile
        return None


def _scored(text: str | None, maybe: list[str], weight: dict[str, float]) -> tuple[float, str, str] | None:
    """The score of a text for the words it may hold, the text and its rarest word held; None when it holds none."""
    if text is None:
        return None
    low = text.lower()
    held = [w for w in maybe if w in low]
    if not held:
        return None
    rarest = max(held, key=lambda w: (weight[w], w))
    return round(sum(weight[w] for w in held), 6), text, rarest
