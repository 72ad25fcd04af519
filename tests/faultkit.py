"""Faults on purpose: recording processes, the faults a database meets, and the check that nothing was lost.

Shared by `tests/test_fault_matrix.py` (which asserts) and `benchmarks/fault_matrix.py` (which prints the
figures in docs/reliability.md). A recording child (`recording_child.py`) records sessions whose every call
can be rebuilt from its tag, recorder and index, so `verify` can say, for each call that should exist,
whether it is there exactly once and replays byte for byte. The scenarios that take `db` run on a SQLite file
in `tmp` by default, or on the database given (a PostgreSQL URL).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from helpers import Locked, create_extension, is_postgres

import reasonlog

CHILD = Path(__file__).with_name("recording_child.py")
SYSTEM = "You are a careful agent. Answer briefly."
WINDOW = 20  # exchanges an agent keeps in its window


def question(tag: str, k: int, i: int, pad: int = 0) -> str:
    text = f"{tag}-{k} question {i}: what is {i} squared?"
    return text + " " + _filler(f"{tag}-{k}-{i}", pad) if pad else text


def _filler(seed: str, n: int) -> str:
    """`n` characters of text that neither repeats nor compresses much (fills a disk quickly)."""
    import hashlib

    out, block = [], seed.encode()
    while sum(map(len, out)) < n:
        block = hashlib.sha256(block).digest()
        out.append(block.hex())
    return "".join(out)[:n]


def answer(tag: str, k: int, i: int) -> str:
    return f"{tag}-{k} answer {i}: {i * i}"


def expected_request(tag: str, k: int, i: int, pad: int = 0) -> dict:
    """The request call i of recorder k sends: the last WINDOW exchanges (a sliding window), then the question."""
    history: list[dict] = []
    for j in range(max(0, i - WINDOW), i):
        history.append({"role": "user", "content": question(tag, k, j, pad)})
        history.append({"role": "assistant", "content": [{"type": "text", "text": answer(tag, k, j)}]})
    history.append({"role": "user", "content": question(tag, k, i, pad)})
    return {"model": "claude-sonnet-4-5", "max_tokens": 256, "system": SYSTEM, "messages": history}


def child_command(db: Path | str, tag: str, calls: int, *, rate: float = 0, recorders: int = 1,
                  busy_ms: int | None = None, close_timeout: float | None = None, progress: bool = False,
                  pad: int = 0) -> list[str]:
    cmd = [sys.executable, str(CHILD), "--db", str(db), "--tag", tag, "--calls", str(calls), "--rate", str(rate),
           "--recorders", str(recorders)]
    if busy_ms is not None:
        cmd += ["--busy-ms", str(busy_ms)]
    if close_timeout is not None:
        cmd += ["--close-timeout", str(close_timeout)]
    return cmd + (["--progress"] if progress else []) + (["--pad", str(pad)] if pad else [])


def start_child(cmd: list[str], *, env: dict | None = None) -> subprocess.Popen:
    """Start a recording child with the package importable and `env` added."""
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(reasonlog.__file__).parents[1]),
                                                           full_env.get("PYTHONPATH")]))
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env, text=True)


def finish_child(proc: subprocess.Popen, timeout: float = 120) -> dict:
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"recording child failed ({proc.returncode}):\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])


@dataclass
class Found:
    """What a database holds of the calls recorded under one tag."""

    present: dict[tuple[int, int], int] = field(default_factory=dict)  # (recorder, index) -> copies
    wrong_replays: list[tuple[int, int]] = field(default_factory=list)
    statuses: dict[int, str] = field(default_factory=dict)  # recorder -> session status

    def count(self) -> int:
        return sum(self.present.values())

    def duplicates(self) -> int:
        return sum(n - 1 for n in self.present.values() if n > 1)

    def missing(self, recorders: int, calls: int) -> int:
        return sum(1 for k in range(recorders) for i in range(calls) if (k, i) not in self.present)

    def prefix_lengths(self, recorders: int) -> list[int]:
        """For each recorder, how many calls from the first are all present (holes end a prefix)."""
        out = []
        for k in range(recorders):
            n = 0
            while (k, n) in self.present:
                n += 1
            out.append(n)
        return out


def verify(db: Path | str, tag: str, pad: int = 0) -> Found:
    """Find every call recorded under `tag`, count copies, and replay each against what was sent."""
    found = Found()
    store = reasonlog.open_store(db)
    try:
        flt = reasonlog.SessionFilter(run=tag, limit=None)
        for s in store.list_sessions(flt):
            k = int(s["agent"].rsplit("-", 1)[1])
            found.statuses[k] = s["status"]
            for call in store.call_details([c["id"] for c in store.get_session(s["id"])["calls"]]):
                request = call["request"]
                i = int(request["messages"][-1]["content"].split(":")[0].rsplit(" ", 1)[1])
                found.present[(k, i)] = found.present.get((k, i), 0) + 1
                if canonical(request) != canonical(expected_request(tag, k, i, pad)):
                    found.wrong_replays.append((k, i))
    finally:
        store.close()
    return found


def canonical(value) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def integrity(db: Path | str) -> str:
    """SQLite's integrity check of the file; on PostgreSQL amcheck's of every B-tree index and the rows it
    indexes (the pages PostgreSQL can check; its GIN indexes need a later amcheck)."""
    if is_postgres(db):
        return _pg_integrity(str(db))
    import sqlite3

    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]


def _pg_integrity(url: str) -> str:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        create_extension(conn, "amcheck")
        indexes = [r[0] for r in conn.execute(
            "SELECT c.oid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam"
            " WHERE a.amname = 'btree' AND c.relnamespace = current_schema()::regnamespace").fetchall()]
        problems = []
        for oid in indexes:
            try:
                conn.execute("SELECT public.bt_index_check(%s, true)", (oid,))
            except psycopg.Error as exc:
                problems.append(str(exc).strip().splitlines()[0])
    return "; ".join(problems) or ("ok" if indexes else "no index checked")


# ----------------------------------------------------------------------------- scenarios
# Each returns the figures docs/reliability.md reports: records written, found, lost, duplicated,
# replays that differ, and the agent's longest wait in one `s.call`.


@dataclass
class Outcome:
    scenario: str
    written: int
    found: int = 0
    lost: int = 0
    duplicates: int = 0
    wrong_replays: int = 0
    longest_wait_ms: float = 0.0
    integrity: str = ""
    statuses: list[str] = field(default_factory=list)
    note: str = ""

    def row(self) -> dict:
        return dict(self.__dict__)


def tally(name: str, db: Path | str, tags: list[str], recorders: int, calls: int, children: list[dict],
          pad: int = 0) -> Outcome:
    """What the database holds after the children ran and the fault cleared."""
    out = Outcome(name, written=len(tags) * recorders * calls,
                  longest_wait_ms=round(max(c["max_wait_ms"] for c in children), 1))
    spilled = sum(st["spilled_events"] for c in children for st in c["stats"])
    out.note = f"{spilled} events went through spill files" if spilled else "nothing spilled"
    for tag in tags:
        f = verify(db, tag, pad)
        out.found += f.count() - f.duplicates()
        out.lost += f.missing(recorders, calls)
        out.duplicates += f.duplicates()
        out.wrong_replays += len(f.wrong_replays)
        out.statuses += [f.statuses[k] for k in sorted(f.statuses)]
    out.integrity = integrity(db)
    return out


def settle(db: Path | str) -> None:
    """What a user does after a fault: `reasonlog db upgrade` writes what waited in spill files."""
    subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "db", "upgrade"], check=True,
                   capture_output=True, env={**os.environ, "PYTHONPATH": str(Path(reasonlog.__file__).parents[1])})


def many_processes(tmp: Path, processes: int = 8, recorders: int = 2, calls: int = 60,
                   db: Path | str | None = None) -> Outcome:
    db = db or tmp / "shared.db"
    reasonlog.open_store(db).close()
    tags = [f"p{n}" for n in range(processes)]
    procs = [start_child(child_command(db, tag, calls, recorders=recorders)) for tag in tags]
    children = [finish_child(p) for p in procs]
    settle(db)
    return tally(f"{processes} processes x {recorders} recorders", db, tags, recorders, calls, children)


def lock_held(tmp: Path, hold_s: float = 1.5, calls: int = 100, rate: float = 50, busy_ms: int = 100,
              db: Path | str | None = None) -> Outcome:
    """Another connection holds the write lock for `hold_s` while a child records (SQLite's BEGIN IMMEDIATE,
    PostgreSQL's tables locked EXCLUSIVE); the child's busy timeout is `busy_ms`."""
    import threading

    db = db or tmp / "locked.db"
    blocker = Locked(db).__enter__()
    threading.Timer(hold_s, blocker.release).start()
    result = finish_child(start_child(child_command(db, "lock", calls, rate=rate, busy_ms=busy_ms)))
    settle(db)
    return tally(f"database locked {hold_s} s (busy timeout {busy_ms} ms)", db, ["lock"], 1, calls,
                 [result])


def read_only_file(tmp: Path, calls: int = 60, rate: float = 100) -> Outcome:
    """The database file may not be written (immutable, which binds root too); then it may again."""
    db = tmp / "ro.db"
    reasonlog.open_store(db).close()
    subprocess.run(["chattr", "+i", str(db)], check=True)
    try:
        result = finish_child(start_child(child_command(db, "rofile", calls, rate=rate)))
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)
    settle(db)
    return tally("database file read-only", db, ["rofile"], 1, calls, [result])


def read_only_folder(tmp: Path, calls: int = 60, rate: float = 100) -> Outcome:
    """The database's folder is a read-only mount (no -wal, no spill beside it); later it is writable."""
    folder = tmp / "rodir"
    folder.mkdir()
    db = folder / "ro.db"
    reasonlog.open_store(db).close()
    env = {"XDG_DATA_HOME": str(tmp / "data-home")}
    subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True)
        result = finish_child(start_child(child_command(db, "rodir", calls, rate=rate), env=env))
    finally:
        subprocess.run(["umount", str(folder)], check=True)
    settle_as(db, env)
    return tally("database folder read-only", db, ["rodir"], 1, calls, [result])


