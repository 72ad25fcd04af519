"""Issue 39: the rough edges a newcomer meets in the first hour, through the real `reasonlog` command at 80 columns
(a pipe), as a person reads it. The dashboard's side of these items is in test_first_hour_browser.py."""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import hypothesis
import hypothesis.strategies as st
import pytest
from conftest import FIXTURES
from fastapi.testclient import TestClient

import reasonlog
from reasonlog.server.app import create_app
from reasonlog.store import open_store

AGENT_DATA = FIXTURES / "ai-trader-agent-log" / "agent_data"
ANTHROPIC_KEY = "sk-ant-api03-" + "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ"
AWS_KEY, GITHUB_TOKEN = "AKIA" + "IOSFODNN7EXAMPLE", "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789"


def reasonlog_cli(db: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if k != "REASONLOG_DB"}, "COLUMNS": "80"}
    done = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=cwd)
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.fixture
def orch(tmp_path) -> Path:
    """A database where an orchestrator's developer agent saved one record under the name `orch-42`, its compact
    record holding one API key and its long form two more."""
    db = tmp_path / "orch.db"
    (tmp_path / "compact.json").write_text(json.dumps({
        "summary": f"Keep a sliding window of 20 turns; {ANTHROPIC_KEY} was in the log",
        "key_decisions": ["escape first", "trim at 1234567"]}))
    (tmp_path / "reasoning.md").write_text(f"Why: {AWS_KEY} and {GITHUB_TOKEN} were in the logs.\n")
    saved = reasonlog_cli(db, "reason", "save", "--session", "orch-42", "--agent", "developer", "--group",
                          "DEL-INIT", "--phase", "approach", "--content-file", "compact.json", "--details-file",
                          "reasoning.md", "--artifacts", "artifacts", cwd=tmp_path)
    assert saved.returncode == 0 and saved.stdout.startswith("saved approach "), saved
    return db


def test_a_reasoning_record_reads_by_the_sessions_own_name_field_by_field(orch, tmp_path):
    lines = reasonlog_cli(orch, "reason", "show", "--session", "orch-42").stdout.splitlines()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d  orch-42  developer  DEL-INIT  approach  kept  \d+t", lines[0])
    assert re.fullmatch(r"  summary: Keep a sliding window of 20 turns; \n\[REDACTED:anthropic_key:[0-9a-f]{12}\]"
                        " was in the log", "\n".join(lines[1:3]))  # broken at the space before the masked key
    assert lines[3:] == [
        "  key_decisions: escape first; trim at 1234567",
        f"  long form: {tmp_path / 'artifacts' / 'orch-42' / 'DEL-INIT_approach.md'} (has this record)"]


@pytest.mark.slow
def test_db_status_counts_the_secrets_a_reasoning_record_had_masked(orch):
    status = reasonlog_cli(orch, "db", "status").stdout
    assert re.search(r"│ redacted_secrets +│ 3 +│", status), status


@pytest.mark.slow
def test_search_names_the_session_as_its_agent_did(orch):
    out = reasonlog_cli(orch, "search", "sliding window").stdout.splitlines()
    assert out[0] == "orch-42  at 0  reasoning  approach"
    assert out[-1] == "1 match"


@pytest.mark.slow
def test_the_dashboard_titles_the_session_by_its_name_and_the_long_form_by_its_file(orch):
    page = TestClient(create_app(lambda: open_store(orch, read_only=True))).get("/sessions/orch-42").text
    assert '<h1 class="session-title">orch-42 <span class="muted">developer</span></h1>' in page
    assert '>orch-42/DEL-INIT_approach.md</span></summary>' in page


@pytest.mark.slow
def test_missing_phases_name_the_session_and_no_records_at_all_is_not_success(orch, tmp_path):
    done = reasonlog_cli(orch, "reason", "missing", "--phases", "understanding,approach")
    assert done.returncode == 1
    assert [ln.split() for ln in done.stdout.splitlines()[2:]] == [["orch-42", "developer", "understanding"]]
    empty = tmp_path / "empty.db"
    reasonlog_cli(empty, "db", "upgrade")
    nothing = reasonlog_cli(empty, "reason", "missing", "--phases", "understanding")
    assert (nothing.returncode, nothing.stdout) == (1, "no reasoning records in this database: no agent saved"
                                                       " understanding\n")


