"""OpenAI Responses calls read as they happened (issue 31, item 5): a prompt sent as `input="a string"` is the
call's user message in `show`, `show --json` and `search` while replay gives back the string; the API's own web
searches (`web_search_call`) are web search tool steps with their query and status, paired with the pages they
found, not opaque blocks. The real
`openai` SDK, recorded by `instrument_openai`, against the recorded web-search payload on 127.0.0.1."""
from __future__ import annotations

import json

import openai
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from sdk_server import load_json

import reasonlog
from reasonlog.capture.openai import instrument_openai
from reasonlog.cli.main import cli
from reasonlog.server.app import create_app

PROMPT = "What is in the tech news today?"


@pytest.fixture
def db_target(db):
    """This suite runs on SQLite and on PostgreSQL."""
    return db


@pytest.fixture
def recorded(server, rec):
    payload = load_json("openai-responses", "openai-web-search-tool.1.json")
    server.reply_json(payload)
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test-key", max_retries=0)
    instrument_openai(client, rec)
    with rec.session(agent="searcher") as s:
        client.responses.create(model="gpt-5", input=PROMPT, tools=[{"type": "web_search"}])
    rec.flush()
    return s.id, payload


def _page(db, session_id: str) -> str:
    client = TestClient(create_app(lambda: reasonlog.open_store(db, read_only=True)))
    return client.get(f"/sessions/{session_id}").text


def _cli(db, *args: str) -> str:
    done = CliRunner().invoke(cli, ["--db", str(db), *args], env={"COLUMNS": "300"}, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    return done.output


def test_a_string_input_is_the_prompt_everywhere_and_replays_as_the_string(recorded, rec, server):
    session_id, _ = recorded
    store = reasonlog.open_store(rec.db_path, read_only=True)
    (call,) = store.get_session(session_id)["calls"]
    assert store.replay_call(call["id"]) == server.requests[-1]["body"]
    assert store.replay_call(call["id"])["input"] == PROMPT
    timeline = json.loads(_cli(rec.db_path, "show", session_id, "--json"))["timeline"]
    messages = [i for i in timeline if i["kind"] == "message"]
    assert (messages[0]["role"], messages[0]["parts"]) == ("user", [{"kind": "text", "text": PROMPT}])
    assert f"[0] user\n{PROMPT}\n" in _cli(rec.db_path, "show", session_id)
    assert f'<div class="text">{PROMPT}</div>' in _page(rec.db_path, session_id)
    found = json.loads(_cli(rec.db_path, "search", "tech news today", "--json"))
    # the prompt, and the reply whose first search asked for "tech news today December 5 2025"
    assert [(h["session_id"], h["message_idx"], h["role"]) for h in found] == [(session_id, 0, "user"),
                                                                               (session_id, 1, "assistant")]
    assert found[0]["snippet"] == PROMPT


def test_web_searches_are_tool_steps_with_their_query_and_status(recorded, rec):
    session_id, payload = recorded
    timeline = json.loads(_cli(rec.db_path, "show", session_id, "--json"))["timeline"]
    parts = [p for i in timeline if i["kind"] == "message" for p in i["parts"]]
    searches = [p for p in parts if p["kind"] == "tool_use"]
    assert [(p["name"], p["tool_use_id"], p["input"]) for p in searches] == [
        ("web_search", "ws_0953eda47ee1741200693330682c988195aaa470a8cc51dfe4",
         {"type": "search", "query": "tech news today December 5 2025", "status": "completed"}),
        ("web_search", "ws_0953eda47ee17412006933306f501c8195b9d3dfba4c547834",
         {"type": "open_page", "url": "https://www.theverge.com/podcast/838932/openai-chatgpt-code-red-vergecast",
          "status": "completed"}),
        ("web_search", "ws_0953eda47ee1741200693330740e248195a2c77632e480424b",
         {"type": "find_in_page", "pattern": "Vercel",
          "url": "https://www.theverge.com/podcast/838932/openai-chatgpt-code-red-vergecast", "status": "completed"})]
    sources = "\n".join(s["url"] for s in payload["output"][1]["action"]["sources"])
    page = "https://www.theverge.com/podcast/838932/openai-chatgpt-code-red-vergecast"
    assert [p["result"] for p in searches] == [{"content": sources, "is_error": False, "duration_ms": None},
                                               {"content": page, "is_error": False, "duration_ms": None},
                                               {"content": page, "is_error": False, "duration_ms": None}]
    assert len(sources.splitlines()) == 16  # the pages the search found
    assert [p["kind"] for p in parts if p["kind"] in ("opaque", "tool_result")] == []
    shown = _cli(rec.db_path, "show", session_id)
    assert ('→ web_search {"query": "tech news today December 5 2025", "type": "search", "status": "completed"}  '
            '(ws_0953eda47ee1741200693330682c988195aaa470a8cc51dfe4)') in " ".join(shown.split("\n    "))
    assert "[opaque]" not in shown
    page = _page(rec.db_path, session_id)
    assert page.count('<span class="tool-name">web_search</span>') == 3
    assert "no result recorded" not in page and "[opaque]" not in page
