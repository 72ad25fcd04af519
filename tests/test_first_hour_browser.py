"""Issue 39 in real headless Chromium (Debian's, driven by Playwright) at 1366×900: the session named as its agent
named it, call lines that read like the CLI's, the usage page's tokens and cost over time stacked by model or agent
with empty days folded, a timeline that says where an untimed session's time went, and the dashboard's keys.

With REASONLOG_SCREENSHOTS=<folder> set, the pages are written there (docs/screenshots holds the ones the docs show)."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from browser import CHROMIUM, shot
from conftest import FIXTURES
from test_ingest import Served, free_port

import reasonlog
from reasonlog.demo import run_demo
from reasonlog.io.importing import plan, run_import
from reasonlog.store import SessionFilter, open_store

pytestmark = [pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium (Debian's chromium package)"),
              pytest.mark.xdist_group("first_hour_browser")]  # one worker builds the module's site once
CLAUDE_CODE = "ae4a77f8-aedd-4bc1-888f-c94edc91af04"  # spotter's long session: 217 calls, no durations recorded
# (day, model, agent, tokens in, out): three models over two runs of days, a gap of three days between them
WORK = [("2025-11-03", "gpt-5", "planner", 120_000, 8_000),
        ("2025-11-03", "claude-sonnet-4-5", "coder", 90_000, 12_000),
        ("2025-11-04", "gpt-5", "planner", 60_000, 4_000),
        ("2025-11-04", "claude-sonnet-4-5", "coder", 150_000, 20_000),
        ("2025-11-05", "claude-sonnet-4-5", "coder", 40_000, 3_000),
        ("2025-11-05", "my-local-model", "coder", 30_000, 2_000),
        ("2025-11-09", "my-local-model", "coder", 50_000, 5_000),
        ("2025-11-09", "gpt-5", "reviewer", 20_000, 1_000)]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    folder = tmp_path_factory.mktemp("first-hour")
    db = folder / "t.db"
    run_demo(db, exchanges=3)
    store = open_store(db)
    run_import(store, plan([FIXTURES / "ai-trader-agent-log" / "agent_data",
                            FIXTURES / "claude-code-transcripts" / "spotter"]))
    store.close()
    rec = reasonlog.Recorder(db, writer="sync")
    for day, model, agent, tokens_in, tokens_out in WORK:
        with rec.session(agent=agent, model=model, run="week-45", started_at=f"{day}T09:00:00Z") as s:
            s.call(messages=[{"role": "user", "content": f"work of {day}"}], response="done", model=model,
                   usage=reasonlog.Usage(input_tokens=tokens_in, output_tokens=tokens_out),
                   started_at=f"{day}T09:00:01Z", latency_ms=10733.0, stop_reason="end_turn")
    rec.close()
    (folder / "compact.json").write_text(json.dumps({"summary": "Keep a sliding window of 20 turns"}))
    subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "reason", "save", "--session", "orch-42",
                    "--agent", "developer", "--phase", "approach", "--content-file", "compact.json",
                    "--details-file", "compact.json", "--artifacts", str(folder / "artifacts")], check=True, cwd=folder,
                   timeout=60)
    port = free_port()
    with Served(db, port):
        yield f"http://127.0.0.1:{port}", db


def session_id(db, **labels) -> str:
    store = open_store(db, read_only=True)
    try:
        return store.list_sessions(SessionFilter(limit=None, **labels))[0]["id"]
    finally:
        store.close()


def test_a_session_named_by_its_agent_reads_by_that_name(site, page):
    base, _ = site
    page.goto(f"{base}/sessions/orch-42")
    assert page.locator("h1.session-title").inner_text() == "orch-42 developer"
    assert page.title().startswith("orch-42 · ")
    summary = page.locator("ul.records summary").inner_text()
    assert summary == "compact record · long form in orch-42/session_approach.md"  # not the server's whole path


@pytest.mark.slow
def test_call_lines_read_like_the_cli(site, page):
    base, db = site
    page.goto(f"{base}/sessions/{session_id(db, agent='reviewer')}")
    line = " ".join(page.locator("li.call").first.inner_text().split())
    assert line == "call #0 gpt-5 · in 20,000 · out 1,000 · cache r 0 / w 0 · $0.0350 · 10,733 ms · end_turn" \
                   " · 1 new in context 20,000 of 272,000 tokens (7%)"
    page.goto(f"{base}/sessions/{CLAUDE_CODE}")
    first = " ".join(page.locator("li.call").first.inner_text().split())
    assert re.fullmatch(r"call #0 claude-opus-4-6 · in 3 · out 209 · cache r 17,842 / w 8,165 · \$0\.0652"
                        r" · 1 new in context 26,010 of 1,000,000 tokens \(3%\)", first), first
    page.locator("li.call a.ref").first.click()
    page.wait_for_url("**/calls/**")
    meta = " ".join(page.locator("p.meta").first.inner_text().split())
    assert meta.endswith("· $0.0652 (computed@" + meta.split("(computed@")[1].split(")")[0] + ")"), meta  # no "0 ms ·"


@pytest.mark.slow
def test_usage_draws_tokens_and_cost_by_day_stacked_by_model_with_empty_days_folded(site, page):
    base, _ = site
    page.goto(base + "/usage")
    chart = page.locator("svg.over-time")
    days = chart.locator("g.day-bars").evaluate_all("gs => gs.map(g => g.dataset.day)")
    # The week's days with their gap, the Claude Code transcripts' two days, then the demo's run (today).
    assert days[:-1] == ["2025-11-03", "2025-11-04", "2025-11-05", "2025-11-09", "2026-02-10", "2026-02-12"]
    assert days[-1] > "2026-02-12"
    # Hovering a day's column shows one tooltip with the day's totals and each series' share, largest series first,
    # as a stacked-bar chart does (a title per segment was 4,000-8,000 elements at 500 days and 20 models).
    day = chart.locator('g.day-bars[data-day="2025-11-05"]')
    assert day.locator(":scope > title").text_content() == (
        "2025-11-05: 75,000 tokens · $0.1650\nclaude-sonnet-4-5: 43,000 tokens · $0.1650\n"
        "my-local-model: 32,000 tokens")
    # Its column holds the segments drawn (each series one path): the cost's (below), then the tokens' bottom up.
    drawn = day.locator("rect.hit").evaluate("""hit => {
        const x0 = +hit.getAttribute('x'), x1 = x0 + +hit.getAttribute('width'), out = [];
        for (const p of hit.closest('svg').querySelectorAll('path.seg'))
            for (const m of p.getAttribute('d').matchAll(/M([\\d.]+) ([\\d.]+)/g))
                if (+m[1] >= x0 && +m[1] < x1) out.push([p.getAttribute('class'), +m[2]]);
        return out.sort((a, b) => b[1] - a[1]).map(a => a[0]); }""")
    assert drawn == ["seg s2", "seg s2", "seg s5"]  # claude-sonnet-4-5's cost and tokens, my-local-model's tokens
    assert chart.locator('g.day-bars[data-day="2025-11-09"] text.unknown title').all_text_contents() == [
        "2025-11-09: and 1 call with no price known"]
    assert chart.locator("g.break title").all_text_contents()[:2] == ["3 days with no usage", "92 days with no usage"]
    assert "$0.0000" not in chart.inner_html()
    legend = page.locator("ul.series-legend li").all_inner_texts()
    assert legend == ["claude-haiku-4-5-20251001", "claude-opus-4-6", "claude-sonnet-4-5", "gpt-5",  # most first
                      "claude-sonnet-4-5-20250929", "my-local-model"]  # no model of the trading log: it has no usage
    assert page.locator("#by-day tbody tr").count() == len(days)
    assert page.locator("details.quiet summary").inner_text() == (
        "20 more days with 154 calls that recorded no tokens and no cost (2025-10-02 to 2025-10-29)")
    shot(page, "usage")
    page.select_option("select[name=split]", "agent")
    page.click("form.filters button[type=submit]")
    assert "split=agent" in page.url
    assert page.locator("ul.series-legend li").all_inner_texts()[:2] == ["claude-code", "coder"]


@pytest.mark.slow
def test_an_untimed_timeline_says_where_the_sessions_time_went(site, page):
    base, _ = site
    page.goto(f"{base}/sessions/{CLAUDE_CODE}/timeline")
    assert page.locator(".time-went h2").inner_text() == "Where the 49.3 min went"
    assert page.locator("ul.shares li").all_inner_texts() == [
        "the model and tools 31.8 min (64%)", "waiting for the user or the agent's code 17.5 min (36%)"]
    thens = page.locator("svg.timeline-chart text.then").all_text_contents()
    assert thens[:3] == ["tools 7.4 s", "tools 5.6 s", "tools 7.6 s"]
    assert page.locator("svg.timeline-chart g.break title").all_text_contents() == [
        "17.5 min waiting, drawn as 2.0 min"]
    # Each gap a call was followed by is said in words beside its row, however thin its bar.
    assert len(thens) == page.locator("svg.timeline-chart rect.after").count() == 201
    shot(page, "timeline-long")


@pytest.mark.slow
def test_the_keys_move_through_sessions_and_calls_and_are_shown(site, page):
    base, _ = site
    page.goto(base + "/?run=week-45")
    assert page.locator("footer.keys summary").inner_text() == (
        "Keys: j k next / previous · [ ] session · / search · ? all keys")
    hrefs = page.locator("table.sessions tbody td.title a").evaluate_all("as => as.map(a => a.getAttribute('href'))")
    assert len(hrefs) == 8
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("k")
    page.keyboard.press("j")
    assert page.locator("table.sessions tr.current td.title a").get_attribute("href") == hrefs[1]
    page.keyboard.press("Enter")
    page.wait_for_url(base + hrefs[1])
    page.keyboard.press("j")
    assert page.locator("li.call.current a.ref").inner_text() == "call #0"
    page.keyboard.press("]")
    page.wait_for_url(base + hrefs[2])
    page.keyboard.press("[")
    page.wait_for_url(base + hrefs[1])
    page.keyboard.press("?")
    assert page.locator("#keys-help dl").is_visible()
    page.keyboard.press("/")
    page.wait_for_url(base + "/#search")
    assert page.evaluate("document.activeElement.name") == "q"
    page.keyboard.type("GOOGL")
    page.keyboard.press("Enter")
    page.wait_for_url("**q=GOOGL**")
    assert page.locator("mark").first.inner_text() == "GOOGL"
