"""Each SDK's own loop shows every message once (issue 17): the real `anthropic` and `openai` packages, pointed at
a local server answering with recorded payloads, in the loops their documentation shows and the ones agents write."""
from __future__ import annotations

import json

import anthropic
import openai
import pytest
from sdk_server import load_json

import reasonlog
from reasonlog.query import timeline


@pytest.fixture
def db_target(db):
    """This suite runs on SQLite and on PostgreSQL."""
    return db

ROUNDS = 3


def _shown(store, sid: str) -> tuple[list[str], list[dict]]:
    """The roles of the conversation's messages as every view shows them, and each call's window."""
    session = store.get_session(sid)
    roles = [i["role"] for i in timeline(session) if i["kind"] == "message"]
    return roles, [c["window"] for c in session["calls"]]


def _grew_by_one(windows: list[dict]) -> bool:
    return all((w["added"], w["trimmed"], w["edited"], w["unsent"]) == (1, 0, 0, 0) for w in windows)


ANTHROPIC_FORMS = {
    "sdk objects": lambda r: r.content,
    "model_dump": lambda r: [b.model_dump() for b in r.content],
    "model_dump exclude_none": lambda r: [b.model_dump(exclude_none=True) for b in r.content],
    "text only": lambda r: r.content[0].text,
}


@pytest.mark.parametrize("form", ANTHROPIC_FORMS)
def test_an_anthropic_loop_shows_each_message_once(server, rec, store_of, form):
    client = anthropic.Anthropic(base_url=server.url, api_key="sk-ant-test", max_retries=0)
    reasonlog.instrument_anthropic(client, rec)
    history: list[dict] = []
    with rec.session(agent="claude") as s:
        for n in range(ROUNDS):
            server.reply_json(load_json("anthropic-messages", "anthropic-text.json"))
            history.append({"role": "user", "content": f"question {n}"})
            r = client.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=history)
            history.append({"role": "assistant", "content": ANTHROPIC_FORMS[form](r)})
    roles, windows = _shown(store_of(), s.id)
    assert roles == ["user", "assistant"] * ROUNDS
    assert _grew_by_one(windows)


OPENAI_CHAT_FORMS = {
    "message object": lambda m: m,
    "model_dump": lambda m: m.model_dump(),
    "model_dump exclude_none": lambda m: m.model_dump(exclude_none=True),
    "text only": lambda m: {"role": "assistant", "content": m.content},
}


@pytest.mark.parametrize("form", OPENAI_CHAT_FORMS)
def test_an_openai_chat_loop_shows_each_message_once(server, rec, store_of, form):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test", max_retries=0)
    reasonlog.instrument_openai(client, rec)
    history: list = []
    with rec.session(agent="gpt") as s:
        for n in range(ROUNDS):
            server.reply_json(load_json("openai-chat", "openai-text.json"))
            history.append({"role": "user", "content": f"question {n}"})
            r = client.chat.completions.create(model="gpt-4o", messages=history)
            history.append(OPENAI_CHAT_FORMS[form](r.choices[0].message))
    roles, windows = _shown(store_of(), s.id)
    assert roles == ["user", "assistant"] * ROUNDS
    assert _grew_by_one(windows)


RESPONSES_FORMS = {
    "output objects": lambda r: list(r.output),
    "model_dump": lambda r: [o.model_dump() for o in r.output],
    "model_dump exclude_none": lambda r: [o.model_dump(exclude_none=True) for o in r.output],
    "output_text": lambda r: [{"role": "assistant", "content": r.output_text}],
}


def _responses_reply(n: int) -> dict:
    body = load_json("openai-responses", "openai-web-search-tool.1.json")
    return {**body, "id": f"resp_{n}"}


