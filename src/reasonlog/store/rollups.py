"""Usage by day, model, agent, run and source, kept by the database itself (migration 18).

`usage_rollup` (store/usage.py) keeps each session's sums by day and model; summing it for `/usage` or `stats`
still reads a few rows a session, and the medians read every call's latency. Two tables answer those instead, with
as many rows as the answer has keys, whatever the archive holds:

- `usage_daily`: per UTC day, model, agent, run and source (the session's `source` label, else `recorded`), the
  sums of the `usage_rollup` rows under that key, and `priced`, how many of those rows have a cost;
- `latency_daily`: per the same key and latency bucket (usage_sql.EDGES, 2.2 % wide), how many calls that bill
  themselves (`counted_in` NULL) took a latency in it.

Triggers keep both in the transaction that changes what they sum, on every path: the batch's upsert of
`usage_rollup`, `recount`, a twin's `counted_in`, prune, a session's deletion, an import replacing one. A row
inserted adds itself, a row deleted subtracts itself, a row updated does both; a `source` label inserted or
deleted moves the session's rows from its old key to its new one. (A session's agent and run are never updated:
its start is written once, ON CONFLICT keeping them.) The accounting rule's irregular sessions (store/usage.py) are
counted here by their calls' plain sums, like every other; a reader subtracts their `usage_rollup` rows and adds
their ledger entries, so the rule holds to the cent. Costs are added and subtracted as floats: a figure read here
agrees with the sum of the calls' costs to 1e-9 dollar, not to the last bit.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from .usage_sql import (
    DAILY_SUMS,
    EDGES,
    IRREGULAR_IDS,
    LOWEST,
    PAIR,
    SOURCE,
    SUMS,
    daily_sql,
    histogram_sql,
)

KEY = "day, model, agent, run, source"
# A session's (`s`) agent, run and source, '' for none.
_SESSION_KEY = "COALESCE(s.agent, ''), COALESCE(s.run, ''), {source}"
_BUCKET = "(SELECT b.bucket FROM latency_buckets b WHERE b.lower_ms <= {ms} ORDER BY b.lower_ms DESC LIMIT 1)"
_PRICED = "CASE WHEN {row}.cost_usd IS NULL THEN 0 ELSE 1 END"
_COUNTED = "{row}.latency_ms IS NOT NULL AND {row}.counted_in IS NULL"


def _source(row: str, rows: str | None, where: str) -> str:
    """The FROM and WHERE of a statement over the row `row` (NEW or OLD), or over the FROM item `rows` (named `r`),
    joined with its session `s`."""
    if rows is None:
        return f" FROM sessions s WHERE s.id = {row}.session_id AND {where}"
    return f" FROM {rows} JOIN sessions s ON s.id = r.session_id WHERE {where}"


def _add_sums(sign: str, row: str, where: str, source: str = SOURCE, rows: str | None = None) -> str:
    """Add (`sign` '+') or subtract ('-') the `usage_rollup` row `row` (NEW, OLD, or `r` of the FROM item `rows`)
    under its session's key (with `source` as its source)."""
    values = [f"{sign}COALESCE({row}.{c}, 0)" if c == "cost_usd" else f"{sign}{row}.{c}" for c in SUMS]
    return (f"INSERT INTO usage_daily ({KEY}, {', '.join(DAILY_SUMS)})"
            f" SELECT {row}.day, {row}.model, {_SESSION_KEY.format(source=source)}, {', '.join(values)},"
            f" {sign}{_PRICED.format(row=row)}{_source(row, rows, where)}"
            f" ON CONFLICT ({KEY}) DO UPDATE SET "
            + ", ".join(f"{c} = usage_daily.{c} + excluded.{c}" for c in DAILY_SUMS))


