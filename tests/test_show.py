"""`show` as the debugging view: one line per call with a short id, tables that fit, limits that say so."""
from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import hypothesis
import hypothesis.strategies as st
import pytest
from click.testing import CliRunner

import reasonlog
from reasonlog.cli.main import cli
from reasonlog.store import SessionFilter
from reasonlog.wire.codec import canonical

TOOL_A = {"name": "get_price", "description": "price", "input_schema": {"type": "object"}}
TOOL_B = {"name": "buy", "description": "buy", "input_schema": {"type": "object"}}


def _msg(role, text):
    return {"role": role, "content": text}


def _usage(i, o, r=0, w=0):
    return reasonlog.Usage(input_tokens=i, output_tokens=o, cache_read_tokens=r, cache_write_tokens=w)


@pytest.fixture
def run(db_path):
    def invoke(*args, ok=True, columns=None):
        env = {"COLUMNS": str(columns)} if columns else {}
        result = CliRunner().invoke(cli, ["--db", str(db_path), *args], env=env, catch_exceptions=False)
        if ok:
            assert result.exit_code == 0, result.output
        return result

    return invoke


@pytest.fixture
def window_session(db_path):
    """Four calls: a first call, two added, a slide with a new system prompt and tools, a compaction."""
    u1, a1, u2, a2, u3, a3, u4 = (_msg("user", "u1"), _msg("assistant", "a1"), _msg("user", "u2"),
                                  _msg("assistant", "a2"), _msg("user", "u3"), _msg("assistant", "a3"),
                                  _msg("user", "u4"))
    rec = reasonlog.Recorder(db_path, writer="sync", strict=True)
    with rec.session(agent="trader", run="r1", model="gpt-5") as s:
        s.call(system="S1", messages=[u1], tools=[TOOL_A], response=a1, model="gpt-5", stop_reason="tool_use",
               usage=_usage(1200, 34, 5000, 700), cost_usd=0.0123, latency_ms=1240)
        s.call(system="S1", messages=[u1, a1, u2], tools=[TOOL_A], response=a2, model="gpt-5",
               stop_reason="end_turn", usage=_usage(10, 2), cost_usd=0.5, latency_ms=80)
        s.call(system="S2", messages=[u2, a2, u3], tools=[TOOL_A, TOOL_B], response=a3, model="gpt-5-mini",
               stop_reason="end_turn", usage=_usage(10, 2), cost_usd=0.5, latency_ms=80)
        s.call(system="S2", messages=[_msg("user", "summary of u2 a2"), u3, a3, u4], tools=[TOOL_A, TOOL_B],
               response=_msg("assistant", "a4"), model="gpt-5", usage=_usage(10, 2), cost_usd=0.5, latency_ms=80)
        sid = s.id
    rec.close()
    return sid


def test_show_prints_one_line_per_call_with_its_window_change(window_session, run):
    out = run("show", window_session, columns=200).output
    lines = [line.rstrip() for line in out.splitlines() if line.startswith("#")]
    assert len(lines) == 4, out
    first = lines[0].split()
    assert first[:2] == ["#0", "gpt-5"]
    assert "in 1,200" in lines[0] and "out 34" in lines[0] and "cache 5,000/700" in lines[0]
    assert "$0.0123" in lines[0] and "1,240 ms" in lines[0] and "tool_use" in lines[0]
    assert lines[0].endswith("+1 message")
    assert lines[1].endswith("+1 message")  # the previous reply was already in the window
    assert lines[2].startswith("#2 gpt-5-mini")
    assert lines[2].endswith("+1 message, 2 trimmed, system changed, tools changed")
    assert lines[3].endswith("+2 messages, 2 trimmed, compacted")


def test_replay_diff_and_show_accept_the_short_call_id(window_session, run, store_of):
    calls = store_of().get_session(window_session)["calls"]
    by_ref = run("replay", f"{window_session}#2").output
    assert by_ref == run("replay", calls[2]["id"]).output
    assert json.loads(by_ref)["system"] == "S2"
    short = window_session[:12]
    assert run("replay", f"{short}#3").output == run("replay", calls[3]["id"]).output
    result = json.loads(run("diff", f"{short}#1", "#2", "--json").output)
    assert (result["call_a"], result["call_b"]) == (calls[1]["id"], calls[2]["id"])
    shown = run("show", f"{short}#2", columns=200).output
    assert "#2 gpt-5-mini" in shown and "u3" in shown and "u4" not in shown
    missing = run("replay", f"{short}#9", ok=False)
    assert missing.exit_code == 1 and f"session {window_session} has no call #9 (it has #0 to #3)" in missing.output
    assert "Traceback" not in missing.output


def test_an_ambiguous_prefix_lists_the_candidates(db_path, run):
    rec = reasonlog.Recorder(db_path, writer="sync", strict=True)
    ids = []
    for agent in ("alice", "bob"):
        with rec.session(agent=agent, id=f"01SAMEPREFIX{agent.upper()}", started_at="2025-10-02T09:00:00Z") as s:
            s.call(messages=[_msg("user", "hi")], response="ok")
            ids.append(s.id)
    rec.close()
    result = run("show", "01SAME", ok=False)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "'01SAME' matches 2 sessions; give more characters:" in result.output
    assert "01SAMEPREFIXALICE  alice  2025-10-02 09:00:00" in result.output
    assert "01SAMEPREFIXBOB  bob  2025-10-02 09:00:00" in result.output


