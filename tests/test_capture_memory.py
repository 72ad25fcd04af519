"""The recorder's memory stays within its stated bound whatever the size of the messages (issue 19 item 9).

The writer remembers the canonical bytes of what it wrote, to find resent history without hashing it
again; that cache is budgeted (16 MiB). orjson hands back its output in the buffer it wrote into (4 KiB
for a short text, about 15 times the length of a long one), so budgeting the key's length while keeping
orjson's object held many times the budget. What the recorder keeps is measured with tracemalloc (SQLite's
own page cache is not Python's and not counted; its bound is its `cache_size`).
"""
from __future__ import annotations

import contextlib
import gc
import os
import time
import tracemalloc
import weakref

import pytest

import reasonlog
from reasonlog.store import SessionFilter

MiB = 1 << 20
# The content cache's budget plus everything else the writer keeps between batches (a session's state,
# the dictionary's samples, sqlite3's statement cache): what a user is promised stays bounded.
RETAINED_BOUND = 24 * MiB


@pytest.mark.slow  # both sizes write tens of thousands of messages
@pytest.mark.parametrize(("messages", "chars"), [(40_000, 30), (10_000, 3_000)], ids=["short", "long"])
def test_the_writer_keeps_a_bounded_memory_whatever_the_size_of_the_messages(db_path, messages, chars):
    tracemalloc.start()
    try:
        rec = reasonlog.Recorder(db_path, writer="sync")
        s = rec.session(agent="memory")
        per_call = 1_000
        for c in range(messages // per_call):
            batch = [{"role": "user", "content": f"{c}-{i}-".ljust(chars, "x")} for i in range(per_call)]
            s.call(messages=batch, response="ok", id=f"call-{c}")
        del batch
        gc.collect()
        retained, _ = tracemalloc.get_traced_memory()
        s.end()
        rec.close()
    finally:
        tracemalloc.stop()
    assert rec.stats()["written"] == 2 + messages // per_call
    assert retained < RETAINED_BOUND, f"the writer keeps {retained / MiB:.1f} MiB"


@pytest.mark.slow
def test_the_server_keeps_a_bounded_memory_ingesting_short_messages(db_path, tmp_path, monkeypatch):
    """`reasonlog serve` writes through the same content writer (issue 20 item 4: 1,138 MB after 104,000 events).
    Server and recorder run in this process (uvicorn in a thread), so what both keep is measured together."""
    from test_ingest import Served, free_port

    from reasonlog.store import open_store

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    key = open_store(db_path).create_api_key("write", "agents")["secret"]
    port = free_port()
    with Served(db_path, port):
        rec = reasonlog.Recorder(f"http://127.0.0.1:{port}", api_key=key, writer="sync")
        tracemalloc.start()
        try:
            s = rec.session(agent="memory over http")
            for c in range(40):
                batch = [{"role": "user", "content": f"{c}-{i}-".ljust(30, "x")} for i in range(1_000)]
                s.call(messages=batch, response="ok", id=f"call-{c}")
            del batch
            gc.collect()
            retained, _ = tracemalloc.get_traced_memory()
            s.end()
            rec.close()
        finally:
            tracemalloc.stop()
    assert rec.stats()["written"] == 42 and rec.stats()["spilled_events"] == 0
    assert retained < RETAINED_BOUND, f"server and recorder keep {retained / MiB:.1f} MiB"


def open_sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):  # the listing's own descriptor is gone by now
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return count


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
@pytest.mark.parametrize("sdk", [pytest.param("anthropic", marks=pytest.mark.slow), "openai"])  # quick: one SDK
def test_an_instrumented_client_dropped_by_the_agent_is_freed_with_its_connections(server, rec, sdk):
    """An agent that makes a client per task: each one instrumented, used, then dropped. The instrumentation
    kept every client alive (and its pool's open connection): memory and one descriptor per client, forever."""
    import anthropic
    import openai

    from reasonlog.capture.anthropic import instrument_anthropic
    from reasonlog.capture.openai import instrument_openai

    make, instrument = {"anthropic": (anthropic.Anthropic, instrument_anthropic),
                        "openai": (openai.OpenAI, instrument_openai)}[sdk]
    hi = [{"role": "user", "content": "hi"}]
    ask = {"anthropic": lambda c: c.messages.create(model="m", max_tokens=8, messages=hi),
           "openai": lambda c: c.chat.completions.create(model="m", messages=hi)}[sdk]
    reply = ({"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
              "content": [{"type": "text", "text": "ok"}], "usage": {"input_tokens": 3, "output_tokens": 1}}
             if sdk == "anthropic" else
             {"id": "c1", "object": "chat.completion", "created": 1, "model": "m",
              "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
              "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}})
    gc.collect()
    before = open_sockets()
    alive = []
    for _ in range(20):
        server.reply_json(reply)
        client = make(base_url=server.url, api_key="test-key", max_retries=0)
        instrument(client, rec)
        ask(client)
        alive.append(weakref.ref(client))
        del client
    gc.collect()
    assert [r() is None for r in alive] == [True] * 20
    deadline = time.monotonic() + 5  # the local server's side closes when its handler thread reads the end
    while open_sockets() != before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert open_sockets() - before == 0
    rec.flush()  # and every call was still recorded, each in its client's own session
    store = reasonlog.open_store(rec.db_path)
    sessions = store.list_sessions(SessionFilter(limit=None))
    assert [len(store.get_session(s["id"])["calls"]) for s in sessions] == [1] * 20