@pytest.mark.parametrize("form", RESPONSES_FORMS)
def test_an_openai_responses_loop_shows_each_message_once(server, rec, store_of, form):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test", max_retries=0)
    reasonlog.instrument_openai(client, rec)
    history: list = []
    with rec.session(agent="gpt") as s:
        for n in range(ROUNDS):
            server.reply_json(_responses_reply(n))
            history.append({"role": "user", "content": f"question {n}"})
            r = client.responses.create(model="gpt-5", input=history)
            history += RESPONSES_FORMS[form](r)
    roles, windows = _shown(store_of(), s.id)
    assert roles == ["user", "assistant"] * ROUNDS
    assert _grew_by_one(windows[1:]) or form == "output_text"
    if form == "output_text":  # the web search and reasoning items were not sent back: the reply's rest is unsent
        units = len(_responses_reply(0)["output"])
        assert [(w["added"], w["trimmed"], w["unsent"]) for w in windows[1:]] == [(1, 0, units - 1)] * (ROUNDS - 1)


def test_a_chained_responses_loop_shows_the_whole_conversation(server, rec, store_of):
    """`previous_response_id`: each request sends only the new input; the server holds the rest."""
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test", max_retries=0)
    reasonlog.instrument_openai(client, rec)
    previous = None
    with rec.session(agent="gpt") as s:
        for n in range(ROUNDS):
            server.reply_json(_responses_reply(n))
            extra = {"previous_response_id": previous} if previous else {}
            r = client.responses.create(model="gpt-5", input=[{"role": "user", "content": f"question {n}"}], **extra)
            previous = r.id
    store = store_of()
    roles, windows = _shown(store, s.id)
    assert roles == ["user", "assistant"] * ROUNDS
    units = len(_responses_reply(0)["output"])
    assert [w["held"] for w in windows] == [0, 1 + units, 2 * (1 + units)]
    assert [w["added"] for w in windows] == [1] * ROUNDS
    last = store.get_call(store.get_session(s.id)["calls"][-1]["id"])
    assert last["request"]["input"] == [{"role": "user", "content": f"question {ROUNDS - 1}"}]  # what was sent
    assert len(last["window_slots"]) == 2 * (1 + units) + 1  # what the model saw


def test_a_conversation_continued_by_another_process_shows_each_message_once(server, db_target, store_of):
    client = anthropic.Anthropic(base_url=server.url, api_key="sk-ant-test", max_retries=0)
    history: list = []
    sid = None
    for n in range(ROUNDS):  # each round a new process: a new recorder going on with the session by its id
        rec = reasonlog.Recorder(db_target, writer="sync", strict=True)
        handle = reasonlog.instrument_anthropic(client, rec)
        with rec.session(id=sid, agent="claude") as s:
            server.reply_json(load_json("anthropic-messages", "anthropic-text.json"))
            history.append({"role": "user", "content": f"question {n}"})
            r = client.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=history)
            history.append({"role": "assistant", "content": [b.model_dump() for b in r.content]})
            sid = s.id
        handle.undo()
        rec.close()
    roles, windows = _shown(store_of(), sid)
    assert roles == ["user", "assistant"] * ROUNDS
    assert _grew_by_one(windows)


def test_replay_of_a_chained_call_says_what_the_server_held(server, db_target, store_of):
    from click.testing import CliRunner

    from reasonlog.cli.main import cli

    rec = reasonlog.Recorder(db_target, writer="sync", strict=True)
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test", max_retries=0)
    reasonlog.instrument_openai(client, rec)
    with rec.session(agent="gpt") as s:
        server.reply_json(_responses_reply(0))
        first = client.responses.create(model="gpt-5", input=[{"role": "user", "content": "question 0"}])
        server.reply_json(_responses_reply(1))
        client.responses.create(model="gpt-5", input=[{"role": "user", "content": "question 1"}],
                                previous_response_id=first.id)
    rec.close()
    out = CliRunner().invoke(cli, ["--db", str(db_target), "replay", f"{s.id}#1"])
    units = len(_responses_reply(0)["output"])
    assert out.stderr.startswith(f"this request continues resp_0: the server held {1 + units} messages")
    sent = json.loads(out.stdout)
    assert (sent["input"], sent["previous_response_id"]) == ([{"role": "user", "content": "question 1"}], "resp_0")
