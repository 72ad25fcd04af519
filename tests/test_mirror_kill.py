"""A `reasonlog mirror push` killed by SIGKILL at any moment, with the record written meanwhile, converges when run
again; and a second push of the same source, while one runs, says so instead of running beside it (issue 36). Each
push is a process of its own, as a user runs it, on both ClickHouse engines; the comparison with the record runs in
a process of its own too (chdb opens its folder in one process at a time)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from mirroring import (
    process_target,  # noqa: F401  (the `target` fixture)
    record,
)

SPEC = {"exchanges": [{"calls": [(100, 20, "gpt-5", "ok"), (7, 1, "claude-haiku-4-5", "error")],
                       "reported": None, "child": [(3, 1, "gpt-5", "ok")]}], "label": "team=a", "end": "completed"}
TESTS = Path(__file__).resolve().parent
COMPARE = ("import sys; sys.path.insert(0, sys.argv[3]); import reasonlog; from mirroring import assert_same;"
           " from reasonlog.mirror import engine, push, reader;"
           " store = reasonlog.open_store(sys.argv[1], read_only=True);"
           " assert_same(store, reader.MirrorReader(engine.connect(sys.argv[2]), push.source_of(store)))")


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "REASONLOG_DB"}


def start_push(db, target: str, *more: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "reasonlog", "--db", str(db), "mirror", "push", target, "--json",
                             *more], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())


def push_to_end(db, target: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "mirror", "push", target, "--json"],
                          capture_output=True, text=True, timeout=300, env=env())
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return done


def assert_mirror_is_the_record(db, target: str) -> None:
    done = subprocess.run([sys.executable, "-c", COMPARE, str(db), target, str(TESTS)], capture_output=True,
                          text=True, timeout=300, env=env())
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(delay=st.floats(0.0, 4.0), written=st.integers(0, 6))
def test_a_push_killed_at_any_moment_converges_when_run_again(tmp_path_factory, target, delay, written):
    db = tmp_path_factory.mktemp("kill") / "a.db"
    record(db, [SPEC] * 12)
    first = start_push(db, target, "--batch", "1")  # one session an insert: many points to be killed at
    writer = threading.Thread(target=record, args=(db, [SPEC] * written))  # the record goes on meanwhile
    writer.start()
    time.sleep(delay)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=60)
    writer.join()
    push_to_end(db, target)
    assert_mirror_is_the_record(db, target)


def test_a_second_push_of_the_source_says_one_is_running_and_runs_once_it_ended(tmp_path, target):
    db = tmp_path / "a.db"
    record(db, [SPEC] * 2)  # two sessions, each with a sub-agent
    watching = start_push(db, target, "--watch", "--every", "0.2", "--times", "1000")
    try:
        assert watching.stdout is not None
        assert json.loads(watching.stdout.readline())["sessions"] == 4  # its first push ended: it holds the guard
        second = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "mirror", "push", target],
                                capture_output=True, text=True, timeout=120, env=env())
        assert second.returncode == 1
        assert second.stderr.strip() == (f"error: a push of sqlite://{db.resolve()} into {target} is already running"
                                         f" (pid {watching.pid}); wait for it to end or stop it, then push again")
    finally:
        watching.send_signal(signal.SIGKILL)  # killed: the kernel lets its guard go
        watching.communicate(timeout=60)
    record(db, [SPEC])
    assert json.loads(push_to_end(db, target).stdout)["sessions"] == 2  # the new session and its sub-agent
