"""The statistics read from the usage kept as calls are written (store/kept.py): `query.stats`, `/usage`, `stats`.

Every reader of tokens and money follows `reasonlog.accounting`. For most sessions that rule is plain sums
of their calls, and those sums are kept per session, UTC day and model in the transaction that writes the
calls, so `/usage`, `stats` and a list of sessions add up a few rows a session instead of building a Python
entry for every call. The rule's exceptions are *irregular* sessions: one with an exchange whose SDK reported
figures (they replace its calls'), and a sub-agent session (a reporting exchange above it may cover it).
Those are read through the ledger, as before, and merged in. `reasonlog db recount` rebuilds the table.
"""
from __future__ import annotations

from typing import Any

from .. import accounting
from . import reading, rollups
from .kept import TOKENS, _chunks, _totals, can_answer
from .usage_sql import (
    CALL_KEYS,
    DAILY_KEYS,
    GROUP_KEYS,
    IRREGULAR,
    PAIR,
    SUMS,
    bucket_of,
    grouped_sql,
    latencies_sql,
)


# The statistics' SQL, and which sessions are irregular (IRREGULAR, alias `s`), are in store/usage_sql.py, which
# `reasonlog stats --json` reads without importing the store (cli/quick_stats.py).
def grouped(cur, key_sql: str, where: str, args: list, since: str | None, until: str | None) -> dict[Any, dict]:
    """The regular sessions' sums grouped by `key_sql`, for the sessions `where` selects and the days asked."""
    days, day_args = [], []
    if since:
        days.append("u.day >= ?")
        day_args.append(since)
    if until:
        days.append("u.day <= ?")
        day_args.append(until)
    rows = cur.execute(grouped_sql(key_sql, where, days), [*args, *day_args]).fetchall()
    return {r[0]: dict(zip(SUMS, r[1:], strict=True)) for r in rows}


def merge(sums: dict | None, entries: list[dict]) -> dict:
    """Sums from the rollup plus ledger entries, as `accounting.totals` counts them, with the latency sum."""
    if sums and not entries:  # most keys: the plain sums (the same figures as below, without a totals per key)
        t = _totals(sums)
        t["latency_ms_sum"], t["latency_count"] = 0 + (sums["latency_ms_sum"] or 0.0), int(sums["latency_count"] or 0)
        return t
    t = accounting.totals(entries)
    calls = [e for e in entries if e["kind"] == "call" and e.get("latency_ms") is not None]
    latency = (sum(e["latency_ms"] for e in calls), len(calls))
    if sums:
        for k in ("calls", "errors", *TOKENS, "calls_without_cost"):
            t[k] += int(sums[k] or 0)
        if sums["cost_usd"] is not None:
            t["cost_usd"] = round((t["cost_usd"] or 0.0) + sums["cost_usd"], 12)
        latency = (latency[0] + (sums["latency_ms_sum"] or 0.0), latency[1] + int(sums["latency_count"] or 0))
    t["latency_ms_sum"], t["latency_count"] = latency
    return t


def stats_groups(cur, by: str, flt, latencies: bool) -> dict[str | None, dict]:
    """Totals of the calls of the sessions `flt` selects, grouped by day (UTC), model, agent, run or source, as
    `reasonlog.accounting` counts them; with `latencies`, each group's latency histogram too (`histogram`, bucket ->
    calls, usage_sql.EDGES: for a median).

    Whole days, a run, an agent and a source are read from the rows kept by day, model, agent, run and source
    (store/rollups.py); another filter selects sessions, read from their kept sums; an instant, from the ledger.
    """
    if rollups.answers(flt):
        return _daily_groups(cur, by, flt, latencies)
    out = session_groups(cur, by, flt, latencies)
    for totals in out.values():
        if latencies:
            totals["histogram"] = _histogram(totals.pop("latencies"))
    return out


def series_groups(cur, split: str, flt, names: list[str]) -> list[rollups.DayUsage]:
    """What the usage chart draws by day and `split` (model or agent): a row a day with calls, each name of `names`
    ('' for none) a column and every other name the last (see rollups.by_day), as `stats_groups(cur, "day+" +
    split, ...)` totals them.

    Pivoted in SQL from the kept sums when they answer alone; with an irregular session under the filter, or a
    filter the kept rows do not answer, from `stats_groups`' totals by day and name."""
    if rollups.answers(flt) and not rollups.irregular_ids(cur, flt):
        return rollups.by_day(cur, split, flt, names)
    groups = stats_groups(cur, f"day+{split}", flt, False)
    return rollups.pivoted((rollups.point_of(key, t) for key, t in groups.items()), names)


