"""Summaries: the offline summarizer over real trading logs and the demo, the LLM summarizers through the real
Anthropic and OpenAI SDKs against recorded payloads on 127.0.0.1, failures kept as failures, stale and outdated
summaries recomputed, the cost question, and summaries in GET /reasoning, /v1 and the server's background."""
from __future__ import annotations

import copy
import time

import pytest
from click.testing import CliRunner
from conftest import FIXTURES
from fastapi.testclient import TestClient
from sdk_server import load_json

import reasonlog
from reasonlog.cli.main import cli
from reasonlog.demo import run_demo
from reasonlog.io.importing import plan as import_plan
from reasonlog.io.importing import run_import
from reasonlog.server.app import create_app
from reasonlog.store import SessionFilter, open_store
from reasonlog.summaries import RUN, runner
from reasonlog.summaries.llm import DEFAULT_PROMPT, LLMSummarizer, prompt_hash
from reasonlog.summaries.offline import OfflineSummarizer

AGENT_DATA = FIXTURES / "ai-trader-agent-log" / "agent_data"
ALL = SessionFilter(limit=None)
ANTHROPIC_TEXT = load_json("anthropic-messages", "anthropic-text.json")
OPENAI_TEXT = load_json("openai-chat", "openai-text.json")


def summarize(db, *args, input=None, env=None):
    return CliRunner().invoke(cli, ["--db", str(db), "summarize", *args], input=input, env=env)


def rows_by_target(store) -> dict:
    return {(r["target_kind"], r["target_id"]): r for r in store.list_summaries([s["id"] for s in
                                                                                 store.list_sessions(ALL)])}


def day(store, date: str) -> dict:
    (found,) = store.list_sessions(SessionFilter(model="gpt-5", labels={"date": date}, limit=None))
    return store.get_session(found["id"])


@pytest.fixture
def trading_db(tmp_path):
    path = tmp_path / "trading.db"
    store = open_store(path)
    run_import(store, import_plan([AGENT_DATA]))
    store.close()
    return path


def one_session_db(path, *, model="claude-sonnet-4-5", summary=None):
    """One recorded session: a question, a price check, and a bought position."""
    with reasonlog.Recorder(path, writer="sync") as rec:
        s = rec.session(agent="trader", run="r1", model=model, labels={"date": "2025-10-02"})
        with s.exchange("Day 1: decide today's trade.") as ex:
            call = ex.call(messages=[{"role": "user", "content": "Day 1: decide today's trade."}],
                           response={"role": "assistant", "content": "Bought 10 NVDA at 189.60."}, model=model)
            s.outcome("position", {"action": "buy", "symbol": "NVDA", "amount": 10, "price": 189.6}, call_id=call)
            ex.end("Bought 10 NVDA at 189.60.")
        s.end(summary=summary)
    return s.id


# ---------------------------------------------------------------------------- offline


def test_offline_summary_of_a_real_trading_day_names_its_trades(trading_db):
    result = summarize(trading_db, "--messages")
    assert result.exit_code == 0, result.output
    store = open_store(trading_db)
    session = day(store, "2025-10-02")
    rows = rows_by_target(store)
    text = rows[("session", session["id"])]["text"]
    assert text.startswith("7 outcomes: bought 10 NVDA at 189.60, bought 6 GOOGL at 245.15, bought 6 AMD at"
                           " 168.675, bought 1 CRWD at 501.225,")
    assert len(text) == min(len(text), 400)
    assert "1 model call." in text
    # 5 models x 20 days: a session and an exchange summary each, and one per assistant reply (154)
    assert store.summary_counts() == {"session": {"ok": 100, "failed": 0}, "exchange": {"ok": 100, "failed": 0},
                                      "message": {"ok": 154, "failed": 0}}
    assert {r["summarizer"] for r in rows.values()} == {"offline"}
    assert {r["model"] for r in rows.values()} == {None}


def test_the_offline_summarizer_is_deterministic_and_within_its_limit(tmp_path):
    run_demo(tmp_path / "d.db")
    store = open_store(tmp_path / "d.db")
    texts = []
    for limit in (400, 120):
        summarizer = OfflineSummarizer(limit=limit)
        work = runner.plan(store, ALL, summarizer, ("session", "exchange", "message"))
        texts.append([summarizer.summarize(w.target) for w in work])
        assert max(len(t) for t in texts[-1]) <= limit
    again = [OfflineSummarizer().summarize(w.target)
             for w in runner.plan(store, ALL, OfflineSummarizer(), ("session", "exchange", "message"))]
    assert again == texts[0]
    assert len(texts[0]) == 2 + 6 + 12  # 2 agents x (1 session, 3 exchanges, 6 assistant replies)
    failed_day = [t for t in texts[0] if "get_price (1 failed). 3 model calls, 1 failed." in t]
    assert len(failed_day) == 2  # each agent's second day: the price feed timed out and so did one call