def _many_sessions(db_path, n):
    rec = reasonlog.Recorder(db_path, writer="sync", strict=True)
    for i in range(n):
        with rec.session(agent=f"claude-sonnet-4-5-agent-{i}", run="nightly-job-2025-10-02", model="claude-sonnet-4-5",
                         started_at=f"2025-10-02T09:{i // 60:02d}:{i % 60:02d}Z") as s:
            s.call(messages=[_msg("user", "hi")], response="ok", usage=_usage(123456, 7890, 1000, 20),
                   cost_usd=1.25, latency_ms=900, stop_reason="end_turn")
    rec.close()


@pytest.mark.parametrize("columns", [80, 120])
def test_sessions_table_fits_and_says_when_cut(db_path, run, columns):
    _many_sessions(db_path, 60)
    out = run("sessions", columns=columns).output
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= columns, out
    rows = [line for line in lines if "$1.2500" in line]
    assert len(rows) == 50 and all(r.rstrip().endswith("$1.2500") for r in rows)  # numbers right-aligned
    assert "showing 50 of 60 (--limit 0 shows all)" in out
    header = next(line for line in lines if "session" in line)
    assert "session" in header and "cost" in header
    full_ids = [s["id"] for s in json.loads(run("sessions", "--json").output)]
    assert all(any(sid in r for r in rows) for sid in full_ids)  # ids are never cut
    if columns == 120:  # the room is used: columns come back in the order of their rank
        assert header.split() == ["started", "(UTC)", "session", "title", "agent", "model", "calls", "cost"]
    else:  # 26-character agent names do not fit; the title (issue 39: what a list is read by) stays
        assert header.split() == ["started", "(UTC)", "session", "title", "cost"]
    assert "showing" not in run("sessions", "--limit", "0", columns=columns).output


def test_sessions_table_fits_when_piped_through_a_real_process(db_path):
    _many_sessions(db_path, 3)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    out = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db_path), "sessions"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert max(len(line) for line in out.stdout.splitlines()) <= 80 and out.stdout.count("$1.2500") == 3


def test_stats_has_a_totals_row_with_right_aligned_numbers(db_path, run):
    _many_sessions(db_path, 3)
    out = run("stats", "--by", "model", columns=80).output
    assert max(len(line) for line in out.splitlines()) <= 80, out
    total = next(line for line in out.splitlines() if line.strip().startswith("total"))
    assert "3" in total.split() and "$3.7500" in total
    assert "370,368" in total  # 3 × 123,456 input tokens


def test_list_sessions_limits_and_counts(db_path, store_of):
    _many_sessions(db_path, 60)
    store = store_of()
    assert len(store.list_sessions(SessionFilter())) == 50
    assert len(store.list_sessions(SessionFilter(limit=None))) == 60
    assert store.count_sessions(SessionFilter()) == 60
    assert store.count_sessions(SessionFilter(agent="claude-sonnet-4-5-agent-7")) == 1


def test_model_and_date_filters_match_what_the_calls_did(db_path, store_of, run):
    rec = reasonlog.Recorder(db_path, writer="sync", strict=True)
    with rec.session(agent="night", model="gpt-5", started_at="2025-10-02T23:59:00Z") as s:
        s.call(messages=[_msg("user", "a")], response="ok", model="gpt-5", started_at="2025-10-02T23:59:30Z")
        s.call(messages=[_msg("user", "b")], response="ok", model="gpt-5-mini", started_at="2025-10-03T00:01:00Z")
    rec.close()
    store = store_of()
    assert [x["agent"] for x in store.list_sessions(SessionFilter(model="gpt-5-mini"))] == ["night"]
    assert [x["agent"] for x in store.list_sessions(SessionFilter(since="2025-10-03", until="2025-10-03"))] == ["night"]
    assert [x["agent"] for x in json.loads(run("sessions", "--date", "2025-10-03", "--json").output)] == ["night"]
    assert store.list_sessions(SessionFilter(model="gpt-4o")) == []
    assert store.list_sessions(SessionFilter(since="2025-10-04")) == []


def test_system_prompts_have_their_own_key(window_session, store_of, run):
    session = store_of().get_session(window_session)
    assert [(p["idx"], p["content"]) for p in session["system_prompts"]] == [(0, "S1"), (5, "S2")]
    assert all(m["role"] != "system" for m in session["messages"])
    out = run("show", window_session, columns=200).output
    assert "system prompt" in out and "S1" in out and "S2" in out


