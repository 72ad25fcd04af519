"""Backfilling history: every recording method takes the instant it happened (issue 8 §6)."""
from __future__ import annotations

import pytest

import reasonlog
from reasonlog.wire.rules import RecordError


def test_every_recording_method_keeps_the_instant_it_is_given(recorder, store_of):
    s = recorder.session(agent="backfill", started_at="2025-10-02T09:00:00Z")
    ex = s.exchange("Decide today's trade", at="2025-10-02T09:00:01Z")
    call = s.call(messages=[{"role": "user", "content": "Decide"}], response="Buy", started_at="2025-10-02T09:00:02Z")
    s.tool_result("t1", "NVDA 180", name="get_price", at="2025-10-02T09:00:03Z")
    s.outcome("trade", {"action": "buy"}, call_id=call, at="2025-10-02T09:00:04Z")
    ex.end("Bought", at="2025-10-02T09:00:05Z")
    s.end(at="2025-10-02T09:00:06Z")
    session = store_of().get_session(s.id)
    assert session["started_at"] == "2025-10-02T09:00:00.000000Z"
    assert [(e["started_at"], e["ended_at"]) for e in session["exchanges"]] == [
        ("2025-10-02T09:00:01.000000Z", "2025-10-02T09:00:05.000000Z")]
    assert session["calls"][0]["started_at"] == "2025-10-02T09:00:02.000000Z"
    assert session["tool_results"][0]["at"] == "2025-10-02T09:00:03.000000Z"
    assert session["outcomes"][0]["at"] == "2025-10-02T09:00:04.000000Z"
    assert session["ended_at"] == "2025-10-02T09:00:06.000000Z"


@pytest.mark.parametrize("where", ["exchange", "exchange end", "session end"])
def test_an_instant_that_is_not_one_is_named(recorder, where):
    s = recorder.session(agent="bad instant")
    with pytest.raises(RecordError, match="at: expected"):
        if where == "exchange":
            s.exchange("q", at="yesterday")
        elif where == "exchange end":
            s.exchange("q").end(at=[2025])
        else:
            s.end(at="soon")


def test_a_bad_instant_in_the_default_mode_is_counted_and_the_agent_goes_on(db_path, store_of):
    rec = reasonlog.Recorder(db_path, writer="sync")
    with rec.session(agent="lenient") as s:
        s.exchange("q", at="yesterday").end("r")
        s.call(messages=[{"role": "user", "content": "q"}], response="r")
    rec.close()
    assert store_of().status()["rejected_records"] == 1
    assert len(store_of().get_session(s.id)["calls"]) == 1
