"""Issue 30: nothing lost when processes fork, writers race, or a close runs out of time.

Ids stay unique in processes made by fork (by hand, by `multiprocessing` with each start method, a fork of a
fork), pools of recorders count every call into one SQLite file and one PostgreSQL database, and a
`close(timeout)` that meets a batch still being committed keeps a copy of it, written exactly once
whichever copy lands."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import faultkit
import pytest
from helpers import Locked

import reasonlog

CHILD = Path(__file__).with_name("forking_child.py")


@pytest.fixture
def db_target(db):
    """The pools and closes run on SQLite and on PostgreSQL."""
    return db


def forked(*args: str) -> object:
    """A scenario of forking_child.py, in a fresh interpreter (see there why not in the test runner)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(reasonlog.__file__).parents[1]),
                                                                     os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(CHILD), *args], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_children_making_ids_in_the_same_milliseconds_never_repeat_one(method):
    ids = forked("ids", method)
    assert isinstance(ids, list) and len(ids) == 6 * 2_000
    assert len(set(ids)) == len(ids)
    assert len({i[10:] for i in ids}) == len(ids)  # not even the random parts meet


def test_os_fork_by_hand_and_a_fork_of_a_fork_never_repeat_an_id():
    ids = forked("by-hand")
    assert isinstance(ids, list) and len(ids) == 7 * 2_000
    assert len(set(ids)) == len(ids)


@pytest.mark.slow
def test_a_multiprocessing_pool_of_recorders_stores_every_call(db_target, tmp_path):
    """Four forked workers, each with its own recorder, start in the same millisecond: every call is stored once."""
    target = str(db_target) if "://" in str(db_target) else str(tmp_path / "pool.db")
    out = forked("pool", target, "4", "150")
    assert isinstance(out, dict)
    assert (out["written"], out["found"], out["lost"], out["duplicates"], out["wrong_replays"]) == (600, 600, 0, 0, 0)
    assert out["rejected"] == 0


@pytest.mark.slow
def test_a_close_that_times_out_keeps_the_batch_being_committed(db_target, tmp_path):
    """The writer is stuck committing (another process holds the lock past close's timeout) when the process
    exits: the batch in flight is in a spill file, and every call is stored once after the lock goes."""
    out = faultkit.close_in_flight(tmp_path, calls=100, db=db_target)
    assert (out.written, out.found, out.lost, out.duplicates, out.wrong_replays) == (100, 100, 0, 0, 0)
    # Every event (the session's start, its calls, its end) went through a spill file: none was lost before exit.
    assert out.note == "102 events went through spill files"


@pytest.mark.slow
def test_when_both_the_batch_in_flight_and_its_spilled_copy_land_it_is_stored_once(db_target):
    """close() times out and spills a copy of the batch being committed; the lock then goes, the commit lands
    in the still running process, and the spilled copy is replayed: nothing twice."""
    calls = 60
    blocker = Locked(db_target).__enter__()
    try:
        rec = reasonlog.Recorder(db_target, store_options={"busy_timeout_ms": 60_000})
        s = rec.session(agent="landing-0", run="landing")
        for i in range(calls):
            s.call(request=faultkit.expected_request("landing", 0, i), response=faultkit.answer("landing", 0, i),
                   usage=reasonlog.Usage(input_tokens=10 + i, output_tokens=5))
        s.end()
        assert rec.close(timeout=1.0) is False
    finally:
        blocker.release()
    deadline = time.monotonic() + 30
    while rec.stats()["written"] == 0 and time.monotonic() < deadline:  # the batch in flight commits now
        time.sleep(0.05)
    assert rec.stats()["written"] > 0
    faultkit.settle(db_target)
    found = faultkit.verify(db_target, "landing")
    assert (found.count(), found.duplicates(), found.missing(1, calls)) == (calls, 0, 0)
