"""Issue 25 item 4: a session's timeline: its calls and tool runs as bars on a time axis, sub-agents nested under the
call that spawned them (five deep in Claude Code), waits visible, each bar's model, tokens, cost and duration on hover,
paged by 200 calls so that a 1,000-call session reads a page at a time."""
from __future__ import annotations

import html as html_lib
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import reasonlog
from reasonlog.io.importing import plan, run_import
from reasonlog.model import CallRecorded, SessionStarted, Usage, stable_id
from reasonlog.server.app import create_app
from reasonlog.server.dashboard.timeline import LABEL, PLOT
from reasonlog.store import NotFound, open_store

NESTED = Path(__file__).resolve().parent / "fixtures" / "claude_code" / "nested"
NESTED_ID = "9e8d7c6b-5a49-4382-8170-6f5e4d3c2b1a"
CHAIN = ["f9a0b1c", "d4e5f60", "c3d4e5f", "b2c3d4e", "a1b2c3d"]


def chain_of(spans: dict) -> list[str]:
    """The agent ids down the first sub-agent of each level."""
    out = []
    while spans["children"]:
        spans = spans["children"][0]
        out.append(spans["session"]["id"].split("@")[0])
    return out


def test_the_spans_of_a_session_nest_its_sub_agents_five_deep(db):
    store = open_store(db)
    run_import(store, plan([NESTED]))
    spans = store.get_spans(NESTED_ID, (0, 200))
    assert chain_of(spans) == CHAIN
    assert [(c["idx"], c["tools"], c["stop_reason"]) for c in spans["calls"]] == [(0, ["Task"], "tool_use"),
                                                                                  (1, [], "end_turn")]
    child = spans["children"][0]
    assert child["session"]["parent_call_id"] == spans["calls"][0]["id"]
    assert (spans["total_calls"], child["total_calls"]) == (2, 2)
    assert sorted(spans["calls"][0]) == sorted(["id", "idx", "started_at", "latency_ms", "model", "status",
                                                "stop_reason", "input_tokens", "output_tokens", "cache_read_tokens",
                                                "cache_write_tokens", "cache_write_1h_tokens", "reasoning_tokens",
                                                "cost_usd", "cost_source", "tools"])
    with pytest.raises(NotFound):
        store.get_spans("no-such-session", (0, 200))
    store.close()


def bars_of(page: str) -> list[tuple[str, str, str]]:
    """Each row of the chart: (its classes, its label, the tooltip of its bar)."""
    rows = re.findall(r'<g class="row ([^"]+)"><text[^>]*><title>([^<]*)</title>.*?'
                      r'<rect [^>]*class="span [^"]*"><title>([^<]*)</title>', page)
    return [(cls, html_lib.unescape(label), html_lib.unescape(tip)) for cls, label, tip in rows]


def test_the_timeline_page_shows_each_sub_agent_under_the_call_that_spawned_it(tmp_path):
    db = tmp_path / "t.db"
    store = open_store(db)
    run_import(store, plan([NESTED]))
    store.close()
    page = TestClient(create_app(lambda: open_store(db))).get(f"/sessions/{NESTED_ID}/timeline")
    assert page.status_code == 200
    rows = bars_of(page.text)
    agents = [cls for cls, label, _ in rows if label == "↳ sub-agent general-purpose"]
    assert agents == [f"depth-{n} agent" for n in range(1, 6)]
    assert [label for _, label, _ in rows][:3] == ["#0 claude-opus-4-6 → Task", "↳ sub-agent general-purpose",
                                                   "#0 claude-opus-4-6 → Task"]
    assert rows[0][2] == ("call #0 · claude-opus-4-6 · 10 in · 30 out · 1,000 cache read · 0 cache write · $0.0013"
                          " · duration not recorded · stop tool_use · ran Task")
    assert "5 sub-agents" in page.text
    assert f'href="/sessions/a1b2c3d@{NESTED_ID}/timeline"' in page.text


