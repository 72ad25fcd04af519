"""Full-text search: what narrows the candidates, per dialect; the stored text decides.

Each kind of record has its searchable text: `contents_search` (messages and system prompts, by content id),
`tool_results_search`, `outcomes_search` and `reasoning_records_search` (by the row's rowid). What is kept of it is
`index_form(text)`: the text lowercased in Python, so that what is kept, the query and the final check fold case the
same way (`str.lower`: Ä→ä, ẞ→ß; ß is not expanded to "ss"), with the bigrams of its CJK runs for PostgreSQL.

SQLite (schema 26, store/text_blocks.py) keeps no index: the texts in compressed blocks that every search reads
whole, finding any substring of any length. PostgreSQL (store/pg_search.py) keeps `pg_trgm` trigram indexes: a query
of one or two characters (other than a two-character CJK word, indexed as "<bigram><SENTINEL>") scans every record
there. Either way every candidate is checked against its stored text: answers are exact and the same on both.

Deleting a record takes it out of what narrows the search: `unindex_contents`, `unindex_tool_results`,
`unindex_outcomes` and `unindex_reasoning_records`.
"""
from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import islice

import orjson

from ..parts import searchable_text
from . import reading, text_blocks
from .content import Dictionaries
from .terms import SessionFilter, StoreError

SENTINEL = "\ue000"  # a private-use character: recorded text practically never holds it
_CJK = r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
# One character of a CJK run: the engine skips to a candidate with its first-character scan, which `{2,}` lacks
# (a text without CJK: 3 times faster than `findall`, on the non-ASCII texts of a Claude Code import).
_CJK_CHAR = re.compile(_CJK)
MAX_TRIGRAMS = 24  # more only narrows the candidates a little further, at the cost of a slower query
RECORD_TABLES = {"tool_results": "tool_results_search", "outcomes": "outcomes_search",
                 "reasoning_records": "reasoning_records_search"}


# ------------------------------------------------------------------ what is indexed


@functools.cache
def _cjk_runs() -> re.Pattern[str]:
    """Runs of two or more CJK characters, compiled at the first text or query that holds one: `re` compiles a set
    of 39,000 characters in a Python loop, at every recorder's start, and most recordings hold no CJK."""
    return re.compile(_CJK + "{2,}")


def index_form(text: str) -> str:
    """The text as the trigram index sees it: lowercased, plus the bigrams of its CJK runs."""
    low = text.lower()
    if low.isascii() or _CJK_CHAR.search(low) is None:  # isascii: known to the string without a scan (issue 34)
        return low
    runs = _cjk_runs().findall(low)
    if not runs:
        return low
    return low + "\n" + "".join(run[i:i + 2] + SENTINEL for run in runs for i in range(len(run) - 1))


def record_text(name: str | None, input_json: str | None, body_json: str | None) -> str:
    """The searchable text of a tool result (name, input, content), an outcome (kind, payload) or a reasoning
    record (phase, compact form; its details, plain text, are quoted as JSON by `_RECORD_COLUMNS`), as stored."""
    values = [name, *(orjson.loads(j) for j in (input_json, body_json) if j is not None)]
    return searchable_text([v for v in values if v is not None])


_RECORD_COLUMNS = {"tool_results": "rowid, name, input_json, content_json",
                   "outcomes": "rowid, kind, NULL, payload_json",
                   "reasoning_records": "rowid, phase, compact_json, details"}


# ------------------------------------------------------------------ the index itself, per dialect


# SQLite's is text_blocks.Blocks (no index: blocks of text, read whole by each search); PostgreSQL's is
# pg_search.TrigramIndex. The functions below take either as `index`.
BLOCKS = text_blocks.BLOCKS
PENDING_KIND = text_blocks.KINDS  # the kind of a row of `search_pending` (schema 25): which text it waits to join


# ------------------------------------------------------------------ writing and deleting


