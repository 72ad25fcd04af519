"""Usage kept as calls are written (`usage_rollup`, migration 13): the batch's sums added in its transaction, their
rebuild (`reasonlog db recount`, migrations 13 and 16), their check, and the kept totals of regular sessions that a
session list and a session page read.

Every reader of tokens and money follows `reasonlog.accounting`. For most sessions that rule is plain sums
of their calls, and those sums are kept per session, UTC day and model in the transaction that writes the
calls, so `/usage`, `stats` and a list of sessions add up a few rows a session instead of building a Python
entry for every call. The rule's exceptions are *irregular* sessions: one with an exchange whose SDK reported
figures (they replace its calls'), and a sub-agent session (a reporting exchange above it may cover it).
Those are read through the ledger, as before, and merged in (store/usage.py reads the statistics).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import accounting
from . import rollups
from .usage_sql import IRREGULAR, SUMS

TOKENS = accounting.TOKENS
_COST = 2 + len(TOKENS)  # where a `Tally` row's cost is, after the calls, the errors and the TOKENS

_UPSERT = (f"INSERT INTO usage_rollup (session_id, day, model, {', '.join(SUMS)}, last_call_at)"
           f" VALUES ({', '.join('?' * (len(SUMS) + 4))}) ON CONFLICT (session_id, day, model) DO UPDATE SET "
           + ", ".join(f"{c} = usage_rollup.{c} + excluded.{c}" for c in SUMS if c != "cost_usd")
           + ", cost_usd = CASE WHEN excluded.cost_usd IS NULL THEN usage_rollup.cost_usd"
             " ELSE COALESCE(usage_rollup.cost_usd, 0) + excluded.cost_usd END,"
             " last_call_at = CASE WHEN excluded.last_call_at > usage_rollup.last_call_at"
             " THEN excluded.last_call_at ELSE usage_rollup.last_call_at END")


@dataclass
class Tally:
    """The sums of the calls a batch wrote, by (session, day, model), until they are added to `usage_rollup`."""

    rows: dict[tuple[str, str, str], list[Any]] = field(default_factory=dict)

    def add(self, session_id: str, started_at: str, model: str | None, status: str, latency_ms: float | None,
            tokens: Sequence[int | None], cost_usd: float | None) -> None:
        """Count one written call (`tokens`: its TOKENS, in their order)."""
        key = (session_id, started_at[:10], model or "")
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = [0, 0, *(0 for _ in TOKENS), None, 0, 0.0, 0, started_at]
        row[0] += 1
        row[1] += status == "error"
        for n, value in enumerate(tokens, 2):
            if value:
                row[n] += value
        if cost_usd is not None:
            row[_COST] = (row[_COST] or 0.0) + cost_usd
        elif tokens[0] is not None:
            row[_COST + 1] += 1
        if latency_ms is not None:
            row[_COST + 2] += latency_ms
            row[_COST + 3] += 1
        if started_at > row[_COST + 4]:
            row[_COST + 4] = started_at

    def flush(self, cur) -> None:
        """Add what was counted to `usage_rollup` (inside the batch's transaction) and forget it."""
        if self.rows:
            cur.executemany(_UPSERT, [(*key, *row) for key, row in self.rows.items()])
        self.rows.clear()

    def clear(self) -> None:
        self.rows.clear()


def recount(cur, session_ids: list[str] | None = None) -> None:
    """Rebuild `usage_rollup` from the calls: of these sessions, or of all (`db recount`); a call counted in
    another (`counted_in`, store/twins.py) adds nothing. All of it rebuilds the rows by day, model, agent, run and
    source too (store/rollups.py: the triggers' additions and subtractions replaced by fresh sums)."""
    if session_ids is None:
        _recount(cur, "", [])
        rollups.rebuild(cur)
    for chunk in _chunks(list(session_ids or ())):
        _recount(cur, f" WHERE session_id IN ({', '.join('?' * len(chunk))})", chunk)


def recount_before_16(cur) -> None:
    """`recount` as migration 13 runs it: before migration 16 no call is counted in another."""
    _recount(cur, "", [], uncounted="")


def _recount(cur, where: str, args: list, uncounted: str = "counted_in IS NULL") -> None:
    cur.execute(f"DELETE FROM usage_rollup{where}", args)
    condition = " AND ".join(c for c in (where.removeprefix(" WHERE "), uncounted) if c)
    cur.execute(f"INSERT INTO usage_rollup (session_id, day, model, {', '.join(SUMS)}, last_call_at)"
                f" {_FROM_CALLS.format(where=f' WHERE {condition}' if condition else '')}", args)


_FROM_CALLS = ("SELECT session_id, SUBSTR(started_at, 1, 10), COALESCE(model, ''), COUNT(*),"
               " SUM(CASE WHEN status = 'error' THEN 1 ELSE 0 END), "
               + ", ".join([*(f"SUM(COALESCE({t}, 0))" for t in TOKENS), "SUM(cost_usd)",
                            "SUM(CASE WHEN cost_usd IS NULL AND input_tokens IS NOT NULL THEN 1 ELSE 0 END)",
                            "COALESCE(SUM(latency_ms), 0)", "COUNT(latency_ms)"])
               + ", MAX(started_at) FROM calls{where} GROUP BY session_id, SUBSTR(started_at, 1, 10),"
                 " COALESCE(model, '')")


def differences(cur) -> list[str]:
    """Where the kept usage differs from the sums of the calls, one line each (`db check`)."""
    def rows(sql: str) -> dict[tuple, tuple]:
        return {tuple(r[:3]): tuple(round(v, 6) if isinstance(v, float) else v for v in r[3:])
                for r in cur.execute(sql).fetchall()}
    kept = rows(f"SELECT session_id, day, model, {', '.join(SUMS)}, last_call_at FROM usage_rollup")
    fresh = rows(_FROM_CALLS.format(where=" WHERE counted_in IS NULL"))
    names, out = (*SUMS, "last_call_at"), []
    for key in sorted(kept.keys() | fresh.keys()):
        if kept.get(key) != fresh.get(key):
            a, b = kept.get(key) or (None,) * len(names), fresh.get(key) or (None,) * len(names)
            wrong = ", ".join(f"{n} {x} (its calls: {y})" for n, x, y in zip(names, a, b, strict=True) if x != y)
            out.append(f"usage of session {key[0]} on {key[1]} ({key[2] or 'no model'}) kept as {wrong};"
                       " `reasonlog db recount` rebuilds it")
    return out


# ------------------------------------------------------------------ reading


def can_answer(since: str | None, until: str | None) -> bool:
    """Whether the rollup answers a date range: whole days only (an instant cuts a day)."""
    return all(d is None or len(d) == 10 for d in (since, until))


def session_totals(cur, session_ids: list[str]) -> dict[str, dict]:
    """Totals of these sessions as the accounting rule counts them, for the regular ones (irregular ones are
    left out: the caller reads them through the ledger)."""
    out: dict[str, dict] = {}
    for chunk in _chunks(session_ids):
        for r in cur.execute(
                f"SELECT u.session_id, {', '.join(f'SUM(u.{c})' for c in SUMS)}, MAX(u.last_call_at)"
                f" FROM usage_rollup u JOIN sessions s ON s.id = u.session_id"
                f" WHERE u.session_id IN ({', '.join('?' * len(chunk))}) AND NOT {IRREGULAR} GROUP BY u.session_id",
                chunk):
            out[r[0]] = _totals(dict(zip(SUMS, r[1:-1], strict=True))) | {"last_call_at": r[-1]}
    return out


def exchange_totals(cur, session_id: str) -> dict[str, dict]:
    """The plain sums of each exchange's calls in a regular session, by exchange id (summed by the database)."""
    if cur.execute("SELECT 1 FROM exchanges WHERE session_id = ? LIMIT 1", (session_id,)).fetchone() is None:
        return {}
    rows = cur.execute(
        "SELECT exchange_id, COUNT(*), SUM(CASE WHEN status = 'error' THEN 1 ELSE 0 END),"
        f" {', '.join(f'SUM(COALESCE({t}, 0))' for t in TOKENS)}, SUM(cost_usd),"
        " SUM(CASE WHEN cost_usd IS NULL AND input_tokens IS NOT NULL THEN 1 ELSE 0 END)"
        " FROM calls WHERE session_id = ? AND exchange_id IS NOT NULL GROUP BY exchange_id", (session_id,))
    names = ("calls", "errors", *TOKENS, "cost_usd", "calls_without_cost")
    return {r[0]: _totals(dict(zip(names, r[1:], strict=True))) for r in rows}


def regular_sessions(cur, session_ids: list[str]) -> set[str]:
    """Which of these sessions are regular: their totals are the plain sums of their calls."""
    return {r[0] for chunk in _chunks(session_ids) for r in cur.execute(
        f"SELECT s.id FROM sessions s WHERE s.id IN ({', '.join('?' * len(chunk))}) AND NOT {IRREGULAR}", chunk)}


def _chunks(items: list[str], size: int = 500) -> list[list[str]]:
    return [items[start:start + size] for start in range(0, len(items), size)]


def _totals(sums: dict) -> dict:
    out: dict[str, Any] = {k: int(sums[k] or 0) for k in ("calls", "errors", *TOKENS, "calls_without_cost")}
    out["cost_usd"] = None if sums["cost_usd"] is None else round(sums["cost_usd"], 12)
    return out
