"""Issue 25 in real headless Chromium: a Bash call shows its command, a session row shows its title on one line at
1280 px, the timeline shows sub-agents nested five deep, and `reasonlog ui`'s one-time token signs in once.

Skips when /usr/bin/chromium is absent. With REASONLOG_SCREENSHOTS=<folder> set, screenshots are written there
(the README and docs/dashboard.md show the ones in docs/screenshots)."""
from __future__ import annotations

from pathlib import Path

import pytest
from browser import CHROMIUM, shot
from conftest import FIXTURES
from test_ingest import Served, free_port

from reasonlog.io.importing import plan, run_import
from reasonlog.store import open_store

pytestmark = [pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium (Debian's chromium package)"),
              pytest.mark.xdist_group("dashboard_browser_views")]  # one worker builds the module's site once
CLAUDE = Path(__file__).resolve().parent / "fixtures" / "claude_code"
TITLED = "7c1e0a52-93b4-4f1d-9e8a-2b6c0d4e5f61"
NESTED = "9e8d7c6b-5a49-4382-8170-6f5e4d3c2b1a"
TOOLS = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"
TOKEN = "browser-one-time-token-5d1f0c"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    db = tmp_path_factory.mktemp("views") / "t.db"
    store = open_store(db)
    run_import(store, plan([FIXTURES / "claude-code-transcripts" / "spotter", CLAUDE / "current", CLAUDE / "nested"]))
    store.create_api_key("read")
    store.close()
    port = free_port()
    with Served(db, port, login_token=TOKEN):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def owner(site, browser):
    """A page of a browser that signed in with the one-time token (the test of the token is the first use)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(f"{site}/login?token={TOKEN}")
    yield page
    context.close()


def test_the_token_signs_the_owner_in_once_and_a_stranger_is_asked_for_a_key(site, owner, browser):
    assert owner.url == f"{site}/" and owner.locator("table.sessions").count() == 1
    (cookie,) = owner.context.cookies()
    assert (cookie["name"], cookie["httpOnly"], cookie["sameSite"]) == ("reasonlog_owner", True, "Strict")
    assert TOKEN not in cookie["value"]
    stranger = browser.new_context().new_page()
    stranger.goto(f"{site}/login?token={TOKEN}")
    assert "used already" in stranger.locator("p.error").inner_text()
    stranger.goto(f"{site}/")
    assert stranger.url == f"{site}/login?next=/" and stranger.locator("input[name=key]").count() == 1
    stranger.context.close()


@pytest.mark.slow
def test_a_session_row_shows_its_title_on_one_line_at_1280_px(site, owner):
    owner.goto(f"{site}/")
    row = owner.locator(f'tr:has(a[href="/sessions/{TITLED}"])')
    assert row.locator("td.title").inner_text() == "EU checkout bug"
    heights = owner.locator("table.sessions tbody tr").evaluate_all("rows => rows.map(r => r.offsetHeight)")
    line = owner.evaluate("parseFloat(getComputedStyle(document.querySelector('table.sessions td')).lineHeight)")
    assert len(heights) == 15 and max(heights) < 2 * line, (heights, line)  # no cell wraps to a second line
    long = owner.locator('td.title a[title^="/handgemacht:create-beads"]')
    assert long.evaluate("a => a.parentElement.scrollWidth > a.parentElement.clientWidth")  # cut, with…
    assert long.evaluate("a => getComputedStyle(a.parentElement).textOverflow") == "ellipsis"  # …an ellipsis
    shot(owner, "claude-code-sessions")


@pytest.mark.slow
def test_a_bash_call_shows_its_command_and_the_first_lines_of_its_result(site, owner):
    owner.goto(f"{site}/sessions/{TOOLS}")
    first = owner.locator("details.tool").first
    assert first.locator("summary .tool-name").inner_text() == "Bash"
    assert first.locator("summary code.arg").inner_text() == "mix phx.server"
    assert first.locator("summary .head").is_visible()  # without opening it
    assert first.locator("summary .head").inner_text().startswith("Command running in background with ID: bae407b")
    assert not first.locator(".pair").is_visible()
    first.locator("summary").click()
    assert first.locator(".pair pre").first.inner_text().startswith('{\n  "command": "mix phx.server"')
    first.locator("summary").click()
    shot(owner, "claude-code-session")


@pytest.mark.slow
def test_the_timeline_shows_sub_agents_nested_under_the_calls_that_spawned_them(site, owner):
    owner.goto(f"{site}/sessions/{NESTED}")
    owner.click("a.timeline-link")
    owner.wait_for_url("**/timeline")
    agents = owner.locator("svg.timeline-chart g.agent")
    assert agents.count() == 5
    depths = agents.evaluate_all("gs => gs.map(g => [...g.classList].find(c => c.startsWith('depth-')))")
    assert depths == ["depth-1", "depth-2", "depth-3", "depth-4", "depth-5"]
    indents = agents.evaluate_all("gs => gs.map(g => g.querySelector('text.label').getBBox().x)")
    assert indents == sorted(indents) and len(set(indents)) == 5  # each level further right
    deepest = owner.locator("svg.timeline-chart g.depth-5.agent rect.span")
    assert deepest.is_visible()
    tip = owner.locator("svg.timeline-chart g.depth-0 rect.span title").first.text_content()
    assert tip.startswith("call #0 · claude-opus-4-6 · 10 in · 30 out · 1,000 cache read")
    shot(owner, "timeline")
    deepest.click()  # a sub-agent's bar opens its own timeline
    owner.wait_for_url(f"**/sessions/a1b2c3d@{NESTED}/timeline")
    assert owner.locator("svg.timeline-chart g.call").count() == 1


@pytest.mark.slow
def test_a_long_claude_code_session_has_a_timeline_page_by_page(site, owner):
    owner.goto(f"{site}/sessions/ae4a77f8-aedd-4bc1-888f-c94edc91af04/timeline")
    assert owner.locator("svg.timeline-chart g.depth-0.call").count() == 200
    assert owner.locator("svg.timeline-chart g.agent").count() == 1
    shot(owner, "timeline-long")
    owner.click("a.later")
    assert owner.locator("svg.timeline-chart g.depth-0.call").count() == 17