def index_contents(cur, rows: list[tuple[int, str]], index=BLOCKS) -> None:
    """Index new contents: (content id, `searchable_text` of the stored value)."""
    index.add(cur, "contents_search", [(cid, index_form(text)) for cid, text in rows if text])


def unindex_contents(cur, ids: Iterable[int], index=BLOCKS) -> None:
    """Take contents (by id) out of what narrows a search. Call before deleting them."""
    index.remove(cur, "contents_search", list(ids))


def unindex_tool_results(cur, rowids: Iterable[int], index=BLOCKS) -> None:
    """Take tool results (by rowid) out of what narrows a search. Call before deleting their rows."""
    index.remove(cur, "tool_results_search", list(rowids))


def unindex_reasoning_records(cur, rowids: Iterable[int], index=BLOCKS) -> None:
    """Take reasoning records (by rowid) out of what narrows a search. Call before deleting their rows."""
    index.remove(cur, "reasoning_records_search", list(rowids))


def unindex_outcomes(cur, rowids: Iterable[int], index=BLOCKS) -> None:
    """Take outcomes (by rowid) out of what narrows a search. Call before deleting their rows."""
    index.remove(cur, "outcomes_search", list(rowids))


def stored_records(cur, table: str, rowids: list[int]) -> list[tuple[int, str]]:
    """(rowid, index form) of these rows of a record table, from their stored (masked) columns, in rowid order."""
    wanted, out = sorted(set(rowids)), []
    for start in range(0, len(wanted), 500):
        chunk = wanted[start:start + 500]
        rows = cur.execute(f"SELECT {_RECORD_COLUMNS[table]} FROM {table} WHERE rowid IN"
                           f" ({','.join('?' * len(chunk))}) ORDER BY rowid", chunk).fetchall()
        out += _record_rows(rows, table)
    return out


def drop_held_reasoning(cur, session_ids: list[str], index=BLOCKS, group: str | None = None) -> int:
    """Delete the held (on_failure) reasoning records of sessions that completed (of one group of them, when
    `group` is given), out of the index first; returns how many."""
    dropped = 0
    where = "session_id = ? AND state = 'held'" + (" AND group_name = ?" if group is not None else "")
    for session_id in session_ids:
        args = (session_id, group) if group is not None else (session_id,)
        rowids = [r for (r,) in cur.execute(f"SELECT rowid FROM reasoning_records WHERE {where}", args).fetchall()]
        if rowids:
            unindex_reasoning_records(cur, rowids, index)
            cur.execute(f"DELETE FROM reasoning_records WHERE {where}", args)
            dropped += len(rowids)
    return dropped


def index_records(cur, rowids: dict[str, list[int]], index=BLOCKS) -> None:
    """Index the tool results, outcomes and reasoning records a batch inserted (their rowids, by table; see
    `Applier.take_records`), from their stored (masked) columns.

    Exactly these: under READ COMMITTED a range of rowids also holds what other transactions committed meanwhile,
    which they index themselves. Reading them back keeps the dialect-neutral writer free of index SQL and indexes
    what the transaction keeps (a row rolled back to a savepoint is not found)."""
    for table, ids in rowids.items():
        rows = stored_records(cur, table, ids)
        if rows:
            index.add(cur, RECORD_TABLES[table], rows)


def index_every_record(cur, tables: Iterable[str], index=BLOCKS) -> None:
    """Index every row of these record tables (a migration building the index, which holds the database), in runs of
    about `RUN_CHARS` characters."""
    for table in tables:
        rows = cur.connection.cursor().execute(f"SELECT {_RECORD_COLUMNS[table]} FROM {table} ORDER BY rowid")
        for run in _runs((rowid, index_form(_row_text(table, name, input_json, body)))
                         for rowid, name, input_json, body in rows):
            index.add(cur, RECORD_TABLES[table], run)


RUN_CHARS = 500_000  # what a migration writes at a time: a block of text (store/text_blocks.py) each on SQLite


