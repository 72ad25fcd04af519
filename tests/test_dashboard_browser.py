"""The dashboard in real headless Chromium (Debian's, driven by Playwright): what a person clicks through.

Skips when /usr/bin/chromium is absent; `.ci/run` installs it. With REASONLOG_SCREENSHOTS=<folder> set, a
screenshot of each page is written there (the README shows the ones in docs/screenshots)."""
from __future__ import annotations

import subprocess
import sys

import pytest
from browser import CHROMIUM, shot
from conftest import FIXTURES
from test_dashboard import record_hostile
from test_ingest import Served, free_port

from reasonlog.demo import run_demo
from reasonlog.io.importing import plan, run_import
from reasonlog.store import SessionFilter, open_store

pytestmark = [pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium (Debian's chromium package)"),
              pytest.mark.xdist_group("dashboard_browser")]  # one worker builds the module's site once


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    db = tmp_path_factory.mktemp("browser") / "t.db"
    run_demo(db, exchanges=3)
    store = open_store(db)
    run_import(store, plan([FIXTURES / "ai-trader-agent-log" / "agent_data",
                            FIXTURES / "claude-code-transcripts" / "spotter"]))
    store.close()
    hostile = record_hostile(db)
    record_loops(db)
    port = free_port()
    with Served(db, port):
        yield f"http://127.0.0.1:{port}", db, hostile


def record_loops(db) -> None:
    """Issue 17's two reproductions: a loop that sends `continue` twice, and one that sends its replies back in
    other forms (the dump with `citations: null`, the text alone)."""
    import reasonlog

    rec = reasonlog.Recorder(db, writer="sync")
    with rec.session(agent="repeater") as s:
        h = [{"role": "user", "content": "continue"}]
        s.call(messages=list(h), response={"role": "assistant", "content": "ok 1"})
        h += [{"role": "assistant", "content": "ok 1"}, {"role": "user", "content": "continue"}]
        s.call(messages=list(h), response={"role": "assistant", "content": "ok 2"})
    with rec.session(agent="resender") as s:
        reply = {"role": "assistant", "content": [{"type": "text", "text": "the answer"}]}
        h = [{"role": "user", "content": "first"}]
        s.call(messages=list(h), response=reply)
        h += [{"role": "assistant", "content": [{"type": "text", "text": "the answer", "citations": None}]},
              {"role": "user", "content": "second"}]
        s.call(messages=list(h), response=reply)
        h += [{"role": "assistant", "content": "the answer"}, {"role": "user", "content": "third"}]
        s.call(messages=list(h), response=reply)
    rec.close()


def test_list_filter_search_open_a_session_and_its_views(site, page):
    base, db, _ = site
    page.goto(base + "/")
    shot(page, "sessions")
    assert page.locator("table.sessions tbody tr").count() == 50
    page.fill("input[name=model]", "gpt-5")
    page.select_option("select[name=source]", "trading-log")
    page.click("form.filters button[type=submit]")
    assert "model=gpt-5" in page.url and "source=trading-log" in page.url
    assert page.locator("table.sessions tbody tr").count() == 20
    page.fill("input[name=q]", "GOOGL")
    page.press("input[name=q]", "Enter")
    assert page.locator("mark").first.inner_text() == "GOOGL"
    shot(page, "search")
    page.locator("table.sessions tbody a").first.click()
    page.wait_for_url("**/sessions/**")
    assert page.locator("li.outcome").count() >= 1
    page.click("nav.views >> text=Summaries")
    assert page.locator('nav.views a[aria-current="page"]').inner_text() == "Summaries"
    page.click("nav.views >> text=Full conversation")
    shot(page, "session")


@pytest.mark.slow
def test_open_a_tool_call_then_a_calls_context_diff(site, page):
    base, db, _ = site
    store = open_store(db, read_only=True)
    session = next(s for s in store.list_sessions(SessionFilter(labels={"source": "claude-code"}, limit=None))
                   if s["call_count"] >= 3)
    page.goto(f"{base}/sessions/{session['id']}")
    tool = page.locator("details.tool").first
    assert tool.get_attribute("open") is None
    tool.locator("summary").click()
    assert tool.get_attribute("open") == ""
    assert tool.locator(".pair h4").first.inner_text() == "input"
    shot(page, "tool-call")
    page.locator("li.call a.ref").nth(2).click()
    page.wait_for_url("**/calls/**")
    assert page.locator("#since-previous h2").inner_text() == "What changed since the previous call"
    page.select_option("select[name=against]", index=0)
    page.click("form.against button")
    assert page.locator("#against").is_visible()
    shot(page, "call")


@pytest.mark.slow
def test_usage_page_with_its_charts_and_numbers(site, page):
    base, _, _ = site
    page.goto(base + "/usage")
    assert page.locator("svg.chart").count() == 7  # by day, tokens and cost in one chart (issue 39)
    assert page.locator("#by-model table tbody tr").count() >= 2  # docs/screenshots/usage.png: test_first_hour_browser


@pytest.mark.slow
def test_usage_chart_labels_are_drawn_whole_inside_their_chart(site, page):
    """Issue 25: a long model name was cut at both ends (`aude-haiku-4-5-2025100`)."""
    base, _, _ = site
    page.goto(base + "/usage")
    labels = page.locator("svg.chart text.label").evaluate_all(
        "els => els.map(e => [e.textContent, e.getBBox().x, e.closest('svg').viewBox.baseVal.width])")
    names = [name for name, _, _ in labels]
    assert "claude-haiku-4-5-20251001" in names  # the model the issue saw clipped, whole
    assert [(n, x) for n, x, _ in labels if x < 0] == []  # no label starts left of its chart
    costs = page.locator("#by-day svg.chart").locator("text").all_text_contents()
    # The AI-Trader days (no tokens, no price) are folded into one line under the table (issue 39), never a zero.
    assert "$0.0000" not in costs and costs.count("—") == 0
    folded = page.locator("#by-day details.quiet summary").inner_text()
    # The AI-Trader's 20 days and 154 calls; and today's 11 calls of the loops, unless the demo's calls (which have
    # usage) fell on the same UTC day.
    assert folded.split(" that ")[0] in ("20 more days with 154 calls", "21 more days with 165 calls"), folded


@pytest.mark.slow
def test_nothing_recorded_runs_on_the_dashboard_or_in_the_exported_file(site, page, tmp_path):
    base, db, hostile = site
    page.goto(f"{base}/sessions/{hostile}")
    page.locator("details").evaluate_all("els => els.forEach(e => e.open = true)")  # show everything
    page.wait_for_timeout(300)
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.dialogs == []
    assert page.get_by_text("<script>window.__xss = 1</script>").count() >= 1  # shown as text
    shot(page, "hostile")
    out = tmp_path / "s.html"
    subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "export", "--format", "html", hostile,
                    "-o", str(out)], check=True, timeout=60)
    page.goto(out.as_uri())
    page.locator("details").evaluate_all("els => els.forEach(e => e.open = true)")
    page.wait_for_timeout(300)
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.dialogs == []
    assert page.locator("li.message").count() == 12