def settle_as(db: Path, env: dict) -> None:
    subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "db", "upgrade"], check=True,
                   capture_output=True,
                   env={**os.environ, **env, "PYTHONPATH": str(Path(reasonlog.__file__).parents[1])})


def full_disk(tmp: Path, calls: int = 150, rate: float = 200, size_kib: int = 3072, pad: int = 4000) -> Outcome:
    """The database lives on a small tmpfs that fills up mid-session; then it is made larger."""
    mount = tmp / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(mount)], check=True)
    try:
        db = mount / "full.db"
        reasonlog.open_store(db).close()
        data_home = tmp / "data-home"
        env = {"XDG_DATA_HOME": str(data_home)}
        result = finish_child(start_child(child_command(db, "full", calls, rate=rate, pad=pad), env=env))
        subprocess.run(["mount", "-o", "remount,size=64m", str(mount)], check=True)
        settle_as(db, env)
        return tally(f"disk full ({size_kib} KiB tmpfs)", db, ["full"], 1, calls, [result], pad)
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def can_mount_tmpfs() -> bool:
    if os.geteuid() != 0:
        return False
    probe = Path("/tmp") / f"reasonlog-probe-{os.getpid()}"
    probe.mkdir(exist_ok=True)
    mount = ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)]
    ok = subprocess.run(mount, capture_output=True).returncode == 0
    if ok:
        subprocess.run(["umount", str(probe)], check=False)
    probe.rmdir()
    return ok


