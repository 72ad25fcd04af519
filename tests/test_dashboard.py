"""The dashboard's pages, served through FastAPI's TestClient: what they show, and that recorded text stays text."""
from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from click.testing import CliRunner
from conftest import demo_and_trading_logs, fresh_database
from fastapi.testclient import TestClient

import reasonlog
from reasonlog.cli.main import cli
from reasonlog.demo import run_demo
from reasonlog.server.app import create_app
from reasonlog.store import SessionFilter, open_store

HOSTILE = ["<script>window.__xss = 1</script>", '<img src=x onerror="window.__xss = 2">',
           "[a link](javascript:window.__xss=3)", '<a href="javascript:window.__xss=4">click</a>',
           "**bold** <b onclick=\"window.__xss=5\">b</b>", "<svg onload=\"window.__xss=6\"></svg>"]


def record_hostile(db) -> str:
    rec = reasonlog.Recorder(db, writer="sync")
    with rec.session(agent="<script>window.__xss=7</script>", run="x<b>y</b>") as s:
        for text in HOSTILE:
            s.call(messages=[{"role": "user", "content": text}],
                   response={"role": "assistant", "content": [
                       {"type": "text", "text": text},
                       {"type": "tool_use", "id": f"t{len(text)}", "name": "<img src=x onerror=alert(1)>",
                        "input": {"q": text}}]}, model="gpt-5")
            s.tool_result(f"t{len(text)}", text, name="evil")
        s.outcome("trade<script>", {"note": HOSTILE[0]})
        s.reason("approach", {"summary": HOSTILE[1]}, details=HOSTILE[0])
    rec.close()
    return s.id


