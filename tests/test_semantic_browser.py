"""Search by meaning in the dashboard, in real headless Chromium (issue 24): a person types a question no recorded text
holds, gets the session that means it first, and walks to sessions like it. Real transcripts (shared fixtures), the
real local model. Skips without /usr/bin/chromium, as test_dashboard_browser.py does."""
from __future__ import annotations

import pytest
from browser import CHROMIUM, shot
from test_ingest import Served, free_port
from test_semantic_cli import ASKED, BOOT, OTHER, SPOTTER

from reasonlog.io.importing import plan, run_import
from reasonlog.semantic import LocalEmbedder
from reasonlog.semantic.backlog import embed_backlog
from reasonlog.store import open_store

pytestmark = [pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium (Debian's chromium package)"),
              pytest.mark.xdist_group("semantic_browser")]  # one worker builds the module's site once


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    db = tmp_path_factory.mktemp("semantic-browser") / "t.db"
    store = open_store(db)
    run_import(store, plan([SPOTTER / "short.jsonl", SPOTTER / "tool_heavy.jsonl"]))
    assert embed_backlog(store, LocalEmbedder()).embedded == 11  # a tool result: its first chunk
    store.close()
    port = free_port()
    with Served(db, port):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def page(site, browser):
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.on("console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None)
    failed: list[str] = []
    tab.on("response", lambda r: failed.append(r.url) if r.status >= 400 and "favicon" not in r.url else None)
    yield tab
    context.close()
    assert (errors, failed) == ([], [])  # no script refused by the CSP, nothing thrown, nothing missing


@pytest.mark.slow
def test_a_question_in_other_words_finds_its_session_first_and_text_mode_finds_none(site, page):
    page.goto(site + "/")
    page.fill("input[name=q]", ASKED)
    page.press("input[name=q]", "Enter")
    page.wait_for_url("**/?q=*")
    assert page.locator("select[name=mode] option:checked").inner_text() == "search: hybrid"
    links = page.locator("table.sessions tbody td.title a")
    assert links.count() == 2 and links.first.get_attribute("href") == f"/sessions/{BOOT}"
    assert page.locator("tr.hits .hit").first.inner_text() != ""
    shot(page, "search-by-meaning")
    page.select_option("select[name=mode]", "text")
    page.click("form.filters button[type=submit]")
    page.wait_for_url("**mode=text**")
    assert page.locator("p.muted").first.inner_text() == "No session matches."


def test_a_session_page_leads_to_sessions_like_it(site, page):
    page.goto(f"{site}/sessions/{OTHER}")
    similar = page.locator("ul.similar li a")
    assert similar.count() == 1 and similar.inner_text() == "mix phx.server doesnt seem to start"
    similar.click()
    page.wait_for_url(f"**/sessions/{BOOT}")
    assert page.locator("ul.similar li a").get_attribute("href") == f"/sessions/{OTHER}"
