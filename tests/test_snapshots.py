"""The JSON of every /v1 route and of every text export format, pinned (issue 21 item 1).

A change to what a route or an export says shows here as a diff of its snapshot; one meant is written with
SNAPSHOTS_UPDATE=1 and reviewed like code. Ids reasonlog makes itself (time-sortable, so different on
every run) and the recording machine's host and pid are replaced by stable names before comparing.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

import reasonlog
from reasonlog.cli.main import cli
from reasonlog.server.app import create_app
from reasonlog.store import open_store

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("SNAPSHOTS_UPDATE") == "1"  # not REASONLOG_*: the suite clears those
_ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")
T0 = "2025-10-02T09:30:00.000000Z"


def _at(seconds: int) -> str:
    return f"2025-10-02T09:30:{seconds:02d}.000000Z"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    db = tmp_path_factory.mktemp("snap") / "snap.db"
    rec = reasonlog.Recorder(db, writer="sync")
    with rec.session(id="trader-1", agent="gpt-5", run="job-1", model="gpt-5", labels={"date": "2025-10-02"},
                     started_at=T0) as s:
        ex = s.exchange("Decide today's trade", at=_at(1))
        history = [{"role": "user", "content": "Decide today's trade"}]
        ask = [{"type": "tool_use", "id": "toolu_1", "name": "get_price", "input": {"symbol": "NVDA"}}]
        s.call(id="call-1", system="You trade.", messages=list(history), response=ask, stop_reason="tool_use",
               usage=reasonlog.Usage(input_tokens=120, output_tokens=30, cache_read_tokens=1000),
               latency_ms=800.0, started_at=_at(2), provider_message_id="msg_1")
        s.tool_result("toolu_1", "NVDA 180.5", name="get_price", duration_ms=12, at=_at(3))
        history += [{"role": "assistant", "content": ask}, {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "NVDA 180.5"}]}]
        s.call(id="call-2", system="You trade.", messages=list(history), response="Buy 10 NVDA.",
               stop_reason="end_turn", usage=reasonlog.Usage(input_tokens=40, output_tokens=8,
                                                              cache_read_tokens=1150),
               latency_ms=600.0, started_at=_at(4), provider_message_id="msg_2")
        s.outcome("position", {"action": "buy", "symbol": "NVDA", "amount": 10}, call_id="call-2", at=_at(5))
        ex.end("Bought 10 NVDA", at=_at(6))
        s.end(at=_at(7))
    rec.close()
    return db


def _stable(value):
    """The JSON with reasonlog's own ids and the machine's host and pid named by their order of appearance."""
    names: dict[str, str] = {}

    def walk(v):
        if isinstance(v, dict):
            return {k: ("<host>" if k == "host" else "<pid>" if k == "pid" else walk(x)) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, str):
            return _ULID.sub(lambda m: names.setdefault(m.group(), f"<id{len(names) + 1}>"), v)
        return v
    return walk(value)


def _check(name: str, value) -> None:
    path = SNAPSHOTS / f"{name}.json"
    text = json.dumps(_stable(value), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if UPDATE or not path.exists():
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        if not UPDATE:
            pytest.fail(f"{path} did not exist: written now; review it and run again")
    assert text == path.read_text(), f"{name}: the JSON changed (SNAPSHOTS_UPDATE=1 writes it)"


ROUTES = {
    "runs": "/v1/runs",
    "sessions": "/v1/sessions",
    "session": "/v1/sessions/trader-1",
    "call": "/v1/calls/call-2",
    "call_request": "/v1/calls/call-2/request",
    "diff": "/v1/diff?a=call-1&b=call-2",
    "outcomes": "/v1/outcomes",
    "stats_by_model": "/v1/stats?by=model",
    "reasoning": "/reasoning?job_id=job-1&date=2025-10-02&include_full_conversation=true",
    "search_text": "/v1/search?q=nvda&mode=text",
    "search_keywords": "/v1/search?q=what%20did%20it%20buy%20in%20NVDA&mode=keywords",
    "similar": "/v1/sessions/trader-1/similar",
}


@pytest.mark.parametrize("name", ROUTES)
def test_each_route_answers_as_pinned(recorded, name):
    client = TestClient(create_app(lambda: open_store(recorded, read_only=True)))
    answer = client.get(ROUTES[name])
    assert answer.status_code == 200, answer.text
    _check(f"route_{name}", answer.json())


@pytest.mark.parametrize("fmt", ["jsonl", "exchange-jsonl", "otlp"])
def test_each_export_format_writes_as_pinned(recorded, tmp_path, fmt):
    out = tmp_path / "out"
    args = ["--db", str(recorded), "export", *(["trader-1"] if fmt == "exchange-jsonl" else []), "--format", fmt,
            "-o", str(out)]
    assert CliRunner().invoke(cli, args).exit_code == 0
    lines = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    _check(f"export_{fmt}", lines)
