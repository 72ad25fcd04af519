"""A replayed session beside its original in the dashboard, in real headless Chromium (issue 23): the session
pages link to the compare page, which says where the two diverged and shows both answers of every call, recorded
text as text. Skips when /usr/bin/chromium is absent."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from browser import CHROMIUM, SHOTS
from click.testing import CliRunner
from sdk_server import FixtureServer, load_json
from test_ingest import Served, free_port

import reasonlog
from reasonlog.cli.main import cli

pytestmark = [pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium (Debian's chromium package)"),
              pytest.mark.xdist_group("replay_dashboard_browser")]  # one worker builds the module's site once
HOSTILE = "<script>alert('replay')</script><img src=x onerror=alert(2)> done"


def _record_original(db) -> str:
    """Three calls of an Anthropic agent; the second answered with hostile text."""
    text = load_json("anthropic-messages", "anthropic-text.json")
    hostile = copy.deepcopy(text)
    hostile["content"][0]["text"] = HOSTILE
    rec = reasonlog.Recorder(db, writer="sync", strict=True)
    with rec.session(agent="triage", provider="anthropic", model="claude-sonnet-4-5-20250929") as s:
        history = [{"role": "user", "content": "hello"}]
        for n, reply in enumerate((text, hostile, text)):
            s.call(request={"model": "claude-sonnet-4-5-20250929", "max_tokens": 256, "messages": list(history)},
                   response=reply, latency_ms=100.0 * (n + 1))
            history += [{"role": "assistant", "content": reply["content"]}, {"role": "user", "content": "go on"}]
        original = s.id
    rec.close()
    return original


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    db = tmp_path_factory.mktemp("replay-browser") / "t.db"
    original = _record_original(db)
    with pytest.MonkeyPatch.context() as mp, FixtureServer() as upstream:
        mp.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        for name in ("anthropic-text.json", "anthropic-tool-no-args.json", "anthropic-text.json"):
            upstream.reply_json(load_json("anthropic-messages", name))
        result = CliRunner().invoke(cli, ["--db", str(db), "replay", original, "--send", "--base-url", upstream.url,
                                          "--concurrency", "1", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    replay = json.loads(result.stdout)["replay_session"]
    port = free_port()
    with Served(db, port):
        yield f"http://127.0.0.1:{port}", original, replay


def test_from_the_original_to_the_comparison_where_they_diverged(site, page):
    base, original, replay = site
    page.goto(f"{base}/sessions/{original}")
    page.click("p.replay-links >> text=compare with replay 1")
    page.wait_for_url("**/compare?**")
    assert page.locator("#verdict").inner_text() == "Diverged at call #1."
    rows = page.locator("ol.compare > li")
    assert rows.count() == 3
    assert rows.nth(0).get_attribute("class") == "same"
    assert rows.nth(1).get_attribute("class") == "differs first-difference"
    first = rows.nth(1)
    assert first.locator(".side.a .answer-text").inner_text() == HOSTILE  # shown as text, never run
    assert first.locator(".side.b .tool-call code").inner_text() == "updateIssueList"
    assert "stop end → tool" in first.locator("h2").inner_text()
    assert page.locator("#totals").inner_text().startswith("same tool 2/3 · same arguments 2/3 · same stop reason 2/3")
    assert page.dialogs == [] and page.locator("ol.compare script").count() == 0
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / "compare.png"), full_page=False)
    page.click("#verdict a")
    assert page.url.endswith("#c1")


def test_the_replay_links_back_to_its_original(site, page):
    base, original, replay = site
    page.goto(f"{base}/sessions/{replay}")
    assert "run replays" in page.locator("p.meta").first.inner_text()
    page.click("p.replay-links >> text=compare with it")
    page.wait_for_url("**/compare?**")
    assert page.url.endswith(f"/compare?a={original}&b={replay}")
    heads = page.locator("table.compare-heads")
    assert "run replays" in heads.inner_text()
