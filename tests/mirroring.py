"""What the mirror tests share: a fresh mirror on each real ClickHouse engine, generated archives, and the
comparison of every mirrored answer with the record's."""
from __future__ import annotations

import os
import uuid

import pytest
from hypothesis import strategies as st

import reasonlog
from reasonlog import query
from reasonlog.store import SessionFilter

CLICKHOUSE = os.environ.get("REASONLOG_TEST_CLICKHOUSE")
REQUIRED = bool(os.environ.get("REASONLOG_REQUIRE_CLICKHOUSE"))
if REQUIRED and not CLICKHOUSE:  # CI: skipping them would hide a failure
    raise RuntimeError("REASONLOG_REQUIRE_CLICKHOUSE is set but REASONLOG_TEST_CLICKHOUSE is not")
NO_SERVER = ("no ClickHouse server: set REASONLOG_TEST_CLICKHOUSE=clickhouse://127.0.0.1:PORT/default"
             " (.ci/run starts one with .ci/clickhouse)")
# The ClickHouse server's run of each test is `slow`: the quick run takes chdb (in this process), the whole suite both.
ENGINES = [pytest.param("server", marks=pytest.mark.slow), "chdb"]


def fresh_mirror(kind: str, chdb_folder) -> str:
    """The TARGET of a new, empty mirror database on the engine `kind`; skipped (a failure in CI) without it."""
    name = "t_" + uuid.uuid4().hex[:16]
    if kind == "server":
        if not CLICKHOUSE:
            pytest.skip(NO_SERVER)
        return f"{CLICKHOUSE.rsplit('/', 1)[0]}/{name}"
    try:
        import chdb  # noqa: F401
    except ImportError:
        if REQUIRED:
            raise
        pytest.skip("chdb is not installed (pip install 'reasonlog[mirror]')")
    return f"chdb://{chdb_folder}?database={name}"


_CHDB_FOLDER: list = []


def chdb_folder_of(tmp_path_factory):
    """The one chdb folder of this test process: chdb opens one folder per process, so every module's in-process
    chdb tests share it (each in a database of its own)."""
    if not _CHDB_FOLDER:
        _CHDB_FOLDER.append(tmp_path_factory.mktemp("chdb"))
    return _CHDB_FOLDER[0]


@pytest.fixture(params=ENGINES, name="target")
def in_process_target(request, tmp_path_factory):
    """A fresh mirror on each engine, read and written in this process (chdb: the process's one folder)."""
    found = fresh_mirror(request.param, chdb_folder_of(tmp_path_factory))
    yield found
    drop(found)


@pytest.fixture(params=ENGINES, name="target")
def process_target(request, tmp_path_factory):
    """A fresh mirror on each engine for `reasonlog` processes to use (chdb: a folder this process never opens)."""
    found = fresh_mirror(request.param, tmp_path_factory.mktemp("cli-chdb"))
    yield found
    if request.param == "server":
        drop(found)


def drop(target: str) -> None:
    from reasonlog.mirror import engine

    found = engine.connect(target)
    found.command(f"DROP DATABASE IF EXISTS {found.database}")


# ------------------------------------------------------------------ generated archives

MODELS = ["claude-haiku-4-5", "gpt-5", "acme-llm-9000"]
calls_st = st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 500), st.sampled_from(MODELS),
                              st.sampled_from(["ok", "ok", "error"])), min_size=0, max_size=3)
exchange_st = st.fixed_dictionaries({
    "calls": calls_st,
    "reported": st.none() | st.just("duration only") | st.tuples(st.integers(0, 10**6).map(lambda c: c / 10**6),
                                                                 st.integers(0, 9000), st.integers(0, 900)),
    "child": st.none() | calls_st,
})
session_st = st.fixed_dictionaries({"exchanges": st.lists(exchange_st, min_size=1, max_size=3),
                                    "label": st.sampled_from([None, "team=a", "team=b", "source=claude-code"]),
                                    "end": st.sampled_from([None, "completed", "failed"])})
archive_st = st.lists(session_st, min_size=1, max_size=4)


