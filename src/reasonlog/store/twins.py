"""A model call that reaches one database by two paths is counted once (issue 31).

The proxy (or an SDK adapter, or OTLP) records a call as it happens; an importer reads the same call, later or
(under `watch`) earlier, from the agent's own log. Both hold the provider's message id. When a call is written
whose provider message id a call of a session of another source already holds, the two are one call:

- the live record bills it: a session no importer made (source `recorded`) holds the exact request, the
  upstream's bytes, latency and time to first token, where a log holds what the agent chose to write;
- between two imports, or two live paths, the call written first bills it;
- the other stays as its path gave it (its session, messages and ids: what the agent's log adds, such as its
  tool results and title, is not lost), with `counted_in` naming the billed call and its tokens and cost 0, so
  that every reader, whatever it sums (the kept usage, a session's calls, an export), counts it once.

Two calls of sessions of one source are never one: a path does not record a call twice, and recorded payloads
replayed by test upstreams repeat their ids.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..accounting import TOKENS
from ..usage_sql import SOURCE
from . import usage

LIVE = "recorded"  # the source of a session no importer made (usage_sql.SOURCE's default)
_ZEROED = ", ".join(f"{t} = CASE WHEN {t} IS NULL THEN NULL ELSE 0 END" for t in (*TOKENS, "cost_usd"))


@dataclass(frozen=True)
class Twin:
    """A call already written that is the same model call as the one being written."""

    call_id: str
    session_id: str
    source: str


def session_source(cur, session_id: str) -> str:
    """Where a session came from: its `source` label (set by importers and OTLP), else `recorded`."""
    row = cur.execute("SELECT value FROM session_labels WHERE session_id = ? AND key = 'source'",
                      (session_id,)).fetchone()
    return row[0] if row else LIVE


_BILLED = (f"SELECT c.provider_message_id, c.id, c.session_id, {SOURCE} FROM calls c"
           " JOIN sessions s ON s.id = c.session_id WHERE c.counted_in IS NULL AND c.provider_message_id IN ({})")
CHUNK = 500  # provider message ids looked up per statement


def billed_calls(cur, provider_message_ids: list[str]) -> dict[str, list[Twin]]:
    """The billed calls already written with these provider message ids: one statement per 500 ids, so that
    a batch costs one lookup rather than one per call."""
    wanted, found = sorted(set(provider_message_ids)), {}
    for start in range(0, len(wanted), CHUNK):
        chunk = wanted[start:start + CHUNK]
        for message_id, *twin in cur.execute(_BILLED.format(", ".join("?" * len(chunk))), chunk).fetchall():
            found.setdefault(message_id, []).append(Twin(*twin))
    return found


def count_once(cur, row: dict, source: str, billed: dict[str, list[Twin]] | None, flush) -> None:
    """Settle which of a call (`row`, about to be inserted) and its twin bills: `row` is made the copy, or the
    twin is (`flush()` first writes what the batch queued, so that the twin's session is recounted whole).
    `billed`: the batch's `billed_calls`, kept up to date here; None looks this call up alone."""
    message_id = row["provider_message_id"]
    known = billed_calls(cur, [message_id]) if billed is None else billed
    twins = known.setdefault(message_id, [])
    twin = next((t for t in twins if t.session_id != row["session_id"] and t.source != source), None)
    if twin is not None and source == LIVE and twin.source != LIVE:
        flush()
        cur.execute(f"UPDATE calls SET counted_in = ?, {_ZEROED} WHERE id = ?", (row["id"], twin.call_id))
        usage.recount(cur, [twin.session_id])
        twins.remove(twin)
    elif twin is not None:
        for column in (*TOKENS, "cost_usd"):
            if row[column] is not None:
                row[column] = 0
        row["counted_in"] = twin.call_id
        return
    twins.append(Twin(row["id"], row["session_id"], source))