def test_diff_of_distant_calls_reports_a_slide_not_edits(db_path, run, store_of):
    rec = reasonlog.Recorder(db_path, writer="sync", strict=True)
    history: list = []
    with rec.session(agent="slider") as s:
        for i in range(12):
            history.append(_msg("user", f"question {i}"))
            window = history[-4:]
            reply = _msg("assistant", f"answer {i}")
            s.call(messages=window, response=reply, params={"temperature": 0.2} if i == 0 else {})
            history.append(reply)
        sid = s.id
    rec.close()
    result = json.loads(run("diff", f"{sid}#0", f"{sid}#11", "--json").output)
    assert result["edited"] == [] and len(result["trimmed"]) == 1 and len(result["added"]) == 4
    text = run("diff", f"{sid}#0", "#11").output
    assert "param temperature: 0.2 → null" in text and "None" not in text


def test_replay_takes_json_and_pretty_prints_on_a_terminal(window_session, run, db_path):
    piped = run("replay", f"{window_session}#0").output.strip()
    assert piped.encode() == canonical(json.loads(piped))
    assert run("replay", f"{window_session}#0", "--json").output.strip() == piped
    primary, secondary = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "reasonlog", "--db", str(db_path), "replay", f"{window_session}#0"],
                            stdout=secondary, stderr=subprocess.PIPE)
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert proc.wait(timeout=60) == 0
    shown = b"".join(chunks).decode().replace("\r\n", "\n")
    assert '\n  "system": "S1"' in shown and json.loads(shown) == json.loads(piped)


CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


@hypothesis.settings(max_examples=25, deadline=None,
                     suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
@hypothesis.given(tails=st.lists(st.text(CROCKFORD, min_size=15, max_size=15), min_size=2, max_size=3, unique=True))
def test_an_ambiguous_call_prefix_names_each_call_whole_even_with_a_t_where_instants_have_one(tmp_path_factory, tails):
    """Ids of the ULID alphabet may hold `T` as their 11th character, where an instant has its `T`: the
    candidates are printed as they are, never read as instants and cut."""
    db = tmp_path_factory.mktemp("ids") / "ids.db"
    head = "01K6KNWNYG"  # ten characters: the 11th is the tail's first, T half of the time
    call_ids = [head + ("T" + tail[1:] if n % 2 == 0 else tail) for n, tail in enumerate(tails)]
    rec = reasonlog.Recorder(db, writer="sync", strict=True)
    with rec.session(agent="a", started_at="2025-10-02T09:00:00Z") as s:
        for call_id in call_ids:
            s.call(messages=[_msg("user", "hi")], response="ok", id=call_id)
    rec.close()
    result = CliRunner().invoke(cli, ["--db", str(db), "replay", head], catch_exceptions=False)
    assert result.exit_code == 1
    listed = [line.split()[0] for line in result.output.splitlines()[1:]]
    assert listed == sorted(call_ids)


def test_summaries_show_in_sessions_and_show_and_their_json(db_path, run):
    """After `summarize`, the session's summary heads `show` and each exchange's heads the exchange; the JSON of
    `sessions` and `show` carries them; `--no-summaries` leaves just those lines out."""
    rec = reasonlog.Recorder(db_path, writer="sync", strict=True)
    with rec.session(agent="trader", started_at="2025-10-02T09:00:00Z") as s:
        for day in ("Monday", "Tuesday"):
            with s.exchange(f"Decide {day}'s trade") as ex:
                s.call(messages=[_msg("user", f"Decide {day}'s trade")], response=f"Buy NVDA on {day}.")
                ex.end(f"Bought NVDA on {day}")
    rec.close()
    assert "summarised 3" in run("summarize", "--summarizer", "offline", "--yes").output
    stored = {(r["target_kind"], r["target_id"]): r["text"]
              for r in reasonlog.open_store(db_path, read_only=True).list_summaries([s.id])}
    session_text = stored[("session", s.id)]
    exchange_texts = [t for (kind, _), t in sorted(stored.items()) if kind == "exchange"]
    assert len(exchange_texts) == 2 and session_text and "NVDA" in exchange_texts[0]
    (listed,) = json.loads(run("sessions", "--json").output)
    assert listed["summary"] == session_text
    shown = json.loads(run("show", s.id, "--json").output)
    assert shown["session"]["summary"] == session_text
    assert [e["summary"] for e in shown["session"]["exchanges"]] == exchange_texts
    assert [i["summary"] for i in shown["timeline"] if i["kind"] == "exchange"] == exchange_texts
    lines = run("show", s.id, columns=200).output.splitlines()
    assert lines[2] == f"summary: {session_text}"
    for n, exchange_text in enumerate(exchange_texts):
        rule = next(i for i, line in enumerate(lines) if f" exchange {n}  completed " in line)
        assert lines[rule + 1] == f"summary: {exchange_text}"
    hidden = run("show", s.id, "--no-summaries", columns=200).output.splitlines()
    assert hidden == [line for line in lines if not line.startswith("summary: ")]


def test_the_width_follows_columns_from_one_command_to_the_next_in_one_process(db_path, run):
    """The console is made when first printed to: a command run in-process after another with a wider terminal
    still fits its own (it kept the first command's width)."""
    _many_sessions(db_path, 3)
    wide = run("stats", "--by", "model", columns=200).output
    assert max(len(line) for line in wide.splitlines()) > 80, wide
    narrow = run("stats", "--by", "model", columns=80).output
    assert max(len(line) for line in narrow.splitlines()) <= 80, narrow