def record(db, sessions: list[dict]) -> None:
    """Write generated sessions: calls of several models (some failing), exchanges whose SDK reported a cost or
    only a duration, sub-agents spawned inside them, labels, and sessions left open or ended."""
    recorder = reasonlog.Recorder(db, writer="sync", strict=True)
    try:
        for n, spec in enumerate(sessions):  # names by position in this call: the same in any order of tests
            labels = dict([spec["label"].split("=")]) if spec["label"] else None
            s = recorder.session(agent=f"agent{n % 2}", run=f"run{n % 3}", model="claude-haiku-4-5", labels=labels)
            for ex_spec in spec["exchanges"]:
                _exchange(recorder, s, ex_spec, f"run{n % 3}")
            if spec["end"]:
                s.end(spec["end"])
    finally:
        recorder.close()


def _exchange(recorder, s, spec: dict, run: str) -> None:
    with s.exchange("go") as ex:
        ids = [_call(s, *c) for c in spec["calls"]]
        if spec["child"] is not None and ids:
            with recorder.session(agent="sub", run=run, parent=s, parent_call=ids[-1]) as child:
                with child.exchange("sub"):
                    for c in spec["child"]:
                        _call(child, *c)
        if spec["reported"] == "duration only":
            ex.end("done", stats={"duration_ms": 1200})
        elif spec["reported"] is not None:
            cost, i, o = spec["reported"]
            ex.end("done", stats={"cost_usd": cost, "input_tokens": i, "output_tokens": o})


def _call(session, inp: int, out: int, model: str, status: str) -> str:
    usage = reasonlog.Usage(input_tokens=inp, output_tokens=out)
    error = {"type": "overloaded", "message": "try later"} if status == "error" else None
    return session.call(request={"model": model, "messages": [{"role": "user", "content": f"hello {inp}"}]},
                        response=None if error else {"role": "assistant", "content": f"reply {out}"}, model=model,
                        provider="anthropic", usage=usage, error=error, latency_ms=float(inp % 97 + out % 13))


# ------------------------------------------------------------------ the comparison

ALL = SessionFilter(limit=None)


def filters(store) -> list[SessionFilter]:
    """Every filter a list or a statistic takes, over what the archive holds."""
    sessions = store.list_sessions(ALL)
    days = sorted({s["started_at"][:10] for s in sessions})
    out = [ALL, SessionFilter(limit=2), SessionFilter(run="run1", limit=None),
           SessionFilter(agent="agent0", limit=None),
           SessionFilter(model="gpt-5", limit=None), SessionFilter(status="completed", limit=None),
           SessionFilter(labels={"team": "a"}, limit=None), SessionFilter(labels={"source": "claude-code"}, limit=None)]
    if sessions:
        newest = sessions[0]
        out += [SessionFilter(since=days[0], until=days[-1], limit=None),
                SessionFilter(since=newest["started_at"], limit=None),
                SessionFilter(after=(newest["started_at"], newest["id"]), limit=3),
                SessionFilter(parent=newest["id"], limit=None)]
    return out


def answers(reader, flts: list[SessionFilter]) -> dict:
    """What a reader answers: session lists and counts, statistics by every key, and the usage chart's points
    (costs to 1e-9 dollars)."""
    out: dict = {}
    for n, flt in enumerate(flts):
        out[f"list {n}"] = reader.list_sessions(flt)
        out[f"count {n}"] = reader.count_sessions(flt)
        for by in (*query.STAT_KEYS, "day+model", "day+agent"):
            rows = query.stats(reader, by, flt) if "+" not in by else \
                sorted(reader.usage_groups(by, flt, latencies=False).items(), key=lambda kv: str(kv[0]))
            out[f"stats {by} {n}"] = _rounded(rows)
        for split in ("model", "agent"):  # the usage page's chart: two names a column each, the rest in the last
            names = sorted(str(k) for k in reader.usage_groups(split, flt, latencies=False) if k is not None)[:2]
            out[f"series {split} {n}"] = _rounded(reader.usage_series(split, flt, names))
    return out


def _rounded(value):
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, dict):
        # `entries` and `latencies` are how the record's groups carry their parts, not what a route shows
        return {k: _rounded(v) for k, v in value.items() if k not in ("latencies", "entries")}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def assert_same(store, mirror) -> None:
    """The mirror answers every list, count and statistic exactly as the record does."""
    flts = filters(store)
    want, got = answers(store, flts), answers(mirror, flts)
    wrong = [k for k in want if want[k] != got[k]]
    assert wrong == [], {k: (want[k], got[k]) for k in wrong[:3]}
