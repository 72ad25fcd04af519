"""One write path (issue 33): an import's progress is an event of its batch, so it travels wherever a batch travels
(a spill file, a replay of one) and lands as the file's `import_files` row, masked as the events are; and a user's
own three-method sink, held by the writer in its spilling wrapper, keeps the counts it kept before."""
from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

import reasonlog
from reasonlog.capture.sinks import SpillingSink, StoreSink
from reasonlog.capture.writer import SyncWriter
from reasonlog.model import FileImported, SessionStarted, dump_event, load_event

SECRET = "sk-proj-" + "a1B2" * 10


def _progress(path: str, sessions: list[str], state: dict | None) -> FileImported:
    return FileImported(path=path, format="claude-code", size=4096, mtime_ns=1_700_000_000_123_456_789,
                        consumed=2048, tail_hash="0" * 32, state=state, sessions=sessions, skipped=1,
                        imported_at="2026-01-02T03:04:05.000000Z")


def test_a_spilled_import_batch_lands_with_its_files_row_when_replayed(db, tmp_path):
    """The batch refused first (no database yet to write: a sink that fails) waits in a spill file; the next writer
    writes its events and the file's row in one transaction, the importer's state masked as its events were."""
    class Refusing:
        def write_batch(self, events, counters=None, *, batch_id=None):
            raise OSError("disk full")

        def add_counters(self, counters):
            raise OSError("disk full")

        def close(self):
            pass

    folder = tmp_path / "spill"
    started = SessionStarted(session_id="S1", started_at="2026-01-02T03:04:05.000000Z", agent="a")
    progress = _progress("/home/u/t.jsonl", ["S1"], {"cwd": f"/tmp/{SECRET}", "$line": 7})
    writer = SyncWriter(SpillingSink(Refusing(), folder))
    assert writer.write([started, progress]) == "spilled"
    assert len(list(folder.glob("*.spill"))) == 1

    store = reasonlog.open_store(db)
    try:
        replaying = SpillingSink(StoreSink(lambda: store, owned=False), folder)
        assert replaying.replay() == 0
        row = store.import_file("/home/u/t.jsonl")
        assert row is not None
        assert {k: row[k] for k in ("format", "size", "consumed", "skipped", "sessions")} == {
            "format": "claude-code", "size": 4096, "consumed": 2048, "skipped": 1, "sessions": ["S1"]}
        assert row["state"]["$line"] == 7 and SECRET not in row["state"]["cwd"]
        assert store.existing_ids("session", ["S1", "S2"]) == {"S1"}
    finally:
        store.close()


_text = st.text(min_size=1, max_size=20)


@settings(max_examples=200, deadline=None)
@given(path=_text, sessions=st.lists(_text, max_size=4),
       state=st.none() | st.dictionaries(_text, st.integers(-2**70, 2**70) | _text | st.binary(max_size=8), max_size=4))
def test_an_import_progress_event_comes_back_from_its_line_as_it_was(path, sessions, state):
    """Spill files and `POST /v1/ingest` carry it as any other event."""
    event = _progress(path, sessions, state)
    assert dataclasses.asdict(load_event(dump_event(event))) == dataclasses.asdict(event)


def test_a_users_own_sink_that_fails_counts_its_batch_dropped_as_before(tmp_path):
    """A three-method sink given without spill folders: nothing spills, the loss is counted and kept for the next
    batch's counters."""
    kept: list[dict] = []

    class Flaky:
        def __init__(self):
            self.calls = 0

        def write_batch(self, events, counters=None, *, batch_id=None):
            self.calls += 1
            if self.calls == 1:
                raise OSError("away")
            kept.append(dict(counters or {}))

        def add_counters(self, counters):
            kept.append(dict(counters))

        def close(self):
            pass

    writer = SyncWriter(Flaky())
    writer.submit(SessionStarted(session_id="S1", started_at="2026-01-02T03:04:05.000000Z"))
    writer.submit(SessionStarted(session_id="S2", started_at="2026-01-02T03:04:05.000000Z"))
    stats = writer.stats()
    assert (stats["dropped"], stats["written"], stats["spilled_batches"]) == (1, 1, 0)
    assert stats["last_error"] == "OSError: away"
    assert kept == [{"dropped": 1}]
