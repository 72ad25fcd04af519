"""How the proxy groups what real CLIs send (issue 31, item 3), request by request: a loop stays one session
whatever `cache_control` marks between calls; a router's or title's call beside it, before or after the loop's
first call, goes to one side session of the run linked to the loop; a call with no tools under the loop's stated
id that does not continue it is a side call too; clients that use no tools keep the rules of before."""
from __future__ import annotations

import copy

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proxy_upstream import Upstream
from proxying import GOOGLE_KEY, recording_proxy

import reasonlog
from reasonlog.capture.proxy_sessions import Sessions
from reasonlog.store import SessionFilter

ALL = SessionFilter(limit=None)
ROUTER = {"parts": [{"text": "\nYou are a specialized Task Routing AI. Your sole function is to analyze ..."}]}
SHELL = [{"functionDeclarations": [{"name": "run_shell_command", "parameters": {"type": "object"}}]}]
GEMINI_UA = "GeminiCLI-tui/0.61.0/gemini-3.1-pro-preview (linux; x64; terminal)"


def grouped(db) -> list[tuple[str | None, int, str | None, bool]]:
    """(role, calls, external id, has a parent) of each session, in the order they started."""
    store = reasonlog.open_store(db, read_only=True)
    found = sorted(store.list_sessions(ALL), key=lambda s: s["id"])
    parents = {s["id"]: s["parent_session_id"] for s in found}
    store.close()
    return [((s["labels"] or {}).get("role"), s["call_count"], s["external_id"], parents[s["id"]] is not None)
            for s in found]


def gemini(client: httpx.Client, url: str, contents: list, **body) -> None:
    done = client.post(f"{url}/v1beta/models/gemini-2.5-flash:generateContent", json={"contents": contents, **body},
                       headers={"x-goog-api-key": GOOGLE_KEY, "user-agent": GEMINI_UA})
    assert done.status_code == 200


def test_gemini_clis_router_calls_before_and_between_its_loop_calls_are_one_side_session(tmp_path):
    db = tmp_path / "r.db"
    ask = [{"role": "user", "parts": [{"text": "<session_context>…"}]}, {"role": "user", "parts": [{"text": "Hi"}]}]
    reply = {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command", "args": {"command": "ls"}}}]}
    result = {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command", "response": {"o": "a"}}}]}
    with Upstream() as up, recording_proxy(db, up.url) as proxied, httpx.Client() as client:
        gemini(client, proxied.url, ask, systemInstruction=ROUTER)
        gemini(client, proxied.url, ask, tools=SHELL)
        gemini(client, proxied.url, [*ask, reply, result], systemInstruction=ROUTER)
        gemini(client, proxied.url, [*ask, reply, result], tools=SHELL)
    store = reasonlog.open_store(db, read_only=True)
    loop, side = sorted(store.list_sessions(ALL), key=lambda s: s["id"])
    assert (loop["call_count"], loop["parent_session_id"], loop["model"]) == (2, None, "gemini-2.5-flash")
    assert (side["labels"]["role"], side["call_count"], side["parent_session_id"]) == ("router", 2, loop["id"])
    store.close()


def test_a_call_without_tools_under_a_looping_claude_code_session_is_beside_it(tmp_path):
    db = tmp_path / "r.db"
    recorder = reasonlog.Recorder(db)
    sessions = Sessions(recorder, agent="claude", run="claude in /w")
    headers = {"user-agent": "claude-cli/2.1.197", "x-claude-code-session-id": "be5bcd10"}
    tools = [{"name": "Bash", "input_schema": {"type": "object"}}]
    first = [{"role": "user", "content": "run ls"}]
    then = [*first, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "thanks"}]
    side_call = [{"role": "user", "content": "Write a 5-word title for: run ls"}]
    placed = [sessions.session_for({"tools": tools, "messages": first}, first, headers, "anthropic", "m"),
              sessions.session_for({"messages": side_call}, side_call, headers, "anthropic", "m"),
              sessions.session_for({"tools": tools, "messages": then}, then, headers, "anthropic", "m"),
              sessions.session_for({"messages": then}, then, headers, "anthropic", "m")]  # no tools, continues
    assert [placed.index(s) for s in placed] == [0, 1, 0, 0]
    assert sessions.started == [placed[0]] and list(sessions.sides.values()) == [placed[1]]
    sessions.end()
    recorder.close()
    assert grouped(db) == [(None, 0, "be5bcd10", False), ("side", 0, None, True)]


def test_clients_without_tools_or_ids_keep_their_sessions_by_continuity(tmp_path):
    db = tmp_path / "r.db"
    recorder = reasonlog.Recorder(db)
    sessions = Sessions(recorder)
    one, two, three = ([{"role": "user", "content": text}] for text in "abc")
    headers = {"x-reasonlog-session": "job-1"}
    placed = [sessions.session_for({"messages": one}, one, headers, "openai", "m"),
              sessions.session_for({"messages": two}, two, headers, "openai", "m"),
              sessions.session_for({"messages": three}, three, {}, "openai", "m")]
    assert placed[0] is placed[1] and placed[2] is not placed[0] and sessions.sides == {}
    sessions.end()
    recorder.close()


messages = st.lists(st.text(min_size=1, max_size=8), min_size=2, max_size=9)


@settings(max_examples=60, deadline=None)
@given(texts=messages, marks=st.lists(st.integers(0, 8), max_size=4))
@pytest.mark.slow
def test_a_loop_is_one_session_wherever_cache_control_moves(tmp_path_factory, texts, marks):
    """Each call resends the conversation so far with `cache_control` on its last message (the AI SDK) and on
    any others it likes; continuity holds across every call."""
    db = tmp_path_factory.mktemp("cc") / "r.db"
    recorder = reasonlog.Recorder(db)
    sessions = Sessions(recorder)
    conversation = [{"role": "user" if i % 2 == 0 else "assistant", "content": [{"type": "text", "text": t}]}
                    for i, t in enumerate(texts)]
    placed = []
    for end in range(1, len(conversation) + 1, 2):
        sent = copy.deepcopy(conversation[:end])
        for i in {end - 1, *(m for m in marks if m < end)}:
            sent[i]["content"][-1]["cache_control"] = {"type": "ephemeral"}
        placed.append(sessions.session_for({"messages": sent}, sent, {}, "anthropic", "m"))
    assert len({s.id for s in placed}) == 1 and len(sessions.started) == 1
    sessions.end()
    recorder.close()
