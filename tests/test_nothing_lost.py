"""Issue 30: nothing lost when processes fork, writers race, or a close runs out of time.

Ids stay unique in processes made by fork (by hand, by `multiprocessing` with each start method, a fork of a
fork), pools of recorders count every call into one SQLite file and one PostgreSQL database, and a
`close(timeout)` that meets a batch still being committed keeps a copy of it, written exactly once
whichever copy lands."""
from __future__ import annotations

import multiprocessing
import os
import signal
import time

import faultkit
import pytest
from helpers import Locked

import reasonlog
from reasonlog.model import new_id

IDS_PER_CHILD = 2_000


@pytest.fixture
def db_target(db):
    """The pools and closes run on SQLite and on PostgreSQL."""
    return db


def _ids_at(start_ns: int, out) -> None:
    """Wait for `start_ns`, then make ids as fast as possible: every child does so in the same milliseconds."""
    while time.time_ns() < start_ns:
        pass
    out.put([new_id() for _ in range(IDS_PER_CHILD)])


def _fork_of_a_fork(start_ns: int, out) -> None:
    ctx = multiprocessing.get_context("fork")
    inner = ctx.Process(target=_ids_at, args=(start_ns, out))
    inner.start()
    _ids_at(start_ns, out)
    inner.join()


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_children_making_ids_in_the_same_milliseconds_never_repeat_one(method):
    new_id()  # the parent has drawn its random part before forking, as a recorder made before a pool would
    ctx = multiprocessing.get_context(method)
    out = ctx.Queue()
    start = time.time_ns() + 1_500_000_000  # spawned children need time to import
    children = [ctx.Process(target=_ids_at, args=(start, out)) for _ in range(6)]
    for c in children:
        c.start()
    ids = [i for _ in children for i in out.get(timeout=60)]
    for c in children:
        c.join(timeout=60)
    assert len(ids) == 6 * IDS_PER_CHILD
    assert len(set(ids)) == len(ids)
    assert len({i[10:] for i in ids}) == len(ids)  # not even the random parts meet


def test_os_fork_by_hand_and_a_fork_of_a_fork_never_repeat_an_id():
    new_id()
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    start = time.time_ns() + 300_000_000
    children = [ctx.Process(target=_fork_of_a_fork, args=(start, out)) for _ in range(3)]
    for c in children:
        c.start()
    pid = os.fork()
    if pid == 0:  # os.fork by hand: the child writes its ids to a pipe-less file and leaves at once
        try:
            _ids_at(start, out)
            out.close()
            out.join_thread()
        finally:
            os._exit(0)
    ids = [i for _ in range(7) for i in out.get(timeout=60)]
    assert _reaped(pid, timeout=60), "the child forked by hand never exited after sending its ids"
    for c in children:
        c.join(timeout=60)
    assert len(ids) == 7 * IDS_PER_CHILD
    assert len(set(ids)) == len(ids)


def _reaped(pid: int, timeout: float) -> bool:
    """Wait for a child made by os.fork, with a deadline: a child stuck past it is killed (the suite never hangs)."""
    deadline = time.monotonic() + timeout
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return False
        time.sleep(0.05)
    return True


def test_a_multiprocessing_pool_of_recorders_stores_every_call(db_target, tmp_path):
    """Four forked workers, each with its own recorder, start in the same millisecond: every call is stored once."""
    out = faultkit.forked_pool(tmp_path, workers=4, calls=150, db=db_target)
    assert (out.written, out.found, out.lost, out.duplicates, out.wrong_replays) == (600, 600, 0, 0, 0)
    assert faultkit.rejected(db_target) == 0


def test_a_close_that_times_out_keeps_the_batch_being_committed(db_target, tmp_path):
    """The writer is stuck committing (another process holds the lock past close's timeout) when the process
    exits: the batch in flight is in a spill file, and every call is stored once after the lock goes."""
    out = faultkit.close_in_flight(tmp_path, calls=100, db=db_target)
    assert (out.written, out.found, out.lost, out.duplicates, out.wrong_replays) == (100, 100, 0, 0, 0)
    # Every event (the session's start, its calls, its end) went through a spill file: none was lost before exit.
    assert out.note == "102 events went through spill files"


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
