"""A model call that reaches one database by two paths is counted once (issue 31).

The proxy (or an SDK adapter, or OTLP) records a call as it happens; an importer reads the same call, later or
(under `watch`) earlier, from the agent's own log. Both hold the provider's message id. When a call is written
whose provider message id a call of a session of another source already holds, the two are one call if one is the
live record and the other an import, or both name the same agent session (`external_id`); where one of them names
no id (Codex's rollouts), a live record and an import of one agent session are paired by position and tokens:

- the live record bills it: a session no importer made (source `recorded`) holds the exact request, the
  upstream's bytes, latency and time to first token, where a log holds what the agent chose to write;
- between two imports, or two live paths, the call written first bills it;
- the other stays as its path gave it (its session, messages and ids: what the agent's log adds, such as its
  tool results and title, is not lost), with `counted_in` naming the billed call and its tokens and cost 0, so
  that every reader, whatever it sums (the kept usage, a session's calls, an export), counts it once.

Two calls of sessions of one source are never one: a path does not record a call twice, and recorded payloads
replayed by test upstreams repeat their ids (which is also why two agents' imports are not paired by id alone).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..accounting import TOKENS
from . import kept
from .dbapi import binds_arrays
from .usage_sql import SOURCE

LIVE = "recorded"  # the source of a session no importer made (usage_sql.SOURCE's default)
_ZEROED = ", ".join(f"{t} = CASE WHEN {t} IS NULL THEN NULL ELSE 0 END" for t in (*TOKENS, "cost_usd"))


@dataclass(frozen=True)
class Twin:
    """A call already written that is the same model call as the one being written."""

    call_id: str
    session_id: str
    source: str
    external_id: str | None = None


@dataclass(frozen=True)
class Origin:
    """What decides a session's calls' twins: where it came from (its `source` label, set by importers and
    OTLP, else `recorded`) and the agent's own id for it (`external_id`)."""

    source: str
    external_id: str | None


def origin_of(cur, session_id: str) -> Origin:
    row = cur.execute("SELECT s.external_id, (SELECT l.value FROM session_labels l WHERE l.session_id = s.id"
                      " AND l.key = 'source') FROM sessions s WHERE s.id = ?", (session_id,)).fetchone()
    return Origin(row[1] or LIVE, row[0]) if row else Origin(LIVE, None)


_BILLED = (f"SELECT c.provider_message_id, c.id, c.session_id, {SOURCE}, s.external_id FROM calls c"
           " JOIN sessions s ON s.id = c.session_id WHERE c.counted_in IS NULL AND c.provider_message_id IN ({})")
CHUNK = 500  # provider message ids looked up per statement
# PostgreSQL's: the ids as one array, each looked up through calls_provider_message (the subquery, kept apart by
# OFFSET 0, is planned for one id). With `IN (…)`, or a plain join, the planner of a table not yet analysed (a new
# database's first minutes, before autovacuum comes) read every call for each batch: 8.6 ms against 0.7 ms for 32
# ids at 5,000 calls, growing with the table.
_BILLED_OF_ARRAY = (f"SELECT c.provider_message_id, c.id, c.session_id, {SOURCE}, s.external_id"
                    " FROM unnest(?::text[]) AS wanted(id) CROSS JOIN LATERAL (SELECT * FROM calls c"
                    " WHERE c.provider_message_id = wanted.id AND c.counted_in IS NULL OFFSET 0) c"
                    " JOIN sessions s ON s.id = c.session_id")


def billed_calls(cur, provider_message_ids: list[str]) -> dict[str, list[Twin]]:
    """The billed calls already written with these provider message ids: one statement per 500 ids (on PostgreSQL
    one for them all), so that a batch costs one lookup rather than one per call."""
    wanted = sorted(set(provider_message_ids))
    found: dict[str, list[Twin]] = {}
    statements: list[tuple[str, list]]
    if binds_arrays(cur):
        statements = [(_BILLED_OF_ARRAY, [wanted])] if wanted else []
    else:
        chunks = (wanted[k:k + CHUNK] for k in range(0, len(wanted), CHUNK))
        statements = [(_BILLED.format(", ".join("?" * len(chunk))), chunk) for chunk in chunks]
    for sql, args in statements:
        for message_id, *twin in cur.execute(sql, args).fetchall():
            found.setdefault(message_id, []).append(Twin(*twin))
    return found


_BY_POSITION = (f"SELECT c.id, c.session_id, {SOURCE} FROM sessions s JOIN calls c ON c.session_id = s.id"
                " WHERE s.external_id = ? AND s.id <> ? AND c.idx = ? AND c.counted_in IS NULL"
                " AND c.input_tokens = ? AND c.output_tokens = ?")


