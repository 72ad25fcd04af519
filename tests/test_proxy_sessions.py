"""Calls through the proxy are grouped into sessions by what the client says (a header, Claude Code's session id
in `metadata.user_id`, Responses `previous_response_id`, the `user` field), else by continuity (issue 22)."""
from __future__ import annotations

import json

import anthropic
import openai
from proxy_upstream import Upstream
from proxying import ANTHROPIC_KEY, OPENAI_KEY, recording_proxy

import reasonlog
from reasonlog.store import SessionFilter

CC_SESSION = "3f1d2c4b-5a6e-4f70-8a9b-0c1d2e3f4a5b"


def sessions_of(db) -> list[tuple[str | None, int]]:
    """(external id, calls) per session, in the order they started."""
    store = reasonlog.open_store(db, read_only=True)
    found = sorted(store.list_sessions(SessionFilter(limit=None)), key=lambda s: s["started_at"])
    return [(s["external_id"], s["call_count"]) for s in found]


def ask(client: anthropic.Anthropic, messages: list, **kw) -> None:
    client.messages.create(model="claude-opus-4-5", max_tokens=16, messages=messages, **kw)


def test_anthropic_sessions_by_header_claude_code_id_and_continuity(tmp_path):
    db = tmp_path / "r.db"
    legacy = {"user_id": f"user_{'ab' * 32}_account__session_{CC_SESSION}"}
    current = {"user_id": json.dumps({"device_id": "d1", "account_uuid": "", "session_id": CC_SESSION})}
    first = [{"role": "user", "content": "List the files."}]
    second = [*first, {"role": "assistant", "content": "a.py b.py"}, {"role": "user", "content": "Open a.py."}]
    with Upstream() as up, recording_proxy(db, up.url) as proxied:
        client = anthropic.Anthropic(base_url=proxied.url, api_key=ANTHROPIC_KEY, max_retries=0)
        ask(client, [{"role": "user", "content": "one"}], metadata=legacy)
        ask(client, [{"role": "user", "content": "two"}], metadata=current)  # the same Claude Code session
        ask(client, [{"role": "user", "content": "x"}], extra_headers={"x-reasonlog-session": "my-run-7"})
        ask(client, [{"role": "user", "content": "y"}], extra_headers={"x-reasonlog-session": "my-run-7"})
        ask(client, first)
        ask(client, second)  # extends the request before: the same conversation
        ask(client, [{"role": "user", "content": "Something else."}])
    assert sessions_of(db) == [(CC_SESSION, 2), ("my-run-7", 2), (None, 2), (None, 1)]


def test_openai_sessions_by_previous_response_id_and_user(tmp_path):
    db = tmp_path / "r.db"
    with Upstream() as up, recording_proxy(db, up.url) as proxied:
        client = openai.OpenAI(base_url=proxied.url + "/v1", api_key=OPENAI_KEY, max_retries=0)
        reply = client.responses.create(model="gpt-5.1", input="Plan the trip.")
        client.responses.create(model="gpt-5.1", input="Now book it.", previous_response_id=reply.id)
        client.responses.create(model="gpt-5.1", input="Unrelated question.")
        client.chat.completions.create(model="gpt-4.1-nano", user="alice",
                                       messages=[{"role": "user", "content": "first"}])
        client.chat.completions.create(model="gpt-4.1-nano", user="alice",
                                       messages=[{"role": "user", "content": "another topic"}])
    assert reply.id == "resp_0f35ed53160b395301693cc957829881909359e7f80cdd20b5"
    assert sessions_of(db) == [(None, 2), (None, 1), ("alice", 2)]
