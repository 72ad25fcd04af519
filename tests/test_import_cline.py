"""Cline, Roo Code and Kilo Code task folders. First the task folder Cline CLI 2.18.0 (Cline 3.82.0's core) wrote
against a local upstream (tests/fixtures/cline, see its NOTICE.md), to the token and the cost, equal to Cline's own
totals in its task history; the same task after its first run, then after its follow-up. Then folders written by
hand after Cline's `ClineMessage` / `ClineApiReqInfo` types: each `api_req_started` is a call with its tokens and
cost, paired with the n-th assistant message; OpenAI-protocol input loses its cached tokens once; a task that goes
on adds only its new requests; bad records are named."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from agent_logs import totals

from reasonlog.io.formats.cline import importer as cline
from reasonlog.io.importing import plan, run_import
from reasonlog.store import open_store

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "cline"
REAL = FIXTURES / "v2.18.0" / "data"
REAL_ID = "1795780953376"


def test_the_task_cline_wrote_imports_with_its_tokens_cost_and_tool_result(db):
    store = open_store(db)
    report = run_import(store, plan([REAL]))
    assert (report.failed, report.skipped, report.rejected) == ([], [], 0)
    assert report.added == {"sessions": 1, "calls": 3, "messages": 6, "tool_results": 1, "outcomes": 0}
    session = store.get_session(f"cline-{REAL_ID}")
    assert (session["agent"], session["model"]) == ("cline", "deepseek-reasoner")
    assert session["labels"] == {"source": "cline", "task_id": REAL_ID}
    # Cline's OpenAI-compatible provider ("openai") writes the prompt's tokens whole in `tokensIn` (339: 320 cache
    # reads and DeepSeek's 19 cache misses, which Cline counts as cache writes), and no `apiProtocol`.
    calls = session["calls"]
    assert [(c["input_tokens"], c["cache_read_tokens"], c["cache_write_tokens"], c["output_tokens"], c["cost_usd"],
             c["model"], c["provider"], c["status"]) for c in calls] == [
        (0, 320, 19, 83, 0.00023702, "deepseek-reasoner", "openai", "ok")] * 3
    # Cline's own totals for the task (state/taskHistory.json) count tokensIn with the cache in it.
    (history,) = json.loads((REAL / "state" / "taskHistory.json").read_text())
    assert (history["tokensIn"], history["tokensOut"], history["cacheReads"], history["cacheWrites"]) == (
        sum(c["input_tokens"] + c["cache_read_tokens"] + c["cache_write_tokens"] for c in calls),
        sum(c["output_tokens"] for c in calls), sum(c["cache_read_tokens"] for c in calls),
        sum(c["cache_write_tokens"] for c in calls))
    assert round(sum(c["cost_usd"] for c in calls), 10) == history["totalCost"] == 0.00071106
    assert [e["input"] for e in session["exchanges"]] == ["Please run the shell command: echo hello",
                                                          "Thanks, that is all"]
    (result,) = session["tool_results"]
    assert (result["name"], result["input"], result["is_error"], result["content"]) == (
        "execute_command", {"command": "echo hello", "requires_approval": False}, False,
        "Command executed successfully (exit code 0).\nOutput:\nhello")
    sent = store.replay_call(calls[1]["id"])["messages"]
    assert [(m["role"], [b["type"] for b in m["content"]]) for m in sent] == [
        ("user", ["text", "text", "text"]), ("assistant", ["thinking", "tool_use"]), ("user", ["text", "text", "text"])]
    assert run_import(store, plan([REAL])).unchanged == 1


def test_the_real_task_imported_after_its_first_run_then_after_its_follow_up_is_as_if_imported_once(db, tmp_path):
    folder = tmp_path / "data" / "tasks" / REAL_ID
    folder.mkdir(parents=True)
    first = FIXTURES / "v2.18.0-first-run" / "data" / "tasks" / REAL_ID
    for f in first.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    store = open_store(db)
    assert run_import(store, plan([folder])).added["calls"] == 2
    for f in (REAL / "tasks" / REAL_ID).iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    again = run_import(store, plan([folder]))
    assert (again.appended, again.added["calls"], again.added["sessions"], again.added["tool_results"]) == (1, 1, 0, 0)
    whole = open_store(tmp_path / "whole.db")
    run_import(whole, plan([REAL]))
    assert totals(store) == totals(whole)


TASK = "1767261600000"


def req(ts: int, **info) -> dict:
    return {"ts": ts, "type": "say", "say": "api_req_started", "text": json.dumps({"request": "...", **info}),
            "modelInfo": {"providerId": "anthropic", "modelId": "claude-sonnet-4-5", "mode": "act"}}


UI = [{"ts": 1767261600000, "type": "say", "say": "task", "text": "fix the tests"},
      req(1767261601000, tokensIn=1200, tokensOut=80, cacheWrites=300, cacheReads=900, cost=0.0123),
      {"ts": 1767261602000, "type": "say", "say": "text", "text": "Reading the file."},
      req(1767261603000, tokensIn=40, tokensOut=20, cacheWrites=0, cacheReads=2400, cost=0.0021),
      {"ts": 1767261604000, "type": "say", "say": "user_feedback", "text": "also the docs"},
      req(1767261605000, tokensIn=5000, tokensOut=10, cacheWrites=0, cacheReads=4000, cost=0.004,
          apiProtocol="openai")]
HISTORY = [{"role": "user", "content": [{"type": "text", "text": "<task>fix the tests</task>"}]},
           {"role": "assistant", "content": [{"type": "text", "text": "<read_file><path>t.py</path></read_file>"}]},
           {"role": "user", "content": [{"type": "text", "text": "[read_file] Result: ..."}]},
           {"role": "assistant", "content": [{"type": "text", "text": "Fixed."}], "ts": 1767261603500},
           {"role": "user", "content": [{"type": "text", "text": "also the docs"}]},
           {"role": "assistant", "content": [{"type": "text", "text": "Done."}]}]


def task(root: Path, extension: str, ui: list, history: list, name: str = TASK) -> Path:
    folder = root / extension / "tasks" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ui_messages.json").write_text(json.dumps(ui))
    (folder / "api_conversation_history.json").write_text(json.dumps(history))
    (folder / "task_metadata.json").write_text(json.dumps({"files_in_context": [], "model_usage": []}))
    return folder


def test_each_request_is_a_call_with_the_tokens_and_cost_the_extension_reported(db, tmp_path):
    task(tmp_path, "saoudrizwan.claude-dev", UI, HISTORY)
    task(tmp_path, "rooveterinaryinc.roo-cline", UI[:2], HISTORY[:2])
    store = open_store(db)
    report = run_import(store, plan([tmp_path / "saoudrizwan.claude-dev" / "tasks",
                                     tmp_path / "rooveterinaryinc.roo-cline" / "tasks"]))
    assert (report.failed, report.skipped) == ([], [])
    assert report.added["sessions"] == 2 and report.added["calls"] == 4
    session = store.get_session(f"cline-{TASK}")
    assert [(c["input_tokens"], c["output_tokens"], c["cache_read_tokens"], c["cache_write_tokens"], c["cost_usd"])
            for c in session["calls"]] == [(1200, 80, 900, 300, 0.0123), (40, 20, 2400, 0, 0.0021),
                                           (1000, 10, 4000, 0, 0.004)]  # openai: 5000 counted the 4000 cached
    assert session["labels"] == {"source": "cline", "task_id": TASK}
    assert [e["input"] for e in session["exchanges"]] == ["fix the tests", "also the docs"]
    sent = store.replay_call(session["calls"][1]["id"])["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    roo = store.get_session(f"roo-code-{TASK}")
    assert (roo["labels"]["source"], roo["agent"], roo["call_count"]) == ("roo-code", "roo-code", 1)


def test_a_task_that_goes_on_adds_only_its_new_requests_and_watch_waits_for_usage(db, tmp_path):
    folder = task(tmp_path, "kilocode.kilo-code", [*UI[:3], req(1767261603000)], HISTORY[:3])
    store = open_store(db)
    first = run_import(store, plan([folder]), live=True)
    assert first.added["calls"] == 1  # the second request has no usage yet
    task(tmp_path, "kilocode.kilo-code", UI, HISTORY)
    second = run_import(store, plan([folder]), live=True)
    assert (second.appended, second.added["calls"], second.added["sessions"]) == (1, 2, 0)
    assert [c["input_tokens"] for c in store.get_session(f"kilo-code-{TASK}")["calls"]] == [1200, 40, 1000]
    assert run_import(store, plan([folder])).unchanged == 1


def test_tool_results_in_each_shape_cline_writes_them(db, tmp_path):
    """A `tool_result` block (Cline with the tool's id, Roo Code), Cline's text with no `tool_use` (XML tool tags),
    a failed tool; and `apiProtocol: anthropic` on an OpenAI-compatible provider keeps its input whole."""
    use = {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a.py"}}
    ui = [UI[0], req(1767261601000, tokensIn=100, tokensOut=5, cacheReads=40, cost=0.1, apiProtocol="anthropic"),
          req(1767261602000, tokensIn=100, tokensOut=5), req(1767261603000, tokensIn=100, tokensOut=5)]
    for record in ui[1:]:
        record["modelInfo"]["providerId"] = "openai"
    history = [HISTORY[0], {"role": "assistant", "content": [use]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
                   {"type": "text", "text": "[read_file for 'a.py'] Result:\nprint(1)"}]}], "ts": 1767261601500},
               {"role": "assistant", "content": [{"type": "text", "text": "<execute_command><command>ls</command>"}]},
               {"role": "user", "content": [{"type": "text", "text": "[execute_command for 'ls'] Result:\nThe tool "
                                             "execution failed with the following error:\n<error>\nno\n</error>"},
                                            {"type": "text", "text": "<environment_details />"}]},
               {"role": "assistant", "content": [{"type": "text", "text": "Done."}]}]
    folder = task(tmp_path, "saoudrizwan.claude-dev", ui, history)
    store = open_store(db)
    report = run_import(store, plan([folder]))
    assert (report.skipped, report.added["tool_results"]) == ([], 2)
    session = store.get_session(f"cline-{TASK}")
    assert [(t["tool_use_id"], t["name"], t["input"], t["is_error"], t["content"], t["at"][:19])
            for t in session["tool_results"]] == [
        ("t1", "read_file", {"path": "a.py"}, False, [{"type": "text", "text": "[read_file for 'a.py'] Result:\n"
                                                                             "print(1)"}], "2026-01-01T10:00:01"),
        (None, "execute_command", None, True, "The tool execution failed with the following error:\n<error>\nno\n"
                                              "</error>", "2026-01-01T10:00:03")]  # no ts: its request's time
    assert [(c["input_tokens"], c["cache_read_tokens"]) for c in session["calls"]] == [(100, 40), (100, 0),
                                                                                      (100, 0)]
    assert run_import(store, plan([folder])).unchanged == 1


def test_bad_records_are_named(db, tmp_path):
    ui = [UI[0], {"ts": 1767261601000, "type": "say", "say": "api_req_started", "text": "{cut"},
          req(1767261602000, tokensIn=-1, tokensOut=2, cost=0.1)]
    folder = task(tmp_path, "saoudrizwan.claude-dev", ui, HISTORY[:4])
    store = open_store(db)
    report = run_import(store, plan([folder]))
    anchor = folder / "ui_messages.json"
    assert report.skipped == [
        (f"{anchor} (ui_messages.json[1])",
         "api_req_started: its `text` is not a JSON object; the call is kept without usage"),
        (f"{anchor} (request 2)", "api_req_started: tokensIn -1 is not a non-negative integer; the call is kept"
                                  " without usage")]
    assert report.added["calls"] == 2
    (folder / "api_conversation_history.json").write_text("[{")
    again = run_import(store, plan([folder]))
    assert again.skipped == [(f"{anchor} (api_conversation_history.json)", "not readable as JSON (unexpected end"
                                                                           " of data)")]


def test_default_folders_are_the_editors_global_storage(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    folders = cline.default_folders()
    assert tmp_path / "Code" / "User" / "globalStorage" / "saoudrizwan.claude-dev" / "tasks" in folders
    assert tmp_path / "Cursor" / "User" / "globalStorage" / "kilocode.kilo-code" / "tasks" in folders
    assert len(folders) == 17
    assert Path.home() / ".cline" / "data" / "tasks" in folders  # the Cline CLI 1.x and 2.x store
    assert Path.home() / ".cline" / "data" / "sessions" in folders  # Cline CLI 3.x
    monkeypatch.setenv("CLINE_DIR", str(tmp_path / "cl"))
    assert tmp_path / "cl" / "data" / "tasks" in cline.default_folders()


def test_a_task_folder_without_ui_messages_imports_its_conversation(tmp_path):
    """Issue 31 item 6: a task folder with `api_conversation_history.json` and no `ui_messages.json` was refused ("no
    importer recognises it") though the conversation is there; its calls come without tokens, and the import says
    so."""
    folder = tmp_path / "tasks" / REAL_ID
    shutil.copytree(REAL / "tasks" / REAL_ID, folder)
    (folder / "ui_messages.json").unlink()
    store = open_store(tmp_path / "t.db")
    report = run_import(store, plan([tmp_path / "tasks"]))
    assert (report.failed, report.skipped) == ([], [])
    assert report.notes == [f"{folder}: no ui_messages.json, so the calls come from api_conversation_history.json"
                            " alone, without tokens, cost or model"]
    assert report.added == {"sessions": 1, "calls": 3, "messages": 6, "tool_results": 1, "outcomes": 0}
    session = store.get_session(f"cline-{REAL_ID}")
    assert [c["input_tokens"] for c in session["calls"]] == [None, None, None]
    assert run_import(store, plan([tmp_path / "tasks"])).unchanged == 1


V3 = FIXTURES / "v3.0.65" / "data"  # Cline CLI 3.0.65's own session files (NOTICE.md)


def test_the_session_files_cline_3_writes_import_with_their_tokens(tmp_path):
    """Issue 31 item 6: Cline 3's `sessions/<id>/<id>.messages.json` was not recognised ("no importer recognises
    it"). Its OpenAI-compatible provider counted the cached prompt tokens in `inputTokens`: taken out once."""
    store = open_store(tmp_path / "t.db")
    report = run_import(store, plan([V3]))
    assert (report.failed, report.skipped) == ([], [])
    assert report.added == {"sessions": 1, "calls": 4, "messages": 9, "tool_results": 4, "outcomes": 0}
    session = store.get_session("cline-1795828626857_lmjzt")
    assert (session["agent"], session["labels"]) == ("cline", {"source": "cline", "version": "3.0.65",
                                                               "cwd": "/tmp/h30/c3/proj"})
    assert [(c["model"], c["input_tokens"], c["cache_read_tokens"], c["output_tokens"]) for c in session["calls"]] \
        == [("deepseek-reasoner", 19, 320, 83)] * 4
    assert [(t["name"], t["content"]) for t in session["tool_results"]][0] == (
        "run_commands", '[{"query":"echo hello","result":"hello\\n","success":true}]')
    sent = store.replay_call(session["calls"][1]["id"])
    assert sent["system"].startswith("You are Cline")
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    one = next(V3.glob("sessions/*/*.messages.json"))
    assert [imp.name for _, imp in plan([one])] == ["cline"]
    assert run_import(store, plan([V3])).unchanged == 1
