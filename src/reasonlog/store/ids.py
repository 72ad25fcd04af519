"""What a person types for a session or a call, resolved to its stored id. Dialect-neutral (`?` placeholders).

Sessions: a full id, a unique prefix, or an external id. A full id names its own session even when it begins other
ids (`run1` beside `run10`): the candidates come in id order, so it is the first. Calls: a full id, a unique prefix, or
`SESSION#N`, the call with index N in that session (SESSION as for sessions). ULIDs of one session
share their first 24 characters, so `SESSION#N` is the short form `show` prints.
"""
from __future__ import annotations

import re

from .terms import Ambiguous, Invalid, NotFound

INSTANT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}")
LISTED = 10  # candidates named when a prefix is ambiguous

_CANDIDATES = {
    "session": "SELECT s.id, s.agent, s.started_at, s.run FROM sessions s WHERE s.id >= ? AND s.id < ?"
               " ORDER BY s.id LIMIT ?",
    "call": "SELECT c.id, c.session_id || '#' || c.idx, s.agent, c.started_at FROM calls c"
            " JOIN sessions s ON s.id = c.session_id WHERE c.id >= ? AND c.id < ? ORDER BY c.id LIMIT ?",
}
_COUNT = {"session": "SELECT COUNT(*) FROM sessions WHERE id >= ? AND id < ?",
          "call": "SELECT COUNT(*) FROM calls WHERE id >= ? AND id < ?"}


def resolve_id(cur, kind: str, ref: str) -> str:
    """The one id `ref` names; a StoreError that lists the candidates when it names several."""
    if kind == "call" and "#" in ref:
        return _call_by_number(cur, ref)
    bounds = (ref, ref + "\U0010ffff")
    rows = cur.execute(_CANDIDATES[kind], (*bounds, LISTED)).fetchall()
    if not rows and kind == "session":
        rows = cur.execute("SELECT id, agent, started_at, run FROM sessions WHERE external_id = ? LIMIT ?",
                           (ref, LISTED)).fetchall()
    if len(rows) == 1 or (rows and rows[0][0] == ref):  # a whole id names itself, even when it begins others
        return rows[0][0]
    if not rows:
        raise NotFound(f"no {kind} matches {ref!r}")
    total = cur.execute(_COUNT[kind], bounds).fetchone()[0] if len(rows) == LISTED else len(rows)
    raise Ambiguous(_ambiguous(kind, ref, rows, max(total, len(rows))))


def _ambiguous(kind: str, ref: str, rows: list, total: int) -> str:
    lines = [f"{ref!r} matches {total} {kind}s; give more characters:"]
    lines += ["  " + "  ".join(_cell(v) for v in row) for row in rows]
    if total > len(rows):
        lines.append(f"  … and {total - len(rows)} more")
    return "\n".join(lines)


def _cell(value) -> str:
    if value is None:
        return "-"
    text = str(value)
    # Instants read as `2025-10-02 09:00:00`, like the sessions table. Only instants: an id may hold a `T` at the
    # same place (`01K6KNWNYGTHNS3XZ67T3C5EZN`).
    return text[:19].replace("T", " ") if INSTANT.match(text) else text


def _call_by_number(cur, ref: str) -> str:
    session_ref, _, number = ref.rpartition("#")
    if not number.isdigit():
        raise Invalid(f"{ref!r}: expected SESSION#N, N the call's number in its session (as `show` prints it)")
    if not session_ref:
        raise Invalid(f"{ref!r}: name the session too, as SESSION#{number}")
    sid = resolve_id(cur, "session", session_ref)
    row = cur.execute("SELECT id FROM calls WHERE session_id = ? AND idx = ?", (sid, int(number))).fetchone()
    if row is not None:
        return row[0]
    last = cur.execute("SELECT MAX(idx) FROM calls WHERE session_id = ?", (sid,)).fetchone()[0]
    has = "it has no calls" if last is None else f"it has #0 to #{last}"
    raise NotFound(f"session {sid} has no call #{number} ({has})")