def test_call_durations_tool_runs_and_waits_are_drawn_to_scale(tmp_path):
    db = tmp_path / "t.db"
    rec = reasonlog.Recorder(db, writer="sync")
    with rec.session(agent="runner", started_at="2026-01-01T10:00:00Z") as s:
        s.call(messages=[{"role": "user", "content": "list"}], model="gpt-5", started_at="2026-01-01T10:00:00Z",
               latency_ms=2000.0, usage={"input_tokens": 10, "output_tokens": 20},
               response={"role": "assistant", "content": [
                   {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]})
        s.tool_result("t1", "a\nb", name="Bash", duration_ms=4000.0, at="2026-01-01T10:00:06Z")
        s.call(messages=[{"role": "user", "content": "list"}], model="gpt-5", started_at="2026-01-01T10:00:08Z",
               latency_ms=2000.0, response={"role": "assistant", "content": "done"})
        s.call(messages=[{"role": "user", "content": "more"}], model="gpt-5", started_at="2026-01-01T10:00:20Z",
               latency_ms=1000.0, response={"role": "assistant", "content": "ok"})
    rec.close()
    page = TestClient(create_app(lambda: open_store(db))).get(f"/sessions/{s.id}/timeline").text
    rows = bars_of(page)
    assert [(cls, label) for cls, label, _ in rows] == [("depth-0 call", "#0 gpt-5 → Bash"),
                                                        ("depth-1 tool", "⚙ Bash"), ("depth-0 call", "#1 gpt-5"),
                                                        ("depth-0 call", "#2 gpt-5")]
    assert rows[0][2].endswith("· 2.0 s · ran Bash") and rows[1][2] == "tool Bash · 4.0 s · ok"
    x = {label: (float(a), float(w)) for label, a, w in re.findall(
        r'<title>([^<]*)</title>[^<]*</text>(?:<rect[^>]*class="after[^"]*">.*?</rect>)?(?:<a [^>]*>)?'
        r'<rect x="([\d.]+)" y="\d+" width="([\d.]+)"', page)}
    scale = PLOT / 21  # the session's 21 s over the plot's width, right of the labels
    assert x == {"#0 gpt-5 → Bash": pytest.approx((LABEL, 2 * scale), abs=0.06),
                 "⚙ Bash": pytest.approx((LABEL + 2 * scale, 4 * scale), abs=0.06),
                 "#1 gpt-5": pytest.approx((LABEL + 8 * scale, 2 * scale), abs=0.06),
                 "#2 gpt-5": pytest.approx((LABEL + 20 * scale, 1 * scale), abs=0.06)}
    afters = re.findall(r'class="after (run|wait)"><title>([^<]*)</title>', page)
    assert afters == [("run", "6.0 s until the next call: the tools ran (Bash)"),
                      ("wait", "10.0 s waiting before the next call (for the user, or the agent&#39;s own code)")]
    assert "model time 5.0 s · tools 6.0 s · waiting 10.0 s" in page


def write_long_session(db, calls: int) -> str:
    sid = "long-session"
    events: list = [SessionStarted(session_id=sid, started_at="2026-01-01T00:00:00Z", agent="long", model="m")]
    for c in range(calls):
        at = f"2026-01-01T{c // 3600:02d}:{c // 60 % 60:02d}:{c % 60:02d}Z"
        events.append(CallRecorded(call_id=stable_id(at, sid, c), session_id=sid, exchange_id=None, started_at=at,
                                   request={"messages": [{"role": "user", "content": f"step {c}"}]},
                                   response={"role": "assistant", "content": f"done {c}"}, model="m",
                                   usage=Usage(input_tokens=1, output_tokens=1), latency_ms=500.0))
    store = open_store(db)
    store.write_batch(events)
    store.close()
    return sid


def test_a_thousand_call_session_is_paged_by_200_calls(tmp_path):
    db = tmp_path / "t.db"
    sid = write_long_session(db, 1000)
    client = TestClient(create_app(lambda: open_store(db)))
    first = client.get(f"/sessions/{sid}/timeline").text
    assert [label for _, label, _ in bars_of(first)] == [f"#{n} m" for n in range(200)]
    assert "Calls 1–200 of 1,000" in first and 'href="?offset=200" class="later"' in first
    last = client.get(f"/sessions/{sid}/timeline", params={"offset": 800}).text
    assert [label for _, label, _ in bars_of(last)] == [f"#{n} m" for n in range(800, 1000)]
    assert "Calls 801–1,000 of 1,000" in last.replace("801–1000", "801–1,000") and "later →" not in last
    assert client.get("/sessions/nope/timeline").status_code == 404


def test_recorded_text_stays_text_on_the_timeline(tmp_path):
    from test_dashboard import assert_inert, record_hostile, tags_of

    db = tmp_path / "t.db"
    hostile = record_hostile(db)
    page = TestClient(create_app(lambda: open_store(db))).get(f"/sessions/{hostile}/timeline").text
    assert_inert(page)
    assert [a["href"] for t, a in tags_of(page) if t == "a" and "/calls/" in a.get("href", "")] != []
    assert "<img src=x onerror=alert(1)>" not in page and "→ &lt;img src=x onerror=alert(1)&gt;" in page