def _runs(rows: Iterable[tuple[int, str]]) -> Iterator[list[tuple[int, str]]]:
    """The rows that have text, in runs of at least `RUN_CHARS` characters (the last one shorter)."""
    run: list[tuple[int, str]] = []
    size = 0
    for rid, text in rows:
        if text:
            run.append((rid, text))
            size += len(text)
            if size >= RUN_CHARS:
                yield run
                run, size = [], 0
    if run:
        yield run


def record_texts(cur, session_ids: list[str]) -> list[tuple[str, str, int, str]]:
    """The searchable text of these sessions' tool results, outcomes and kept reasoning records, as a search reads
    it: (kind, session id, rowid, text); what a ClickHouse mirror searches beside the messages (store/mirrored.py)."""
    marks = ", ".join("?" * len(session_ids))
    out = []
    for kind, table, kept in (("tool_result", "tool_results", ""), ("outcome", "outcomes", ""),
                              ("reasoning", "reasoning_records", " AND state = 'kept'")):
        rows = cur.execute(f"SELECT session_id, {_RECORD_COLUMNS[table]} FROM {table}"
                           f" WHERE session_id IN ({marks}){kept}", session_ids).fetchall()
        out += [(kind, sid, rowid, _row_text(table, name, input_json, body))
                for sid, rowid, name, input_json, body in rows]
    return out


def _row_text(table: str, name: str | None, input_json: str | None, body: str | None) -> str:
    if table == "reasoning_records":  # phase, compact form (JSON) and details (plain text)
        return searchable_text([v for v in (name, orjson.loads(input_json or "null"), body) if v is not None])
    return record_text(name, input_json, body)


def _record_rows(rows, table: str) -> list[tuple[int, str]]:
    texts = [(rowid, index_form(_row_text(table, name, input_json, body))) for rowid, name, input_json, body
             in rows]
    return [(rowid, text) for rowid, text in texts if text]


def rebuild(cur) -> None:
    """Fill the blocks of searched text from everything stored (migration 26, inside its transaction)."""
    reader = reading.ContentReader(cur.connection.cursor(), Dictionaries())
    rows = cur.connection.cursor().execute("SELECT id, codec, dict_id, data FROM contents WHERE kind != 'tool'"
                                           " ORDER BY id")
    for run in _runs((cid, searchable_text(orjson.loads(reader.bytes_of(codec, dict_id, data))))
                     for cid, codec, dict_id, data in rows):
        index_contents(cur, run)
    index_every_record(cur, RECORD_TABLES)


# ------------------------------------------------------------------ searching


def search(cur, dicts: Dictionaries, text: str, flt: SessionFilter, limit: int | None, index=BLOCKS) -> list[dict]:
    """Messages, tool results and outcomes whose text contains `text` (case-insensitive), newest sessions first.

    Within a session hits follow the timeline; a tool result or outcome comes before the message
    at its position. `limit=None` returns every match.
    """
    if not text.strip():
        return []
    query = Query.parse(text)
    match = index.argument(cur, query)
    where, args = reading.filter_sql(replace(flt, limit=None))
    candidates = _candidates(index if match is not None else None, match)
    sql = (f"SELECT h.* FROM ({candidates}) h JOIN sessions s ON s.id = h.session_id"
           f" WHERE {where} ORDER BY s.started_at DESC, s.id, h.pos, h.rank, h.at")
    with index.planned(cur) if match is not None else contextlib.nullcontext():
        rows = cur.execute(sql, [*_arguments(index, match), *args])
    return _verified(rows, _Texts(reading.ContentReader(cur.connection.cursor(), dicts)), query, limit)