def _add_calls(sign: str, row: str, where: str, source: str = SOURCE, rows: str | None = None) -> str:
    """Add or subtract the call `row` (NEW or OLD; or the calls `r` of the FROM item `rows`) to the latency
    histograms, if it bills itself."""
    counted = f"{_COUNTED.format(row=row)} AND {where}"
    return (f"INSERT INTO latency_daily ({KEY}, bucket, calls)"
            f" SELECT SUBSTR({row}.started_at, 1, 10) AS day, COALESCE({row}.model, '') AS model,"
            f" {_SESSION_KEY.format(source=source)}, {_BUCKET.format(ms=f'{row}.latency_ms')} AS bucket,"
            f" {sign}{'1' if rows is None else 'COUNT(*)'}{_source(row, rows, counted)}"
            f"{'' if rows is None else ' GROUP BY 1, 2, 3, 4, 5, 6'}"
            f" ON CONFLICT ({KEY}, bucket) DO UPDATE SET calls = latency_daily.calls + excluded.calls")


# A session's first `source` label other than the one `row` names (for a label inserted or deleted).
_FIRST_OTHER = ("(SELECT MIN(l.value) FROM session_labels l WHERE l.key = 'source'"
                " AND l.session_id = {row}.session_id AND l.value <> {row}.value)")


def _moves(row: str, old: str, new: str) -> list[str]:
    """Statements moving a session's (`row`.session_id) sums and histograms from source `old` to `new`."""
    rollups = f"(SELECT * FROM usage_rollup u WHERE u.session_id = {row}.session_id) r"
    calls = f"(SELECT * FROM calls c WHERE c.session_id = {row}.session_id) r"
    moved = f"{old} <> {new}"
    return [_add_sums("-", "r", moved, old, rollups), _add_sums("+", "r", moved, new, rollups),
            _add_calls("-", "r", moved, old, calls), _add_calls("+", "r", moved, new, calls)]


def triggers() -> list[tuple[str, str, str, str | None, list[str]]]:
    """(name, event, table, condition, statements) of every trigger that keeps the two tables."""
    others = _FIRST_OTHER.format(row="NEW")
    remaining = _FIRST_OTHER.format(row="OLD").replace(" AND l.value <> OLD.value", "")
    added_old = f"COALESCE({others}, 'recorded')"
    added_new = f"CASE WHEN {others} < NEW.value THEN {others} ELSE NEW.value END"
    gone_new = f"COALESCE({remaining}, 'recorded')"
    gone_old = f"CASE WHEN {remaining} < OLD.value THEN {remaining} ELSE OLD.value END"
    return [
        ("usage_daily_insert", "INSERT", "usage_rollup", None, [_add_sums("+", "NEW", "true")]),
        ("usage_daily_update", "UPDATE", "usage_rollup", None,
         [_add_sums("-", "OLD", "true"), _add_sums("+", "NEW", "true")]),
        ("usage_daily_delete", "DELETE", "usage_rollup", None, [_add_sums("-", "OLD", "true")]),
        ("latency_daily_insert", "INSERT", "calls", _COUNTED.format(row="NEW"),
         [_add_calls("+", "NEW", "true")]),
        ("latency_daily_update", "UPDATE OF latency_ms, counted_in, started_at, model, session_id", "calls", None,
         [_add_calls("-", "OLD", "true"), _add_calls("+", "NEW", "true")]),
        ("latency_daily_delete", "DELETE", "calls", _COUNTED.format(row="OLD"),
         [_add_calls("-", "OLD", "true")]),
        ("usage_daily_source_added", "INSERT", "session_labels", "NEW.key = 'source'",
         _moves("NEW", added_old, added_new)),
        ("usage_daily_source_gone", "DELETE", "session_labels", "OLD.key = 'source'",
         _moves("OLD", gone_old, gone_new)),
    ]


def trigger_sql(dialect: str) -> str:
    """The triggers as migration text, for SQLite or PostgreSQL (a function each)."""
    out = []
    for name, event, table, condition, statements in triggers():
        body = "".join(f"    {s};\n" for s in statements)
        if dialect == "postgresql":
            when = f" WHEN ({condition})" if condition else ""
            out.append(f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $body$\nBEGIN\n{body}"
                       f"    RETURN NULL;\nEND\n$body$;\nCREATE TRIGGER {name} AFTER {event} ON {table} FOR EACH ROW"
                       f"{when} EXECUTE FUNCTION {name}();\n")
        else:
            when = f" WHEN {condition}" if condition else ""
            out.append(f"CREATE TRIGGER {name} AFTER {event} ON {table} FOR EACH ROW{when}\nBEGIN\n{body}END;\n")
    return "".join(out)


