"""`reasonlog replay --send` against two local upstreams on 127.0.0.1, an Anthropic Messages one and an OpenAI Chat
one, answering with recorded payloads (issue 23): one call re-sent, a whole session re-sent onto the other
provider (translated, and back), the comparison report checked exactly, the replays linked to their originals,
--max-cost refusing, a missing key named, and the --json shape."""
from __future__ import annotations

import copy
import json

import pytest
from click.testing import CliRunner
from sdk_server import FixtureServer, load_json

import reasonlog
from reasonlog.cli.main import cli
from reasonlog.providers import ANTHROPIC, OPENAI_CHAT
from reasonlog.providers.translate import translate_request

TOOL = {"name": "updateIssueList", "description": "Refresh the list of open issues", "input_schema": {
    "type": "object", "properties": {}}}
ASK = {"role": "user", "content": "Please update the issue list."}
FIRST = {"model": "claude-3-opus-20240229", "max_tokens": 1024, "tools": [TOOL], "messages": [ASK]}


def _second(first_reply: dict) -> dict:
    """The agent's next request: the history, the reply, and the tool's result."""
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01LRmxn9vGM1d2DZSDBowdZ1",
                                           "content": "3 open issues"}]}
    return {**FIRST, "messages": [ASK, {"role": "assistant", "content": first_reply["content"]}, result]}


@pytest.fixture
def recorded(db_path):
    """An Anthropic session of two calls, recorded from real Messages payloads: a tool call, then text."""
    tool_reply, text_reply = load_json("anthropic-messages", "anthropic-tool-no-args.json"), \
        load_json("anthropic-messages", "anthropic-text.json")
    rec = reasonlog.Recorder(db_path, writer="sync", strict=True)
    with rec.session(agent="triage", provider="anthropic", model="claude-3-opus-20240229") as s:
        s.call(request=FIRST, response=tool_reply, latency_ms=1500.0)
        s.call(request=_second(tool_reply), response=text_reply, latency_ms=800.0)
        session_id = s.id
    rec.close()
    return session_id