def test_summarising_again_does_nothing_until_the_session_grows(tmp_path):
    db = tmp_path / "t.db"
    with reasonlog.Recorder(db, writer="sync") as rec:
        s = rec.session(agent="a", model="m")
        s.call(messages=[{"role": "user", "content": "hi"}], response={"role": "assistant", "content": "Hello."})
        store = open_store(db)
        assert len(runner.run(store, runner.plan(store, ALL, OfflineSummarizer()), OfflineSummarizer()).errors) == 0
        assert runner.plan(store, ALL, OfflineSummarizer()) == []
        s.call(messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello."},
                         {"role": "user", "content": "buy"}], response={"role": "assistant", "content": "Done."})
        work = runner.plan(store, ALL, OfflineSummarizer())
        assert [(w.target.kind, w.reason) for w in work] == [("session", "outdated")]
        runner.run(store, work, OfflineSummarizer())
        (row,) = store.list_summaries([s.id])
        assert row["text"] == "2 model calls. Said: Done."


# ---------------------------------------------------------------------------- readers


def test_reasoning_and_v1_return_stored_summaries_and_fall_back_to_the_sessions_own(tmp_path):
    db = tmp_path / "t.db"
    sid = one_session_db(db, summary="the agent's own summary")
    client = TestClient(create_app(lambda: open_store(db, read_only=True)))
    before = client.get("/reasoning", params={"include_full_conversation": True}).json()["sessions"][0]
    assert before["session_summary"] == "the agent's own summary"
    assert [m["summary"] for m in before["conversation"]] == [None, None]

    assert summarize(db, "--messages").exit_code == 0
    client = TestClient(create_app(lambda: open_store(db, read_only=True)))
    after = client.get("/reasoning", params={"include_full_conversation": True}).json()["sessions"][0]
    assert after["session_summary"] == ("Outcome: bought 10 NVDA at 189.60. 1 model call."
                                        " Said: Bought 10 NVDA at 189.60.")
    assert [m["summary"] for m in after["conversation"]] == [
        None, "Outcome: bought 10 NVDA at 189.60. Bought 10 NVDA at 189.60."]
    one = client.get(f"/v1/sessions/{sid}").json()
    assert one["session_summary"] == after["session_summary"]
    assert one["exchanges"][0]["summary"] == ("Outcome: bought 10 NVDA at 189.60. 1 model call. Asked: Day 1:"
                                              " decide today's trade. Said: Bought 10 NVDA at 189.60.")
    assert [m["summary"] for m in one["messages"]] == [m["summary"] for m in after["conversation"]]


def test_the_server_summarises_in_the_background(tmp_path):
    db = tmp_path / "t.db"
    one_session_db(db)
    app = create_app(lambda: open_store(db), summarizer=OfflineSummarizer, summarize_every_s=0.05)
    with TestClient(app) as client:
        deadline = time.monotonic() + 10
        while app.state.summaries.passes < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        body = client.get("/reasoning").json()
    assert app.state.summaries.last_report.ok == 2 and app.state.summaries.last_report.failed == 0
    assert body["sessions"][0]["session_summary"].startswith("Outcome: bought 10 NVDA at 189.60.")


def test_deleting_a_session_deletes_its_summaries(tmp_path):
    db = tmp_path / "t.db"
    sid = one_session_db(db)
    assert summarize(db).exit_code == 0
    store = open_store(db)
    assert len(store.list_summaries([sid])) == 2
    store.delete_sessions([sid])
    assert store.list_summaries([sid]) == []


def test_a_summary_row_without_its_fields_is_refused(tmp_path):
    store = open_store(tmp_path / "t.db")
    good = {"target_kind": "session", "target_id": "s1", "session_id": "s1", "status": "failed", "text": None,
            "error": "boom", "source_hash": "h", "summarizer": "offline", "model": None, "prompt_hash": None,
            "version": "v", "created_at": "2025-01-01T00:00:00Z", "attempted_at": "2025-01-01T00:00:00Z"}
    with pytest.raises(ValueError, match="error: a failed summary needs its error"):
        store.save_summaries([{**good, "error": ""}])
    with pytest.raises(ValueError, match="target_kind: expected one of session, exchange, message, got 'call'"):
        store.save_summaries([{**good, "target_kind": "call"}])
    with pytest.raises(ValueError, match="text: a summary that succeeded needs its text"):
        store.save_summaries([{**good, "status": "ok"}])
    assert store.list_summaries(["s1"]) == []


# ---------------------------------------------------------------------------- LLM summarizers, real SDKs