_KEY_AND_BUCKET = "1, 2, 3, 4, 5, 6"  # latency_daily's key and bucket, as `_add_calls`'s grouped upsert names them


def calls_added_sql() -> str:
    """Migration 24 (PostgreSQL): `latency_daily_insert` made a statement trigger. It adds the calls one statement
    inserted (a batch's `COPY`, store/postgres.py) in one grouped upsert, where the row trigger ran a PL/pgSQL call and
    an upsert per call (72 us a call: 0.36 s of the 0.48 s the server spent inserting the medium workload's 5,000
    calls). SQLite keeps its row trigger (it has no transition tables)."""
    # In the keys' order: two writers' triggers then lock the rows they both add to in one order (a row trigger took
    # them in the order of each batch's calls, and two batches could wait for each other).
    grouped = _add_calls("+", "r", "true", rows="new_calls r")
    body = grouped.replace(" ON CONFLICT", f" ORDER BY {_KEY_AND_BUCKET} ON CONFLICT", 1)
    return ("DROP TRIGGER latency_daily_insert ON calls;\nDROP FUNCTION latency_daily_insert();\n"
            "CREATE FUNCTION latency_daily_insert() RETURNS trigger LANGUAGE plpgsql AS $body$\nBEGIN\n"
            f"    {body};\n    RETURN NULL;\nEND\n$body$;\n"
            "CREATE TRIGGER latency_daily_insert AFTER INSERT ON calls REFERENCING NEW TABLE AS new_calls"
            " FOR EACH STATEMENT EXECUTE FUNCTION latency_daily_insert();\n")


# ------------------------------------------------------------------ filling


def fill(cur) -> None:
    """Fill the buckets' edges and both tables from what is stored (migration 18; `rebuild`)."""
    cur.execute("DELETE FROM latency_buckets")
    cur.executemany("INSERT INTO latency_buckets (bucket, lower_ms) VALUES (?, ?)",
                    [(LOWEST - 1, -1e308), *((LOWEST + n, edge) for n, edge in enumerate(EDGES))])
    rebuild(cur)


def rebuild(cur) -> None:
    """Both tables again from `usage_rollup` and the calls (`reasonlog db recount`)."""
    cur.execute("DELETE FROM usage_daily")
    cur.execute("DELETE FROM latency_daily")
    priced = "SUM(CASE WHEN u.cost_usd IS NULL THEN 0 ELSE 1 END)"
    cur.execute(f"INSERT INTO usage_daily ({KEY}, {', '.join(DAILY_SUMS)})"
                f" SELECT u.day, u.model, COALESCE(s.agent, ''), COALESCE(s.run, ''), {SOURCE},"
                f" {', '.join(f'SUM(COALESCE(u.{c}, 0))' for c in SUMS)}, {priced}"
                f" FROM usage_rollup u JOIN sessions s ON s.id = u.session_id"
                f" GROUP BY u.day, u.model, COALESCE(s.agent, ''), COALESCE(s.run, ''), {SOURCE}")
    bucket = _BUCKET.format(ms="c.latency_ms")
    cur.execute(f"INSERT INTO latency_daily ({KEY}, bucket, calls)"
                f" SELECT SUBSTR(c.started_at, 1, 10), COALESCE(c.model, ''), COALESCE(s.agent, ''),"
                f" COALESCE(s.run, ''), {SOURCE}, {bucket}, COUNT(*)"
                f" FROM calls c JOIN sessions s ON s.id = c.session_id WHERE {_COUNTED.format(row='c')}"
                f" GROUP BY SUBSTR(c.started_at, 1, 10), COALESCE(c.model, ''), COALESCE(s.agent, ''),"
                f" COALESCE(s.run, ''), {SOURCE}, {bucket}")


