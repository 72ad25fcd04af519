"""Every kind of secret in every field on every path reaches no file, export, page or log unmasked (issue 19).

Paths: events written to a store and spilled (every string field of every event type, enumerated from
`model.EVENT_TYPES`, so a new field cannot be missed), the HTTP sink into `reasonlog serve` (from a recorder that
masks and from one that does not: the server's policy wins), OTLP spans, every importer, reasoning records and
their artifacts. What is searched for the raw secrets: the database files (as bytes), the spill files, the
artifacts (names too), `reasonlog export` in both formats, `show`, the dashboard's and API's pages, and the logs.
The SDK adapters and the Python API's own calls are covered by test_redaction.py and test_redaction_leaks.py.
"""
from __future__ import annotations

import base64
import dataclasses
import http.server
import json
import logging
import re
import shutil
import threading
import typing
from pathlib import Path
from urllib.parse import quote

import orjson
import pytest
from click.testing import CliRunner
from conftest import FIXTURES
from fastapi.testclient import TestClient
from helpers import PEM_BODY, SECRETS
from local_http import LocalHTTPServer
from test_import_exchange_jsonl import recorded_session
from test_ingest import Served, free_port
from test_otlp import genai_attributes

import reasonlog
from reasonlog import model
from reasonlog.capture.http_sink import HttpSink
from reasonlog.capture.sinks import SpillingSink
from reasonlog.cli.main import cli
from reasonlog.io.exchange_jsonl import export_exchange_jsonl
from reasonlog.io.jsonl import dump_lines
from reasonlog.reasoning import policy
from reasonlog.reasoning.saving import save
from reasonlog.redact import Redactor
from reasonlog.server.app import create_app
from reasonlog.store import SessionFilter, open_store

# A password in a connection URL (issue 30 item 5): the user name and host stay, the password is masked.
URL_PASSWORD = "Pw9%40Zq-url7"
URL = f"postgresql://alice:{URL_PASSWORD}@db.internal:5432/app?sslmode=require"
# Every kind in one text, each where the issue found it missed: after a slash, an underscore, a newline.
PLANTED_KEYS = " ".join([f"/v1/{SECRETS['openai_key']}/data", f"MY_TOKEN_{SECRETS['github_token']}",
                         f"AWS_SECRET_ACCESS_KEY={SECRETS['aws_secret_key']}",
                         *(v for k, v in SECRETS.items() if k not in ("openai_key", "github_token", "aws_secret_key"))])
PLANTED = f"{PLANTED_KEYS} {URL}"
# What must never be found: each secret's own characters (the bearer's token, the PEM block's body).
RAW = {k: v for k, v in SECRETS.items() if k not in ("bearer_token", "private_key")} | {
    "bearer_token": "abc123DEF456ghi789JKL", "private_key": PEM_BODY, "url_password": URL_PASSWORD}
ALL = SessionFilter(limit=None)


def leaks(blob: bytes) -> list[str]:
    return [kind for kind, raw in RAW.items() if raw.encode() in blob or raw.replace("/", "\\/").encode() in blob]


def planted(tag: str) -> str:
    return f"{tag}: {PLANTED}"


def planted_id(tag: str) -> str:
    """An id holding every secret but the URL, without the slashes a URL path cannot carry (the server's routes)."""
    return f"{tag}: {PLANTED_KEYS.replace('/v1/', '_v1_').replace('/data', '_data')}"


# ------------------------------------------------------------------ every field of every event


def _value_for(cls: type, name: str, hint: typing.Any, session: str, call: str) -> typing.Any:
    """A value of the field's type that holds every secret; ids are the planted ids that others refer to."""
    if name == "session_id" or name == "parent_session_id":
        return session
    if name == "call_id" or name == "parent_call_id":
        return call
    if name == "usage":
        return model.Usage(input_tokens=1)
    if name == "request":
        return {"messages": [{"role": "user", "content": planted("message")}], "system": planted("system"),
                "tools": [{"name": planted("tool")}], "metadata": {planted("param key"): planted("param")}}
    if name == "xml_tool_tags":
        return [planted("tag")]
    if name == "references":
        return [planted("reference")]
    if name == "stats":
        return {"note": planted("stats")}
    args = set(typing.get_args(hint)) | {hint}
    if str in args:
        return planted(f"{cls.kind}.{name}")
    if dict in args or hint is typing.Any or name in ("response", "compact"):
        return {planted(f"{cls.kind}.{name} key"): [planted(f"{cls.kind}.{name}")]}
    return None


# Fields whose checks allow only their own vocabulary (instants, statuses): no text of a caller's reaches them.
CLOSED = {"started_at", "ended_at", "at", "status", "state"}


