"""Usage summed ahead: what `/usage` and the statistics read instead of every call's row (issue 36).

A push that changed something ends by summing `mirror_calls` (read through FINAL: the rows as the record now has
them) by day, model, agent, run and source label into `mirror_usage`, in the slot after the one its source's cursor
names, and the cursor's last row names the new slot and version. Readers read the slot and version the cursor
names, so a push under way, or one stopped before its cursor, changes nothing they see; three slots, so a reader
that read the cursor just before a push finished still finds its slot whole (the rows a slot's merges drop are its
older pushes').

Each group's sums are the ones the reader folds from `mirror_calls` (`CALL_SUMS`): statistics read from here or
from the calls are the same numbers, the latency histogram included (bucket -> calls, store/usage_sql.py).
"""
from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any

from ..accounting import TOKENS
from ..store import SessionFilter
from .engine import Engine, literal
from .schema import USAGE_COLUMNS, USAGE_KEYS, USAGE_SUMS

SLOTS = 3
COUNTED = "kind != 'twin'"  # a call counted in another call (store/twins.py) counts nothing here
TIMED = "kind = 'call' AND latency_ms IS NOT NULL"  # as the record's histograms: a twin's call is not timed
CALL_SUMS = {"calls": "countIf(kind = 'call')", "errors": "countIf(kind = 'call' AND ifNull(status, '') = 'error')",
             **{t: f"sumIf({t}, {COUNTED})" for t in TOKENS}, "cost_usd": f"sumIf(cost_usd, {COUNTED})",
             "priced": f"countIf(has_cost = 1 AND {COUNTED})", "without_cost": "sum(without_cost)",
             "latency_ms_sum": f"sumIf(assumeNotNull(latency_ms), {TIMED})", "latency_count": f"countIf({TIMED})"}
CALL_HISTOGRAM = f"sumMapIf([latency_bucket], [toUInt64(1)], {TIMED})"
ROLLUP_SUMS = {name: f"sum({name})" for name in USAGE_SUMS}
ROLLUP_HISTOGRAM = "sumMap(buckets, bucket_calls)"
assert tuple(CALL_SUMS) == USAGE_SUMS


def build(engine: Engine, src: str, slot: int, version: int,
          since: tuple[tuple[int, int], list[dt.date]] | None = None) -> None:
    """Sum the source's calls as the mirror now holds them into `slot` with `version`. `since`: the usage of the
    last finished push (its slot and version) and the days whose calls changed after it: those days summed again,
    every other day's rows copied from that usage (the days of one push's sessions are read, not every call)."""
    db, keys = engine.database, ", ".join(USAGE_KEYS)
    into = f"INSERT INTO {db}.mirror_usage ({', '.join(USAGE_COLUMNS)}) SELECT src, {int(slot)}, {int(version)}"
    only = ""
    if since is not None:
        kept, days = since
        listed = ", ".join(literal(d) for d in days)
        engine.command(f"{into}, {', '.join(USAGE_COLUMNS[3:])} FROM {db}.mirror_usage WHERE src = {literal(src)}"
                       f" AND {slot_of(engine, src, kept)}{f' AND day NOT IN ({listed})' if days else ''}")
        if not days:
            return
        only = f" AND day IN ({listed})"
    sums = ", ".join(f"{expr} AS s_{name}" for name, expr in CALL_SUMS.items())  # not a column's name: no cycle
    summed = (f"SELECT src, {keys}, {sums}, {CALL_HISTOGRAM} AS h FROM {db}.mirror_calls FINAL"
              f" WHERE src = {literal(src)}{only} AND deleted = 0 AND kind != 'gone' GROUP BY src, {keys}")
    engine.command(f"{into}, {keys}, {', '.join('s_' + n for n in USAGE_SUMS)}, tupleElement(h, 1),"
                   f" tupleElement(h, 2) FROM ({summed})")


def next_slot(cursor: dict | None) -> int:
    """The slot a push writes: the one after its source's last finished push's (0 first)."""
    if not cursor or not cursor.get("usage_version"):
        return 0
    return (int(cursor["usage_slot"]) + 1) % SLOTS