@pytest.fixture
def upstreams(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-test-key")
    with FixtureServer() as claude, FixtureServer() as gpt:
        yield claude, gpt


def _run(db_path, *args, code=0):
    result = CliRunner().invoke(cli, ["--db", str(db_path), "replay", *args], catch_exceptions=False)
    assert result.exit_code == code, result.output + result.stderr
    return result


def test_one_call_resent_is_recorded_as_a_replay_and_set_beside_the_original(db_path, recorded, upstreams):
    claude, _ = upstreams
    claude.reply_json(load_json("anthropic-messages", "anthropic-text.json"))
    out = _run(db_path, f"{recorded}#0", "--send", "--model", "claude-sonnet-4-5-20250929", "--base-url",
               claude.url, "--json")
    report = json.loads(out.stdout)
    sent = claude.requests[0]
    assert sent["path"] == "/v1/messages" and sent["headers"]["x-api-key"] == "sk-ant-test-key"
    assert sent["body"] == {**FIRST, "model": "claude-sonnet-4-5-20250929"}  # the recorded request, on the new model
    row = report["calls"][0]
    assert (row["same_tool"], row["same_arguments"], row["same_stop_reason"]) == (False, False, False)
    assert row["stop_reasons"] == ["tool", "end"] and row["text_similarity"] == 0.033
    assert row["original"]["tools"] == [{"name": "updateIssueList", "arguments": {}}]
    assert row["replay"]["text"].startswith("Hello! I'm doing well") and row["replay"]["tools"] == []
    # claude-3-opus: $15 / $75 per million; claude-sonnet-4-5: $3 / $15. 602 in, 93 out; 12 in, 29 out.
    assert row["cost_usd"] == [0.016005, 0.000471] and row["latency_ms"][0] == 1500.0
    assert row["original"]["tokens"] == {"input_tokens": 602, "cache_read_tokens": 0, "cache_write_tokens": 0,
                                         "output_tokens": 93}
    assert report["estimate_usd"] == 0.003201  # 602 x $3/M + the recorded 93 output x $15/M, before sending
    store = reasonlog.open_store(db_path, read_only=True)
    replayed = store.get_call(row["replay_call"])
    assert replayed["replay_of"] == row["call"] and replayed["model"] == "claude-sonnet-4-5-20250929"
    assert store.get_session(replayed["session_id"])["run"] == "replays"
    assert store.replay_links(recorded) == {"replay_of": None, "replays": [report["replay_session"]]}
    assert store.replay_links(report["replay_session"]) == {"replay_of": recorded, "replays": []}


def test_the_side_by_side_report_names_what_differs(db_path, recorded, upstreams):
    claude, _ = upstreams
    claude.reply_json(load_json("anthropic-messages", "anthropic-text.json"))
    out = _run(db_path, f"{recorded}#0", "--send", "--model", "claude-sonnet-4-5-20250929", "--base-url",
               claude.url).stdout
    assert "updateIssueList({})" in out and "tool_use" in out and "end_turn" in out
    assert "same tool: no  same arguments: no  same stop reason: no  text similarity: 0.033" in out
    assert "$0.016005" in out and "$0.000471" in out and "1,500 ms" in out
    assert "+Hello! I'm doing well" in out  # the text diff
    assert "estimated cost of 1 call to claude-sonnet-4-5-20250929: $0.003201" in _run(
        db_path, f"{recorded}#0", "--send", "--model", "claude-sonnet-4-5-20250929", "--base-url", claude.url,
        code=1).stderr  # no reply queued: the stand-in answers 500, named on one line


def _session_onto_openai(db_path, recorded, gpt, *extra, code=0):
    gpt.reply_json(load_json("openai-chat", "mistral-tool-call.json"))
    gpt.reply_json(load_json("openai-chat", "openai-text.json"))
    return _run(db_path, recorded, "--send", "--provider", "openai", "--model", "gpt-4.1-nano", "--base-url",
                gpt.url, "--concurrency", "1", *extra, code=code)


def test_a_session_resent_onto_another_provider_is_compared_call_by_call(db_path, recorded, upstreams):
    _, gpt = upstreams
    report = json.loads(_session_onto_openai(db_path, recorded, gpt, "--json").stdout)
    assert [r["path"] for r in gpt.requests] == ["/v1/chat/completions"] * 2
    assert gpt.requests[0]["headers"]["authorization"] == "Bearer sk-openai-test-key"
    assert gpt.requests[1]["body"]["messages"][1:] == [  # the recorded context, in Chat's shape
        {"role": "assistant", "content": load_json("anthropic-messages", "anthropic-tool-no-args.json")[
            "content"][0]["text"], "tool_calls": [{"id": "toolu_01LRmxn9vGM1d2DZSDBowdZ1", "type": "function",
                                                   "function": {"name": "updateIssueList", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "toolu_01LRmxn9vGM1d2DZSDBowdZ1", "content": "3 open issues"}]
    first, second = report["calls"]
    assert (first["same_tool"], first["same_arguments"], first["same_stop_reason"]) == (False, False, True)
    assert [t["name"] for t in first["replay"]["tools"]] == ["weather"] and first["stop_reasons"] == ["tool", "tool"]
    assert (second["same_tool"], second["same_arguments"], second["same_stop_reason"]) == (True, True, True)
    assert second["stop_reasons"] == ["end", "end"]
    # gpt-4.1-nano: $0.10 / $0.40 per million. 124 in + 22 out; 16 in + 363 out.
    assert [r["cost_usd"][1] for r in report["calls"]] == [0.0000212, 0.0001468]
    totals = report["totals"]
    assert {k: totals[k] for k in ("calls", "errors", "same_tool", "same_arguments", "same_stop_reason")} == \
        {"calls": 2, "errors": 0, "same_tool": 1, "same_arguments": 1, "same_stop_reason": 2}
    assert totals["cost_usd"] == [0.01836, 0.000168]  # claude-3-opus: 0.016005 + (12 in + 29 out) 0.002355
    # no text in the tool call: 0; "for" and "are" shared by 20 and 250 words: 2 x 2 / 270 = 0.015
    assert (first["text_similarity"], second["text_similarity"], totals["mean_text_similarity"]) == \
        (0.0, 0.015, 0.0075)
    assert totals["latency_ms"][0] == 2300.0
    store = reasonlog.open_store(db_path, read_only=True)
    replay = store.get_session(report["replay_session"])
    assert [c["replay_of"] for c in replay["calls"]] == [first["call"], second["call"]]
    assert [c["provider"] for c in replay["calls"]] == ["openai", "openai"]


def test_a_request_translated_to_openai_and_back_is_the_recorded_one(db_path, recorded, upstreams):
    _, gpt = upstreams
    _session_onto_openai(db_path, recorded, gpt, "--json")
    sent = gpt.requests[1]["body"]
    back = translate_request(sent, OPENAI_CHAT, ANTHROPIC, "claude-3-opus-20240229")
    tool_reply = load_json("anthropic-messages", "anthropic-tool-no-args.json")
    assert back.notices == [] and back.request == _second(tool_reply)


def test_what_cannot_be_translated_is_named_on_stderr(db_path, upstreams):
    _, gpt = upstreams
    request = copy.deepcopy(FIRST)
    request["system"] = [{"type": "text", "text": "Triage issues.", "cache_control": {"type": "ephemeral"}}]
    request["tools"].append({"type": "web_search_20250305", "name": "web_search"})
    rec = reasonlog.Recorder(db_path, writer="sync", strict=True)
    with rec.session(provider="anthropic") as s:
        call = s.call(request=request, response=load_json("anthropic-messages", "anthropic-text.json"))
    rec.close()
    gpt.reply_json(load_json("openai-chat", "openai-text.json"))
    out = _run(db_path, call, "--send", "--provider", "openai", "--model", "gpt-4.1-nano", "--base-url", gpt.url,
               "--json")
    assert "notice: not sent as recorded: cache_control (Anthropic prompt caching mark)" in out.stderr
    assert "notice: not sent as recorded: Anthropic server tool web_search (web_search_20250305)" in out.stderr
    assert json.loads(out.stdout)["calls"][0]["notices"] == [
        "cache_control (Anthropic prompt caching mark)", "Anthropic server tool web_search (web_search_20250305)"]
    assert [t["function"]["name"] for t in gpt.requests[0]["body"]["tools"]] == ["updateIssueList"]


def test_max_cost_refuses_before_anything_is_sent(db_path, recorded, upstreams):
    _, gpt = upstreams
    out = _session_onto_openai(db_path, recorded, gpt, "--max-cost", "0.0001", code=1)
    # the recorded 602 + 12 input and 93 + 29 output tokens at gpt-4.1-nano's prices
    assert out.stderr.splitlines() == [
        "estimated cost of 2 calls to gpt-4.1-nano: $0.000110",
        "error: the estimated cost of 2 calls to gpt-4.1-nano is more than --max-cost $0.000100; nothing was sent"]
    assert gpt.requests == []
    assert _session_onto_openai(db_path, recorded, gpt, "--max-cost", "0.0002", "--json").exit_code == 0


def test_a_missing_key_is_named_on_one_line(db_path, recorded, upstreams, monkeypatch):
    _, gpt = upstreams
    monkeypatch.delenv("OPENAI_API_KEY")
    out = _session_onto_openai(db_path, recorded, gpt, code=1)
    assert out.stderr == ("error: set OPENAI_API_KEY to send to openai: recorded keys are masked, so a replay is"
                          " sent with your own key\n")
    assert gpt.requests == [] and out.stdout == ""


def test_json_has_one_shape(db_path, recorded, upstreams):
    _, gpt = upstreams
    report = json.loads(_session_onto_openai(db_path, recorded, gpt, "--json").stdout)
    assert sorted(report) == ["calls", "estimate_usd", "original_session", "replay_session", "totals"]
    assert sorted(report["calls"][0]) == [
        "call", "cost_usd", "idx", "latency_ms", "notices", "original", "replay", "replay_call", "same_arguments",
        "same_stop_reason", "same_tool", "stop_reasons", "text_diff", "text_similarity"]
    assert sorted(report["calls"][0]["replay"]) == ["cost_usd", "error", "latency_ms", "model", "stop_reason",
                                                    "text", "tokens", "tools"]
    assert sorted(report["totals"]) == ["calls", "cost_usd", "errors", "latency_ms", "mean_text_similarity",
                                        "same_arguments", "same_stop_reason", "same_tool"]


def test_on_a_terminal_over_the_budget_asks_first(db_path, recorded, upstreams):
    """stdin a terminal (a pty): the question is asked, and `n` sends nothing, `y` sends."""
    import pty
    import sys

    _, gpt = upstreams
    gpt.reply_json(load_json("openai-chat", "mistral-tool-call.json"))
    gpt.reply_json(load_json("openai-chat", "openai-text.json"))
    command = [sys.executable, "-m", "reasonlog", "--db", str(db_path), "replay", recorded, "--send", "--provider",
               "openai", "--model", "gpt-4.1-nano", "--base-url", gpt.url, "--max-cost", "0.0001", "--json"]
    for answer, code, sent in ((b"n\n", 1, 0), (b"y\n", 0, 2)):
        main, terminal = pty.openpty()
        done = _asked(command, main, terminal, answer)
        assert done.returncode == code, done.stderr
        assert "the estimate is more than --max-cost $0.000100; send anyway? [y/N]" in done.stderr
        assert len(gpt.requests) == sent


def _asked(command, main, terminal, answer):
    import os
    import subprocess

    os.write(main, answer)
    try:
        return subprocess.run(command, stdin=terminal, capture_output=True, timeout=60, text=True)
    finally:
        os.close(main)
        os.close(terminal)


def test_a_streamed_request_is_sent_whole_and_says_so(db_path, upstreams):
    claude, _ = upstreams
    rec = reasonlog.Recorder(db_path, writer="sync", strict=True)
    with rec.session(provider="anthropic") as s:
        call = s.call(request={**FIRST, "stream": True},
                      response=load_json("anthropic-messages", "anthropic-text.json"))
    rec.close()
    claude.reply_json(load_json("anthropic-messages", "anthropic-text.json"))
    out = _run(db_path, call, "--send", "--base-url", claude.url, "--json")
    assert "notice: not sent as recorded: stream: sent non-streamed (the answer is compared whole)" in out.stderr
    assert claude.requests[0]["body"] == FIRST
    row = json.loads(out.stdout)["calls"][0]
    assert (row["same_tool"], row["same_stop_reason"], row["text_similarity"]) == (True, True, 1.0)


def test_an_answer_of_another_protocol_is_a_failed_send(db_path, recorded, upstreams):
    claude, _ = upstreams
    claude.reply_json(load_json("openai-chat", "openai-text.json"))  # a Chat completion from a Messages endpoint
    out = _run(db_path, f"{recorded}#1", "--send", "--base-url", claude.url, code=1)
    assert out.stderr.splitlines()[-1] == ("error: 1 of 1 sends failed (recorded as errors); the first: the answer is"
                                           " no anthropic response: ['choices', 'created', 'id', 'model', 'object',"
                                           " 'service_tier'] at its top")


def test_send_options_without_send_are_a_usage_error(db_path, recorded):
    out = _run(db_path, f"{recorded}#0", "--model", "gpt-5", code=2)
    assert "--model, --provider, --base-url and --max-cost go with --send" in out.stderr


def test_an_interrupted_replay_keeps_what_came_back(db_path, recorded, monkeypatch):
    """Ctrl-C while the second call waits on its answer: the first answer is recorded, the session interrupted."""
    import os
    import signal
    import subprocess
    import sys
    import threading
    import time
    from http.server import BaseHTTPRequestHandler

    from local_http import LocalHTTPServer

    answered, release = [], threading.Event()
    body = json.dumps(load_json("anthropic-messages", "anthropic-text.json")).encode()

    class Slow(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            answered.append(self.path)
            if len(answered) > 1:
                release.wait(30)  # the second answer comes only once the test lets it
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    upstream = LocalHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}
    child = subprocess.Popen([sys.executable, "-m", "reasonlog", "--db", str(db_path), "replay", recorded, "--send",
                              "--concurrency", "1", "--base-url", f"http://127.0.0.1:{upstream.server_port}"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             # as a terminal starts it: a suite run in the background inherits SIGINT ignored
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 30
        while len(answered) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # the first answer is written before the second request goes out
        child.send_signal(signal.SIGINT)
        time.sleep(0.3)
        release.set()  # the call in flight ends; its answer is not recorded
        _, err = child.communicate(timeout=30)
    finally:
        release.set()
        upstream.stop()
    assert child.returncode != 0 and "Traceback" not in err, err
    store = reasonlog.open_store(db_path, read_only=True)
    replay = store.get_session(store.replay_links(recorded)["replays"][0])
    assert replay["status"] == "interrupted" and replay["run"] == "replays"
    assert [c["replay_of"] for c in replay["calls"]] == [store.resolve_id("call", f"{recorded}#0")]


def test_a_base_url_that_is_no_url_is_one_line(db_path, recorded, upstreams):
    out = _run(db_path, f"{recorded}#0", "--send", "--base-url", "localhost:8080", code=1)
    assert out.stderr == "error: --base-url 'localhost:8080': expected http://host[:port] or https://host[:port]\n"


def test_a_responses_call_is_not_translated(db_path, upstreams):
    rec = reasonlog.Recorder(db_path, writer="sync", strict=True)
    with rec.session(provider="openai") as s:
        call = s.call(request={"model": "gpt-5", "input": [{"role": "user", "content": "hi"}]},
                      response={"role": "assistant", "content": "hello"})
    rec.close()
    out = _run(db_path, call, "--send", "--provider", "anthropic", code=1)
    assert out.stderr.splitlines() == ["error: translating to or from the OpenAI Responses API is not supported;"
                                       " replay it on OpenAI"]


def test_a_call_sent_to_gemini_goes_to_its_model_url_with_the_gemini_key(db_path, recorded, upstreams,
                                                                          monkeypatch):
    """No recorded Gemini answer is at hand, so the stand-in answers 500: the request it got is what is checked."""
    claude, _ = upstreams
    monkeypatch.setenv("GOOGLE_API_KEY", "AIza-test")
    out = _run(db_path, f"{recorded}#1", "--send", "--provider", "gemini", "--model", "gemini-2.5-flash",
               "--base-url", claude.url, code=1)
    sent = claude.requests[0]
    assert sent["path"] == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert sent["headers"]["x-goog-api-key"] == "AIza-test" and "model" not in sent["body"]
    assert [c["role"] for c in sent["body"]["contents"]] == ["user", "model", "user"]
    assert sent["body"]["contents"][2]["parts"] == [{"functionResponse": {
        "id": "toolu_01LRmxn9vGM1d2DZSDBowdZ1", "name": "updateIssueList", "response": {"content": "3 open issues"}}}]
    assert "HTTP 500: no reply queued" in out.stderr


def test_a_replay_that_meets_a_locked_database_spills_and_is_written_later(db_path, recorded, upstreams):
    """Another process holds the database's write lock while the answers come back: the replay goes to spill files
    beside the database (as a recorder's records do) instead of failing, and the next writer writes it, linked."""
    import sqlite3

    from reasonlog.capture.spillfiles import spill_dirs
    from reasonlog.replay import session as replaying

    claude, _ = upstreams
    for name in ("anthropic-tool-no-args.json", "anthropic-text.json"):
        claude.reply_json(load_json("anthropic-messages", name))
    store = reasonlog.open_store(db_path, busy_timeout_ms=20)
    original = store.get_session(recorded)
    target, planned = replaying.plan(store, [c["id"] for c in original["calls"]], provider=None, model=None,
                                     base_url=claude.url)
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # a write transaction another process keeps open
    try:
        recorded_replay = replaying.send_and_record(store, planned, target, original, concurrency=1)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert recorded_replay.spilled is True
    assert [o.error for o in recorded_replay.outcomes] == [None, None]
    assert len(list(spill_dirs(db_path)[0].glob("*.spill"))) == 4  # the start, two calls, the end
    assert store.replay_links(recorded) == {"replay_of": None, "replays": []}
    store.close()

    reasonlog.Recorder(db_path, writer="sync").close()  # the next writer replays what waits
    store = reasonlog.open_store(db_path, read_only=True)
    replay = store.get_session(recorded_replay.session_id)
    assert (replay["run"], replay["status"]) == ("replays", "completed")
    assert [c["replay_of"] for c in replay["calls"]] == [c["id"] for c in original["calls"]]
    assert [c["id"] for c in replay["calls"]] == recorded_replay.ids
    assert list(spill_dirs(db_path)[0].glob("*.spill")) == []
