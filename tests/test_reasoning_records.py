"""Tiered reasoning records: `reasonlog reason save|show|missing|outcome`, `session.reason`, the HTTP route."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import orjson
import pytest
from click.testing import CliRunner
from conftest import FIXTURES
from fastapi.testclient import TestClient

import reasonlog
from reasonlog.cli.main import cli
from reasonlog.reasoning import tokens
from reasonlog.server.app import create_app
from reasonlog.store import open_store

SCHEMAS = FIXTURES / "bazinga-handoff-schemas"
COMPACT = {"summary": "The parser drops escaped quotes; fix the tokenizer first.",
           "key_decisions": ["fix tokenizer", "add a regression test"], "concerns": ["CSV exports use it too"],
           "files_modified": ["parser.py"], "metrics": {"tests_failing": 3}}
SECRET = "sk-ant-api03-" + "a1B2c3D4" * 6


@pytest.fixture(autouse=True)
def counted_by_the_estimate(monkeypatch, tmp_path):
    """Counts that do not depend on whether tiktoken's encoding happens to be cached on this machine."""
    monkeypatch.setenv("REASONLOG_TOKENIZER", "estimate")
    monkeypatch.chdir(tmp_path)  # no reasonlog.toml but the tests' own
    monkeypatch.delenv("REASONLOG_CONFIG", raising=False)


def run(db, *args, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """The real command, in its own process, as an agent runs it."""
    return subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), *args], input=stdin,
                          capture_output=True, timeout=60, env={**os.environ})


def save(db, tmp_path, phase="understanding", compact=COMPACT, details=None, *more) -> subprocess.CompletedProcess:
    content = tmp_path / f"{phase}.json"
    content.write_bytes(orjson.dumps(compact))
    args = ["reason", "save", "--session", "orch-1", "--agent", "developer", "--group", "DEL-INIT", "--phase", phase,
            "--content-file", str(content), "--artifacts", str(tmp_path / "artifacts"), *more]
    if details is not None:
        (tmp_path / f"{phase}.md").write_text(details)
        args += ["--details-file", str(tmp_path / f"{phase}.md")]
    return run(db, *args)


def test_save_prints_a_receipt_of_a_few_tokens_and_the_record_reads_back_beside_its_artifact(db, tmp_path):
    done = save(db, tmp_path, "understanding", COMPACT, f"Long form. The key {SECRET} leaked in a log.\n")
    assert done.returncode == 0, done.stderr
    receipt = done.stdout.decode().strip()
    assert receipt.startswith("saved understanding ") and receipt.endswith("t")
    assert tokens.count(receipt)[0] <= 20
    (record,) = open_store(db, read_only=True).list_reasoning_records()
    assert (record["phase"], record["agent"], record["group"], record["state"], record["compact"]) == \
        ("understanding", "developer", "DEL-INIT", "kept", COMPACT)
    assert receipt == f"saved understanding {record['id'][-6:]} {record['compact_tokens']}t"
    assert (record["redacted"], record["tokenizer"]) == (True, "estimate:chars/4")
    artifact = tmp_path / "artifacts" / "orch-1" / "DEL-INIT_understanding.md"
    assert record["artifact_path"] == str(artifact)
    text = artifact.read_text()
    assert SECRET not in text and "[REDACTED:" in text and record["id"] in text
    assert SECRET not in record["details"]
    assert record["details_tokens"] == tokens.estimate(record["details"])
    index = json.loads((artifact.parent / "reasoning_index.json").read_text())
    assert [(e["record_id"], e["file"], e["phase"], e["redacted"]) for e in index] == \
        [(record["id"], artifact.name, "understanding", True)]
    shown = json.loads(run(db, "reason", "show", "--session", "orch-1", "--json").stdout)
    assert [(r["id"], r["artifact"]) for r in shown] == [(record["id"], {"path": str(artifact), "has_record": True})]
    hits = open_store(db, read_only=True).search("leaked in a log", reasonlog.SessionFilter())
    assert [(h["kind"], h["name"]) for h in hits] == [("reasoning", "understanding")]


def test_content_from_standard_input(db, tmp_path):
    done = run(db, "reason", "save", "--session", "s", "--phase", "approach", "--content-file", "-",
               stdin=b'{"summary": "Try the cache first."}')
    assert done.returncode == 0, done.stderr
    assert [r["compact"] for r in open_store(db, read_only=True).list_reasoning_records()] == \
        [{"summary": "Try the cache first."}]


