"""`reasonlog proxy --replay SESSION` (issue 23): an agent re-run under it gets the recorded answers byte for
byte with no network while its requests match the recording; a changed line in its code gets a 409 naming the
first call that differs, with the diff; `--until N` serves the recording up to call N and forwards from there,
asking another model, recorded as a session linked to the original at call N."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import anthropic
import httpx2
import pytest
from proxy_upstream import Reply, Upstream, anthropic_events, recorded_stream
from proxying import ANTHROPIC_KEY, recording_proxy
from sdk_server import load_json, sse

import reasonlog
from reasonlog.capture.proxy_replay import Replayer, load_script
from reasonlog.store import SessionFilter

TOOLS = [{"name": "get_weather", "description": "The weather in a city now.",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]


def tool_use_answer() -> bytes:
    """A recorded tool call (anthropic-tool-no-args.json) asking for get_weather in Paris, streamed."""
    body = load_json("anthropic-messages", "anthropic-tool-no-args.json")
    body["content"][1] |= {"name": "get_weather", "input": {"city": "Paris"}}
    return sse(anthropic_events(body), named=True)


FINAL = recorded_stream("anthropic-messages", "anthropic-text.chunks.txt", named=True)


def weather(city: str) -> str:
    return f"{city}: 18°C, sunny"


def agent(url: str, sent: list[bytes], tool=weather, system: str | None = None) -> list[str]:
    """A tool loop on the real SDK, streaming each turn; `sent` gets the bytes of every request it made."""
    hook = {"request": [lambda request: sent.append(request.read())]}
    client = anthropic.Anthropic(base_url=url, api_key=ANTHROPIC_KEY, max_retries=0,
                                 http_client=httpx2.Client(event_hooks=hook))
    messages: list = [{"role": "user", "content": "What is the weather in Paris?"}]
    said = []
    while True:
        with client.messages.stream(model="claude-opus-4-5", max_tokens=256, tools=TOOLS, messages=messages,
                                    **({"system": system} if system else {})) as stream:
            reply = stream.get_final_message()
        said += [block.text for block in reply.content if block.type == "text"]
        if reply.stop_reason != "tool_use":
            return said
        messages.append({"role": "assistant", "content": reply.content})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": block.id, "content": tool(**block.input)}
            for block in reply.content if block.type == "tool_use"]})


def dead_upstream() -> str:
    with socket.socket() as s:  # nothing listens here: any attempt at the network fails
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def recorded(tmp_path):
    """The agent run once through the recording proxy: (db, its session id, the bytes of its requests, output)."""
    db = tmp_path / "r.db"
    sent: list[bytes] = []
    with Upstream() as up, recording_proxy(db, up.url) as proxied:
        up.replies.extend([Reply(200, [tool_use_answer()], "text/event-stream"),
                           Reply(200, [FINAL], "text/event-stream")])
        said = agent(proxied.url, sent)
    (session,) = reasonlog.open_store(db, read_only=True).list_sessions(SessionFilter())
    assert [r.body for r in up.received] == sent  # what reached the upstream is what the agent sent
    return db, session["id"], sent, said


def replaying(db, session_id: str, **kw) -> Replayer:
    return Replayer(load_script(reasonlog.open_store(db, read_only=True), session_id), **kw)


def test_an_agent_rerun_under_replay_sends_every_request_byte_for_byte_and_gets_the_recorded_answers(recorded,
                                                                                                      tmp_path):
    db, session_id, sent_first, said_first = recorded
    sent: list[bytes] = []
    with recording_proxy(tmp_path / "unused.db", dead_upstream(), replaying(db, session_id)) as proxied:
        said = agent(proxied.url, sent)
    assert sent == sent_first and len(sent) == 2  # every request, byte for byte
    assert said == said_first == ["<thinking>\nThe updateIssueList tool was provided in the list of available"
                                  " functions. The tool has no required parameters, so it can be called without"
                                  " any additional information needed from the user.\n</thinking>\n\nOkay, I will"
                                  " update the current issue list:",
                                  "Hello! I'm doing well, thank you for asking. How are you doing today? Is there"
                                  " anything I can help you with?"]
    assert proxied.recording.count == 0  # a replay records nothing


@pytest.mark.slow
def test_a_changed_line_gets_a_409_naming_the_first_call_that_differs_with_the_diff(recorded, tmp_path):
    db, session_id, _, _ = recorded
    with recording_proxy(tmp_path / "unused.db", dead_upstream(), replaying(db, session_id)) as proxied:
        with pytest.raises(anthropic.ConflictError) as refused:
            agent(proxied.url, [], tool=lambda city: f"{city}: 19°C, sunny")  # the changed line
    error = refused.value
    assert error.status_code == 409 and error.body["error"]["type"] == "replay_mismatch"
    message = error.body["error"]["message"]
    store = reasonlog.open_store(db, read_only=True)
    second = store.get_session(session_id)["calls"][1]["id"]
    assert message.splitlines()[0] == (f"reasonlog replay: request #1 differs from the recorded call"
                                       f" {session_id}#1 ({second}) (beyond the ids, times and process ids a"
                                       f" re-run makes fresh):")
    assert '-          "content": "Paris: 18°C, sunny",' in message.splitlines()
    assert '+          "content": "Paris: 19°C, sunny",' in message.splitlines()


@pytest.mark.slow
def test_a_fork_at_call_n_serves_the_recording_then_forwards_to_another_model_and_is_linked(recorded, tmp_path):
    db, session_id, sent_first, _ = recorded
    original = reasonlog.open_store(db, read_only=True).get_session(session_id)["calls"]
    sent: list[bytes] = []
    with Upstream() as up:
        up.replies.append(Reply(200, [FINAL], "text/event-stream"))
        fork = replaying(db, session_id, until=1, model="claude-haiku-4-5")
        with recording_proxy(db, up.url, fork, run=f"fork of {session_id} at #1", parent=session_id,
                             parent_call=original[1]["id"], labels={"fork_of": session_id}) as proxied:
            agent(proxied.url, sent)
    assert sent == sent_first  # the agent did the same; call #0 came from the recording
    (forwarded,) = up.received  # only call #1 reached the upstream, asking for the other model
    assert json.loads(forwarded.body) == {**json.loads(sent[1]), "model": "claude-haiku-4-5"}
    store = reasonlog.open_store(db, read_only=True)
    (forked,) = [s for s in store.list_sessions(SessionFilter(limit=None)) if s["id"] != session_id]
    assert (forked["parent_session_id"], forked["parent_call_id"]) == (session_id, original[1]["id"])
    assert forked["labels"]["fork_of"] == session_id
    (call,) = store.get_session(forked["id"])["calls"]
    assert store.get_call(call["id"])["request"] == json.loads(forwarded.body)  # the fork records what it sent


def run_agent_through_cli_proxy(db, args: list[str], upstream: str) -> tuple[list[bytes], list[str], str]:
    """`reasonlog proxy ARGS` in its own process, the agent run through it, then Ctrl-C: (bytes sent, said, stderr)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "reasonlog", "--db", str(db), "proxy", "--port", str(port),
                               *args, "--upstream", upstream], stderr=subprocess.PIPE, text=True)
    try:
        first = server.stderr.readline()
        sent: list[bytes] = []
        deadline = time.monotonic() + 10
        while True:  # the port opens just after the line is printed
            try:
                said = agent(f"http://127.0.0.1:{port}", sent)
                break
            except anthropic.APIConnectionError:
                assert time.monotonic() < deadline
                sent.clear()
                time.sleep(0.05)
    finally:
        os.kill(server.pid, signal.SIGINT)
        err = server.communicate(timeout=30)[1]
    assert server.returncode == 0 and "Traceback" not in err
    return sent, said, first + err


