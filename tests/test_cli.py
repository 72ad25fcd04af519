"""The `reasonlog` command, end to end on a real database."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import reasonlog
from reasonlog.cli.main import cli
from reasonlog.wire.codec import canonical


@pytest.fixture
def db_target(db):
    """This suite runs on SQLite and on PostgreSQL (`--db` takes either)."""
    return db


@pytest.fixture
def run(db_target):
    runner = CliRunner()

    def invoke(*args, ok=True):
        result = runner.invoke(cli, ["--db", str(db_target), *args], catch_exceptions=False)
        if ok:
            assert result.exit_code == 0, result.output
        return result

    return invoke


@pytest.fixture
def demo(run):
    run("demo")
    sessions = json.loads(run("sessions", "--json").output)
    return sessions


def _commands(group, prefix=()):
    for name, command in group.commands.items():
        yield (*prefix, name), command
        if hasattr(command, "commands"):
            yield from _commands(command, (*prefix, name))


@pytest.mark.parametrize("path", [p for p, _ in _commands(cli)], ids=" ".join)
def test_every_command_has_help(path):
    command = dict(_commands(cli))[path]
    assert command.help and len(command.help.strip()) > 10
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0 and "Usage:" in result.output


def test_demo_records_what_the_readme_promises(demo, run, store_of):
    assert len(demo) == 2 and {s["agent"] for s in demo} == {"gpt-5", "claude-sonnet-4-5"}
    assert len({s["run"] for s in demo}) == 1
    store = store_of()
    for s in demo:
        full = store.get_session(s["id"])
        sent = [m["content"] for m in full["messages"] if isinstance(m["content"], dict)]
        if s["agent"] == "gpt-5":  # OpenAI Chat: tool_calls and `tool` messages
            assert any(m.get("tool_calls") for m in sent) and any(m.get("role") == "tool" for m in sent)
        else:
            parts = [p.get("type") for m in sent for p in (m["content"] if isinstance(m["content"], list) else ())]
            assert {"thinking", "tool_use", "tool_result"} <= set(parts)
        assert any(t["is_error"] for t in full["tool_results"])
        assert any(c["status"] == "error" for c in full["calls"])
        assert [o["kind"] for o in full["outcomes"]] == ["trade"] * 3
        assert len(full["exchanges"]) == 3
        removed = [(c["context_facts"] or {}).get("turns_removed", 0) for c in full["calls"]]
        assert removed[0] == 0 and max(removed) > 0, "the sliding window trimmed the history"


def test_sessions_filters(demo, run):
    run_name = demo[0]["run"]
    assert len(json.loads(run("sessions", "--run", run_name, "--json").output)) == 2
    assert [s["agent"] for s in json.loads(run("sessions", "--agent", "gpt-5", "--json").output)] == ["gpt-5"]
    day = demo[0]["started_at"][:10]
    assert len(json.loads(run("sessions", "--date", day, "--label", "market=nasdaq-100", "--json").output)) == 2
    assert json.loads(run("sessions", "--date", "1999-01-01", "--json").output) == []
    assert json.loads(run("sessions", "--status", "failed", "--json").output) == []
    assert "no sessions match" in run("sessions", "--model", "nope").output


def test_show_prints_the_conversation(demo, run):
    sid, other = demo[0]["id"], demo[1]["id"]
    unique = next(sid[:n] for n in range(8, 27) if not other.startswith(sid[:n]))
    out = run("show", unique).output
    assert "→ get_price" in out and "← result" in out and "outcome trade" in out and "failed" in out
    data = json.loads(run("show", sid, "--json").output)
    assert [i["kind"] for i in data["timeline"]].count("exchange") == 3


def test_show_prints_recorded_markup_as_text(run, db_target):
    rec = reasonlog.Recorder(db_target, writer="sync")
    with rec.session(agent="x") as s:
        s.call(messages=[{"role": "user", "content": "[bold red]not markup[/] <script>alert(1)</script>"}],
               response="ok")
    rec.close()
    sid = json.loads(run("sessions", "--json").output)[0]["id"]
    assert "[bold red]not markup[/] <script>alert(1)</script>" in run("show", sid).output


def test_stats_by_each_key(demo, run):
    for by in ("day", "model", "agent", "run"):
        rows = json.loads(run("stats", "--by", by, "--json").output)
        assert sum(r["calls"] for r in rows) == 14 and sum(r["errors"] for r in rows) == 2
    by_model = {r["model"]: r for r in json.loads(run("stats", "--by", "model", "--json").output)}
    assert by_model["gpt-5"]["cost_usd"] > 0 and by_model["gpt-5"]["calls_without_cost"] == 0


def test_replay_prints_the_exact_request(demo, run, store_of):
    call = store_of().get_session(demo[0]["id"])["calls"][2]["id"]
    printed = run("replay", call).output.strip()
    request = json.loads(printed)
    assert printed.encode() == canonical(request)
    assert request["system"].startswith("You are a trading agent") and request["tools"][0]["name"] == "get_price"


def test_diff_shows_the_sliding_window_trim(demo, run, store_of):
    calls = store_of().get_session(demo[0]["id"])["calls"]
    lens = [c["context_len"] for c in calls]
    i = next(i for i in range(1, len(lens)) if lens[i] < lens[i - 1] + 1 and calls[i]["status"] == "ok"
             and calls[i - 1]["status"] == "ok")
    result = json.loads(run("diff", calls[i - 1]["id"], calls[i]["id"], "--json").output)
    assert result["trimmed"] and result["added"] and not result["system_changed"]
    assert "trimmed" in run("diff", calls[i - 1]["id"], calls[i]["id"]).output


def test_search_gives_session_and_position(demo, run):
    hits = json.loads(run("search", "price feed timed out", "--json").output)
    # In each session: the tool result that said so, and the message that carried it to the model.
    assert sorted(h["kind"] for h in hits) == ["message", "message", "tool_result", "tool_result"]
    assert {h["session_id"] for h in hits} == {s["id"] for s in demo}
    assert all(isinstance(h["message_idx"], int) for h in hits)
    assert json.loads(run("search", "GOOGL NVDA AMZN MSFT AAPL together", "--json").output) == []


def test_export_import_round_trip_is_byte_identical(demo, run, tmp_path):
    first = tmp_path / "first.jsonl"
    run("export", "-o", str(first))
    other = tmp_path / "other.db"
    runner = CliRunner()
    assert runner.invoke(cli, ["--db", str(other), "import", str(first)]).exit_code == 0
    second = tmp_path / "second.jsonl"
    assert runner.invoke(cli, ["--db", str(other), "export", "-o", str(second)]).exit_code == 0
    assert first.read_bytes() == second.read_bytes()
    assert len(first.read_bytes().splitlines()) > 50
    again = runner.invoke(cli, ["--db", str(other), "import", str(first)])  # the same file twice
    assert again.exit_code == 0 and "0 records added (0 session(s))" in again.output
    assert "2 session(s) already present" in again.output
    third = tmp_path / "third.jsonl"
    runner.invoke(cli, ["--db", str(other), "export", "-o", str(third)])
    assert third.read_bytes() == first.read_bytes()


def test_import_of_a_bad_file_names_the_line_and_writes_nothing(run, tmp_path, db_target):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "reasonlog", "version": 1}\n'
                   '{"type": "session", "id": "s1", "started_at": "x"}\nnot json\n')
    result = run("import", str(bad), ok=False)
    assert result.exit_code == 1 and "bad.jsonl:3" in result.output and "not valid JSON" in result.output
    if isinstance(db_target, Path):
        assert not db_target.exists()  # a refused file creates no database
    else:
        assert reasonlog.open_store(db_target).record_counts()["sessions"] == 0


def test_db_commands(demo, run, db_target):
    assert run("db", "path").output.strip() == str(db_target)
    status = json.loads(run("db", "status", "--json").output)
    assert status["schema_version"] == status["latest_schema_version"] >= 2
    assert status["counts"]["calls"] == 14 and status["dropped_records"] == 0
    assert "applied nothing" in run("db", "upgrade").output


def test_unknown_session_is_one_clear_line(run, db_target):
    reasonlog.open_store(db_target).close()
    result = run("show", "does-not-exist", ok=False)
    assert result.exit_code == 1 and "no session matches 'does-not-exist'" in result.output


def test_first_readme_command_works_from_a_shell(tmp_path):
    env = {**os.environ, "REASONLOG_DB": str(tmp_path / "fresh.db")}
    out = subprocess.run([sys.executable, "-m", "reasonlog", "demo"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert str(tmp_path / "fresh.db") in out.stdout and "reasonlog" in out.stdout and "show" in out.stdout


def test_export_exchange_jsonl_of_one_session(demo, run):
    output = run("export", "--format", "exchange-jsonl", demo[0]["id"]).output
    lines = [json.loads(line) for line in output.splitlines()]
    assert lines[0]["type"] == "session_start" and lines[-1]["type"] == "session_end"
    exchanges = [line for line in lines if line["type"] == "exchange"]
    assert len(exchanges) == 3 and all("stats" in e and "user_input" in e for e in exchanges)
    assert lines[-1]["tools_used"] == {"get_price": 3}
    assert run("export", "--format", "exchange-jsonl", ok=False).exit_code != 0
