"""Recording from Python: what a user writes, and what they get back."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import reasonlog
from reasonlog import RecordError, Usage
from reasonlog.query import timeline

TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "get_price", "input": {"symbol": "NVDA"}}


def record_trade(rec: reasonlog.Recorder) -> tuple[str, list[str]]:
    calls = []
    with rec.session(agent="gpt-5", run="job-1", model="gpt-5", labels={"date": "2025-10-02"}) as s:
        with s.exchange("Decide today's trade") as ex:
            history = [{"role": "user", "content": "Decide today's trade"}]
            first = [{"type": "thinking", "thinking": "check NVDA first", "signature": "sig"},
                     {"type": "text", "text": "Checking."}, TOOL_USE]
            calls.append(s.call(system="You trade.", messages=history, response=first, stop_reason="tool_use",
                                usage=Usage(input_tokens=100, output_tokens=20, cache_read_tokens=50,
                                            cache_write_tokens=30, cache_write_1h_tokens=10, reasoning_tokens=5),
                                latency_ms=1200, provider_message_id="msg_1", request_id="req_1",
                                raw={"id": "msg_1", "content": first}))
            history += [{"role": "assistant", "content": first}]
            s.tool_result("toolu_1", "NVDA 180.5", name="get_price", duration_ms=12.5)
            history += [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                      "content": "NVDA 180.5"}]}]
            calls.append(s.call(system="You trade.", messages=history, response="Buy 10 NVDA.", stop_reason="end_turn",
                                usage=Usage(input_tokens=10, output_tokens=5), latency_ms=800))
            s.outcome("trade", {"action": "buy", "symbol": "NVDA", "amount": 10})
            ex.end("Bought 10 NVDA")
        s.call(messages=history, error=TimeoutError("model timed out"), latency_ms=60000)
        sid = s.id
    return sid, calls


def test_a_recorded_session_reads_back_whole(recorder, store_of):
    sid, (c1, c2) = record_trade(recorder)
    store = store_of()
    session = store.get_session(sid)
    assert (session["agent"], session["run"], session["model"], session["labels"]) == \
        ("gpt-5", "job-1", "gpt-5", {"date": "2025-10-02"})
    assert session["status"] == "completed" and session["ended_at"]
    assert session["call_count"] == 3 and session["error_count"] == 1
    assert [e["result"] for e in session["exchanges"]] == ["Bought 10 NVDA"]
    first = store.get_call(c1)
    assert (first["input_tokens"], first["output_tokens"], first["cache_read_tokens"], first["cache_write_tokens"],
            first["cache_write_1h_tokens"], first["reasoning_tokens"]) == (100, 20, 50, 30, 10, 5)
    assert (first["provider_message_id"], first["request_id"], first["stop_reason"]) == ("msg_1", "req_1", "tool_use")
    assert first["raw"] == {"id": "msg_1", "content": first["response"]["content"]}
    assert first["cost_source"].startswith("computed@") and first["cost_usd"] > 0


def test_show_pairs_tool_calls_with_results_and_places_outcomes(recorder, store_of):
    sid, _ = record_trade(recorder)
    items = timeline(store_of().get_session(sid))
    kinds = [i["kind"] for i in items]
    assert kinds == ["exchange", "system", "message", "call", "message", "call", "message", "outcome", "failed_call"]
    assistant = items[4]
    tool = next(p for p in assistant["parts"] if p["kind"] == "tool_use")
    assert tool["result"] == {"content": "NVDA 180.5", "is_error": False, "duration_ms": 12.5}
    assert [p["kind"] for p in assistant["parts"]] == ["thinking", "text", "tool_use"]
    assert items[7]["payload"] == {"action": "buy", "symbol": "NVDA", "amount": 10}
    assert items[8]["error"] == {"type": "TimeoutError", "message": "model timed out"}


@pytest.mark.parametrize("bad, message", [
    (dict(usage={"input_tokens": -1}), "usage.input_tokens"),
    (dict(response=[{"type": "hologram"}]), "unknown part kind 'hologram'"),
    (dict(messages="hello"), "messages: expected a list"),
    (dict(latency_ms="fast"), "latency_ms"),
    (dict(usage={"prompt_tokens": 3}), "unknown field"),
])
def test_strict_mode_raises_bad_input_at_the_call_site(recorder, bad, message):
    with recorder.session(agent="a") as s:
        with pytest.raises(RecordError, match=message):
            s.call(**bad)


def test_default_mode_counts_rejections_and_keeps_what_was_recorded(db_path, store_of, caplog):
    rec = reasonlog.Recorder(db_path, writer="sync")
    with rec.session(agent="a") as s:
        good = s.call(messages=[{"role": "user", "content": "hi"}], response="hello")
        assert s.call(usage={"input_tokens": -5}) is None
        s.outcome("", None)
    rec.close()
    assert rec.stats()["rejected"] == 2
    assert "rejected a record" in caplog.text
    store = store_of()
    assert store.get_call(good)["response"]["content"][0]["text"] == "hello"
    assert store.status()["rejected_records"] == 2


def test_background_writer_flushes_and_counts_drops(db_path, store_of):
    rec = reasonlog.Recorder(db_path, max_queue=5, flush_interval=60, on_full="drop")  # dropping is explicit
    with rec.session(agent="a") as s:
        for i in range(20):
            s.call(messages=[{"role": "user", "content": f"q{i}"}], response=f"a{i}")
    assert rec.flush(10)
    rec.close()
    stats = rec.stats()
    assert stats["dropped"] > 0 and stats["written"] + stats["dropped"] >= 22
    assert store_of().status()["dropped_records"] == stats["dropped"]


def _run(code: str, db) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env={**os.environ, "REASONLOG_DB": str(db)},
                          capture_output=True, text=True, timeout=60)


def test_a_session_never_closed_is_flushed_at_exit_and_shows_interrupted(db_path, store_of):
    out = _run("""
        import reasonlog
        rec = reasonlog.Recorder()
        s = rec.session(agent="crashy")
        s.call(messages=[{"role": "user", "content": "hi"}], response="hello")
        print(s.id)
    """, db_path)
    assert out.returncode == 0, out.stderr
    session = store_of().get_session(out.stdout.strip())
    assert session["status"] == "interrupted" and session["call_count"] == 1


def test_a_killed_process_leaves_a_readable_interrupted_session(db_path, store_of):
    out = _run("""
        import os, signal, reasonlog
        rec = reasonlog.Recorder(writer="sync")
        s = rec.session(agent="killed")
        s.call(messages=[{"role": "user", "content": "hi"}], response="hello")
        print(s.id, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """, db_path)
    session = store_of().get_session(out.stdout.strip())
    assert session["status"] == "interrupted"
    assert session["messages"][-1]["content"]["content"][0]["text"] == "hello"


def test_a_forked_child_records_its_own_calls(db_path, store_of):
    rec = reasonlog.Recorder(db_path)
    s = rec.session(agent="parent")
    s.call(messages=[{"role": "user", "content": "before fork"}], response="p")
    assert rec.flush(10)
    pid = os.fork()
    if pid == 0:
        child = rec.session(agent="child")
        child.call(messages=[{"role": "user", "content": "in child"}], response="c")
        child.end()
        rec.close(timeout=10)  # must not end the parent's session
        os._exit(0)
    os.waitpid(pid, 0)
    parent = store_of().get_session(s.id)
    assert parent["status"] == "open" and parent["ended_at"] is None
    s.end()
    rec.close()
    agents = sorted(x["agent"] for x in store_of().list_sessions(reasonlog.SessionFilter()))
    assert agents == ["child", "parent"]
    assert store_of().status()["counts"]["calls"] == 2


@pytest.mark.parametrize("target", ["mysql://x/y", "ftp://h/db"])
def test_a_target_it_cannot_write_is_refused_clearly_and_creates_nothing(tmp_path, monkeypatch, target):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="not a database reasonlog knows"):
        reasonlog.Recorder(target)
    with pytest.raises(reasonlog.store.StoreError, match="not a database reasonlog knows"):
        reasonlog.open_store(target)
    assert list(tmp_path.iterdir()) == []


def test_a_postgresql_server_that_is_not_there_is_named_without_its_password(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(reasonlog.store.StoreError) as caught:
        reasonlog.open_store("postgresql://agent:hunter2@127.0.0.1:1/team")
    assert str(caught.value).startswith("postgresql://agent:***@127.0.0.1:1/team: cannot connect (")
    assert "hunter2" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []  # no file named after the URL


@pytest.mark.parametrize("target", ["https://reasonlog.example", "http://127.0.0.1:8080"])
def test_a_server_url_is_for_recorders_and_never_taken_for_a_file(tmp_path, monkeypatch, target):
    monkeypatch.chdir(tmp_path)
    rec = reasonlog.Recorder(target, writer="sync")
    assert (rec.url, rec.db_path) == (target, "")
    with pytest.raises(reasonlog.store.StoreError, match="a reasonlog serve URL is for recorders"):
        reasonlog.open_store(target)
    assert list(tmp_path.iterdir()) == []


def test_a_sqlite_url_and_a_path_are_the_same_database(tmp_path):
    with reasonlog.Recorder(f"sqlite:///{tmp_path}/a.db", writer="sync") as rec, rec.session(agent="url"):
        pass
    assert reasonlog.open_store(tmp_path / "a.db", read_only=True).count_sessions(reasonlog.SessionFilter()) == 1


def test_a_session_opened_without_a_model_shows_the_model_of_its_first_call(recorder, store_of):
    with recorder.session(agent="adapter user") as s:  # as with instrument_openai inside rec.session(...)
        s.call(request={"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]}, response="hello")
        s.call(request={"model": "gpt-5-mini", "messages": [{"role": "user", "content": "and?"}]}, response="so")
    with recorder.session(agent="said", model="claude-sonnet-4-5") as named:
        named.call(request={"model": "gpt-5", "messages": []}, response="x")
    models = {x["agent"]: x["model"] for x in store_of().list_sessions(reasonlog.SessionFilter())}
    assert models == {"adapter user": "gpt-5", "said": "claude-sonnet-4-5"}