@pytest.mark.slow
def test_proxy_replay_from_the_command_line(recorded, tmp_path):
    db, session_id, sent_first, said_first = recorded
    sent, said, err = run_agent_through_cli_proxy(db, ["--replay", session_id[:10]], dead_upstream())
    assert "answering from the recording" in err.splitlines()[0]
    assert sent == sent_first and said == said_first


@pytest.mark.slow
def test_proxy_from_session_and_call_forks_there_from_the_command_line(recorded):
    db, session_id, sent_first, _ = recorded
    with Upstream() as up:
        up.replies.append(Reply(200, [FINAL], "text/event-stream"))
        sent, _, err = run_agent_through_cli_proxy(
            db, ["--from", f"{session_id[:10]}#1", "--model", "claude-haiku-4-5"], up.url)
    assert sent == sent_first and f"recording into {db}" in err.splitlines()[0]
    (forwarded,) = up.received  # call #0 came from the recording, #1 went to the upstream for the other model
    assert json.loads(forwarded.body)["model"] == "claude-haiku-4-5"
    store = reasonlog.open_store(db, read_only=True)
    (forked,) = [s for s in store.list_sessions(SessionFilter(limit=None)) if s["id"] != session_id]
    original = store.get_session(session_id)["calls"]
    assert (forked["parent_session_id"], forked["parent_call_id"]) == (session_id, original[1]["id"])
    assert (forked["labels"]["fork_of"], forked["labels"]["fork_at"], forked["run"]) == (
        session_id, "1", f"fork of {session_id} at #1")


