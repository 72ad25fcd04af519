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
from reasonlog.providers import anthropic, openai_chat
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
