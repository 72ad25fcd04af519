"""What search by meaning embeds: units a person would look for, cut from the stored timeline (migration 15).

A session's units are its user messages' text, its assistant messages' text (with their thinking), each tool
result of `TOOL_RESULT_MIN_CHARS` characters or more (a part of a message, or a recorded tool_results row), and its
summary (the stored one, else the session's own). System prompts and tool calls are left to full-text search.
A text of more than `CHUNK_WORDS` words is cut into chunks of that many words overlapping by `OVERLAP_WORDS`
(all-MiniLM-L6-v2 reads 256 word pieces: 150 words is about 200 of them), at most `MAX_CHUNKS` chunks a text and
`TOOL_RESULT_CHUNKS` a tool result; the rest of a longer text is found by full-text search only.

Each distinct chunk text is stored once (`unit_texts`, by its hash), so a message repeated across calls or sessions
is embedded once; `search_units` says where each occurs. Cutting runs in the background (`reasonlog embed`,
`reasonlog serve`), session by session, from `unit_marks` on: the timeline only grows, so what was cut stays.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import orjson

from ..parts import parts_of, searchable_text
from .content import Dictionaries, compress, decompress
from .dbapi import ids_by_hash
from .reading import ContentReader

CHUNK_WORDS = 150
OVERLAP_WORDS = 30
MAX_CHUNKS = 16
TOOL_RESULT_CHUNKS = 1  # a tool result's chunks embedded: its first 150 words (docs/search.md, issue 34)
TOOL_RESULT_MIN_CHARS = 200
KINDS = ("user", "assistant", "tool_result", "summary")
_WORD = re.compile(r"\S+")
_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "model": "assistant"}


# ------------------------------------------------------------------ chunks


def chunk_spans(text: str, most: int = MAX_CHUNKS) -> list[tuple[int, int]]:
    """Where each chunk of `text` starts and ends: runs of `CHUNK_WORDS` words, each starting `CHUNK_WORDS -
    OVERLAP_WORDS` words after the one before, the last reaching the last word or the `most`-th chunk; none for a text
    without words."""
    words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    if not words:
        return []
    step, spans = CHUNK_WORDS - OVERLAP_WORDS, []
    for first in range(0, len(words), step):
        last = min(first + CHUNK_WORDS, len(words)) - 1
        spans.append((words[first][0], words[last][1]))
        if last == len(words) - 1 or len(spans) == most:
            break
    return spans


def chunks_of(text: str, most: int = MAX_CHUNKS) -> list[str]:
    """The chunks of `text` as they are embedded (each keeps the text's own spacing), at most `most`."""
    return [text[a:b] for a, b in chunk_spans(text, most)]


def text_hash(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


# ------------------------------------------------------------------ units of one message


@dataclass(frozen=True)
class Piece:
    """A text to cut into units: its kind, where it is, and which piece of the message it is."""

    kind: str
    message_idx: int | None
    text: str
    part: int = 0
    tool_result_id: str | None = None


def pieces_of_message(idx: int, role: str | None, value) -> list[Piece]:
    """The texts of one timeline message a person would search for (see the module's docstring)."""
    parts = parts_of(value)
    out: list[Piece] = []
    results = [p.text for p in parts if p.kind == "tool_result"]
    for n, text in enumerate(results):
        if len(text.strip()) >= TOOL_RESULT_MIN_CHARS:
            out.append(Piece("tool_result", idx, text, part=n))
    kind = _ROLES.get((role or "").lower())
    if kind is not None:
        said = "\n".join(p.text for p in parts if p.kind in ("text", "thinking") and p.text.strip())
        if said.strip():
            out.insert(0, Piece(kind, idx, said))
    return out


def piece_of_tool_result(row_id: str, message_idx: int, content_json: str | None) -> Piece | None:
    """A recorded tool result (a tool_results row) long enough to be a unit, else None."""
    text = searchable_text(orjson.loads(content_json)) if content_json is not None else ""
    if len(text.strip()) < TOOL_RESULT_MIN_CHARS:
        return None
    return Piece("tool_result", message_idx, text, tool_result_id=row_id)


# ------------------------------------------------------------------ cutting sessions into units (in the store)


def stale_sessions(cur, limit: int | None = None) -> list[tuple]:
    """Sessions with timeline entries, tool results or a summary not cut yet, newest first:
    (id, messages cut, last tool result cut, summary hash cut, timeline length, last tool result, summary text)."""
    rows = cur.execute(
        "SELECT s.id, COALESCE(k.messages, 0), COALESCE(k.tool_results, 0), k.summary,"
        " (SELECT COALESCE(MAX(m.idx) + 1, 0) FROM messages m WHERE m.session_id = s.id),"
        " (SELECT COALESCE(MAX(t.rowid), 0) FROM tool_results t WHERE t.session_id = s.id),"
        " COALESCE((SELECT sm.text FROM summaries sm WHERE sm.target_kind = 'session' AND sm.target_id = s.id),"
        " s.summary)"
        " FROM sessions s LEFT JOIN unit_marks k ON k.session_id = s.id ORDER BY s.started_at DESC, s.id DESC"
    ).fetchall()
    stale = [r for r in rows if r[4] > r[1] or r[5] > r[2] or _summary_mark(r[6]) != r[3]]
    return stale if limit is None else stale[:limit]


def _summary_mark(text: str | None) -> str | None:
    return None if not text or not text.strip() else text_hash(text).hex()


def cut_session(cur, dicts: Dictionaries, row: tuple) -> int:
    """Cut what is new in one session (a row of `stale_sessions`) into units; returns how many units it added."""
    sid, messages_cut, results_cut, summary_cut, length, last_result, summary = row
    mark_now = cur.execute("SELECT messages, tool_results, summary FROM unit_marks WHERE session_id = ?",
                           (sid,)).fetchone()
    if tuple(mark_now or (0, 0, None)) != (messages_cut, results_cut, summary_cut):
        return 0  # another worker cut it meanwhile: the next pass sees what is left
    pieces: list[Piece] = []
    if length > messages_cut:
        entries = cur.execute("SELECT idx, role, content_id FROM messages WHERE session_id = ? AND idx >= ?"
                              " AND idx < ? ORDER BY idx", (sid, messages_cut, length)).fetchall()
        reader = ContentReader(cur.connection.cursor(), dicts)
        reader.load([cid for _, role, cid in entries if role != "system"])
        for idx, role, cid in entries:
            if role != "system" and cid in reader.memo:
                pieces += pieces_of_message(idx, role, reader.memo[cid])
    if last_result > results_cut:
        for row_id, message_idx, content_json in cur.execute(
                "SELECT id, message_idx, content_json FROM tool_results WHERE session_id = ? AND rowid > ?"
                " AND rowid <= ? ORDER BY rowid", (sid, results_cut, last_result)).fetchall():
            piece = piece_of_tool_result(row_id, message_idx, content_json)
            if piece is not None:
                pieces.append(piece)
    mark = _summary_mark(summary)
    if mark != summary_cut:
        cur.execute("DELETE FROM search_units WHERE session_id = ? AND kind = 'summary'", (sid,))
        if mark is not None:
            pieces.append(Piece("summary", None, summary))
    added = _add_units(cur, sid, pieces)
    cur.execute("INSERT INTO unit_marks (session_id, messages, tool_results, summary) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (session_id) DO UPDATE SET messages = excluded.messages,"
                " tool_results = excluded.tool_results, summary = excluded.summary",
                (sid, length, last_result, mark))
    return added


def _add_units(cur, session_id: str, pieces: list[Piece]) -> int:
    rows = [(p, n, chunk) for p in pieces for n, chunk in enumerate(chunks_of(p.text, TOOL_RESULT_CHUNKS if
                                                                            p.kind == "tool_result" else MAX_CHUNKS))]
    ids = text_ids(cur, [chunk for _, _, chunk in rows])
    cur.executemany("INSERT INTO search_units (session_id, kind, message_idx, tool_result_id, part, chunk, text_id)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(session_id, p.kind, p.message_idx, p.tool_result_id, p.part, n, ids[text_hash(chunk)])
                     for p, n, chunk in rows])
    return len(rows)


def text_ids(cur, texts: list[str]) -> dict[bytes, int]:
    """The `unit_texts` id of each text by its hash, storing the texts not stored yet."""
    by_hash = {text_hash(t): t for t in texts}
    found = ids_by_hash(cur, "unit_texts", list(by_hash))
    missing = [h for h in by_hash if h not in found]
    if missing:
        cur.executemany("INSERT INTO unit_texts (hash, size, codec, data) VALUES (?, ?, ?, ?)"
                        " ON CONFLICT (hash) DO NOTHING", [(h, *_encoded(by_hash[h])) for h in missing])
        found.update(ids_by_hash(cur, "unit_texts", missing))
    return found




def _encoded(text: str) -> tuple[int, int, bytes]:
    data = text.encode("utf-8", "surrogatepass")
    return (len(data), *compress(data))


def decoded(codec: int, data: bytes) -> str:
    """A stored unit text."""
    return decompress(codec, bytes(data), None).decode("utf-8", "surrogatepass")


def forget_sessions(cur, chosen: str, args: tuple = ()) -> None:
    """Delete the units and marks of the sessions `chosen` (an SQL condition on session_id) and the texts and vectors
    no other unit uses; inside the caller's transaction, before the sessions go."""
    cur.execute("CREATE TEMP TABLE IF NOT EXISTS gone_texts (id INTEGER PRIMARY KEY)")
    cur.execute("DELETE FROM gone_texts")
    cur.execute(f"INSERT INTO gone_texts SELECT DISTINCT text_id FROM search_units WHERE {chosen}", args)
    for table in ("search_units", "unit_marks", "session_vectors"):
        cur.execute(f"DELETE FROM {table} WHERE {chosen}", args)
    cur.execute("DELETE FROM gone_texts WHERE id IN (SELECT text_id FROM search_units u WHERE u.text_id IN"
                " (SELECT id FROM gone_texts))")
    cur.execute("DELETE FROM unit_vectors WHERE text_id IN (SELECT id FROM gone_texts)")
    cur.execute("DELETE FROM unit_texts WHERE id IN (SELECT id FROM gone_texts)")
    cur.execute("DELETE FROM gone_texts")


# ------------------------------------------------------------------ hits


def unit_hits(cur, ranked: list[tuple[int, float]], where: str, args: list) -> list[dict]:
    """The hits of ranked texts (id, score): every unit of theirs in the sessions `where` (a condition on sessions
    `s`) selects, one per message, tool result or summary (its best chunk), best first; equal scores newest first."""
    if not ranked:
        return []
    score = dict(ranked)
    ids = list(score)
    rows = []
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        rows += cur.execute(
            "SELECT u.text_id, u.session_id, u.kind, u.message_idx, u.tool_result_id, m.role, m.call_id, m.at,"
            " r.name, r.tool_use_id, r.at, (SELECT p.call_id FROM messages p WHERE p.session_id = r.session_id"
            " AND p.idx = r.message_idx - 1), s.started_at FROM search_units u JOIN sessions s ON s.id = u.session_id"
            " LEFT JOIN messages m ON u.tool_result_id IS NULL AND m.session_id = u.session_id"
            " AND m.idx = u.message_idx"
            " LEFT JOIN tool_results r ON r.id = u.tool_result_id"
            f" WHERE u.text_id IN ({', '.join('?' * len(chunk))}) AND {where}", [*chunk, *args]).fetchall()
    best: dict[tuple, tuple] = {}
    for row in rows:
        tid, sid, unit, idx, result_id = row[:5]
        kind = "summary" if unit == "summary" else "tool_result" if result_id is not None else "message"
        key = (sid, idx, kind, result_id)
        if key not in best or score[tid] > score[best[key][0]]:
            best[key] = row
    texts = _texts(cur, {row[0] for row in best.values()})
    hits = [_hit(key[2], row, score[row[0]], texts[row[0]]) for key, row in best.items()]
    hits.sort(key=lambda h: h["message_idx"] if h["message_idx"] is not None else -1)
    hits.sort(key=lambda h: (h.pop("_started"), h["session_id"]), reverse=True)
    hits.sort(key=lambda h: -h["score"])
    return hits


def _hit(kind: str, row: tuple, score: float, text: str) -> dict:
    _, sid, _, idx, _, role, call_id, at, name, tool_use_id, result_at, result_call, started = row
    result = kind == "tool_result"
    return {"kind": kind, "session_id": sid, "message_idx": idx, "role": "tool" if result else role,
            "call_id": result_call if result else call_id, "at": result_at if result else at,
            "tool_use_id": tool_use_id, "name": name, "snippet": snippet(text), "score": round(score, 6),
            "_started": started}


def snippet(text: str, size: int = 160) -> str:
    """The start of a unit's text on one line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= size else flat[:size].rstrip() + "…"


def _texts(cur, ids: set[int]) -> dict[int, str]:
    out: dict[int, str] = {}
    wanted = list(ids)
    for start in range(0, len(wanted), 500):
        chunk = wanted[start:start + 500]
        out.update((tid, decoded(codec, data)) for tid, codec, data in cur.execute(
            f"SELECT id, codec, data FROM unit_texts WHERE id IN ({', '.join('?' * len(chunk))})", chunk).fetchall())
    return out
