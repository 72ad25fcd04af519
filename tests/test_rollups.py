"""Usage kept by day, model, agent, run and source (migration 18, store/rollups.py) says what the calls say.

`/usage`, `/v1/stats`, `reasonlog stats` and the dashboard's charts read the kept rows when the filter is whole days,
a run, an agent or a source; a filter by an instant is answered from every call's ledger entry (the accounting rule
applied to the calls themselves). Over generated sessions (models, agents, runs, sources, days, errors, costs the SDK
reported, sub-agents, twins recorded by two paths, deletions) both answers are equal on SQLite and PostgreSQL: calls,
errors, tokens, calls without a cost and the median exactly, costs and the mean latency to 1e-9.
"""
from __future__ import annotations

import math
import statistics
from itertools import count

import pytest
from conftest import fresh_database
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reasonlog
from reasonlog import query
from reasonlog.model import format_instant
from reasonlog.store import SessionFilter
from reasonlog.store.usage_sql import ANY_REPORTING, IRREGULAR_IDS, bucket_of, bucket_value

MODELS, AGENTS, RUNS, SOURCES = ("claude-haiku-4-5", "gpt-5", None), ("lead", "helper", None), ("r1", "r2"), \
    (None, "claude-code", "codex")
DAYS = ("2025-03-01", "2025-03-02", "2025-03-04")
ids = count()

calls_of = st.lists(st.tuples(
    st.sampled_from(MODELS), st.sampled_from(DAYS), st.integers(0, 5000), st.integers(0, 900),
    st.one_of(st.none(), st.floats(0.0, 0.5, allow_nan=False)), st.one_of(st.none(), st.floats(0.0, 9000.0)),
    st.booleans(), st.one_of(st.none(), st.sampled_from(("m-1", "m-2", "m-3")))), min_size=1, max_size=4)
session_of = st.fixed_dictionaries({
    "agent": st.sampled_from(AGENTS), "run": st.sampled_from(RUNS), "source": st.sampled_from(SOURCES),
    "calls": calls_of, "reported": st.one_of(st.none(), st.floats(0.0, 2.0, allow_nan=False)),
    "sub": st.booleans()})


def write(db, sessions: list[dict]) -> list[str]:
    """The sessions through a recorder; returns their ids (and their sub-agents')."""
    recorder, out = reasonlog.Recorder(db), []
    for spec in sessions:
        labels = {"source": spec["source"]} if spec["source"] else None
        s = recorder.session(agent=spec["agent"], run=spec["run"], labels=labels, external_id=f"x-{next(ids)}",
                             on_close="completed")
        out.append(s.id)
        ex = s.exchange("task", at=f"{DAYS[0]}T00:00:00Z") if spec["reported"] is not None else None
        spawn = None
        for model, day, inp, outp, cost, latency, error, message_id in spec["calls"]:
            spawn = s.call(request={"model": model or "x", "messages": [{"role": "user", "content": "hi"}]},
                           response={"role": "assistant", "content": "ok"}, model=model, provider="anthropic",
                           usage=reasonlog.Usage(input_tokens=inp, output_tokens=outp), cost_usd=cost,
                           latency_ms=latency, started_at=f"{day}T{next(ids) % 24:02d}:00:00Z",
                           provider_message_id=message_id, error={"message": "boom"} if error else None)
        if spec["sub"] and spawn is not None:
            child = recorder.session(agent="helper", run=spec["run"], parent=s, parent_call=spawn, on_close="completed")
            child.call(request={"model": "gpt-5", "messages": []}, response={"role": "assistant", "content": "k"},
                       model="gpt-5", provider="openai", usage=reasonlog.Usage(input_tokens=7, output_tokens=3),
                       cost_usd=0.01, latency_ms=120.0, started_at=f"{DAYS[0]}T05:00:00Z")
            out.append(child.id)
            child.end("completed")
        if ex is not None:
            ex.end("done", stats={"cost_usd": spec["reported"], "input_tokens": 11, "output_tokens": 13},
                   at=f"{DAYS[-1]}T23:00:00Z")
        s.end("completed")
    recorder.close()
    return out


def instant(flt: SessionFilter) -> SessionFilter:
    """The same selection by instants, which the calls' ledger answers (the kept rows answer whole days only)."""
    from dataclasses import replace

    return replace(flt, since=format_instant(f"{flt.since or '2000-01-01'}T00:00:00Z"),
                   until=None if flt.until is None else format_instant(f"{flt.until}T23:59:59.999999Z"))