def answers(flt: SessionFilter) -> bool:
    """Whether the rollup answers a statistics filter: no filter but whole days (a session filter selects sessions,
    whose rows only `mirror_calls` keeps)."""
    if replace(flt, since=None, until=None, limit=None) != SessionFilter(limit=None):
        return False
    return all(d is None or _is_day(d) for d in (flt.since, flt.until))


def _is_day(text: str) -> bool:
    try:
        return len(text) == 10 and dt.date.fromisoformat(text) is not None
    except ValueError:
        return False


def slot_of(engine: Engine, src: str, where: tuple[int, int] | None) -> str:
    """The condition on the rollup's rows of the slot and version `where`; None: of the usage the source's newest
    cursor row names, read in the same query (a push carries the last finished push's usage in its first cursor
    row, so that is the last finished push's usage even while another runs: what a reader that found the source
    caught up a moment ago reads, without asking the cursor first)."""
    if where is not None:
        return f"slot = {int(where[0])} AND version = {int(where[1])}"
    return (f"(slot, version) IN (SELECT usage_slot, usage_version FROM {engine.database}.mirror_cursors"
            f" WHERE src = {literal(src)} ORDER BY version DESC LIMIT 1)")


def read(engine: Engine, src: str, where: str, key: str, flt: SessionFilter,
         latencies: bool) -> list[tuple[Any, ...]]:
    """The groups of the rollup's rows `where` (`slot_of`), by `key` (an expression over its columns), within the
    filter's days: (key, *USAGE_SUMS[, buckets, calls])."""
    sums = ", ".join(ROLLUP_SUMS.values()) + histogram(ROLLUP_HISTOGRAM, latencies)
    return read_sums(engine, src, where, key, sums, flt)


def read_sums(engine: Engine, src: str, where: str, keys: str, sums: str,
              flt: SessionFilter) -> list[tuple[Any, ...]]:
    """`keys` and `sums` (expressions over the rollup's columns) of its rows `where` (`slot_of`), grouped by the
    keys, within the filter's days. One thread: a few thousand rows cost chdb twice the CPU over its pool."""
    conditions = [f"src = {literal(src)}", where]
    if flt.since:
        conditions.append(f"day >= {literal(dt.date.fromisoformat(flt.since))}")
    if flt.until:
        conditions.append(f"day <= {literal(dt.date.fromisoformat(flt.until))}")
    return engine.query(f"SELECT {keys}, {sums} FROM {engine.database}.mirror_usage"
                        f" WHERE {' AND '.join(conditions)} GROUP BY {keys} SETTINGS max_threads = 1")


def pivot(name: str, names: list[str], tokens: tuple[str, ...]) -> str:
    """The sums of a usage chart's day pivoted in ClickHouse, as the record pivots its own (store/rollups.py
    `by_day`): the tokens of each name of `names` (`name`: its expression) and of every other name, then their
    costs, then how many priced calls each holds (a cost of None where none), then the calls without a cost; a row a
    day reaches Python, not a row a day and name."""
    cases = [f"{name} = {literal(n)}" for n in names]
    cases.append(f"{name} NOT IN ({', '.join(literal(n) for n in names)})" if names else "1")
    summed = " + ".join(tokens)
    return ", ".join([*(f"sumIf({summed}, {c})" for c in cases), *(f"sumIf(cost_usd, {c})" for c in cases),
                      *(f"sumIf(priced, {c})" for c in cases), "sum(without_cost)"])


def histogram(expr: str, latencies: bool) -> str:
    """The bucket of a group's middle call (the lower of the two middle ones when its count is even), and its
    count, from a latency histogram `expr` (buckets, and each one's calls, the buckets in order): the bucket that
    answers the record's median (store/usage_sql.py `median_of`), without the histogram sent to Python."""
    if not latencies:
        return ""
    buckets, calls = f"tupleElement({expr}, 1)", f"tupleElement({expr}, 2)"
    return (f", arrayElement({buckets}, arrayFirstIndex(x -> x >= intDiv(arraySum({calls}) + 1, 2),"
            f" arrayCumSum({calls}))), arraySum({calls})")
