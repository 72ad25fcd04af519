"""The `import_files` table: what `reasonlog import` and `watch` consumed of each file.

Dialect-neutral DB-API with `?` placeholders; rows travel as dicts with the JSON columns parsed.
"""
from __future__ import annotations

from typing import Any

import orjson

from ..model import utc_now

_COLUMNS = ("path", "format", "size", "mtime_ns", "consumed", "tail_hash", "state_json", "sessions_json",
            "skipped", "imported_at")
_ID_COLUMNS = {"session": ("sessions", "id"), "call": ("calls", "id"), "tool_result": ("tool_results", "id"),
               "outcome": ("outcomes", "id")}


def save_file(cur, row: dict) -> None:
    """Insert or update one file's row (the keys of `load_file`'s answer)."""
    values = {**row, "state_json": None if row.get("state") is None else orjson.dumps(row["state"]).decode(),
              "sessions_json": orjson.dumps(sorted(row.get("sessions") or ())).decode()}
    cols = ", ".join(_COLUMNS)
    updates = ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
    cur.execute(f"INSERT INTO import_files ({cols}) VALUES ({', '.join('?' * len(_COLUMNS))})"
                f" ON CONFLICT (path) DO UPDATE SET {updates}", [values.get(c) for c in _COLUMNS])


def _row(values: tuple) -> dict[str, Any]:
    row = dict(zip(_COLUMNS, values, strict=True))
    row["state"] = None if row["state_json"] is None else orjson.loads(row.pop("state_json"))
    row.pop("state_json", None)
    row["sessions"] = orjson.loads(row.pop("sessions_json"))
    return row


def load_file(cur, path: str) -> dict | None:
    found = cur.execute(f"SELECT {', '.join(_COLUMNS)} FROM import_files WHERE path = ?", (path,)).fetchone()
    return None if found is None else _row(found)


def list_files(cur) -> list[dict]:
    rows = cur.execute(f"SELECT {', '.join(_COLUMNS)} FROM import_files ORDER BY imported_at DESC, path").fetchall()
    return [_row(r) for r in rows]


def existing_ids(cur, kind: str, ids: list[str]) -> set[str]:
    table, column = _ID_COLUMNS[kind]
    found: set[str] = set()
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        found.update(r[0] for r in cur.execute(
            f"SELECT {column} FROM {table} WHERE {column} IN ({', '.join('?' * len(chunk))})", chunk))
    return found


def last_call(cur, session_id: str) -> str | None:
    row = cur.execute("SELECT id FROM calls WHERE session_id = ? ORDER BY idx DESC LIMIT 1", (session_id,)).fetchone()
    return None if row is None else row[0]


def claim_batch(cur, batch_id: str, events: int) -> bool:
    """Record a sent batch by its id; False when it was recorded already (inside the batch's transaction)."""
    return cur.execute("INSERT INTO ingested_batches (id, received_at, events) VALUES (?, ?, ?)"
                       " ON CONFLICT (id) DO NOTHING", (batch_id, utc_now(), events)).rowcount == 1