def test_anthropic_summaries_are_stored_with_their_provenance_and_their_calls_recorded_apart(tmp_path, server):
    db = tmp_path / "t.db"
    sid = one_session_db(db)
    server.reply_json(ANTHROPIC_TEXT)
    server.reply_json(ANTHROPIC_TEXT)
    result = summarize(db, "--summarizer", "anthropic", "--base-url", server.url, "--yes",
                       env={"ANTHROPIC_API_KEY": "test-key"})
    assert result.exit_code == 0, result.output
    assert "2 calls" in result.output and "at most 600 output tokens" in result.output
    sent = [r["body"] for r in server.requests]
    assert [r["path"] for r in server.requests] == ["/v1/messages"] * 2
    assert {b["model"] for b in sent} == {"claude-haiku-4-5"}
    assert "[outcome] bought 10 NVDA at 189.60" in sent[0]["messages"][0]["content"]
    store = open_store(db)
    rows = store.list_summaries([sid])
    assert {r["text"] for r in rows} == {ANTHROPIC_TEXT["content"][0]["text"]}
    assert {(r["summarizer"], r["model"], r["prompt_hash"]) for r in rows} == {
        ("anthropic", "claude-haiku-4-5", prompt_hash(DEFAULT_PROMPT))}
    # the summarizer's own calls: in their own run, with the tokens the provider reported; none in the session
    (own,) = store.list_sessions(SessionFilter(run=RUN, limit=None))
    assert (own["call_count"], own["input_tokens"], own["output_tokens"]) == (2, 24, 58)
    assert store.get_session(sid)["call_count"] == 1
    assert runner.plan(store, ALL, OfflineSummarizer()) == []  # the summarizer's run is never summarised


def test_openai_protocol_server_with_the_sessions_own_model(tmp_path, server):
    db = tmp_path / "t.db"
    sid = one_session_db(db, model="qwen2.5:7b")
    server.reply_json(OPENAI_TEXT)
    server.reply_json(OPENAI_TEXT)
    result = summarize(db, "--summarizer", "openai", "--base-url", server.url, "--model", "same", "--yes")
    assert result.exit_code == 0, result.output
    assert "cost unknown (no price for qwen2.5:7b)" in result.output
    sent = [r["body"] for r in server.requests]
    assert [r["path"] for r in server.requests] == ["/chat/completions"] * 2
    assert [(b["model"], b["max_tokens"]) for b in sent] == [("qwen2.5:7b", 300)] * 2
    rows = open_store(db).list_summaries([sid])
    assert {(r["text"], r["model"]) for r in rows} == {(OPENAI_TEXT["choices"][0]["message"]["content"], "qwen2.5:7b")}


def test_saying_no_to_the_cost_question_spends_nothing(tmp_path, server):
    db = tmp_path / "t.db"
    sid = one_session_db(db)
    result = summarize(db, "--summarizer", "anthropic", "--base-url", server.url, input="n\n",
                       env={"ANTHROPIC_API_KEY": "test-key"})
    assert result.exit_code == 1
    assert "2 calls" in result.output and "Go on?" in result.output
    assert server.requests == []
    assert open_store(db).list_summaries([sid]) == []


def test_a_failed_summary_is_recorded_kept_apart_from_the_text_and_retried(tmp_path, server):
    db = tmp_path / "t.db"
    sid = one_session_db(db)
    store = open_store(db)
    runner.run(store, runner.plan(store, ALL, OfflineSummarizer()), OfflineSummarizer())
    offline_text = {r["target_kind"]: r["text"] for r in store.list_summaries([sid])}

    cut = copy.deepcopy(ANTHROPIC_TEXT)
    cut["stop_reason"] = "max_tokens"
    server.reply_json(cut)  # the session's summary is cut off; the exchange's gets no reply (500)
    llm = LLMSummarizer("anthropic", db=str(db), base_url=server.url, api_key="test-key", max_retries=0)
    work = runner.plan(store, ALL, llm, stale=True)
    assert [(w.target.kind, w.reason) for w in work] == [("session", "stale"), ("exchange", "stale")]
    report = runner.run(store, work, llm)
    assert (report.ok, report.failed) == (0, 2)
    rows = {r["target_kind"]: r for r in store.list_summaries([sid])}
    assert rows["session"]["error"] == ("the reply was cut at 300 tokens (stop reason max_tokens);"
                                        " not stored as a summary")
    assert rows["exchange"]["error"].startswith("InternalServerError: Error code: 500")
    for kind in ("session", "exchange"):  # the earlier summary is kept, and what made it
        assert (rows[kind]["status"], rows[kind]["text"], rows[kind]["summarizer"], rows[kind]["failures"]) == (
            "failed", offline_text[kind], "offline", 1)

    llm = LLMSummarizer("anthropic", db=str(db), base_url=server.url, api_key="test-key", max_retries=0)
    work = runner.plan(store, ALL, llm)  # failed ones are retried without --stale
    assert [(w.target.kind, w.reason) for w in work] == [("session", "failed"), ("exchange", "failed")]
    server.reply_json(ANTHROPIC_TEXT)
    server.reply_json(ANTHROPIC_TEXT)
    assert runner.run(store, work, llm).ok == 2
    rows = {r["target_kind"]: r for r in store.list_summaries([sid])}
    assert {(r["status"], r["text"], r["error"], r["failures"]) for r in rows.values()} == {
        ("ok", ANTHROPIC_TEXT["content"][0]["text"], None, 0)}


