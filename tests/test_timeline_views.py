"""Every view of the conversation shows the two reproductions of issue 17 right: a repeated `continue` twice, and a
reply resent in an equivalent form once, with no phantom trim. The views: `show`, `show --json`, `/v1/sessions/{id}`,
the dashboard's session page, `GET /reasoning`'s conversation, `export --format exchange-jsonl` and `--format html`,
and the summarizers' input."""
from __future__ import annotations

import json
import re

import anthropic
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from sdk_server import FixtureServer, load_json

import reasonlog
from reasonlog.cli.main import cli
from reasonlog.server.app import create_app
from reasonlog.store import open_store
from reasonlog.summaries.targets import targets_of

REPEATED = ["continue", "ok 1", "continue", "ok 2"]


def record_repeated(rec) -> str:
    with rec.session(agent="looper", run="job-1", model="m", labels={"date": "2025-10-02"}) as s:
        h = [{"role": "user", "content": "continue"}]
        s.call(messages=list(h), response={"role": "assistant", "content": "ok 1"})
        h += [{"role": "assistant", "content": "ok 1"}, {"role": "user", "content": "continue"}]
        s.call(messages=list(h), response={"role": "assistant", "content": "ok 2"})
    return s.id


def record_resent(rec, url: str) -> str:
    """The real anthropic SDK; the loop appends the reply's dump (with `citations: null`), then its text."""
    client = anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0)
    handle = reasonlog.instrument_anthropic(client, rec)
    with rec.session(agent="resender", run="job-2", labels={"date": "2025-10-03"}) as s:
        history: list = [{"role": "user", "content": "first"}]
        r = client.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=history)
        history += [{"role": "assistant", "content": [b.model_dump() for b in r.content]},
                    {"role": "user", "content": "second"}]
        r = client.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=history)
        history += [{"role": "assistant", "content": r.content[0].text}, {"role": "user", "content": "third"}]
        client.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=history)
    handle.undo()
    return s.id


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    db = tmp_path_factory.mktemp("views") / "views.db"
    rec = reasonlog.Recorder(db, writer="sync", strict=True)
    with FixtureServer() as server:
        for _ in range(3):
            server.reply_json(load_json("anthropic-messages", "anthropic-text.json"))
        ids = record_repeated(rec), record_resent(rec, server.url)
    rec.close()
    reply = load_json("anthropic-messages", "anthropic-text.json")["content"][0]["text"]
    return db, ids, reply


def _texts(items: list[dict]) -> list[str]:
    return [p.get("text", "") for i in items if i["kind"] == "message" for p in i["parts"]]


def test_show(recorded):
    db, (repeated, resent), reply = recorded
    out = CliRunner().invoke(cli, ["--db", str(db), "show", repeated]).output
    assert [line for line in out.splitlines() if line in ("continue", "ok 1", "ok 2")] == REPEATED
    assert "trimmed" not in out and "same window" not in out and "run=job-1  model=m" in out
    out = CliRunner().invoke(cli, ["--db", str(db), "show", resent]).output
    assert out.count(" ".join(reply.split()[:3])) == 3 and "trimmed" not in out
    assert "run=None" not in out


def test_show_json(recorded):
    db, (repeated, resent), reply = recorded
    data = json.loads(CliRunner().invoke(cli, ["--db", str(db), "show", repeated, "--json"]).output)
    assert _texts(data["timeline"]) == REPEATED
    calls = [i for i in data["timeline"] if i["kind"] == "call"]
    assert [(c["window"]["added"], c["window"]["trimmed"]) for c in calls] == [(1, 0), (1, 0)]
    data = json.loads(CliRunner().invoke(cli, ["--db", str(db), "show", resent, "--json"]).output)
    assert _texts(data["timeline"]) == ["first", reply, "second", reply, "third", reply]
    assert [c["window"]["trimmed"] for c in data["timeline"] if c["kind"] == "call"] == [0, 0, 0]


@pytest.fixture(scope="module")
def client(recorded):
    return TestClient(create_app(lambda: open_store(recorded[0], read_only=True)))


def _contents(messages: list[dict]) -> list:
    return [m["content"]["content"] if isinstance(m["content"]["content"], str) else m["content"]["content"][0]["text"]
            for m in messages]


def test_the_api(recorded, client):
    _, (repeated, resent), reply = recorded
    assert _contents(client.get(f"/v1/sessions/{repeated}").json()["messages"]) == REPEATED
    assert _contents(client.get(f"/v1/sessions/{resent}").json()["messages"]) == \
        ["first", reply, "second", reply, "third", reply]


def _page_texts(html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", t).strip() for t in re.findall(r'<li class="message[^"]*"[^>]*>(.*?)</li>', html,
                                                                     re.S)]


def test_the_dashboard_session_page(recorded, client):
    _, (repeated, resent), reply = recorded
    texts = _page_texts(client.get(f"/sessions/{repeated}").text)
    assert [t.split(None, 1)[1] for t in texts] == REPEATED  # "user continue" -> "continue"
    page = client.get(f"/sessions/{resent}").text
    assert len(_page_texts(page)) == 6 and "trimmed" not in page


def test_the_reasoning_conversation(recorded, client):
    body = client.get("/reasoning", params={"job_id": "job-1", "date": "2025-10-02",
                                            "include_full_conversation": True}).json()
    conversation = body["sessions"][0]["conversation"] if "sessions" in body else body[0]["conversation"]
    assert [c["text"] if "text" in c else c.get("content") for c in conversation] == REPEATED


def test_the_exports(recorded, tmp_path):
    db, (repeated, resent), reply = recorded
    out = tmp_path / "x.jsonl"
    CliRunner().invoke(cli, ["--db", str(db), "export", resent, "--format", "exchange-jsonl", "-o", str(out)])
    texts = [m["text"] for line in out.read_text().splitlines() for m in json.loads(line).get("messages", ())
             if m["type"] == "text"]
    assert texts == [reply] * 3
    html = tmp_path / "x.html"
    CliRunner().invoke(cli, ["--db", str(db), "export", repeated, "--format", "html", "-o", str(html)])
    assert [t.split(None, 1)[1] for t in _page_texts(html.read_text())] == REPEATED


def test_the_summarizers_input(recorded):
    db, (repeated, resent), _ = recorded
    store = open_store(db, read_only=True)
    (session,) = targets_of(store.get_session(repeated), ("session",))
    assert _contents(session.messages) == REPEATED
    (session,) = targets_of(store.get_session(resent), ("session",))
    assert len(session.messages) == 6
    store.close()
