"""A value that cannot be stored as sent (NaN, an infinity) is never stored as something else (issue 30 item 6b).

orjson writes NaN and the infinities as `null`: `params={"t": float("nan")}` was stored as `{"t": null}` in
both modes with nothing counted, and `replay` printed a request that was not sent. Strict mode raises at the
call site naming where the value is; the default mode rejects the record and counts it, on every path.
"""
from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

import reasonlog
from reasonlog.capture.sinks import SpillingSink
from reasonlog.cli.main import cli
from reasonlog.redact import Redactor
from reasonlog.store import SessionFilter, open_store
from reasonlog.wire.rules import RecordError

Q = [{"role": "user", "content": "q"}]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
def test_strict_raises_naming_where_the_value_is(db_path, bad):
    rec = reasonlog.Recorder(db_path, writer="sync", strict=True)
    s = rec.session(agent="a")
    with pytest.raises(RecordError, match=r'^request\["t"\]: cannot be stored as JSON \((nan|inf|-inf) has no JSON'):
        s.call(messages=Q, params={"t": bad}, response="ok")
    with pytest.raises(RecordError, match=r'^request\["messages"\]\[0\]\["content"\]\[1\]\["input"\]\["x"\]: '):
        s.call(messages=[{"role": "user", "content": [{"type": "text", "text": "hi"},
                                                      {"type": "tool_use", "id": "t", "input": {"x": [bad][0]}}]}])
    with pytest.raises(RecordError, match=r'^payload\["price"\]\[1\]: cannot be stored as JSON'):
        s.outcome("trade", {"price": [1.5, bad]})
    s.end()
    rec.close()
    assert open_store(db_path).status()["counts"]["calls"] == 0


def test_the_default_mode_rejects_and_counts_it_and_replay_prints_only_what_was_sent(db_path):
    rec = reasonlog.Recorder(db_path)
    s = rec.session(agent="a")
    kept = s.call(messages=Q, params={"t": 0.5}, response="ok")
    s.call(messages=Q, params={"t": math.nan}, response="ok")
    s.call(messages=Q, params={"t": None}, response="ok")  # a null that was sent is kept as it was
    s.tool_result("tu1", {"score": math.inf})
    s.outcome("trade", {"price": -math.inf})
    s.end()
    rec.close()
    assert rec.stats()["rejected"] == 3
    store = open_store(db_path)
    status = store.status()
    session = store.get_session(s.id)
    requests = [store.replay_call(c["id"]) for c in session["calls"]]
    store.close()
    assert (status["rejected_records"], status["counts"]["calls"], status["counts"]["outcomes"]) == (3, 2, 0)
    assert [r.get("t", "absent") for r in requests] == [0.5, None]
    shown = CliRunner().invoke(cli, ["--db", str(db_path), "replay", kept])
    assert shown.exit_code == 0 and '"t":0.5' in shown.output.replace(" ", "")


def test_a_spilled_batch_never_turns_it_into_null(tmp_path):
    class Refusing:
        def write_batch(self, events, counters=None):
            raise OSError("the database is away")

        add_counters = write_batch

        def close(self):
            pass

    rec = reasonlog.Recorder(tmp_path / "x.db", sink=SpillingSink(Refusing(), tmp_path / "spill", Redactor()))
    s = rec.session(agent="a")
    s.call(messages=Q, params={"t": math.nan}, response="ok")
    s.call(messages=Q, params={"t": 1.0}, response="ok")
    s.end()
    rec.close()
    spilled = b"".join(p.read_bytes() for p in (tmp_path / "spill").glob("*.spill"))
    assert b'"t":null' not in spilled and spilled.count(b'"t":1.0') == 1
    assert rec.stats()["rejected"] == 1


def test_a_nan_inside_a_message_of_the_history_rejects_that_call_alone(db_path):
    """A content holding NaN serialises to the bytes of one holding null: it must not meet that content's id."""
    rec = reasonlog.Recorder(db_path, writer="sync")
    s = rec.session(agent="a")
    s.call(messages=[{"role": "user", "content": "q", "meta": None}], response="ok")
    s.call(messages=[{"role": "user", "content": "q", "meta": math.nan}], response="ok")
    s.end()
    rec.close()
    store = open_store(db_path)
    (session,) = store.list_sessions(SessionFilter())
    assert (session["call_count"], store.status()["rejected_records"], rec.stats()["rejected"]) == (1, 1, 1)


def test_a_recorder_sending_to_a_server_rejects_and_counts_it(tmp_path, monkeypatch):
    from test_ingest import Served, free_port

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # where a remote recorder's spill files go
    db, port = tmp_path / "served.db", free_port()
    with Served(db, port):
        rec = reasonlog.Recorder(f"http://127.0.0.1:{port}")
        s = rec.session(agent="a")
        s.call(messages=Q, params={"t": math.nan}, response="ok")
        s.call(messages=Q, params={"t": 1.0}, response="ok")
        s.end()
        rec.close()
    store = open_store(db)
    (session,) = store.list_sessions(SessionFilter())
    (call,) = store.get_session(session["id"])["calls"]
    assert store.replay_call(call["id"])["t"] == 1.0 and rec.stats()["rejected"] == 1
    assert store.status()["rejected_records"] == 1