def matching_sessions(cur, dicts: Dictionaries, flt: SessionFilter, index=BLOCKS) -> list[str]:
    """Ids of the sessions `flt` selects whose text contains `flt.text`, newest first, at most `flt.limit`.

    Stops at the first verified hit of a session and at the limit: a page of a list costs a page of hits. A
    common text (the index finds `COMMON` contents or more) is looked for session by session, newest first, in
    each session's own records, so the page ends without the index's every candidate being joined and sorted;
    sessions past a bounded walk are left to the index."""
    assert flt.text is not None
    query = Query.parse(flt.text)
    match = index.argument(cur, query)
    texts = _Texts(reading.ContentReader(cur.connection.cursor(), dicts))
    found: list[str] = []
    if match is not None and flt.limit is not None and _is_common(cur, index, match):
        found, flt = _walk(cur, flt, query, texts)
        if flt.limit is not None and flt.limit <= 0:
            return found
    where, args = reading.filter_sql(replace(flt, limit=None, text=None))
    candidates = _candidates(index if match is not None else None, match)
    with index.planned(cur) if match is not None else contextlib.nullcontext():
        rows = cur.execute(f"SELECT h.* FROM ({candidates}) h JOIN sessions s ON s.id = h.session_id WHERE {where}"
                           " ORDER BY s.started_at DESC, s.id DESC", [*_arguments(index, match), *args])
    return found + _first_hits(rows, query, texts, flt.limit)


COMMON = 5000  # contents the index finds for a text before the text counts as common
WALK = 8  # a common text's walk reads at most this many times the page's sessions (at least 200)


def _is_common(cur, index, match: str) -> bool:
    return index.is_common(cur, match, COMMON)


def _walk(cur, flt: SessionFilter, query: "Query", texts: "_Texts") -> tuple[list[str], SessionFilter]:
    """Matching sessions among the newest the filter selects, read session by session without the index; and
    the filter for the rest: the sessions after the walk, and what is left of the limit."""
    assert flt.limit is not None
    where, args = reading.filter_sql(replace(flt, limit=None, text=None))
    walked = cur.execute(f"SELECT s.id, s.started_at FROM sessions s WHERE {where}"
                         f" ORDER BY s.started_at DESC, s.id DESC LIMIT {max(WALK * flt.limit, 200)}", args).fetchall()
    found: list[str] = []
    for start in range(0, len(walked), 50):
        chunk = [sid for sid, _ in walked[start:start + 50]]
        rows = cur.execute(f"SELECT h.* FROM ({_candidates(None)}) h WHERE h.session_id IN"
                           f" ({', '.join('?' * len(chunk))}) ORDER BY h.session_id, h.pos, h.rank", chunk).fetchall()
        order = {sid: n for n, sid in enumerate(chunk)}
        hits = _first_hits(sorted(rows, key=lambda r: order[r[1]]), query, texts, flt.limit - len(found))
        found += hits
        if len(found) >= flt.limit:
            return found, replace(flt, limit=0)
    rest = replace(flt, limit=flt.limit - len(found))
    full = len(walked) == max(WALK * flt.limit, 200)
    return found, replace(rest, after=(walked[-1][1], walked[-1][0])) if full else replace(rest, limit=0)


def _first_hits(rows, query: "Query", texts: "_Texts", limit: int | None) -> list[str]:
    """The sessions of `rows` (session by session) with a verified hit, in order, at most `limit`."""
    found: list[str] = []
    for kind, session_id, _pos, _rank, _role, _call, _at, ref, _tool_use, name, input_json, body_json in \
            _read_ahead(rows, texts):
        if found and found[-1] == session_id:
            continue  # rows come session by session: this one is found already
        text = texts.of(kind, ref, name, input_json, body_json)
        if text is not None and query.first_in(text.lower()) is not None:
            found.append(session_id)
            if limit is not None and len(found) >= limit:
                break
    return found


_TOKEN = re.compile(r'-?"[^"]*"?|\S+')
_EXCLUDED = re.compile(r"-\w")  # `-word` excludes; `-`, `--` and `->` alone are text


def _is_operator(token: str) -> bool:
    return token == "OR" or token.startswith('"') or _EXCLUDED.match(token) is not None or \
        (token.endswith("*") and len(token) > 1)