@pytest.mark.slow
def test_a_key_is_revoked_by_the_start_of_its_id_and_a_shared_start_says_so(tmp_path):
    db = tmp_path / "keys.db"
    for name in ("ci", "laptop"):
        reasonlog_cli(db, "keys", "create", "--scope", "read", "--name", name)
    ids = [k["id"] for k in json.loads(reasonlog_cli(db, "keys", "list", "--json").stdout)]
    unique = next(n for n in range(1, 27) if sum(i.startswith(ids[1][:n]) for i in ids) == 1)
    shared = reasonlog_cli(db, "keys", "revoke", ids[1][:unique - 1])
    assert (shared.returncode, shared.stderr) == (1, f"error: {ids[1][:unique - 1]}: 2 working keys start so"
                                                     f" ({ids[0]}, {ids[1]}); give more of the id\n")
    done = reasonlog_cli(db, "keys", "revoke", ids[1][:unique])
    assert (done.returncode, done.stdout) == (0, f"revoked {ids[1][:unique]}\n")
    keys = json.loads(reasonlog_cli(db, "keys", "list", "--json").stdout)
    assert [k["revoked_at"] is not None for k in keys] == [False, True]


@pytest.mark.slow
def test_serve_on_a_port_in_use_says_so_before_anything_else(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = reasonlog_cli(tmp_path / "s.db", "serve", "--port", str(port))
    assert (done.returncode, done.stderr) == (1, f"error: cannot serve on 127.0.0.1:{port}: Address already in use"
                                                 " (another server is on it? choose another --port)\n")


@pytest.mark.slow
def test_watch_once_says_it_imports_once(tmp_path):
    folder = FIXTURES / "claude-code-transcripts" / "spotter"
    done = reasonlog_cli(tmp_path / "w.db", "watch", str(folder), "--once")
    assert done.returncode == 0 and done.stderr.splitlines()[0] == f"importing {folder} once"


@pytest.fixture(scope="module")
def trading(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("trading") / "t.db"
    done = reasonlog_cli(db, "import", str(AGENT_DATA))
    assert done.returncode == 0, done.stderr
    return db


@pytest.mark.slow
def test_prune_dry_run_lists_the_sessions_it_would_remove(trading):
    out = reasonlog_cli(trading, "prune", "--older-than", "200d", "--agent", "gpt-5", "--dry-run").stdout
    lines = out.splitlines()
    expected = json.loads(reasonlog_cli(trading, "sessions", "--json", "--agent", "gpt-5", "--limit", "0").stdout)
    assert [ln.split()[2] for ln in lines[2:-1]] == [s["id"] for s in sorted(expected, key=lambda s: s["started_at"])]
    assert lines[0].split() == ["started", "(UTC)", "session", "title", "cost"]
    assert lines[-1].startswith(f"would remove {len(expected)} sessions, ")
    assert len(expected) == 20 and max(map(len, lines)) <= 80


@pytest.mark.slow
def test_sessions_at_80_columns_keep_the_title(trading):
    lines = reasonlog_cli(trading, "sessions", "--limit", "3").stdout.splitlines()
    assert lines[0].split() == ["started", "(UTC)", "session", "title", "cost"]  # the title cut, not dropped
    assert all("Please analyze and update" in ln for ln in lines[2:5]) and max(map(len, lines)) <= 80


@pytest.mark.slow
def test_show_at_80_columns_breaks_call_lines_between_fields_and_json_between_values(tmp_path):
    db = tmp_path / "demo.db"
    reasonlog_cli(db, "demo")
    claude, gpt = (json.loads(reasonlog_cli(db, "sessions", "--json", "--agent", agent).stdout)[0]["id"]
                   for agent in ("claude-sonnet-4-5", "gpt-5"))
    lines = reasonlog_cli(db, "show", claude).stdout.splitlines()
    assert max(map(len, lines)) <= 80
    assert lines[0] == f"session {claude}  agent=claude-sonnet-4-5"  # the header, broken between its fields
    assert re.fullmatch(r"    run=demo-\S+  model=claude-sonnet-4-5  status=completed", lines[1]), lines[1]
    assert lines[2] == "    calls=7  cost=$0.0164"
    calls = {ln.split()[0]: [ln, lines[n + 1]] for n, ln in enumerate(lines) if re.match(r"#\d ", ln)}
    assert calls["#3"] == ["#3 claude-sonnet-4-5",
                           "    ✗ failed: TimeoutError: upstream model timed out after 60 s  60,000 ms"]
    assert calls["#5"][0].endswith(" ms") and calls["#5"][1] == "    tool_use  +1 message, 4 trimmed"
    lines = reasonlog_cli(db, "show", gpt).stdout.splitlines()
    outcome = next(n for n, ln in enumerate(lines) if ln.startswith("◆ outcome trade"))
    words = " ".join(lines[outcome:outcome + 2]).split()
    assert words[3:] == ['{"action":', '"buy",', '"symbol":', '"MSFT",', '"amount":', '26,', '"price":', '114.63,',
                         '"cash_after":', '7019.62}']


@pytest.mark.slow
def test_the_reasoning_api_finds_a_model_however_it_is_cased(trading):
    client = TestClient(create_app(lambda: open_store(trading, read_only=True)))
    asked = {model: client.get("/reasoning", params={"date": "2025-10-02", "model": model})
             for model in ("gpt-5", "GPT-5", "Gpt-5", "DeepSeek-Chat-V3.1")}
    assert {m: r.status_code for m, r in asked.items()} == {m: 200 for m in asked}
    assert [s["model"] for s in asked["GPT-5"].json()["sessions"]] == ["gpt-5"]
    assert asked["GPT-5"].json() == asked["gpt-5"].json() == asked["Gpt-5"].json()
    assert [s["model"] for s in asked["DeepSeek-Chat-V3.1"].json()["sessions"]] == ["deepseek-chat-v3.1"]


# ------------------------------------------------------------------ usage by a pair of keys (the usage page's chart)

CALLS = [("2025-11-03", "gpt-5", "planner", 100, 10, 0.5), ("2025-11-03", "gpt-5", "coder", 50, 5, 0.25),
         ("2025-11-03", None, "coder", 7, 1, None), ("2025-11-05", "claude-sonnet-4-5", "coder", 30, 3, 0.125)]


def record_calls(target, calls) -> None:
    rec = reasonlog.Recorder(target, writer="sync")
    for day, model, agent, tokens_in, tokens_out, cost in calls:
        with rec.session(agent=agent, started_at=f"{day}T09:00:00Z") as s:
            s.call(messages=[{"role": "user", "content": "go"}], response="ok", model=model, cost_usd=cost,
                   usage=reasonlog.Usage(input_tokens=tokens_in, output_tokens=tokens_out),
                   started_at=f"{day}T09:00:01Z")
    rec.close()


@pytest.mark.slow
def test_usage_by_day_and_model_or_agent_on_both_databases(db):
    record_calls(db, CALLS)
    store = open_store(db, read_only=True)
    every = reasonlog.SessionFilter(limit=None)
    by_model = {k: (t["calls"], t["input_tokens"], t["cost_usd"]) for k, t in
                store.usage_groups("day+model", every, latencies=False).items()}
    assert by_model == {"2025-11-03\tgpt-5": (2, 150, 0.75), "2025-11-03\t": (1, 7, None),
                        "2025-11-05\tclaude-sonnet-4-5": (1, 30, 0.125)}
    by_agent = {k: (t["calls"], t["output_tokens"]) for k, t in
                store.usage_groups("day+agent", every, latencies=True).items()}
    assert by_agent == {"2025-11-03\tplanner": (1, 10), "2025-11-03\tcoder": (2, 6), "2025-11-05\tcoder": (1, 3)}


@pytest.mark.slow
@hypothesis.settings(max_examples=25, deadline=None)
@hypothesis.given(st.lists(st.tuples(st.sampled_from(["2025-11-01", "2025-11-02", "2025-11-09"]),
                                     st.sampled_from(["gpt-5", "claude-sonnet-4-5", None]),
                                     st.sampled_from(["a", "b"]), st.integers(0, 10_000), st.integers(0, 500),
                                     st.one_of(st.none(), st.sampled_from([0.5, 0.25, 0.125]))),
                          min_size=1, max_size=8))
def test_the_pairs_add_up_to_each_key_alone(calls):
    """Summed over its second key, `day+model` (or `day+agent`) gives what `day` gives, and over days what the
    second key alone gives: the chart's stacks and the tables below it agree."""
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "p.db"
        record_calls(target, calls)
        store = open_store(target, read_only=True)
        every = reasonlog.SessionFilter(limit=None)
        for second in ("model", "agent"):
            pairs = store.usage_groups(f"day+{second}", every, latencies=False)
            for by, part in (("day", 0), (second, 1)):
                alone = store.usage_groups(by, every, latencies=False)
                summed: dict = {}
                for key, t in pairs.items():
                    name = key.split("\t")[part] or None
                    calls_, tokens = summed.get(name, (0, 0))
                    summed[name] = (calls_ + t["calls"], tokens + t["input_tokens"])
                assert summed == {k: (t["calls"], t["input_tokens"]) for k, t in alone.items()}
        store.close()


@pytest.mark.slow
@hypothesis.given(st.lists(st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=30),
                           min_size=1, max_size=12), st.integers(20, 120))
def test_a_call_line_breaks_only_between_its_fields(fields, width):
    """However narrow: no field is cut, each line fits unless one field alone is wider, and the fields read in
    order, two spaces apart on a line, each further line indented."""
    from reasonlog.cli.show import fitted

    lines = fitted(fields, width).split("\n")
    assert [f for ln in lines for f in ln.strip().split("  ")] == fields
    assert all(ln.startswith("    ") for ln in lines[1:])
    assert all(len(ln) <= width or "  " not in ln.strip() for ln in lines)