def killed(tmp: Path, rate: float, kill_after_s: float, calls: int = 10**7,
           db: Path | str | None = None) -> tuple[Outcome, float]:
    """SIGKILL a recording process `kill_after_s` after its first call; returns the outcome and how long
    before the kill the oldest lost call was sent (the loss window, in seconds)."""
    import signal
    import time

    db = db or tmp / f"killed-{int(rate)}.db"
    reasonlog.open_store(db).close()
    proc = start_child(child_command(db, "kill", calls, rate=rate, progress=True))
    sent_at: dict[int, float] = {}
    assert proc.stdout is not None
    first = None
    for line in proc.stdout:
        now = time.monotonic()
        sent_at[int(line.split()[2])] = now
        first = first or now
        if now - first >= kill_after_s:
            break
    proc.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    proc.wait()
    sent = len(sent_at)
    reasonlog.Recorder(db).close()  # the next recorder on this database: replays spills, marks the dead
    found = verify(db, "kill")
    prefix = found.prefix_lengths(1)[0]
    lost = [i for i in range(sent) if (0, i) not in found.present]
    window = killed_at - min((sent_at[i] for i in lost), default=killed_at)
    out = Outcome(f"SIGKILL at {'flat out' if not rate else f'{rate:g} calls/s'}", written=sent,
                  found=found.count() - found.duplicates(), lost=len(lost), duplicates=found.duplicates(),
                  wrong_replays=len(found.wrong_replays), integrity=integrity(db),
                  statuses=[found.statuses.get(0, "missing")],
                  note=f"first {prefix} calls all present; loss window {window:.2f} s")
    return out, window