# Every event type but an import's bookkeeping (`file_imported`: its state and sessions are masked as its events are,
# tests/test_import_*; its path is the file's own name on this machine, by which the next import finds its row).
RECORDED = [cls for cls in model.EVENT_TYPES.values() if cls is not model.FileImported]


def planted_events() -> tuple[list[model.Event], set[str]]:
    """One event of each type, every open field planted; and the names of the fields planted."""
    session, call = planted_id("session id"), planted_id("call id")
    events, fields = [], set()
    for cls in RECORDED:
        hints = typing.get_type_hints(cls)
        values: dict[str, typing.Any] = {}
        for f in dataclasses.fields(cls):
            if f.name in CLOSED:
                values[f.name] = {"status": "ok" if cls is model.CallRecorded else "completed",
                                  "state": "kept"}.get(f.name, "2025-01-01T00:00:00.000000Z")
                continue
            value = _value_for(cls, f.name, hints[f.name], session, call)
            if value is not None:
                values[f.name], _ = value, fields.add(f"{cls.kind}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                values[f.name] = None
        events.append(cls(**values))
    order = ["session_started", "session_titled", "exchange_started", "call", "tool_result", "outcome", "reasoning",
             "exchange_ended", "session_ended"]
    return sorted(events, key=lambda e: order.index(e.kind)), fields


def test_every_string_field_of_every_event_is_planted():
    """The enumeration itself: every field that can hold text or JSON is planted (a new field joins by itself)."""
    _, fields = planted_events()
    skipped = {f"{cls.kind}.{f.name}" for cls in RECORDED for f in dataclasses.fields(cls)} - fields
    assert {s.split(".")[1] for s in skipped} <= CLOSED | {"pid", "cost_usd", "latency_ms", "ttft_ms", "is_error",
                                                         "duration_ms", "stable_history", "details_tokens",
                                                         "compact_tokens", "redacted"}


def everything_read(db) -> bytes:
    """What a person can read of a database: its files' bytes, both exports, `show` and the server's pages."""
    store = open_store(db)
    sessions = [s["id"] for s in store.list_sessions(ALL)]
    out = b"".join(dump_lines(store))
    calls = [c["id"] for sid in sessions for c in store.get_session(sid)["calls"]]
    records = orjson.dumps(store.list_reasoning_records())
    store.checkpoint()
    store.close()
    if isinstance(db, Path):
        out += b"".join(p.read_bytes() for p in db.parent.iterdir() if p.is_file() and p.name.startswith(db.name))
    runner = CliRunner()
    out += runner.invoke(cli, ["--db", str(db), "export", "--format", "otlp"]).stdout_bytes + records
    client = TestClient(create_app(lambda: open_store(db)))
    pages = ["/", "/v1/sessions"] + [f"{p}/sessions/{quote(sid, safe='')}" for sid in sessions for p in ("", "/v1")]
    pages += [f"{p}/{quote(cid, safe='')}" for cid in calls for p in ("/calls", "/v1/calls")]
    for page in pages:
        answer = client.get(page)
        assert answer.status_code == 200, (page, answer.text[:200])
        out += answer.content
    for sid in sessions:
        shown = runner.invoke(cli, ["--db", str(db), "show", sid])
        assert shown.exit_code == 0, shown.output
        out += shown.stdout_bytes
    return out


def test_every_field_written_to_a_store_is_masked(db, caplog):
    caplog.set_level(logging.DEBUG)
    events, _ = planted_events()
    store = open_store(db)
    store.write_batch(events)
    status = store.status()
    store.close()
    blob = everything_read(db) + caplog.text.encode()
    assert leaks(blob) == [] and status["rejected_records"] == 0
    assert status["redacted_secrets"] > 100


def test_every_field_spilled_is_masked_and_replays_into_the_same_ids(tmp_path):
    class Refusing:
        def write_batch(self, events, counters=None):
            raise OSError("the database is away")

    events, _ = planted_events()
    sink = SpillingSink(Refusing(), tmp_path / "spill", Redactor())
    assert sink.write_batch(events) == "spilled"
    spilled = b"".join(p.read_bytes() for p in (tmp_path / "spill").iterdir())
    assert leaks(spilled) == []
    db = tmp_path / "replayed.db"
    sink.inner = reasonlog.capture.sinks.StoreSink(lambda: open_store(db))
    assert sink.replay() == 0
    store = open_store(db)
    (session,) = store.list_sessions(ALL)
    assert session["id"] == Redactor().text(planted_id("session id")) and session["call_count"] == 1
    store.close()
    assert leaks(everything_read(db)) == []


# ------------------------------------------------------------------ the server: ingestion and OTLP


@pytest.mark.parametrize("recorder_masks", [True, False], ids=["masking-recorder", "recorder-without-masking"])
def test_events_sent_to_the_server_are_masked_there(db, tmp_path, monkeypatch, recorder_masks):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    events, _ = planted_events()
    port = free_port()
    with Served(db, port):
        HttpSink(f"http://127.0.0.1:{port}", redactor=Redactor() if recorder_masks else None).write_batch(events)
    store = open_store(db)
    (session,) = store.list_sessions(ALL)
    assert session["id"] == Redactor().text(planted_id("session id"))
    assert store.status()["redacted_secrets"] > 100
    store.close()
    assert leaks(everything_read(db)) == []


class Catching(http.server.BaseHTTPRequestHandler):
    """A stand-in for `reasonlog serve` on 127.0.0.1 that keeps every body it is sent."""

    bodies: list[bytes] = []

    def do_GET(self):
        self._answer(b'{"max_bytes": 1048576}')

    def do_POST(self):
        self.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
        self._answer(b'{"events": 0}')

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_recorder_pointed_at_a_server_sends_nothing_unmasked(tmp_path, monkeypatch):
    """What leaves the recorder's process: the bodies a server receives from `Recorder("http://…")`."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    server = LocalHTTPServer(("127.0.0.1", 0), Catching)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        rec = reasonlog.Recorder(f"http://127.0.0.1:{server.server_port}", writer="sync")
        with rec.session(id=planted("session"), agent=planted("agent"), run=planted("run")) as s:
            s.call(messages=[{"role": "user", "content": planted("message")}], response=planted("answer"),
                   raw=planted("raw").encode())
        rec.close()
    finally:
        server.stop()
    sent = b"".join(Catching.bodies)
    assert sent.count(b'"event":"call"') == 1 and leaks(sent) == []
    raw = [base64.b64decode(m) for m in re.findall(rb'"\$reasonlog.bytes":"([^"]*)"', sent)]
    assert len(raw) == 1 and leaks(raw[0]) == []


def test_otlp_spans_are_masked(db, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    inputs = [{"role": "user", "parts": [{"type": "text", "content": planted("message")}]}]
    output = {"role": "assistant", "finish_reason": "tool_call", "parts": [
        {"type": "tool_call", "id": "c1", "name": "fetch", "arguments": {"url": planted("argument")}}]}
    attributes = genai_attributes(inputs, output, 10, 0)
    attributes["gen_ai.system_instructions"] = json.dumps([{"type": "text", "content": planted("system")}])
    attributes["gen_ai.conversation.id"] = planted("conversation")
    attributes["user.note"] = planted("attribute")
    span = {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "name": "chat gpt-5",
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000",
            "attributes": [{"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else
                            {"arrayValue": {"values": [{"stringValue": x} for x in v]}} if isinstance(v, list) else
                            {"stringValue": v}} for k, v in attributes.items()]}
    body = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": [span]}]}]}
    client = TestClient(create_app(lambda: open_store(db)))
    answer = client.post("/v1/traces", content=orjson.dumps(body), headers={"Content-Type": "application/json"})
    assert answer.status_code == 200, answer.text
    store = open_store(db)
    assert sum(s["call_count"] for s in store.list_sessions(ALL)) == 1
    store.close()
    assert leaks(everything_read(db)) == []


# ------------------------------------------------------------------ importers


def plant_file(source: Path, target: Path) -> None:
    """A copy of a source file with the secrets in its free text: strings with a space or that are paths."""
    data = source.read_bytes()
    if source.suffix == ".txt":
        target.write_text(source.read_text() + "\n" + PLANTED + "\n")
    elif source.suffix in (".json", ".jsonl"):
        lines = data.decode().splitlines() if source.suffix == ".jsonl" else [data.decode()]
        target.write_text("\n".join(json.dumps(_plant(json.loads(line))) if line.strip() else line
                                    for line in lines) + "\n")
    else:
        target.write_bytes(data)


def _plant(value):
    if isinstance(value, dict):
        return {k: _plant(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plant(v) for v in value]
    if isinstance(value, str) and value.startswith("/"):
        return value.rstrip("/") + "/" + SECRETS["openai_key"]
    if isinstance(value, str) and " " in value:
        return value + " " + PLANTED
    return value


def planted_copy(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / "in" / source.name
    if source.is_dir():
        shutil.copytree(source, target)
        for path in [p for p in target.rglob("*") if p.is_file()]:
            plant_file(path, path)
    else:
        target.parent.mkdir(parents=True)
        plant_file(source, target)
    return target


TESTS = Path(__file__).parent / "fixtures"
IMPORTS = {
    "claude-code": FIXTURES / "claude-code-transcripts" / "claude-code-log-synthetic" / "representative_messages.jsonl",
    "codex": TESTS / "codex" / "sessions",
    "gemini": TESTS / "gemini" / "tmp",
    "game-log": FIXTURES / "pycatan-ai-logs" / "session_20260109_170804",
    "interactions": TESTS / "interactions" / "logs",
    "trading-log": FIXTURES / "ai-trader-agent-log" / "agent_data",
    "claude-agent-sdk": FIXTURES / "claude-agent-sdk" / "subagent-step-stream.json",
}


def exchange_jsonl_source(tmp_path: Path) -> Path:
    """An exchange-based session file, as the Agent SDK logger's export writes it, recorded without masking."""
    rec = reasonlog.Recorder(tmp_path / "unmasked.db", writer="sync", redact=False)
    recorded_session(rec)
    rec.close()
    store = open_store(tmp_path / "unmasked.db", redactor=False)
    (session,) = store.list_sessions(ALL)
    source = tmp_path / "source" / "session.jsonl"
    source.parent.mkdir()
    source.write_text("".join(export_exchange_jsonl(store, session["id"])))
    store.close()
    return source


@pytest.mark.parametrize("fmt", sorted([*IMPORTS, "exchange-jsonl"]))
@pytest.mark.slow
def test_every_importer_masks(fmt, tmp_path):
    source = planted_copy(IMPORTS[fmt] if fmt in IMPORTS else exchange_jsonl_source(tmp_path), tmp_path)
    db = tmp_path / "imported.db"
    done = CliRunner().invoke(cli, ["--db", str(db), "import", "--format", fmt, "--json", str(source)])
    assert done.exit_code == 0, done.output
    store = open_store(db)
    calls, redacted = sum(s["call_count"] for s in store.list_sessions(ALL)), store.status()["redacted_secrets"]
    store.close()
    assert calls > 0 and redacted > 0
    assert leaks(everything_read(db) + done.output.encode()) == []


def test_an_export_made_without_masking_is_masked_when_imported(tmp_path):
    raw_db = tmp_path / "raw.db"
    rec = reasonlog.Recorder(raw_db, writer="sync", redact=False)
    with rec.session(id=planted_id("session"), agent=planted("agent"), run=planted("run"),
                     labels={planted("key"): planted("label")}) as s:
        s.call(system=planted("system"), messages=[{"role": "user", "content": planted("message")}],
               response=planted("answer"), raw={"echo": planted("raw")})
        s.tool_result("t1", planted("result"), input={"cmd": planted("input")})
        s.outcome("note", {"text": planted("outcome")})
    rec.close()
    export = tmp_path / "raw.jsonl"
    export.write_bytes(CliRunner().invoke(cli, ["--db", str(raw_db), "export"]).stdout_bytes)
    assert set(leaks(export.read_bytes())) == set(RAW)  # the file holds them all: the import must mask them
    db = tmp_path / "imported.db"
    done = CliRunner().invoke(cli, ["--db", str(db), "import", str(export)])
    assert done.exit_code == 0, done.output
    store = open_store(db)
    (session,) = store.list_sessions(ALL)
    assert session["id"] == Redactor().text(planted_id("session")) and session["call_count"] == 1
    store.close()
    assert leaks(everything_read(db)) == []


# ------------------------------------------------------------------ reasoning records and their artifacts


def test_reasoning_records_and_their_artifacts_are_masked(db, tmp_path):
    root = tmp_path / "artifacts"
    store, limits = open_store(db), policy.Policy(budget_tokens=5000, overflow="artifact")
    record, _ = save(store, limits, planted("session"), "completion", {"summary": planted("summary"),
                     "key_decisions": [planted("decision")]}, agent=planted("agent"), group=planted("group"),
                     details=planted("details"), confidence=planted("confidence"),
                     references=[planted("reference")], artifacts_root=root)
    again, _ = save(store, limits, planted("session"), "decisions", {"summary": "second"},
                    details="more", artifacts_root=root)
    store.close()
    assert record is not None and again is not None and again["session_id"] == record["session_id"]
    files = [p for p in root.rglob("*")]
    names = "\n".join(str(p.relative_to(root)) for p in files).encode()
    assert len([p for p in files if p.name == "reasoning_index.json"]) == 1
    contents = b"".join(p.read_bytes() for p in files if p.is_file())
    assert re.search(rb"REDACTED_openai_key_[0-9a-f]{12}", names)
    assert leaks(names + contents) == [] and leaks(everything_read(db)) == []