class Tags(HTMLParser):
    """Every tag and attribute of a page, to prove none came from recorded text."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def tags_of(html: str) -> list[tuple[str, dict]]:
    parser = Tags()
    parser.feed(html)
    return parser.tags


def assert_inert(html: str, export: bool = False) -> None:
    tags = tags_of(html)
    scripts = [a.get("src") for t, a in tags if t == "script"]
    assert scripts == ([] if export else ["/static/app.js", "/static/live.js"])
    assert [(t, k) for t, a in tags for k in a if k.startswith("on")] == []
    assert [a["href"] for t, a in tags if a.get("href", "").lower().startswith(("javascript", "data"))] == []
    assert [t for t, _ in tags if t in ("img", "iframe", "object", "embed", "svg") and t != "svg"] == []


@pytest.fixture(scope="module")
def served(dialect, tmp_path_factory):
    """The pages over the demo, the trading logs and hostile text, on each dialect."""
    with fresh_database(dialect, tmp_path_factory.mktemp("dash")) as db:
        demo_and_trading_logs(db)
        hostile = record_hostile(db)
        yield TestClient(create_app(lambda: open_store(db))), db, hostile


def test_the_sessions_page_lists_filters_and_searches(served):
    client, db, _ = served
    store = open_store(db, read_only=True)
    total = store.count_sessions(SessionFilter())
    page = client.get("/")
    assert page.status_code == 200
    assert page.headers["content-security-policy"].startswith("default-src 'none'; script-src 'self';")
    assert page.text.count('href="/sessions/') == min(total, 50)
    gpt5 = client.get("/", params={"model": "gpt-5", "source": "trading-log"}).text
    expected = store.count_sessions(SessionFilter(model="gpt-5", labels={"source": "trading-log"}))
    assert gpt5.count('href="/sessions/') == expected == 20
    found = client.get("/", params={"q": "NVDA"}).text
    assert store.count_sessions(SessionFilter(text="NVDA")) == 90
    assert found.count('href="/sessions/') == 50  # a page of them
    assert "<mark>NVDA</mark>" in found
    older = re.search(r'href="/\?([^"]+after=[^"]+)"', page.text)
    assert older is not None  # more than a page: the next one is a link that keeps the filters


def test_a_session_page_shows_its_timeline_calls_outcomes_and_context(served):
    client, db, _ = served
    store = open_store(db, read_only=True)
    (day,) = store.list_sessions(SessionFilter(model="gpt-5", labels={"date": "2025-10-02"}))
    html = client.get(f"/sessions/{day['id']}").text
    session = store.get_session(day["id"])
    assert html.count('class="call') == len(session["calls"])
    assert html.count('class="outcome"') == len(session["outcomes"]) == 7
    assert "the reasoning that led to it" in html
    summary = client.get(f"/sessions/{day['id']}", params={"view": "summary"}).text
    assert 'aria-current="page">Summaries' in summary


def test_long_sessions_are_paged_by_the_server(tmp_path):
    db = tmp_path / "long.db"
    rec = reasonlog.Recorder(db, writer="sync")
    history = []
    with rec.session(agent="long") as s:
        for i in range(150):
            history.append({"role": "user", "content": f"question {i}"})
            s.call(messages=list(history), response=f"answer {i}", model="gpt-5")
            history.append({"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}]})
    rec.close()
    client = TestClient(create_app(lambda: open_store(db)))
    first = client.get(f"/sessions/{s.id}").text
    assert "Messages 1–200 of 300" in first and "question 99" in first and "question 100" not in first
    second = client.get(f"/sessions/{s.id}", params={"offset": 200}).text
    assert "Messages 201–300 of 300" in second and "question 100" in second and "question 99<" not in second


def test_a_call_page_has_its_exact_request_and_the_diff_against_another(served):
    client, db, _ = served
    store = open_store(db, read_only=True)
    session = next(s for s in store.list_sessions(SessionFilter(limit=None)) if s["call_count"] >= 3)
    calls = store.get_session(session["id"])["calls"]
    html = client.get(f"/calls/{calls[2]['id']}", params={"against": calls[0]["id"]}).text
    assert 'id="request-json"' in html and 'data-copy="request-curl"' in html and 'id="request-python"' in html
    assert "What changed since the previous call" in html and 'id="against"' in html


def test_usage_page_and_csv(served):
    client, db, _ = served
    html = client.get("/usage").text
    assert all(f'id="by-{by}"' in html for by in ("day", "model", "agent", "source"))
    assert html.count("<svg") == 7  # by day: tokens and cost in one chart over time (issue 39)
    csv = client.get("/usage.csv", params={"by": "model"})
    assert csv.headers["content-type"].startswith("text/csv")
    lines = csv.text.strip().splitlines()
    assert lines[0].startswith("model,calls,errors,input_tokens")
    from reasonlog import query

    assert len(lines) - 1 == len(query.stats(open_store(db, read_only=True), "model", SessionFilter(limit=None)))


def test_recorded_html_and_script_stay_text_on_every_page_and_in_the_export(served, tmp_path):
    client, db, hostile = served
    html = client.get(f"/sessions/{hostile}").text
    assert_inert(html)
    assert "&lt;script&gt;window.__xss = 1&lt;/script&gt;" in html  # shown, as text
    assert '<a rel="noopener noreferrer nofollow" href="javascript' not in html
    assert_inert(client.get("/", params={"q": "xss"}).text)
    store = open_store(db, read_only=True)
    first_call = store.get_session(hostile)["calls"][0]["id"]
    assert_inert(client.get(f"/calls/{first_call}").text)
    out = tmp_path / "s.html"
    result = CliRunner().invoke(cli, ["--db", str(db), "export", "--format", "html", hostile, "-o", str(out)])
    assert result.exit_code == 0, result.output
    exported = out.read_text()
    assert_inert(exported, export=True)
    assert 'http-equiv="Content-Security-Policy" content="default-src \'none\'' in exported
    assert not re.search(r'(src|href)="https?://', exported)  # nothing loads from anywhere


def test_keys_make_the_dashboard_ask_for_one_and_keep_it_in_a_session_cookie(tmp_path):
    db = tmp_path / "k.db"
    run_demo(db, exchanges=1)
    key = open_store(db).create_api_key("read")["secret"]
    client = TestClient(create_app(lambda: open_store(db)))
    assert client.get("/", follow_redirects=False).headers["location"] == "/login?next=/"
    wrong = client.post("/login", data={"key": "rlk_wrong", "next": "/"})
    assert wrong.status_code == 401 and "wrong or revoked" in wrong.text
    ok = client.post("/login", data={"key": key, "next": "/usage"}, follow_redirects=False)
    assert ok.status_code == 303 and ok.headers["location"] == "/usage"
    assert "HttpOnly" in ok.headers["set-cookie"] and "Max-Age" not in ok.headers["set-cookie"]
    assert client.get("/usage").status_code == 200
    offsite = client.post("/login", data={"key": key, "next": "//evil.example"}, follow_redirects=False)
    assert offsite.headers["location"] == "/"


def test_the_bearer_key_that_opens_the_api_opens_the_dashboard_and_its_csv(tmp_path):
    """Issue 30 item 6c: `GET /usage.csv` answered 401 to `Authorization: Bearer <key>` (a script fetching the
    CSV has no cookie); the pages redirected it to the sign-in form."""
    db = tmp_path / "k.db"
    run_demo(db, exchanges=1)
    key = open_store(db).create_api_key("read")["secret"]
    client = TestClient(create_app(lambda: open_store(db)))
    bearer = {"Authorization": f"Bearer {key}"}
    csv = client.get("/usage.csv", params={"by": "model"}, headers=bearer)
    assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    assert csv.text.splitlines()[0] == client.get("/usage.csv", params={"by": "model"},
                                                  cookies={"reasonlog_key": key}).text.splitlines()[0]
    assert [client.get(page, headers=bearer, follow_redirects=False).status_code
            for page in ("/", "/usage", "/v1/sessions")] == [200, 200, 200]
    wrong = {"Authorization": "Bearer rlk_wrong"}
    assert client.get("/usage.csv", headers=wrong).status_code == 401
    assert client.get("/usage", headers=wrong, follow_redirects=False).headers["location"] == "/login?next=/usage"


def test_unknown_ids_and_bad_dates_are_pages_not_tracebacks(served):
    client, _, _ = served
    missing = client.get("/sessions/nope")
    assert missing.status_code == 404 and "no session matches" in missing.text
    assert client.get("/calls/nope").status_code == 404
    assert client.get("/usage.csv", params={"by": "weekday"}).status_code == 400


def test_the_exported_page_carries_its_stylesheet_as_css_not_as_escaped_text(served, tmp_path):
    """Issue 25 item 1: autoescaping turned the inlined stylesheet's quotes into entities, so the export rendered
    in the browser's default font."""
    from reasonlog.server.dashboard.export import session_html

    _, db, _ = served
    store = open_store(db, read_only=True)
    session_id = store.list_sessions(SessionFilter(limit=1))[0]["id"]
    html = session_html(store, session_id)
    store.close()
    style = html.split("<style>", 1)[1].split("</style>", 1)[0]
    assert '"Segoe UI"' in style and "&#34;" not in style and "&quot;" not in style


