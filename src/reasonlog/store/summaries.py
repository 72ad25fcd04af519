"""The `summaries` rows (migration 11): one per summarised session, exchange or message, last attempt wins.

A success replaces the row. A failure keeps the text an earlier success made (and what made it) and records
only its error: a summary is never replaced by nothing, nor by a cut copy of its input. Plain SQL with `?`
placeholders and `INSERT ... ON CONFLICT`, so SQLite and PostgreSQL run the same statements.
"""
from __future__ import annotations

from collections.abc import Iterable

COLUMNS = ("target_kind", "target_id", "session_id", "status", "text", "error", "source_hash", "summarizer",
           "model", "prompt_hash", "version", "failures", "created_at", "attempted_at")
KINDS = ("session", "exchange", "message")
STATUSES = ("ok", "failed")
CHUNK = 500  # ids per IN (...): well under SQLite's and PostgreSQL's limits on parameters

_INSERT = f"INSERT INTO summaries ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
_ON_OK = (" ON CONFLICT (target_kind, target_id) DO UPDATE SET session_id = excluded.session_id,"
          " status = 'ok', text = excluded.text, error = NULL, source_hash = excluded.source_hash,"
          " summarizer = excluded.summarizer,"
          " model = excluded.model, prompt_hash = excluded.prompt_hash, version = excluded.version, failures = 0,"
          " created_at = excluded.created_at, attempted_at = excluded.attempted_at")
# What made a kept text stays with it; a row that never succeeded names what was tried last.
_KEPT = "CASE WHEN summaries.text IS NULL THEN excluded.{0} ELSE summaries.{0} END"
_ON_FAILED = (" ON CONFLICT (target_kind, target_id) DO UPDATE SET status = 'failed', error = excluded.error,"
              " failures = summaries.failures + 1, attempted_at = excluded.attempted_at, "
              + ", ".join(f"{c} = {_KEPT.format(c)}" for c in ("source_hash", "summarizer", "model",
                                                               "prompt_hash", "version", "created_at")))


def save(cur, rows: Iterable[dict]) -> int:
    """Write summary rows (dicts with the keys of `COLUMNS`; `failures` is counted here); how many."""
    n = 0
    for row in rows:
        _check(row)
        ok = row["status"] == "ok"
        values = {**row, "failures": 0 if ok else 1, "error": None if ok else row["error"],
                  "text": row["text"] if ok else None}
        cur.execute(_INSERT + (_ON_OK if ok else _ON_FAILED), tuple(values[c] for c in COLUMNS))
        n += 1
    return n


def _check(row: dict) -> None:
    if row.get("target_kind") not in KINDS:
        raise ValueError(f"target_kind: expected one of {', '.join(KINDS)}, got {row.get('target_kind')!r}")
    if row.get("status") not in STATUSES:
        raise ValueError(f"status: expected ok or failed, got {row.get('status')!r}")
    if row["status"] == "ok" and not isinstance(row.get("text"), str):
        raise ValueError("text: a summary that succeeded needs its text")
    if row["status"] == "failed" and not row.get("error"):
        raise ValueError("error: a failed summary needs its error")
    for name in ("target_id", "session_id", "source_hash", "summarizer", "version", "created_at", "attempted_at"):
        if not isinstance(row.get(name), str) or not row[name]:
            raise ValueError(f"{name}: expected a non-empty string, got {row.get(name)!r}")


def for_sessions(cur, session_ids: list[str]) -> list[dict]:
    """Every summary row of these sessions, as dicts with the keys of `COLUMNS`."""
    out: list[dict] = []
    for start in range(0, len(session_ids), CHUNK):
        chunk = session_ids[start:start + CHUNK]
        rows = cur.execute(f"SELECT {', '.join(COLUMNS)} FROM summaries WHERE session_id IN"
                           f" ({', '.join('?' * len(chunk))}) ORDER BY target_kind, target_id", chunk).fetchall()
        out += [dict(zip(COLUMNS, r, strict=True)) for r in rows]
    return out


def counts(cur) -> dict[str, dict[str, int]]:
    """How many summaries of each kind succeeded and failed: {"session": {"ok": n, "failed": m}, ...}."""
    out = {kind: {"ok": 0, "failed": 0} for kind in KINDS}
    for kind, status, n in cur.execute("SELECT target_kind, status, COUNT(*) FROM summaries"
                                       " GROUP BY target_kind, status").fetchall():
        out.setdefault(kind, {})[status] = n
    return out