SYNTAX = ('a plain query is one phrase; with operators: "exact phrase", a OR b, -excluded, prefix* '
          "(terms are ANDed; every term matches any part of a word)")


@dataclass(frozen=True)
class Query:
    """What a search asks for: every group (alternatives joined by OR) must occur, no excluded term may.

    A query without operators is one phrase, so `timed out` finds exactly that text. With quotes, OR,
    a leading `-` or a trailing `*`, it is a list of terms; a term matches any substring, so a
    trailing `*` (a prefix) changes nothing."""

    groups: tuple[tuple[str, ...], ...]
    excluded: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> "Query":
        tokens = _TOKEN.findall(text.strip())
        if not any(_is_operator(t) for t in tokens):
            return cls(((text.lower().strip(),),))
        return cls._from_tokens(tokens)

    @classmethod
    def _from_tokens(cls, tokens: list[str]) -> "Query":
        groups: list[list[str]] = []
        excluded: list[str] = []
        joining = False
        for token in tokens:
            if token == "OR":
                if not groups or joining:
                    raise StoreError(f"OR needs a term on each side; {SYNTAX}")
                joining = True
                continue
            negative = _EXCLUDED.match(token) is not None
            term = cls._term(token[1:] if negative else token)
            if negative:
                excluded.append(term)
            elif joining:
                groups[-1].append(term)
            else:
                groups.append([term])
            joining = False
        if joining:
            raise StoreError(f"OR needs a term on each side; {SYNTAX}")
        if not groups:
            raise StoreError(f"nothing to find: only excluded terms; {SYNTAX}")
        return cls(tuple(tuple(g) for g in groups), tuple(excluded))

    @staticmethod
    def _term(token: str) -> str:
        if token.startswith('"'):
            if len(token) < 2 or not token.endswith('"'):
                raise StoreError(f"a quote is not closed in {token!r}; {SYNTAX}")
            token = token[1:-1]
        elif token.endswith("*"):
            token = token[:-1]
        if "*" in token and not token.startswith('"'):
            raise StoreError(f"only a trailing * is supported, not {token!r}; {SYNTAX}")
        if not token.strip():
            raise StoreError(f"an empty term; {SYNTAX}")
        return token.lower()

    def first_in(self, low: str) -> str | None:
        """The term to show a snippet around, when `low` (lowercased text) satisfies the query; else None."""
        if any(term in low for term in self.excluded):
            return None
        shown = None
        for group in self.groups:
            found = next((term for term in group if term in low), None)
            if found is None:
                return None
            shown = shown or found
        return shown


def grams_of(needle: str) -> list[str] | None:
    """The trigrams every record containing `needle` (lowercased) holds; None when it is too short to index."""
    if len(needle) == 2 and len(_cjk_runs().findall(needle)) == 1:
        return [needle + SENTINEL]
    if len(needle) >= 3:
        # Every trigram, not every third: common ones ("han", "dle") alone let through ten times the candidates.
        return list(dict.fromkeys(needle[i:i + 3] for i in range(len(needle) - 2)))[:MAX_TRIGRAMS]
    return None