def test_call_lines_keep_the_price_source_in_a_tooltip_and_unpriced_models_say_so(tmp_path):
    """Issue 25 item 5: no `(computed@…)` on every call line, a space before a failed call's error, and a model
    the price table does not know is "—" with its calls counted, never `$0.0000`."""
    db = tmp_path / "u.db"
    rec = reasonlog.Recorder(db, writer="sync")
    with rec.session(agent="a") as s:
        s.call(messages=[{"role": "user", "content": "hi"}], response="ok", model="claude-sonnet-4-5",
               usage=reasonlog.Usage(input_tokens=10, output_tokens=5), latency_ms=60000)
        s.call(messages=[{"role": "user", "content": "hi"}], model="a-model-nobody-prices",
               usage=reasonlog.Usage(input_tokens=10, output_tokens=5), latency_ms=60000,
               error=TimeoutError("took too long"))
    rec.close()
    client = TestClient(create_app(lambda: open_store(db)))
    page = client.get(f"/sessions/{s.id}").text
    assert "(computed@" not in page and 'title="price: computed@' in page
    assert re.search(r"60,000 ms · <span class=\"error\">", page)  # issue 39: as the CLI writes it
    usage = client.get("/usage").text
    row = usage.split("<td>a-model-nobody-prices</td>", 1)[1].split("</tr>", 1)[0]  # its row in the table by model
    assert row.endswith('<td class="num">— <span class="muted">(1 unpriced)</span></td>'), row