def by_position(cur, row: dict, origin: Origin, flush) -> Twin | None:
    """A call of the same agent session (`external_id`) at the same position with the same input and output tokens,
    where one of the two names no provider message id (Codex's rollouts name none) and one is the live record and
    the other an import: the agent's session id and position, checked by its figures. Two imports are never
    paired so (two agents' logs may be made alike, as test fixtures are). `flush()` first writes what the batch
    queued, which may hold the twin (a session new to the store reads nothing first); only when there is a question
    to ask, so a call with no agent session id costs the batch nothing."""
    if origin.external_id is None or row["input_tokens"] is None or row["output_tokens"] is None:
        return None
    flush()
    sql = _BY_POSITION + ("" if row["provider_message_id"] is None else " AND c.provider_message_id IS NULL")
    rows = cur.execute(sql, (origin.external_id, row["session_id"], row["idx"], row["input_tokens"],
                             row["output_tokens"])).fetchall()
    return next((Twin(*r) for r in rows if (r[2] == LIVE) != (origin.source == LIVE)), None)


def _paired(twin: Twin, origin: Origin) -> bool:
    """Whether two calls with one provider message id are one call: a live record and an import, or two imports
    (or live paths) of one agent session. Two agents' imports are not (their logs may be made alike: test
    fixtures answered by one recorded payload share its id)."""
    if twin.source == origin.source:
        return False
    live = (twin.source == LIVE) != (origin.source == LIVE)
    return live or (origin.external_id is not None and twin.external_id == origin.external_id)


def shared_external_ids(cur, session_ids: list[str], started: list[tuple[str, str]]) -> set[str]:
    """The agent session ids (`external_id`) of these sessions, and of the sessions `started` ((id, external id))
    in the batch, that more than one session holds: a call of a session whose agent session id no other session
    holds has no twin by position, and is not looked for one."""
    holders: dict[str, set[str]] = {}
    for sid, external_id in started:
        holders.setdefault(external_id, set()).add(sid)
    wanted = sorted(holders)
    for start in range(0, max(len(session_ids), len(wanted)), CHUNK):
        ours, theirs = session_ids[start:start + CHUNK], wanted[start:start + CHUNK]
        for external_id, sid in cur.execute(
                "SELECT external_id, id FROM sessions WHERE external_id IN (SELECT external_id FROM sessions"
                f" WHERE id IN ({', '.join('?' * len(ours)) or 'NULL'})) OR external_id IN"
                f" ({', '.join('?' * len(theirs)) or 'NULL'})", [*ours, *theirs]).fetchall():
            holders.setdefault(external_id, set()).add(sid)
    return {external_id for external_id, sids in holders.items() if len(sids) > 1}


def count_once(cur, row: dict, origin: Origin, billed: dict[str, list[Twin]] | None, flush,
               shared: set[str] | None = None) -> None:
    """Settle which of a call (`row`, about to be inserted) and its twin bills: `row` is made the copy, or the
    twin is (`flush()` first writes what the batch queued, so that the twin's session is recounted whole).
    `billed`: the batch's `billed_calls`, kept up to date here; None looks this call up alone. `shared`: the batch's
    `shared_external_ids`; None looks for a twin by position whenever one could be."""
    message_id, source = row["provider_message_id"], origin.source
    twins: list[Twin] = []
    if message_id is not None:
        known = billed_calls(cur, [message_id]) if billed is None else billed
        twins = known.setdefault(message_id, [])
    twin: Twin | None = None
    if twins:  # (most calls: no call holds their id)
        twin = next((t for t in twins if t.session_id != row["session_id"] and _paired(t, origin)), None)
    if twin is None and (message_id is None or source == LIVE) and (shared is None or origin.external_id in shared):
        twin = by_position(cur, row, origin, flush)
    if twin is not None and source == LIVE and twin.source != LIVE:
        flush()
        cur.execute(f"UPDATE calls SET counted_in = ?, {_ZEROED} WHERE id = ?", (row["id"], twin.call_id))
        kept.recount(cur, [twin.session_id])
        if twin in twins:
            twins.remove(twin)
    elif twin is not None:
        for column in (*TOKENS, "cost_usd"):
            if row[column] is not None:
                row[column] = 0
        row["counted_in"] = twin.call_id
        return
    if message_id is not None:
        twins.append(Twin(row["id"], row["session_id"], source))


def bill_copies_of(cur, chosen: str, args: tuple = ()) -> None:
    """Before the calls of the sessions `chosen` (an SQL condition on `session_id`; `args` its parameters) are
    deleted: each copy counted in one of them, and not deleted with them, takes the billed call's figures (the same
    call's) and bills itself again, and its session's kept usage is recounted."""
    figures = (*TOKENS, "cost_usd")
    rows = cur.execute(f"SELECT x.id, x.session_id, {', '.join('c.' + f for f in figures)} FROM calls x"
                       " JOIN calls c ON c.id = x.counted_in"
                       f" WHERE x.counted_in IN (SELECT id FROM calls WHERE {chosen})"
                       f" AND x.id NOT IN (SELECT id FROM calls WHERE {chosen})", args + args).fetchall()
    for call_id, _, *values in rows:
        cur.execute(f"UPDATE calls SET counted_in = NULL, {', '.join(f + ' = ?' for f in figures)} WHERE id = ?",
                    (*values, call_id))
    kept.recount(cur, sorted({row[1] for row in rows}))