@pytest.mark.slow
@pytest.mark.parametrize("args, says", [
    (["--until", "1"], "--until and --model go with --replay SESSION"),
    (["--replay", "nosuchsession"], "nosuchsession"),
    (["--from", "nosuchsession"], "--from nosuchsession: expected SESSION#N"),
    (["--from", "x#1", "--until", "1"], "--from SESSION#N stands for --replay SESSION --until N"),
    (["--from", "nosuchsession#1"], "nosuchsession"),
])
def test_proxy_replay_mistakes_are_one_line(recorded, args, says):
    db = recorded[0]
    done = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "proxy", *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode in (1, 2) and "Traceback" not in done.stderr
    assert says in done.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_a_fork_is_linked_from_both_session_pages_and_compared_from_its_call(recorded, tmp_path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from reasonlog.server.app import create_app

    db, session_id, _, _ = recorded
    original = reasonlog.open_store(db, read_only=True).get_session(session_id)["calls"]
    with Upstream() as up:
        up.replies.append(Reply(200, [FINAL], "text/event-stream"))
        fork = replaying(db, session_id, until=1, model="claude-haiku-4-5")
        with recording_proxy(db, up.url, fork, run=f"fork of {session_id} at #1", parent=session_id,
                             parent_call=original[1]["id"], labels={"fork_of": session_id, "fork_at": "1"}) as proxied:
            agent(proxied.url, [])
    store = reasonlog.open_store(db, read_only=True)
    (forked,) = [s["id"] for s in store.list_sessions(SessionFilter(limit=None)) if s["id"] != session_id]
    client = TestClient(create_app(lambda: reasonlog.open_store(db)))
    compare = f"/compare?a={session_id}&amp;b={forked}&amp;start=1"
    assert compare in client.get(f"/sessions/{session_id}").text  # the original links its fork
    assert compare in client.get(f"/sessions/{forked}").text      # and the fork its original
    page = client.get(f"/compare?a={session_id}&b={forked}&start=1").text
    assert "B begins at A's call #1" in page
    assert page.count("<h2>Call #") == 1 and "<h2>Call #1 " in page  # the fork's one call, beside the original's #1


@pytest.mark.slow
def test_a_rerun_whose_system_prompt_lists_the_same_lines_in_another_order_is_answered_and_told(tmp_path):
    """An agent that lists what it found on disk (skills, tools, files) in the order a directory walk gave it sends
    another order on another run: the replay answers it and says what it let pass."""
    skills = ["- antigravity-support: installing Antigravity CLI", "- skill-creator: creating skills"]
    db, sent_first = tmp_path / "r.db", []
    with Upstream() as up, recording_proxy(db, up.url) as proxied:
        up.replies.extend([Reply(200, [tool_use_answer()], "text/event-stream"),
                           Reply(200, [FINAL], "text/event-stream")])
        said_first = agent(proxied.url, sent_first, system="Skills:\n" + "\n".join(skills))
    (session,) = reasonlog.open_store(db, read_only=True).list_sessions(SessionFilter())
    replayer = replaying(db, session["id"])
    with recording_proxy(tmp_path / "unused.db", dead_upstream(), replayer) as proxied:
        said = agent(proxied.url, [], system="Skills:\n" + "\n".join(skills[::-1]))
    assert said == said_first and len(replayer.served) == 2
    assert replayer.report() == [f"  #{n} → {session['id']}#{n}: system (order of lines): 3 lines → the same,"
                                 " reordered" for n in (0, 1)]
