"""The timeline rebuilds every context of every real fixture that carries contexts (issue 17): Claude Code
transcripts, the PyCatan tree, the AI-Trader logs, Gemini and Codex sessions, Claude Agent SDK streams, OTLP spans
and reasonlog's own export. For each call, the timeline entries its window points at read as the messages it sent,
and the timeline holds each message once: what the windows added, edited, and the replies."""
from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from conftest import FIXTURES

from reasonlog.conversation import key_of, reader_form, reply_units, reply_variants
from reasonlog.io.importing import plan, run_import
from reasonlog.model import jsonable
from reasonlog.store import SessionFilter, open_store

HERE = Path(__file__).parent / "fixtures"
SOURCES = {
    "claude-code": FIXTURES / "claude-code-transcripts",
    "pycatan": FIXTURES / "pycatan-ai-logs",
    "ai-trader": FIXTURES / "ai-trader-agent-log" / "agent_data",
    "claude-agent-sdk": HERE / "claude_agent",
    "codex": HERE / "codex",
    "gemini": HERE / "gemini",
    "interactions": HERE / "interactions",
}


def _form(value):
    return reader_form(orjson.loads(orjson.dumps(value, default=jsonable, option=orjson.OPT_NON_STR_KEYS)))


def _reads_as(entry, sent) -> bool:
    form = _form(entry)
    return key_of(_form(sent)) in {key_of(form), *map(key_of, reply_variants(form))}


def assert_timeline_rebuilds_contexts(store) -> int:
    """Check every call of every session; returns how many calls were checked."""
    checked = 0
    for s in store.list_sessions(SessionFilter(limit=None)):
        session = store.get_session(s["id"])
        entries = {m["idx"]: m["content"] for m in session["messages"]}
        shown = 0
        for row in session["calls"]:
            call = store.get_call(row["id"])
            request = call["request"]
            sent = next((request[k] for k in ("messages", "input", "contents") if isinstance(request.get(k), list)),
                        [])
            slots = call["window_slots"]
            held = row["window"]["held"]
            assert len(slots) == held + len(sent), row["id"]
            for slot, message in zip(slots[held:], sent, strict=True):
                entry = entries[slot] if isinstance(slot, int) else reply_units(entries[slot[0]])[slot[1]]
                assert _reads_as(entry, message), (row["id"], slot)
            shown += row["window"]["added"] + row["window"]["edited"] + (call["response"] is not None)
            checked += 1
        assert shown == len(session["messages"]), s["id"]
    return checked


@pytest.mark.parametrize("name", SOURCES)
def test_every_context_of_a_real_fixture_is_rebuilt_by_the_timeline(tmp_path, name):
    store = open_store(tmp_path / "t.db")
    report = run_import(store, plan([SOURCES[name]]))
    assert report.failed == []
    assert assert_timeline_rebuilds_contexts(store) == report.added["calls"]
    store.close()


@pytest.mark.slow  # every real session exported and imported again (4 s of CPU)
def test_an_export_imported_again_has_the_same_windows(tmp_path):
    from reasonlog.io.jsonl import import_file, write_export

    first = open_store(tmp_path / "a.db")
    run_import(first, plan([SOURCES["claude-code"] / "spotter"]))
    with open(tmp_path / "all.jsonl", "wb") as out:
        write_export(first, out)
    second = open_store(tmp_path / "b.db")
    import_file(second, tmp_path / "all.jsonl")
    assert assert_timeline_rebuilds_contexts(second) == assert_timeline_rebuilds_contexts(first)
    windows = [[c["window"] for c in s.get_session(x["id"])["calls"]]
               for s in (first, second) for x in sorted(s.list_sessions(SessionFilter(limit=None)),
                                                        key=lambda x: x["id"])]
    assert windows[:len(windows) // 2] == windows[len(windows) // 2:]
    first.close()
    second.close()


@pytest.mark.slow  # every real session as OTLP spans (5 s of CPU)
def test_otlp_spans_of_real_sessions_are_rebuilt_by_the_timeline(tmp_path):
    """Real Claude Code sessions exported as OTLP GenAI spans, then ingested by `POST /v1/traces`."""
    from fastapi.testclient import TestClient

    from reasonlog.io.otlp_export import session_requests
    from reasonlog.server.app import create_app

    source = open_store(tmp_path / "source.db")
    run_import(source, plan([SOURCES["claude-code"] / "spotter"]))
    ids = [s["id"] for s in source.list_sessions(SessionFilter(limit=None))]
    client = TestClient(create_app(lambda: open_store(tmp_path / "spans.db"), max_body_bytes=256 << 20))
    for body in session_requests(source, ids):
        assert client.post("/v1/traces", content=body, headers={"Content-Type": "application/json"}).status_code == 200
    spans = open_store(tmp_path / "spans.db", read_only=True)
    assert assert_timeline_rebuilds_contexts(spans) == 243
    source.close()
    spans.close()
