"""Issue 20, "It must stay fast as the database grows": the read paths that were slow for a reason a test can see
(usage totals kept as calls are written, a session's calls paged, a position's `action_type`), on both dialects."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from reasonlog.model import CallRecorded, OutcomeRecorded, SessionStarted, Usage
from reasonlog.server.app import create_app
from reasonlog.store import open_store


def _model_day(sid: str, day: str, payload: dict) -> list:
    return [SessionStarted(session_id=sid, started_at=f"{day}T09:00:00Z", agent="gpt-5", run="job", model="gpt-5",
                           labels={"date": day}),
            CallRecorded(call_id=sid + "-c", session_id=sid, exchange_id=None, started_at=f"{day}T09:01:00Z",
                         request={"model": "gpt-5", "messages": [{"role": "user", "content": "trade"}]},
                         response={"role": "assistant", "content": "bought"}, model="gpt-5",
                         usage=Usage(input_tokens=10, output_tokens=2)),
            OutcomeRecorded(outcome_id=sid + "-o", session_id=sid, at=f"{day}T09:02:00Z", outcome_kind="position",
                            payload=payload)]


def test_a_position_recorded_with_action_type_keeps_it(db):
    store = open_store(db)
    store.write_batch(_model_day("s1", "2025-10-02", {"action_id": 1, "action_type": "sell", "symbol": "NVDA",
                                                      "amount": 3, "price": 190.0}))
    store.write_batch(_model_day("s2", "2025-10-03", {"action_id": 2, "action": "buy", "symbol": "AMD",
                                                      "amount": 1, "price": 150.0}))
    store.close()
    client = TestClient(create_app(lambda: open_store(db, read_only=True), "test"))
    positions = {s["date"]: s["positions"] for s in client.get("/reasoning").json()["sessions"]}
    assert [(p["action_type"], p["symbol"]) for p in positions["2025-10-02"]] == [("sell", "NVDA")]
    assert [(p["action_type"], p["symbol"]) for p in positions["2025-10-03"]] == [("buy", "AMD")]
