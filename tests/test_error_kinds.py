"""Errors travel by kind, not by their words (issue 21 item 3): the store raises NotFound, Ambiguous, Invalid,
Unavailable or ReadOnly, and each surface answers once by kind."""
from __future__ import annotations

import sqlite3

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

import reasonlog
from reasonlog.cli.main import cli
from reasonlog.server.app import create_app
from reasonlog.server.errors import status_of
from reasonlog.store import Ambiguous, Invalid, NotFound, ReadOnlyDatabase, Unavailable, failure_of, open_store


@pytest.fixture
def recorded(tmp_path):
    db = tmp_path / "k.db"
    rec = reasonlog.Recorder(db, writer="sync")
    ids = []
    for n in range(2):
        with rec.session(agent="a", id=f"0AMBIG{n}") as s:
            s.call(messages=[{"role": "user", "content": "hi"}], response="hello")
            ids.append(s.id)
    rec.close()
    return db, ids


def test_the_store_raises_each_kind(recorded):
    db, _ = recorded
    store = open_store(db, read_only=True)
    with pytest.raises(NotFound):
        store.resolve_id("session", "ZZZ")
    with pytest.raises(Ambiguous):
        store.resolve_id("session", "0AMBIG")
    with pytest.raises(Invalid):
        store.resolve_id("call", "#3")
    with pytest.raises(NotFound):
        store.resolve_id("call", "0AMBIG0#9")
    with pytest.raises(NotFound):
        store.get_session("nothing")
    store.close()


def test_each_kind_has_its_status_whatever_its_words():
    assert [status_of(e) for e in (NotFound("x"), Ambiguous("no words decide"), Invalid("no such thing"),
                                   Unavailable("y"), ReadOnlyDatabase("z"))] == [404, 400, 400, 503, 503]


def test_the_api_and_the_dashboard_answer_by_kind(recorded):
    db, ids = recorded
    client = TestClient(create_app(lambda: open_store(db, read_only=True)))
    assert client.get("/v1/sessions/ZZZ").status_code == 404
    assert client.get("/v1/sessions/0AMBIG").status_code == 400
    assert client.get(f"/v1/sessions/{ids[0]}").status_code == 200
    assert client.get("/sessions/ZZZ").status_code == 404
    assert client.get("/sessions/0AMBIG").status_code == 400


def test_a_drivers_error_is_unavailable_and_the_cli_says_it_in_one_line(recorded, tmp_path):
    assert isinstance(failure_of(sqlite3.DatabaseError("database disk image is malformed")), Unavailable)
    assert failure_of(ValueError("not a driver's")) is None
    db, _ = recorded
    out = CliRunner().invoke(cli, ["--db", str(db), "show", "ZZZ"])
    assert (out.exit_code, out.output) == (1, "error: no session matches 'ZZZ'\n")