def _candidates(index, match=None) -> str:
    """One SELECT per kind of record, with the same columns; with an `index`, each takes the `arguments` of `match`
    (`_arguments`)."""
    def source(table: str, alias: str, name: str) -> str:
        if index is None:
            return f"{table} {alias}"
        return (f"{index.rows(name)} JOIN {table} {alias} ON {index.joins(name, f'{alias}.{_KEY[table]}')}"
                f" AND {index.matches(name, match)}")

    return " UNION ALL ".join([
        "SELECT 'message' AS kind, m.session_id, m.idx AS pos, 1 AS rank, m.role, m.call_id, m.at,"
        " m.content_id AS ref, NULL AS tool_use_id, NULL AS name, NULL AS input_json, NULL AS body_json"
        f" FROM {source('messages', 'm', 'contents_search')}",
        "SELECT 'tool_result', t.session_id, t.message_idx, 0, 'tool', (SELECT call_id FROM messages p"
        " WHERE p.session_id = t.session_id AND p.idx = t.message_idx - 1), t.at, t.rowid, t.tool_use_id, t.name,"
        f" t.input_json, t.content_json FROM {source('tool_results', 't', 'tool_results_search')}",
        "SELECT 'outcome', o.session_id, o.message_idx, 0, NULL, o.call_id, o.at, o.rowid, NULL, o.kind, NULL,"
        f" o.payload_json FROM {source('outcomes', 'o', 'outcomes_search')}",
        "SELECT 'reasoning', r.session_id, 0, 0, NULL, NULL, r.at, r.rowid, r.group_name, r.phase, r.compact_json,"
        f" r.details FROM {source('reasoning_records', 'r', 'reasoning_records_search')}"
        f" {'AND' if index is not None else 'WHERE'} r.state = 'kept'",  # a held record is not saved yet
    ])


def _arguments(index, match) -> list:
    """The values of `_candidates(index)`'s placeholders: each kind's `matches`, in their order."""
    return [] if match is None else [a for name in _INDEXES for a in index.arguments(name, match)]


_INDEXES = ("contents_search", "tool_results_search", "outcomes_search", "reasoning_records_search")
_KEY = {"messages": "content_id", "tool_results": "rowid", "outcomes": "rowid", "reasoning_records": "rowid"}


class _Texts:
    """The searchable text of each candidate; a content's text is made once however many messages share it."""

    def __init__(self, reader: reading.ContentReader):
        self.reader = reader
        self.memo: dict[int, str | None] = {}

    def of(self, kind: str, ref: int, name, input_json, body_json) -> str | None:
        if kind != "message":
            return _row_text("reasoning_records" if kind == "reasoning" else kind, name, input_json, body_json)
        if ref not in self.memo:
            try:
                self.memo[ref] = searchable_text(self.reader.get(ref))
            except StoreError:  # a content pruned meanwhile: nothing to find in it
                self.memo[ref] = None
        return self.memo[ref]


def _read_ahead(rows, texts: _Texts) -> Iterator[tuple]:
    """The candidate rows, each chunk's contents read in one query first (not one query a content: on PostgreSQL a
    round trip each, most of a search's time when thousands of candidates come back). Chunks grow from 32 to 1,024
    rows, so a page that stops at its first hits reads little more than it shows."""
    rows, size = iter(rows), 32
    while chunk := list(islice(rows, size)):
        texts.reader.load(row[7] for row in chunk if row[0] == "message" and row[7] not in texts.memo)
        yield from chunk
        size = min(2 * size, 1024)


def _verified(rows, texts: _Texts, query: Query, limit: int | None) -> list[dict]:
    hits: list[dict] = []
    for kind, session_id, pos, _rank, role, call_id, at, ref, tool_use_id, name, input_json, body_json in \
            _read_ahead(rows, texts):
        text = texts.of(kind, ref, name, input_json, body_json)
        term = None if text is None else query.first_in(text.lower())
        snippet = None if term is None or text is None else snippet_of(text, term)
        if snippet is None:
            continue
        hits.append({"kind": kind, "session_id": session_id, "message_idx": pos, "role": role, "call_id": call_id,
                     "at": at, "tool_use_id": tool_use_id, "name": name, "snippet": snippet})
        if limit is not None and len(hits) >= limit:
            break
    return hits


def snippet_of(text: str, needle: str, around: int = 60) -> str | None:
    """The text around the first place `needle` (lowercased) occurs in it, or None when it does not."""
    low = text.lower()
    pos = low.find(needle)
    if pos < 0:
        return None
    shown = text if len(low) == len(text) else low  # lowering changed lengths: positions hold only in `low`
    start, end = max(0, pos - around), min(len(shown), pos + len(needle) + around)
    return ("…" if start else "") + shown[start:end].replace("\n", " ") + ("…" if end < len(shown) else "")