# ----------------------------------------------------------------------------- issue 30: forks and closes


def _pool_worker(db: str, tag: str, k: int, calls: int, start_ns: int) -> dict:
    """A forked worker: waits for `start_ns` (so the workers start in the same milliseconds), then records."""
    import time

    while time.time_ns() < start_ns:
        pass
    rec = reasonlog.Recorder(db)
    s = rec.session(agent=f"{tag}-{k}", run=tag)
    for i in range(calls):
        s.call(request=expected_request(tag, k, i), response=answer(tag, k, i),
               usage=reasonlog.Usage(input_tokens=10 + i, output_tokens=5))
    s.end()
    rec.close()
    return rec.stats()


def forked_pool(tmp: Path, workers: int = 4, calls: int = 150, db: Path | str | None = None) -> Outcome:
    """A `multiprocessing` pool (fork) of recorders, reasonlog imported and an id made before the fork, the
    workers starting in the same millisecond (issue 30 item 1: they made the same ids)."""
    import multiprocessing
    import time

    from reasonlog.model import new_id

    db = db or tmp / "pool.db"
    reasonlog.open_store(db).close()
    new_id()
    start = time.time_ns() + 500_000_000
    pool = multiprocessing.get_context("fork").Pool(workers)
    try:
        stats = pool.starmap_async(_pool_worker, [(str(db), "pool", k, calls, start)
                                                  for k in range(workers)]).get(timeout=300)
    except BaseException:
        pool.terminate()
        raise
    # The workers leave on their own: terminate(), what `with` does, left one waiting forever in a full run of the
    # suite, on the task queue's lock held by a worker it had killed.
    pool.close()
    pool.join()
    out = tally(f"multiprocessing pool (fork) of {workers} recorders started in the same millisecond", db, ["pool"],
                workers, calls, [{"max_wait_ms": 0.0, "stats": stats}])
    out.note += f"; {rejected(db)} events rejected"
    return out


def close_in_flight(tmp: Path, calls: int = 100, db: Path | str | None = None) -> Outcome:
    """`close(timeout=2)` while the writer is committing a batch another process's lock holds up (busy timeout
    60 s), then the process exits under it (issue 30 item 2: that batch went nowhere)."""
    db = db or tmp / "closing.db"
    with Locked(db):
        child = finish_child(start_child(child_command(db, "closing", calls, busy_ms=60_000, close_timeout=2)))
    settle(db)
    out = tally("close(timeout=2 s) while a batch is held up by a lock, then exit", db, ["closing"], 1, calls,
                [child])
    out.longest_wait_ms = 0.0
    return out


def rejected(db: Path | str) -> int:
    store = reasonlog.open_store(db, read_only=True)
    try:
        return store.status()["rejected_records"]
    finally:
        store.close()