# ------------------------------------------------------------------ reading


def answers(flt) -> bool:
    """Whether the kept rows answer a statistics filter: whole days, a run, an agent and the `source` label select
    keys; anything else (a model a session used, a status, a text) selects sessions, which usage.py answers."""
    plain = (flt.model, flt.status, flt.parent, flt.after, flt.text) == (None,) * 5 and not flt.scores \
        and not flt.has_note and set(flt.labels) <= {"source"}
    named = all(v is None or v != "" for v in (flt.run, flt.agent, flt.labels.get("source")))
    return plain and named and all(d is None or len(d) == 10 for d in (flt.since, flt.until))


def conditions(flt) -> tuple[list[str], list]:
    """The filter as conditions on the kept rows (alias `d`)."""
    where, args = [], []
    for column, value in (("run", flt.run), ("agent", flt.agent), ("source", flt.labels.get("source"))):
        if value is not None:
            where.append(f"d.{column} = ?")
            args.append(value)
    if flt.since:
        where.append("d.day >= ?")
        args.append(flt.since)
    if flt.until:
        where.append("d.day <= ?")
        args.append(flt.until)
    return where, args


def kept_groups(cur, key_sql: str, flt, histograms: bool) -> tuple[dict[Any, tuple], dict[Any, dict[int, int]]]:
    """The kept sums (DAILY_SUMS, in order) and, with `histograms`, latency histograms, grouped by `key_sql`."""
    where, args = conditions(flt)
    sums = {r[0]: r[1:] for r in cur.execute(daily_sql(key_sql, where), args)}
    out: dict[Any, dict[int, int]] = {}
    if histograms:
        for key, bucket, calls in cur.execute(histogram_sql(key_sql, where), args).fetchall():
            out.setdefault(key, {})[bucket] = int(calls)
    return sums, out


CHART_TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")  # what the chart stacks
# A day of the usage chart: (day, tokens of each name asked and then of every other name, their costs (None: no
# priced call under it that day), calls without a cost that day).
DayUsage = tuple[str, tuple[int, ...], tuple[float | None, ...], int]


# A point of the usage chart before the pivot: (day, name, tokens, cost or None, calls without a cost).
DayPoint = tuple[str, str, float, float | None, int]


def point_of(key: Any, totals: dict) -> DayPoint:
    """A point of the usage chart from a `day+model` (or `day+agent`) group's totals."""
    day, _, name = str(key).partition(PAIR)
    return day, name, sum(totals[c] or 0 for c in CHART_TOKENS), totals["cost_usd"], totals["calls_without_cost"]


def pivoted(points: Iterable[DayPoint], names: list[str]) -> list[DayUsage]:
    """The days of `points` as `by_day` gives them: each name of `names` a column, every other name the last."""
    column = {name: n for n, name in enumerate(names)}
    days: dict[str, tuple[list[int], list[float | None], list[int]]] = {}
    for day, name, tokens, cost, without in points:
        sums, costs, unpriced = days.setdefault(day, ([0] * (len(names) + 1), [None] * (len(names) + 1), [0]))
        k = column.get(name, len(names))
        sums[k] += int(tokens)
        if cost is not None:
            costs[k] = round((costs[k] or 0.0) + cost, 12)
        unpriced[0] += without
    return [(day, tuple(sums), tuple(costs), unpriced[0]) for day, (sums, costs, unpriced) in sorted(days.items())]