@pytest.mark.parametrize(("compact", "says"), [
    ({"summary": "word " * 60}, "compact.summary: 75 tokens, over the limit of 50"),
    ({"summary": "s", "key_decisions": ["a", "b", "c", "d"]}, "compact.key_decisions: 4 items, over the limit of 3"),
    ({"summary": "s", "concerns": ["a", "b", "c"]}, "compact.concerns: 3 items, over the limit of 2"),
    ({"summary": "s", "metrics": {"coverage": "high"}}, "compact.metrics.coverage: expected a number, got 'high'"),
    ({"summary": "s", "files_created": "a.py"}, "compact.files_created: expected a list of texts"),
    ({"summary": "s", "mood": "good"}, "compact.mood: not a field of a compact record"),
    ({"key_decisions": ["a"]}, "compact.summary: required"),
    ({"summary": "s", "files_modified": [f"src/module_{i}/file.py" for i in range(40)]},
     "compact: 246 tokens, over the budget of 150"),
])
def test_an_invalid_record_names_the_field_and_the_limit_and_saves_nothing(db, tmp_path, compact, says):
    done = save(db, tmp_path, "decisions", compact)
    assert done.returncode == 1
    assert done.stderr.decode().startswith(f"error: {says}")
    assert b"Traceback" not in done.stderr
    assert open_store(db).list_reasoning_records() == []