@pytest.mark.slow
def test_the_exported_session_opens_as_a_file_and_reads_like_the_page(site, page, tmp_path):
    base, db, _ = site
    store = open_store(db, read_only=True)
    (day,) = store.list_sessions(SessionFilter(model="gpt-5", labels={"date": "2025-10-02"}))
    out = tmp_path / "day.html"
    subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "export", "--format", "html", day["id"],
                    "-o", str(out)], check=True, timeout=60)
    page.goto(out.as_uri())
    assert page.locator("li.outcome").count() == 7
    font = page.evaluate("getComputedStyle(document.body).fontFamily")
    assert font.startswith("system-ui"), font  # the inlined stylesheet applies (issue 25 item 1)
    page.goto(f"{base}/sessions/{day['id']}")
    assert page.locator("li.outcome").count() == 7
    shot(page, "export")


@pytest.mark.slow
def test_a_repeated_message_shows_twice_and_a_resent_reply_once(site, page):
    base, db, _ = site
    store = open_store(db, read_only=True)
    ids = {s["agent"]: s["id"] for s in store.list_sessions(SessionFilter(limit=None))
           if s["agent"] in ("repeater", "resender")}
    store.close()
    page.goto(f"{base}/sessions/{ids['repeater']}")
    texts = [t.strip() for t in page.locator("li.message :is(.text, .markdown)").all_inner_texts()]
    assert texts == ["continue", "ok 1", "continue", "ok 2"]
    page.goto(f"{base}/sessions/{ids['resender']}")
    texts = [t.strip() for t in page.locator("li.message :is(.text, .markdown)").all_inner_texts()]
    assert texts == ["first", "the answer", "second", "the answer", "third", "the answer"]
    assert "trimmed" not in page.locator("ol.timeline").inner_text()