def _daily_groups(cur, by: str, flt, latencies: bool) -> dict[Any, dict]:
    """`stats_groups` from `usage_daily` and `latency_daily`: the irregular sessions' kept sums taken out and their
    ledger entries added (the histograms count their calls already: the rule changes no call's latency)."""

    key_sql = _key_sql(DAILY_KEYS, by)
    kept, histograms = rollups.kept_groups(cur, key_sql, flt, latencies)
    irregular = rollups.irregular_ids(cur, flt)
    taken: dict[Any, tuple] = {}
    entries: list[dict] = []
    for chunk in _chunks(irregular):
        for key, sums in rollups.irregular_sums(cur, key_sql, flt, chunk).items():
            before = taken.get(key, (0,) * len(sums))
            taken[key] = tuple(a + b for a, b in zip(before, sums, strict=True))
        entries += reading.iter_call_rows(cur, flt, only=f"s.id IN ({', '.join('?' * len(chunk))})", only_args=chunk)
    out, groups = rollups.regular(kept, taken), _of_entries(by, entries, False)
    for key, group in groups.items():
        out[key] = merge(out.get(key), group["entries"])
    if latencies:
        for key, totals in out.items():
            totals["histogram"] = histograms.get(key, {})
    return out


def _histogram(latencies: list[float]) -> dict[int, int]:
    out: dict[int, int] = {}
    for value in latencies:
        bucket = bucket_of(value)
        out[bucket] = out.get(bucket, 0) + 1
    return out


def session_groups(cur, by: str, flt, latencies: bool) -> dict[Any, dict]:
    """`stats_groups` from the sessions' kept sums (a filter the daily rows do not answer), with latency lists: the
    only way before migration 18 (benchmarks/bench_server.py --scale measures it beside the kept rows)."""
    from dataclasses import replace


    if not can_answer(flt.since, flt.until):
        return _of_entries(by, list(reading.iter_call_rows(cur, flt)), latencies)
    where, args = reading.filter_sql(replace(flt, since=None, until=None, limit=None, text=None))
    sums = grouped(cur, _key_sql(GROUP_KEYS, by), where, args, flt.since, flt.until)
    irregular = [r[0] for r in cur.execute(f"SELECT s.id FROM sessions s WHERE ({where}) AND {IRREGULAR}", args)]
    entries = [e for chunk in _chunks(irregular)
               for e in reading.iter_call_rows(cur, flt, only=f"s.id IN ({', '.join('?' * len(chunk))})",
                                               only_args=chunk)]
    groups = _of_entries(by, entries, latencies)
    out = {key: merge(sums.get(key), groups.get(key, {}).get("entries", [])) for key in {*sums, *groups}}
    if latencies:
        regular = _latencies(cur, by, where, args, flt)
        for key, totals in out.items():
            totals["latencies"] = regular.get(key, []) + groups.get(key, {}).get("latencies", [])
    return out




def _key_sql(keys: dict[str, str], by: str) -> str:
    """A statistics key as SQL; a pair `day+model` (or more, `model+agent+source`) groups by each, as one text
    `2025-10-02<TAB>gpt-5`, '' for none."""
    if "+" not in by:
        return keys[by]
    parts = [keys[k] if k == "day" else f"COALESCE({keys[k]}, '')" for k in by.split("+")]  # a day is never NULL
    return "(" + f" || '{PAIR}' || ".join(parts) + ")"


def _entry_key(by: str, entry: dict) -> Any:
    if "+" in by:
        return PAIR.join(str(_entry_key(k, entry) or "") for k in by.split("+"))
    return entry["started_at"][:10] if by == "day" else entry[by]


def _of_entries(by: str, entries: list[dict], latencies: bool) -> dict[Any, dict]:
    grouped_entries: dict[Any, list[dict]] = {}
    for e in entries:
        grouped_entries.setdefault(_entry_key(by, e), []).append(e)
    out = {}
    for key, mine in grouped_entries.items():
        out[key] = merge(None, mine) | {"entries": mine}
        if latencies:
            out[key]["latencies"] = [e["latency_ms"] for e in mine if e["kind"] == "call"
                                     and e["latency_ms"] is not None]
    return out


def _latencies(cur, by: str, where: str, args: list, flt) -> dict[Any, list[float]]:
    """The regular sessions' call latencies by group: two columns of the calls, for the medians."""

    span, span_args = reading.span_sql(flt)
    rows = cur.execute(latencies_sql(_key_sql(CALL_KEYS, by), where, span.replace("@", "c.started_at")),
                       [*args, *span_args])
    out: dict[Any, list[float]] = {}
    for k, value in rows:
        out.setdefault(k, []).append(value)
    return out