def by_day(cur, split: str, flt, names: list[str]) -> list[DayUsage]:
    """The usage chart's days from the kept rows alone, by `split` (model or agent, '' for none): each name of
    `names` a column, every other name summed in a last one, a row a UTC day with calls, in order of day. The pivot
    is SQL's: a row a day (500 for 500 days), not a row a day and name (10,000 for 20 models), reaches Python.
    The caller checks that no irregular session is under the filter."""
    where, args = conditions(flt)
    tokens = "(" + " + ".join(f"d.{c}" for c in CHART_TOKENS) + ")"
    cost = "CASE WHEN d.priced <> 0 THEN d.cost_usd END"  # a key no price covers adds no cost, not a zero
    cases = [f"d.{split} = ?" for _ in names] + [f"d.{split} NOT IN ({', '.join('?' * len(names))})" if names
                                                 else "1 = 1"]
    columns = [f"CAST(SUM(CASE WHEN {case} THEN {tokens} ELSE 0 END) AS BIGINT), SUM(CASE WHEN {case} THEN {cost} END)"
               for case in cases]
    sql = (f"SELECT d.day, {', '.join(columns)}, CAST(SUM(d.calls_without_cost) AS BIGINT) FROM usage_daily d"
           f"{' WHERE ' + ' AND '.join(where) if where else ''} GROUP BY d.day HAVING SUM(d.calls) <> 0"
           f" ORDER BY d.day")
    case_args = [x for name in names for x in (name, name)] + [*names, *names]
    return [(row[0], tuple(int(v) for v in row[1:-1:2]),
             tuple(None if v is None else round(0.0 + v, 12) for v in row[2:-1:2]), int(row[-1]))
            for row in cur.execute(sql, [*case_args, *args])]


def irregular_sums(cur, key_sql: str, flt, ids: list[str]) -> dict[Any, tuple]:
    """The `usage_rollup` sums of these (irregular) sessions grouped by `key_sql` (over `d`: the rollup's row
    with its session's key), as `kept_groups` counts them, for a reader to take out."""
    where, args = conditions(flt)
    rows = (f"(SELECT u.*, COALESCE(s.agent, '') AS agent, COALESCE(s.run, '') AS run, {SOURCE} AS source,"
            f" CASE WHEN u.cost_usd IS NULL THEN 0 ELSE 1 END AS priced FROM usage_rollup u"
            f" JOIN sessions s ON s.id = u.session_id WHERE u.session_id IN ({', '.join('?' * len(ids))})) d")
    sql = daily_sql(key_sql, where).replace("FROM usage_daily d", f"FROM {rows}")
    return {r[0]: tuple(v or 0 for v in r[1:]) for r in cur.execute(sql, [*ids, *args])}


_INTS = [(n, c) for n, c in enumerate(DAILY_SUMS) if c not in ("cost_usd", "latency_ms_sum", "priced")]
_AT_COST, _AT_LATENCY, _AT_PRICED = (DAILY_SUMS.index(c) for c in ("cost_usd", "latency_ms_sum", "priced"))


def regular(kept: dict[Any, tuple], taken: dict[Any, tuple]) -> dict[Any, dict]:
    """The kept sums less the irregular sessions' (`taken`), as `usage.merge` gives them with no ledger entry: cost
    None where no priced row is left; a key with no call left is left out."""
    out = {}
    for key, row in kept.items():
        less = taken.get(key)
        if less is not None:
            row = tuple(a - b for a, b in zip(row, less, strict=True))
        if row[0]:
            totals: dict[str, Any] = {c: int(row[n]) for n, c in _INTS}
            totals["cost_usd"] = round(0.0 + row[_AT_COST], 12) if row[_AT_PRICED] else None
            totals["latency_ms_sum"] = 0 + (row[_AT_LATENCY] or 0.0)
            out[key] = totals
    return out


def irregular_ids(cur, flt) -> list[str]:
    """The irregular sessions (store/usage.py) under the filter's run, agent and source."""
    where, args = conditions(replace(flt, since=None, until=None))
    keys = f"(SELECT s.id, COALESCE(s.agent, '') AS agent, COALESCE(s.run, '') AS run, {SOURCE} AS source" \
           f" FROM sessions s WHERE s.id IN {IRREGULAR_IDS}) d"
    sql = f"SELECT d.id FROM {keys}{' WHERE ' + ' AND '.join(where) if where else ''}"
    return [r[0] for r in cur.execute(sql, args)]