def same(kept: list[dict], fresh: list[dict], by: str) -> None:
    assert [r[by] for r in kept] == [r[by] for r in fresh], (kept, fresh)
    for a, b in zip(kept, fresh, strict=True):
        exact = {k: v for k, v in a.items() if k not in ("cost_usd", "latency_ms_mean")}
        assert exact == {k: v for k, v in b.items() if k not in ("cost_usd", "latency_ms_mean")}, (by, a, b)
        for k in ("cost_usd", "latency_ms_mean"):
            assert (a[k] is None) == (b[k] is None), (k, a, b)
            assert a[k] is None or math.isclose(a[k], b[k], rel_tol=0, abs_tol=1e-9), (k, a, b)


FILTERS = [SessionFilter(limit=None), SessionFilter(run="r1", limit=None), SessionFilter(agent="lead", limit=None),
           SessionFilter(since="2025-03-02", limit=None), SessionFilter(until="2025-03-02", limit=None),
           SessionFilter(labels={"source": "codex"}, limit=None)]


def pivot(pairs: dict, names: list[str]) -> list[tuple]:
    """The chart's days as the pairs' totals (`usage_groups("day+model")`) say them: tokens and cost of each name
    of `names` and of the rest, calls without a cost, a day with calls in order (a cost None where none is known)."""
    days: dict[str, tuple[list, list, list]] = {}
    for key, t in pairs.items():
        day, name = str(key).split("\t")
        tokens, costs, unpriced = days.setdefault(day, ([0] * (len(names) + 1), [None] * (len(names) + 1), [0]))
        k = names.index(name) if name in names else len(names)
        tokens[k] += sum(t[c] for c in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"))
        costs[k] = costs[k] if t["cost_usd"] is None else (costs[k] or 0.0) + t["cost_usd"]
        unpriced[0] += t["calls_without_cost"]
    return [(day, tuple(tokens), tuple(costs), unpriced[0]) for day, (tokens, costs, unpriced) in sorted(days.items())]


def same_series(store, flt: SessionFilter) -> None:
    """The usage chart's days (`usage_series`, pivoted in SQL from the kept rows) are the pairs' totals
    (`usage_groups("day+model")`) pivoted: tokens, calls without a cost and whether a cost is known exactly, the
    cost to 1e-9, with every name a column, one name and the rest, or all in the rest; and the usage page's tables
    by model, agent and source added up from one read (`query.stats_each`) are each table read alone."""
    for split in ("model", "agent"):
        pairs = store.usage_groups(f"day+{split}", flt, latencies=False)
        every = sorted({str(k).split("\t")[1] for k in pairs})
        for names in (every, every[1:2], []):
            days, expected = store.usage_series(split, flt, names), pivot(pairs, names)
            assert [(d, t, [c is None for c in cs], u) for d, t, cs, u in days] == \
                [(d, t, [c is None for c in cs], u) for d, t, cs, u in expected], (flt, split, names, days, expected)
            for (_, _, costs, _), (_, _, wanted, _) in zip(days, expected, strict=True):
                assert all(c is None or math.isclose(c, w, rel_tol=0, abs_tol=1e-9)
                           for c, w in zip(costs, wanted, strict=True)), (costs, wanted)
    for by, rows in query.stats_each(store, ("model", "agent", "source"), flt).items():
        same(rows, query.stats(store, by, flt, latency=False), by)


def check(db) -> None:
    store = reasonlog.open_store(db)
    try:
        for flt in FILTERS:
            same_series(store, flt)
            same_series(store, instant(flt))
            for by in (*query.STAT_KEYS, "day+model", "day+agent"):
                if "+" in by:
                    kept = store.usage_groups(by, flt, latencies=False)
                    fresh = store.usage_groups(by, instant(flt), latencies=False)
                    assert sorted(kept, key=str) == sorted(fresh, key=str), (flt, by, kept, fresh)
                    assert {k: v["calls"] for k, v in kept.items()} == {k: v["calls"] for k, v in fresh.items()}
                    continue
                try:
                    same(query.stats(store, by, flt), query.stats(store, by, instant(flt)), by)
                except AssertionError as exc:
                    raise AssertionError(f"{flt}: {exc}") from None
    finally:
        store.close()


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(batches=st.lists(st.tuples(st.lists(session_of, min_size=1, max_size=4), st.integers(0, 3)), min_size=1,
                        max_size=3))
def test_every_statistic_from_the_kept_rows_equals_the_calls(dialect, tmp_path, batches):
    """Sessions written, some deleted (with their sub-agents, and the copies twins left billed again), in turns;
    after each turn every statistic by every key and filter is what the calls say."""
    folder = tmp_path / str(next(ids))
    folder.mkdir()
    with fresh_database(dialect, folder) as db:
        written: list[str] = []
        for sessions, deleted in batches:
            written += write(db, sessions)
            if deleted:
                store = reasonlog.open_store(db)
                store.delete_sessions(written[:deleted])
                store.close()
                written = written[deleted:]
            check(db)


def test_the_median_is_the_middle_calls_bucket(db):
    """An odd count answers the middle call's bucket; an even one the lower middle's, where statistics.median
    (before migration 18) averaged the two middle calls."""
    recorder = reasonlog.Recorder(db)
    s = recorder.session(agent="a", run="odd")
    for ms in (100.0, 250.0, 4000.0):
        s.call(request={"model": "m", "messages": []}, model="m", latency_ms=ms, started_at="2025-01-01T00:00:00Z")
    t = recorder.session(agent="b", run="even")
    for ms in (100.0, 250.0, 4000.0, 5000.0):
        t.call(request={"model": "m", "messages": []}, model="m", latency_ms=ms, started_at="2025-01-01T00:00:00Z")
    recorder.close()
    store = reasonlog.open_store(db)
    odd, even = (query.stats(store, "run", SessionFilter(run=r, limit=None))[0] for r in ("odd", "even"))
    store.close()
    assert odd["latency_ms_p50"] == bucket_value(bucket_of(250.0)) == 247.816
    assert abs(odd["latency_ms_p50"] - statistics.median([100.0, 250.0, 4000.0])) / 250.0 < 0.011
    assert even["latency_ms_p50"] == 247.816  # statistics.median said 2125.0
    assert odd["latency_ms_mean"] == 1450.0


def test_deleting_and_pruning_leave_no_row_behind(db):
    """Every session deleted: the kept rows answer nothing, as the calls do."""
    written = write(db, [{"agent": "lead", "run": "r1", "source": "codex", "reported": 0.5, "sub": True,
                          "calls": [("gpt-5", "2025-03-01", 10, 2, 0.1, 50.0, True, "m-9")]},
                         {"agent": None, "run": "r2", "source": None, "reported": None, "sub": False,
                          "calls": [("gpt-5", "2025-03-02", 10, 2, None, None, False, "m-9")]}])
    store = reasonlog.open_store(db)
    # The imported (codex) call is the live one's twin, billed by it; the sub-agent's call is billed in the
    # reported figures (11 input tokens) of the exchange that spawned it.
    rows = query.stats(store, "day", SessionFilter(limit=None))
    assert [(r["day"], r["calls"], r["input_tokens"]) for r in rows] == [("2025-03-01", 1, 11), ("2025-03-02", 1, 10)]
    assert store.delete_sessions(written) == 3
    assert query.stats(store, "day", SessionFilter(limit=None)) == []
    assert store.usage_groups("day+model", SessionFilter(limit=None), latencies=True) == {}
    store.close()


def test_a_source_label_given_later_moves_the_sessions_usage(db):
    """A session first written with no `source` label (counted as `recorded`), then started again with one: its
    calls and latencies are counted under the new source, as a filter by that label finds them."""
    recorder = reasonlog.Recorder(db)
    s = recorder.session(id="s-later", agent="a", run="r")
    s.call(request={"model": "m", "messages": []}, model="m", latency_ms=250.0, started_at="2025-01-01T00:00:00Z",
           usage=reasonlog.Usage(input_tokens=5, output_tokens=1))
    recorder.close()
    again = reasonlog.Recorder(db)
    again.session(id="s-later", agent="a", run="r", labels={"source": "codex"})
    again.close()
    store = reasonlog.open_store(db)
    rows = query.stats(store, "source", SessionFilter(limit=None))
    assert [(r["source"], r["calls"], r["input_tokens"], r["latency_ms_p50"]) for r in rows] == \
        [("codex", 1, 5, 247.816)]
    assert query.stats(store, "source", SessionFilter(labels={"source": "codex"}, limit=None)) == rows
    store.close()


def test_the_usage_charts_days_are_one_row_a_day_with_a_column_a_name(db):
    """`usage_series`: a row (day, tokens of each name asked then of the rest, their costs, calls without a cost) a
    day, in order; a model no price covers has cost None, never 0."""
    recorder = reasonlog.Recorder(db)
    s = recorder.session(agent="lead", run="r")
    for model, day, cost in (("gpt-5", "2025-03-02", 0.25), ("gpt-5", "2025-03-01", 0.5),
                             ("my-local", "2025-03-01", None), ("gpt-5", "2025-03-01", 0.125),
                             ("o3", "2025-03-02", 0.0625)):
        s.call(request={"model": model, "messages": []}, model=model, provider="openai", cost_usd=cost,
               usage=reasonlog.Usage(input_tokens=100, output_tokens=10, cache_read_tokens=1000),
               started_at=f"{day}T10:00:00Z")
    recorder.close()
    store = reasonlog.open_store(db)
    every = SessionFilter(limit=None)
    assert store.usage_series("model", every, ["gpt-5", "my-local", "o3"]) == [
        ("2025-03-01", (2220, 1110, 0, 0), (0.625, None, None, None), 1),
        ("2025-03-02", (1110, 0, 1110, 0), (0.25, None, 0.0625, None), 0)]
    assert store.usage_series("model", every, ["my-local"]) == [  # the rest: gpt-5 and o3
        ("2025-03-01", (1110, 2220), (None, 0.625), 1), ("2025-03-02", (0, 2220), (None, 0.3125), 0)]
    assert store.usage_series("agent", SessionFilter(since="2025-03-02", limit=None), ["lead"]) == [
        ("2025-03-02", (2220, 0), (0.3125, None), 0)]
    store.close()


def test_which_sessions_are_irregular_is_asked_of_the_exchanges_that_report_a_cost_alone(tmp_path):
    """Migration 22: every statistics read asks which sessions have an exchange reporting a cost (three times a usage
    page). SQLite answers from the index of those exchanges alone, not by reading every exchange's stats (14 ms at
    100,000 exchanges, each time); the index of exchanges with any stats (migration 13) would read them all."""
    import sqlite3

    db = tmp_path / "plan.db"
    reasonlog.open_store(db).close()
    conn = sqlite3.connect(db)
    try:
        plans = [[row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]
                 for sql in (ANY_REPORTING, f"SELECT * FROM {IRREGULAR_IDS} i")]
    finally:
        conn.close()
    assert plans[0] == ["SCAN CONSTANT ROW", "SCALAR SUBQUERY 1", "SCAN exchanges USING INDEX exchanges_reporting"]
    assert [step for step in plans[1] if "exchanges" in step] == ["SCAN exchanges USING INDEX exchanges_reporting"]


def test_a_batch_of_many_calls_stores_each_once_in_order_and_counts_each_once(db):
    """A batch's calls go in INSERTs of several rows (store/rows.py `insert_calls`): 21 calls in one batch (16 + 4 + 1
    to a statement on SQLite) are each stored in their order with their own fields, counted once in the kept usage
    and latency; a call that repeats an id rejects itself alone."""
    collected: list = []

    class Collect:
        def write_batch(self, events, counters=None, *, batch_id=None):
            collected.extend(events)

        def add_counters(self, counters):
            return None

        def close(self):
            return None

    recorder = reasonlog.Recorder(sink=Collect(), writer="sync")
    s = recorder.session(agent="a", run="many")
    for n in range(21):
        s.call(request={"model": "m", "messages": [{"role": "user", "content": f"q{n}"}]}, model="m",
               response={"role": "assistant", "content": f"a{n}"}, latency_ms=100.0 * (n + 1),
               usage=reasonlog.Usage(input_tokens=n, output_tokens=1), started_at="2025-01-01T00:00:00Z",
               id=f"call-{n}" if n != 20 else "call-3")
    recorder.close()
    store = reasonlog.open_store(db)
    store.write_batch(collected)
    calls = store.get_calls(s.id, (0, 50))
    row = query.stats(store, "run", SessionFilter(run="many", limit=None))[0]
    store.close()
    assert [(c["id"], c["latency_ms"], c["input_tokens"]) for c in calls] == \
        [(f"call-{n}", 100.0 * (n + 1), n) for n in range(20)]
    assert (row["calls"], row["input_tokens"], row["latency_ms_mean"]) == (20, sum(range(20)), 1050.0)
    assert row["latency_ms_p50"] == bucket_value(bucket_of(1000.0))