def test_bad_input_files_are_one_line_errors(db, tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    bad = str(tmp_path / "bad.json")
    done = run(db, "reason", "save", "--session", "s", "--phase", "approach", "--content-file", bad)
    assert done.returncode == 1 and done.stderr.decode().startswith(f"error: {bad}: not JSON (")
    missing = run(db, "reason", "save", "--session", "s", "--phase", "approach", "--content-file", "nope.json")
    assert missing.returncode == 1 and missing.stderr.decode().startswith("error: --content-file nope.json: No such")
    wrong = run(db, "reason", "save", "--session", "s", "--phase", "musing", "--content-file", "-", stdin=b"{}")
    assert wrong.returncode == 1 and wrong.stderr.decode().startswith("error: phase: expected one of understanding,")


def test_overflow_moves_to_the_artifact_when_the_policy_says_so(db, tmp_path):
    (tmp_path / "reasonlog.toml").write_text('[reasoning]\noverflow = "artifact"\n')
    decisions = ["one", "two", "three", "four", "five"]
    done = save(db, tmp_path, "decisions", {"summary": "Five options weighed.", "key_decisions": decisions})
    assert done.returncode == 0, done.stderr
    (record,) = open_store(db, read_only=True).list_reasoning_records()
    artifact = tmp_path / "artifacts" / "orch-1" / "DEL-INIT_decisions.md"
    assert record["compact"] == {"summary": "Five options weighed.", "key_decisions": ["one", "two", "three"],
                                 "overflow": str(artifact)}
    assert '"key_decisions": [\n    "four",\n    "five"\n  ]' in artifact.read_text()


@pytest.mark.slow
def test_the_bazinga_handoff_schemas_check_compact_records(db, tmp_path):
    (tmp_path / "reasonlog.toml").write_text(
        f'[reasoning]\nbudget_tokens = 400\n[reasoning.schemas]\n"agent:developer" = '
        f'"{SCHEMAS / "handoff_developer_response.schema.json"}"\n')
    handoff = {"from_agent": "developer", "to_agent": "tech_lead", "session_id": "bazinga_20250101",
               "group_id": "DEL-INIT", "status": "READY_FOR_REVIEW",
               "issue_responses": [{"issue_id": "TL-DEL-1-2", "action": "FIXED", "details": "escaped quotes"}],
               "blocking_summary": {"total_blocking": 1, "fixed": 1, "rejected_with_reason": 0, "unaddressed": 0}}
    assert save(db, tmp_path, "completion", handoff).returncode == 0
    broken = {**handoff, "issue_responses": [{"issue_id": "DEL-1", "action": "FIXED", "details": "x"}]}
    done = save(db, tmp_path, "completion", broken)
    assert done.returncode == 1
    assert done.stderr.decode().startswith("error: compact.issue_responses[0].issue_id: 'DEL-1' does not match")
    rejected = {**handoff, "issue_responses": [{"issue_id": "TL-DEL-1-2", "action": "REJECTED"}]}
    assert "'reason' is a required property" in save(db, tmp_path, "completion", rejected).stderr.decode()
    assert len(open_store(db, read_only=True).list_reasoning_records()) == 1


@pytest.mark.slow
def test_modes_and_disabled_phases(db, tmp_path, monkeypatch):
    monkeypatch.setenv("REASONLOG_REASONING_MODE", "compact")
    assert save(db, tmp_path, "approach", {"summary": "s"}, "a long form that is not kept").returncode == 0
    (record,) = open_store(db, read_only=True).list_reasoning_records()
    assert (record["details"], record["artifact_path"]) == (None, None)
    assert not (tmp_path / "artifacts").exists()
    monkeypatch.setenv("REASONLOG_REASONING_PHASES", "pivot=disabled")
    done = save(db, tmp_path, "pivot", {"summary": "s"})
    assert done.stdout.decode().startswith("skipped pivot: disabled")
    monkeypatch.setenv("REASONLOG_REASONING_MODE", "off")
    assert save(db, tmp_path, "approach", {"summary": "s"}).stderr.decode().startswith(
        "error: mode: expected full | compact | disabled, got 'off'")
    assert len(open_store(db, read_only=True).list_reasoning_records()) == 1


@pytest.mark.slow
def test_on_failure_records_are_held_then_kept_on_failure_and_dropped_on_success(db, tmp_path, monkeypatch):
    monkeypatch.setenv("REASONLOG_REASONING_PHASES", "risks=on_failure")
    done = save(db, tmp_path, "risks", {"summary": "The migration may lock the table."}, "why it may")
    assert done.stdout.decode().startswith("held risks ")
    store = open_store(db, read_only=True)
    assert [r["state"] for r in store.list_reasoning_records()] == ["held"]
    assert store.list_reasoning_records(include_held=False) == []
    assert store.search("lock the table", reasonlog.SessionFilter()) == []  # not saved yet: not found
    assert run(db, "reason", "outcome", "--session", "orch-1", "--status", "completed").stdout == \
        b"dropped 1 held record(s)\n"
    assert open_store(db, read_only=True).list_reasoning_records() == []
    save(db, tmp_path, "risks", {"summary": "Second try may time out."})
    assert run(db, "reason", "outcome", "--session", "orch-1", "--group", "DEL-INIT", "--status", "failed").stdout == \
        b"kept 1 held record(s)\n"
    assert [r["state"] for r in open_store(db, read_only=True).list_reasoning_records()] == ["kept"]
    assert [h["kind"] for h in open_store(db).search("may time out", reasonlog.SessionFilter())] == ["reasoning"]


def test_a_held_record_survives_its_process_being_killed_and_the_session_outcome_decides(tmp_path, monkeypatch):
    db = tmp_path / "t.db"
    monkeypatch.setenv("REASONLOG_REASONING_PHASES", "blockers=on_failure")
    code = ("import os, signal, reasonlog\n"
            f"rec = reasonlog.Recorder({str(db)!r}, writer='sync')\n"
            "s = rec.session(agent='worker')\n"
            "s.reason('blockers', {'summary': 'waiting on credentials'}, group='G1')\n"
            "print(s.id, flush=True)\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    killed = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL
    session_id = killed.stdout.decode().strip()
    store = open_store(db)
    assert [(r["session_id"], r["state"]) for r in store.list_reasoning_records()] == [(session_id, "held")]
    assert store.get_session(session_id)["status"] == "interrupted"  # nothing decided: the record waits
    rec = reasonlog.Recorder(db, writer="sync")
    resumed = rec.session(id=session_id, agent="worker")
    resumed.end(status="failed")
    rec.close()
    assert [r["state"] for r in open_store(db).list_reasoning_records()] == ["kept"]


def test_session_reason_from_python_and_the_session_ending_well_drops_held_records(db, tmp_path, monkeypatch):
    monkeypatch.setenv("REASONLOG_REASONING_PHASES", "risks=on_failure")
    rec = reasonlog.Recorder(db, writer="sync")
    with rec.session(agent="planner") as s:
        receipt = s.reason("approach", {"summary": "Split the job by day."}, details="Because days are independent.",
                           group="DEL-INIT", confidence="high", references=["docs/plan.md"])
        s.reason("risks", {"summary": "Days may overlap at midnight."}, group="DEL-INIT")
        with pytest.raises(reasonlog.reasoning.ReasonError, match="compact.concerns: 3 items, over the limit of 2"):
            s.reason("risks", {"summary": "s", "concerns": ["a", "b", "c"]})
    rec.close()
    (record,) = open_store(db, read_only=True).list_reasoning_records()
    assert receipt == f"saved approach {record['id'][-6:]} {record['compact_tokens']}t"
    assert (record["agent"], record["confidence"], record["references"], record["details"]) == \
        ("planner", "high", ["docs/plan.md"], "Because days are independent.")


@pytest.mark.slow
def test_missing_names_the_agents_that_skipped_mandatory_phases(db, tmp_path):
    save(db, tmp_path, "understanding", {"summary": "s"})
    save(db, tmp_path, "completion", {"summary": "done"})
    other = tmp_path / "c.json"
    other.write_bytes(b'{"summary": "looked"}')
    run(db, "reason", "save", "--session", "orch-1", "--agent", "qa_expert", "--phase", "understanding",
        "--content-file", str(other))
    done = run(db, "reason", "missing", "--phases", "understanding,completion", "--json")
    assert done.returncode == 1
    rows = json.loads(done.stdout)
    assert [(r["agent"], r["missing"]) for r in rows] == [("qa_expert", ["completion"])]
    bad = run(db, "reason", "missing", "--phases", "understanding,musing")
    assert bad.returncode == 2 and b"'musing' is not a phase" in bad.stderr


def test_the_http_route_saves_reads_back_and_names_what_is_wrong(db):
    client = TestClient(create_app(lambda: open_store(db)))
    r = client.post("/v1/reasoning-records", json={"session": "remote-7", "agent": "a", "phase": "approach",
                                                    "compact": {"summary": "Use the index."}})
    assert r.status_code == 201
    body = r.json()
    assert body["receipt"] == f"saved approach {body['record']['id'][-6:]} {body['record']['compact_tokens']}t"
    listed = client.get("/v1/reasoning-records", params={"session": "remote-7"}).json()["records"]
    assert [x["compact"] for x in listed] == [{"summary": "Use the index."}]
    bad = client.post("/v1/reasoning-records", json={"session": "remote-7", "phase": "approach",
                                                      "compact": {"summary": "s", "key_decisions": [1]}})
    assert (bad.status_code, bad.json()["detail"]) == (400, "compact.key_decisions: expected a list of texts")
    missing = client.post("/v1/reasoning-records", json={"phase": "approach", "compact": {}})
    assert missing.status_code == 422 and missing.json()["detail"][0]["loc"] == ["body", "session"]
    assert client.get("/v1/reasoning-records", params={"session": "nobody"}).status_code == 404


@pytest.mark.slow
def test_twenty_agents_saving_at_once_all_succeed(tmp_path):
    db = tmp_path / "t.db"
    open_store(db).close()
    content = tmp_path / "c.json"
    content.write_bytes(b'{"summary": "parallel"}')
    env = {**os.environ, "REASONLOG_TOKENIZER": "estimate"}
    procs = [subprocess.Popen([sys.executable, "-m", "reasonlog", "--db", str(db), "reason", "save", "--session",
                               "swarm", "--agent", f"agent-{n}", "--group", "G", "--phase", "completion",
                               "--content-file", str(content), "--details-file", str(content),
                               "--artifacts", str(tmp_path / "arts")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) for n in range(20)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [(p.returncode, err) for p, (_, err) in zip(procs, results, strict=True)] == [(0, b"")] * 20
    records = open_store(db, read_only=True).list_reasoning_records()
    assert sorted(r["agent"] for r in records) == sorted(f"agent-{n}" for n in range(20))
    assert len({r["session_id"] for r in records}) == 1  # one session for the name, made once
    index = json.loads((tmp_path / "arts" / "swarm" / "reasoning_index.json").read_text())
    assert sorted(e["record_id"] for e in index) == sorted(r["id"] for r in records)


def test_cli_help_lists_the_reason_commands():
    out = CliRunner().invoke(cli, ["reason", "--help"]).output
    assert all(name in out for name in ("save", "show", "missing", "outcome"))
    assert "--content-file" in CliRunner().invoke(cli, ["reason", "save", "--help"]).output
    time.sleep(0)
