"""One number per question: every reader counts the same tokens and money for the same data."""
from __future__ import annotations

import itertools

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reasonlog
from reasonlog import pricing, query
from reasonlog.io.exchange_jsonl import exchange_records

# claude-haiku-4-5 in the bundled table (Anthropic's list prices), $ per token.
HAIKU = {"input": 1e-06, "output": 5e-06, "cache_read": 1e-07, "cache_write_5m": 1.25e-06}


def by_hand(inp: int, out: int, read: int = 0, write: int = 0) -> float:
    return inp * HAIKU["input"] + out * HAIKU["output"] + read * HAIKU["cache_read"] + write * HAIKU["cache_write_5m"]


def call(session, inp: int, out: int, read: int = 0, write: int = 0, model: str = "claude-haiku-4-5") -> str:
    usage = reasonlog.Usage(input_tokens=inp, output_tokens=out, cache_read_tokens=read, cache_write_tokens=write)
    return session.call(request={"model": model, "messages": [{"role": "user", "content": "hi"}]},
                        response={"role": "assistant", "content": "ok"}, model=model, provider="anthropic",
                        usage=usage)


def readers(store, run: str) -> dict:
    """Cost and tokens of one run, as each reader tells them."""
    sessions = store.list_sessions(reasonlog.SessionFilter(run=run))
    flt = reasonlog.SessionFilter(run=run)
    out = {"sessions": _sum(sessions, "cost_usd", "input_tokens", "output_tokens")}
    full = [store.get_session(s["id"]) for s in sessions]
    out["get_session"] = _sum(full, "cost_usd", "input_tokens", "output_tokens")
    for by in query.STAT_KEYS:
        out[f"stats --by {by}"] = _sum(query.stats(store, by, flt), "cost_usd", "input_tokens", "output_tokens")
    ends = [list(exchange_records(s))[-1] for s in full]
    out["exchange-jsonl"] = (_money(e["total_cost_usd"] for e in ends), sum(e["total_tokens"]["input"] for e in ends),
                             sum(e["total_tokens"]["output"] for e in ends))
    return out


def _sum(rows, cost, inp, out) -> tuple:
    return _money(r[cost] for r in rows), sum(r[inp] for r in rows), sum(r[out] for r in rows)


def _money(values) -> float | None:
    values = [v for v in values if v is not None]
    return round(sum(values), 9) if values else None


def test_a_reported_exchange_cost_replaces_its_calls_in_every_reader(recorder, store_of):
    with recorder.session(agent="coder", run="r1", model="claude-haiku-4-5") as s:
        with s.exchange("task") as ex:
            call(s, 100, 1)  # the SDK's assistant message says 1 output token; the result says 300
            call(s, 200, 1)
            ex.end("done", stats={"cost_usd": 0.25, "input_tokens": 300, "output_tokens": 300})
        with s.exchange("more"):
            call(s, 1000, 50, read=2000)
    store = store_of()
    second = by_hand(1000, 50, read=2000)  # 0.00125
    expected = (round(0.25 + second, 9), 1300, 350)
    assert readers(store, "r1") == dict.fromkeys(
        ["sessions", "get_session", "stats --by day", "stats --by model", "stats --by agent", "stats --by run",
         "stats --by source",
         "exchange-jsonl"], expected)
    (session,) = store.list_sessions(reasonlog.SessionFilter(run="r1"))
    assert session["call_count"] == 3
    (row,) = query.stats(store, "agent", reasonlog.SessionFilter(run="r1"))
    assert (row["calls"], row["calls_without_cost"]) == (3, 0)


def test_a_subagent_billed_in_its_parents_reported_cost_is_not_added_again(recorder, store_of):
    with recorder.session(agent="lead", run="r2", model="claude-haiku-4-5") as parent:
        with parent.exchange("delegate") as ex:
            spawn = call(parent, 100, 10)
            with recorder.session(agent="helper", run="r2", parent=parent, parent_call=spawn) as child:
                with child.exchange("sub-task"):
                    call(child, 400, 40)  # already inside the parent's reported 0.5
            ex.end("done", stats={"cost_usd": 0.5, "input_tokens": 500, "output_tokens": 50})
    store = store_of()
    assert set(readers(store, "r2").values()) == {(0.5, 500, 50)}
    by_agent = {r["agent"]: (r["calls"], r["cost_usd"]) for r in query.stats(store, "agent",
                                                                             reasonlog.SessionFilter(run="r2"))}
    assert by_agent == {"lead": (1, 0.5), "helper": (1, 0.0)}


