"""The recorder's memory stays within its stated bound whatever the size of the messages (issue 19 item 9).

The writer remembers the canonical bytes of what it wrote, to find resent history without hashing it
again; that cache is budgeted (16 MiB). orjson hands back its output in the buffer it wrote into (4 KiB
for a short text, about 15 times the length of a long one), so budgeting the key's length while keeping
orjson's object held many times the budget. What the recorder keeps is measured with tracemalloc (SQLite's
own page cache is not Python's and not counted; its bound is its `cache_size`).
"""
from __future__ import annotations

import gc
import tracemalloc

import pytest

import reasonlog

MiB = 1 << 20
# The content cache's budget plus everything else the writer keeps between batches (a session's state,
# the dictionary's samples, sqlite3's statement cache): what a user is promised stays bounded.
RETAINED_BOUND = 24 * MiB


@pytest.mark.parametrize(("messages", "chars"), [pytest.param(40_000, 30, marks=pytest.mark.slow), (10_000, 3_000)],
                         ids=["short", "long"])
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
