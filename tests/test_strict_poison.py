"""Values no JSON can hold: raised at the call site when strict, counted in `rec.stats()` when not (issue 19 item 12).

NaN and the infinities (issue 30 item 6b) are poison too: orjson writes them as `null`, so the store kept a
request that was not the one sent, and `replay` printed it.

The default recorder serialises on its writer thread, so a lone surrogate, bytes inside a message, an
integer past 64 bits, nesting deeper than orjson's limit or a tuple as a key is rejected there. A
strict recorder must raise it where it was given, and both must count it where users look.
"""
from __future__ import annotations

import logging
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reasonlog
from reasonlog.capture.sinks import StoreSink
from reasonlog.wire.rules import RecordError


def _deep(n: int):
    value: object = "x"
    for _ in range(n):
        value = [value]
    return value


POISON = {"lone surrogate": "a\ud800b", "bytes": b"\xff\x00", "integer past 64 bits": 2**70,
          "10,000-deep nesting": _deep(10_000), "tuple key": {("a", 1): 1}, "object": object(),
          "negative past 64 bits": -2**64, "NaN": float("nan"), "infinity": float("inf"),
          "-infinity": float("-inf")}

Q = [{"role": "user", "content": "q"}]
SITES = {
    "message": lambda s, v: s.call(messages=[{"role": "user", "content": v}], response="ok"),
    "system": lambda s, v: s.call(messages=Q, system=v, response="ok"),
    "params": lambda s, v: s.call(messages=Q, params={"x": v}, response="ok"),
    "response": lambda s, v: s.call(messages=Q, response={"role": "assistant", "content": v}),
    "raw": lambda s, v: s.call(messages=Q, response="ok", raw={"r": v}),
    "context_facts": lambda s, v: s.call(messages=Q, response="ok", context_facts={"f": v}),
    "error": lambda s, v: s.call(messages=Q, error={"e": v}),
    "tool result": lambda s, v: s.tool_result("tu1", v),
    "tool input": lambda s, v: s.tool_result("tu1", "ok", input=v),
    "outcome": lambda s, v: s.outcome("trade", v),
    "exchange input": lambda s, v: s.exchange(v).end(),
    "exchange result": lambda s, v: s.exchange("in").end(v),
    "session error": lambda s, v: s.end(status="failed", error={"e": v}),
}


def _record(db_path, site: str, value, strict: bool):
    rec = reasonlog.Recorder(db_path, writer="sync", strict=strict)
    s = rec.session(agent="poison")
    try:
        SITES[site](s, value)
    finally:
        rec.close()
    return rec


@pytest.mark.parametrize("site", SITES)
@pytest.mark.parametrize("poison", POISON)
def test_a_strict_recorder_raises_what_its_store_would_reject_at_the_call_site(db_path, store_of, site, poison):
    with pytest.raises(RecordError) as raised:
        _record(db_path, site, POISON[poison], strict=True)
    assert "cannot be stored as JSON" in str(raised.value)
    assert store_of().status()["rejected_records"] == 0


@pytest.mark.parametrize("site", ["message", "tool result", "outcome", "exchange input", "session error"])
def test_the_writers_rejections_are_counted_in_the_recorders_stats(db_path, store_of, site):
    rec = _record(db_path, site, POISON["lone surrogate"], strict=False)
    assert rec.stats()["rejected"] == store_of().status()["rejected_records"] == 1


class _Gated(StoreSink):
    """The real store behind a gate: the writer's thread waits at it, so the queue fills (a stalled disk)."""

    def __init__(self, db_path):
        super().__init__(lambda: reasonlog.open_store(db_path))
        self.gate = threading.Event()

    def write_batch(self, events, counters=None, *, batch_id=None):
        self.gate.wait(10)
        return super().write_batch(events, counters, batch_id=batch_id)


def test_a_dropped_session_start_drops_its_later_records_quietly_and_counts_them(db_path, store_of, caplog):
    sink = _Gated(db_path)
    rec = reasonlog.Recorder(db_path, sink=sink, on_full="drop", max_queue=5)
    first = rec.session(agent="kept")
    for i in range(20):  # the writer holds one batch at the gate; the queue fills to 5; the rest is dropped
        first.call(messages=[{"role": "user", "content": f"q{i}"}], response="a")
    second = rec.session(agent="start dropped")
    sink.gate.set()
    assert rec.flush(10)
    dropped_before = rec.stats()["dropped"]
    with caplog.at_level(logging.WARNING, logger="reasonlog"):
        for i in range(200):
            second.call(messages=[{"role": "user", "content": f"q{i}"}], response="a")
        second.end()
        first.end()
        rec.close()
    stats = rec.stats()
    assert stats["dropped"] - dropped_before == 201 and stats["rejected"] == 0
    assert caplog.records == []
    status = store_of().status()
    assert (status["rejected_records"], status["dropped_records"]) == (0, stats["dropped"])
    assert [s["agent"] for s in store_of().list_sessions(reasonlog.SessionFilter())] == ["kept"]


# ------------------------------------------------------------------ every poison value, anywhere in a value

_JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text(max_size=8),
                     lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=3),
                     max_leaves=8)
_POISONS = (st.text(max_size=3).map(lambda t: t + "\ud800" + t) | st.binary(min_size=1, max_size=4)
            | st.integers(2**64, 2**80) | st.integers(-2**80, -2**63 - 1) | st.integers(260, 400).map(_deep)
            | st.tuples(st.text(max_size=3), st.integers()).map(lambda k: {k: 1})
            | st.sampled_from([float("nan"), float("inf"), float("-inf")]))


@st.composite
def _poisoned(draw):
    """A JSON value with one poison value somewhere inside it."""
    poison = draw(_POISONS)
    for _ in range(draw(st.integers(0, 3))):
        wrap = draw(st.sampled_from(["list", "dict"]))
        poison = [draw(_JSON), poison] if wrap == "list" else {draw(st.text(max_size=4)): poison}
    return poison


@settings(max_examples=60, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(site=st.sampled_from(sorted(SITES)), value=_poisoned())
@pytest.mark.slow
def test_every_poison_value_is_raised_when_strict_and_counted_when_not(tmp_path_factory, site, value):
    folder = tmp_path_factory.mktemp("poison")
    with pytest.raises(RecordError):
        _record(folder / "strict.db", site, value, strict=True)
    rec = _record(folder / "default.db", site, value, strict=False)
    stored = reasonlog.open_store(folder / "default.db").status()["rejected_records"]
    assert rec.stats()["rejected"] == stored == 1