def test_stale_recomputes_only_what_another_prompt_made(tmp_path, server):
    db = tmp_path / "t.db"
    one_session_db(db)
    second = one_session_db(db)
    store = open_store(db)
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Summarise this {kind} in one line:\n{transcript}")
    first = LLMSummarizer("openai", db=str(db), base_url=server.url, max_retries=0, prompt=prompt.read_text())
    server.default = None
    for _ in range(4):
        server.reply_json(OPENAI_TEXT)
    assert runner.run(store, runner.plan(store, ALL, first), first).ok == 4
    assert summarize(db, "--summarizer", "openai", "--base-url", server.url, "--prompt-file", str(prompt),
                     "--stale", "--yes").output.strip() == "nothing to summarise"
    prompt.write_text("One line, please, about this {kind}:\n{transcript}")
    for _ in range(2):
        server.reply_json(OPENAI_TEXT)
    result = summarize(db, "--summarizer", "openai", "--base-url", server.url, "--prompt-file", str(prompt),
                       "--stale", "--yes", "--run", "r1", "--limit", "1")
    assert result.exit_code == 0, result.output
    assert len(server.requests) == 6
    assert server.requests[-1]["body"]["messages"][0]["content"].startswith("One line, please, about this exchange:")
    hashes = {r["target_id"]: r["prompt_hash"] for r in store.list_summaries([second])}
    assert set(hashes.values()) == {prompt_hash(prompt.read_text())}  # the newest session (limit 1) only


def test_bad_options_are_one_line_errors(tmp_path):
    db = tmp_path / "t.db"
    one_session_db(db)
    prompt = tmp_path / "p.txt"
    prompt.write_text("Summarise please.")
    result = summarize(db, "--summarizer", "openai", "--base-url", "http://127.0.0.1:9", "--prompt-file", str(prompt))
    assert result.exit_code == 2
    assert f"{prompt}: prompt: expected a template containing {{transcript}}" in result.output
    result = summarize(db, "--summarizer", "anthropic", env={"ANTHROPIC_API_KEY": ""})
    assert result.exit_code == 2
    assert "--summarizer anthropic: set ANTHROPIC_API_KEY (or pass --base-url for a local server)" in result.output
    result = summarize(db, "--model", "gpt-5")
    assert result.exit_code == 2 and "are for --summarizer anthropic or openai" in result.output
    assert "Traceback" not in result.output


# ---------------------------------------------------------------------------- both stores


def test_the_summaries_table_behaves_the_same_on_sqlite_and_postgresql(db):
    sid = one_session_db(db)
    store = open_store(db)
    row = {"target_kind": "session", "target_id": sid, "session_id": sid, "status": "ok", "text": "first",
           "error": None, "source_hash": "h1", "summarizer": "offline", "model": None, "prompt_hash": None,
           "version": "v1", "created_at": "2025-01-01T00:00:00Z", "attempted_at": "2025-01-01T00:00:00Z"}
    store.save_summaries([row])
    store.save_summaries([{**row, "status": "failed", "text": None, "error": "timeout", "summarizer": "anthropic",
                           "attempted_at": "2025-01-02T00:00:00Z"}])
    store.save_summaries([{**row, "status": "failed", "text": None, "error": "timeout again",
                           "attempted_at": "2025-01-03T00:00:00Z"}])
    (kept,) = store.list_summaries([sid])
    assert {k: kept[k] for k in ("status", "text", "error", "summarizer", "failures", "created_at",
                                 "attempted_at")} == {
        "status": "failed", "text": "first", "error": "timeout again", "summarizer": "offline", "failures": 2,
        "created_at": "2025-01-01T00:00:00Z", "attempted_at": "2025-01-03T00:00:00Z"}
    assert store.summary_counts()["session"] == {"ok": 0, "failed": 1}
    store.save_summaries([{**row, "text": "second", "created_at": "2025-01-04T00:00:00Z"}])
    (done,) = store.list_summaries([sid])
    assert (done["status"], done["text"], done["error"], done["failures"]) == ("ok", "second", None, 0)
    store.delete_sessions([sid])
    assert store.list_summaries([sid]) == []
    store.close()
