"""`reasonlog mirror push TARGET [--watch]`, `reasonlog mirror status TARGET` and `serve --mirror TARGET` as a
user runs them (each a process of its own: chdb opens its folder in one process at a time), on both engines."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from mirroring import (
    process_target,  # noqa: F401  (the `target` fixture)
    record,
)

SPEC = {"exchanges": [{"calls": [(100, 20, "gpt-5", "ok")], "reported": None, "child": None}], "label": None,
        "end": "completed"}


def reasonlog(*args: str, db) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "REASONLOG_DB"}
    done = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), *args], capture_output=True, text=True,
                          timeout=120, env=env)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def pushed(done: subprocess.CompletedProcess) -> list[dict]:
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_push_status_and_watch(tmp_path, target):
    db = tmp_path / "a.db"
    record(db, [SPEC, SPEC])
    (first,) = pushed(reasonlog("mirror", "push", target, "--json", db=db))
    assert (first["sessions"], first["entries"], first["messages"], first["deleted"]) == (2, 2, 4, 0)
    assert first["source"] == f"sqlite://{db.resolve()}"
    (again,) = pushed(reasonlog("mirror", "push", target, "--json", db=db))
    assert (again["sessions"], again["entries"]) == (0, 0)
    status = json.loads(reasonlog("mirror", "status", target, "--json", db=db).stdout)
    assert status["caught_up"] is True and status["cursor"]["sessions"] == 2
    record(db, [SPEC])
    assert json.loads(reasonlog("mirror", "status", target, "--json", db=db).stdout)["caught_up"] is False
    watched = pushed(reasonlog("mirror", "push", target, "--watch", "--every", "0.1", "--times", "2", "--json",
                               db=db))
    assert [(w["sessions"], w["whole"]) for w in watched] == [(1, True), (0, False)]  # then the recent ones
    assert all(isinstance(w["lag_s"], float) and w["lag_s"] >= 0 for w in watched)
    said = reasonlog("mirror", "push", target, db=db)
    assert said.stdout.startswith("pushed 0 session(s), 0 entries, 0 messages (0 deleted) from sqlite://")


def test_a_rebuild_drops_the_mirror_and_pushes_everything_again(tmp_path, target):
    db = tmp_path / "a.db"
    record(db, [SPEC])
    assert reasonlog("mirror", "push", target, db=db).returncode == 0
    (rebuilt,) = pushed(reasonlog("mirror", "push", target, "--rebuild", "--json", db=db))
    assert (rebuilt["sessions"], rebuilt["entries"]) == (1, 1)


def test_a_mirror_that_cannot_be_reached_is_one_line_naming_it(tmp_path):
    db = tmp_path / "a.db"
    record(db, [SPEC])
    for args in (("mirror", "push", "clickhouse://127.0.0.1:1/x"), ("mirror", "status", "ftp://nowhere"),
                 ("serve", "--mirror", "clickhouse://127.0.0.1:1/x", "--port", "1")):
        done = reasonlog(*args, db=db)
        assert done.returncode == 1, done
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
        assert "clickhouse://" in lines[0]