def test_without_reported_costs_calls_are_priced_from_the_table(recorder, store_of):
    with recorder.session(agent="a", run="r3", model="claude-haiku-4-5") as s:
        with s.exchange("x"):
            call(s, 1657, 1818, read=622375, write=71658)
        call(s, 10, 10, model="acme-llm-9000")  # unknown: unpriced, never $0
    store = store_of()
    assert set(readers(store, "r3").values()) == {(round(by_hand(1657, 1818, 622375, 71658), 9), 1667, 1828)}
    (row,) = query.stats(store, "run", reasonlog.SessionFilter(run="r3"))
    assert row["calls_without_cost"] == 1


# ------------------------------------------------------------------ property: all readers agree

calls_st = st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 500), st.sampled_from(
    ["claude-haiku-4-5", "gpt-5", "acme-llm-9000"])), min_size=0, max_size=3)
exchange_st = st.fixed_dictionaries({
    "calls": calls_st,
    "reported": st.none() | st.just("duration only") | st.tuples(st.integers(0, 10**6).map(lambda c: c / 10**6),
                                                                 st.integers(0, 9000), st.integers(0, 900)),
    "child": st.none() | calls_st,
})
session_st = st.lists(exchange_st, min_size=1, max_size=3)
RUNS = itertools.count()


@pytest.mark.slow  # twenty recorded runs read by every reader; the named cases above are the quick run's
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sessions=st.lists(session_st, min_size=1, max_size=3))
def test_every_reader_gives_the_same_cost_and_tokens(recorder, store_of, sessions):
    run = f"run-{next(RUNS)}"  # one database for every example: each example is its own run
    for n, exchanges in enumerate(sessions):
        _record(recorder, run, f"agent{n % 2}", exchanges)
    got = readers(store_of(), run)
    assert len(set(got.values())) == 1, orjson.dumps(got).decode()
    assert got["sessions"] == _expected(sessions)


def _record(recorder, run: str, agent: str, exchanges: list[dict]) -> None:
    with recorder.session(agent=agent, run=run, model="claude-haiku-4-5") as s:
        for spec in exchanges:
            with s.exchange("go") as ex:
                ids = [call(s, i, o, model=m) for i, o, m in spec["calls"]]
                if spec["child"] is not None and ids:
                    with recorder.session(agent="sub", run=run, parent=s, parent_call=ids[-1]) as child:
                        with child.exchange("sub"):
                            for i, o, m in spec["child"]:
                                call(child, i, o, model=m)
                if spec["reported"] == "duration only":  # as Claude Code's transcripts state: no figures
                    ex.end("done", stats={"duration_ms": 1200})
                elif spec["reported"] is not None:
                    cost, i, o = spec["reported"]
                    ex.end("done", stats={"cost_usd": cost, "input_tokens": i, "output_tokens": o})


def _expected(sessions) -> tuple:
    """The rule, by hand: a reported exchange counts its figures (its sub-agent's included); else its calls."""
    money, inp, out = [], 0, 0
    for exchanges in sessions:
        for spec in exchanges:
            calls = spec["calls"] + ((spec["child"] or []) if spec["calls"] else [])
            if spec["reported"] not in (None, "duration only"):
                cost, i, o = spec["reported"]
                money.append(cost)
                inp, out = inp + i, out + o
                continue
            for i, o, model in calls:
                inp, out = inp + i, out + o
                price = {"claude-haiku-4-5": (1e-06, 5e-06), "gpt-5": (1.25e-06, 1e-05)}.get(model)
                if price:
                    money.append(i * price[0] + o * price[1])
    return (round(sum(money), 9) if money else None), inp, out


def test_gpt5_price_used_by_hand_is_the_tables():
    p = pricing.load_price_table().get("gpt-5")
    assert (p.input, p.output) == pytest.approx((1.25e-06, 1e-05))
