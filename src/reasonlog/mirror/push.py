"""`reasonlog mirror push`: copy the sessions that changed since the last push into the mirror, idempotently.

One push: read every session's fingerprint from the record (one snapshot) and the mirror's; the sessions whose
fingerprint differs (and their sub-agents, whose accounting a parent's reported cost changes) are pushed in
batches: their entries and messages first, each session's row with its new fingerprint last. A push killed
anywhere leaves some sessions with their old fingerprint (or none), so the next push does them again; rows written
twice are one row read through FINAL (same key, the newer version wins). Rows that left the record (a session
deleted or pruned, an entry a changed report no longer has) are written again as deleted. The cursor row says
where the push began (`done = 0`) and, last, that it finished (`done = 1`) with the newest instant the record held
and the slot of the usage summed after its rows (mirror/rollup.py; a push that changed nothing keeps the last one).
"""
from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from ..accounting import TOKENS
from ..store import MirrorSource, StoreReader
from ..store.mirrored import sessions_in
from ..store.usage_sql import bucket_of
from . import rollup, schema
from .engine import Engine, literal

BATCH = 1000  # sessions a batch reads from the record and writes to the mirror (each table one insert a batch)
RECENT_MARGIN_S = 60.0  # a push of the recent sessions looks this far before the last push's newest instant


@dataclass
class Pushed:
    """What one push did (`full`: it read every session's fingerprint, not only the recent ones')."""

    sessions: int = 0
    deleted: int = 0
    entries: int = 0
    messages: int = 0
    pushed_through: str | None = None
    seconds: float = 0.0
    full: bool = True


def push(store: MirrorSource, engine: Engine, src: str, batch: int = BATCH,
         inserted: Callable[[str], None] | None = None, since: str | None = None) -> Pushed:
    """Bring the mirror's rows of `src` to what `store` holds now. `inserted` is called after each insert with
    the table's name (the tests' seam for a push stopped after k inserts). `since` (an instant: `recent_since` of
    the last push's `pushed_through`): look only at the sessions open, started or with a call started since then,
    and their sub-agents (what `--watch` pushes between whole pushes); a whole push instead when the last push did
    not finish or the record's count of sessions is not the mirror's after it (a session deleted, or an old one
    imported)."""
    started = time.monotonic()
    schema.create(engine)
    last = cursor(engine, src)
    prints, (newest, mark) = store.mirror_fingerprints(since if last and last["done"] else None)
    recent = since is not None and bool(last and last["done"])
    mirrored = _mirrored_prints(engine, src, list(prints) if recent else None)
    total = len(prints)
    if recent:
        total = int(last["sessions"]) + sum(1 for sid in prints if sid not in mirrored)  # type: ignore[index]
        if total != sessions_in(mark):
            return push(store, engine, src, batch, inserted)
    write = _Writer(engine, src, _version(engine, src), inserted or (lambda table: None), set(mirrored))
    write.cursor(None, "", done=False, usage=_usage_of(last))  # the last usage carried: slots go on in turn
    changed = _with_descendants({sid for sid, (fp, _) in prints.items() if mirrored.get(sid) != fp}, prints)
    gone = [] if recent else sorted(set(mirrored) - set(prints))
    out = Pushed(pushed_through=newest, full=not recent)
    ordered = sorted(changed)
    for start in range(0, len(ordered), batch):
        ids = ordered[start:start + batch]
        rows = store.mirror_rows(ids)
        out.entries += write.calls(ids, rows)
        out.messages += write.messages(ids, rows)
        write.texts(ids, rows)
        write.sessions(rows, {sid: prints[sid][0] for sid in ids})
        out.sessions += len(ids)
    for start in range(0, len(gone), batch):
        write.forget(gone[start:start + batch])
    if gone:  # the deleted rows merged with the live ones now: a deletion is of the newest sessions, mostly, which
        # a page reads first, and until a merge each took one of its places (0.3 s on 18.16 at 100,000 sessions)
        engine.command(f"OPTIMIZE TABLE {engine.database}.mirror_sessions FINAL")
    out.deleted = len(gone)

    usage = _summed(engine, src, write, last, bool(changed or gone), recent)
    write.cursor(newest, mark, done=True, sessions=total, usage=usage)
    out.seconds = time.monotonic() - started
    return out


def cursor(engine: Engine, src: str) -> dict | None:
    """The source's cursor: `pushed_through`, `mark`, `done`, `sessions`, `pushed_at`, and the slot and version of
    its usage (`usage_slot`, `usage_version`: 0 before any); None before its first push (or when the mirror holds no
    tables)."""
    if not engine.query(f"SELECT name FROM system.tables WHERE database = '{engine.database}'"
                        " AND name = 'mirror_cursors'"):
        return None
    rows = engine.query(f"SELECT pushed_through, mark, done, sessions, pushed_at, usage_slot, usage_version"
                        f" FROM {engine.database}.mirror_cursors FINAL WHERE src = {literal(src)}")
    if not rows:
        return None
    through, mark, done, sessions, at, slot, usage = rows[0]
    return {"pushed_through": through, "mark": mark, "done": bool(done), "sessions": sessions, "pushed_at": at,
            "usage_slot": slot, "usage_version": usage}


def _usage_of(cursor: dict | None) -> tuple[int, int]:
    return (int(cursor["usage_slot"]), int(cursor["usage_version"])) if cursor else (0, 0)


def _summed(engine: Engine, src: str, write: _Writer, last: dict | None, changed: bool,
            recent: bool) -> tuple[int, int]:
    """The slot and version of the usage this push leaves: summed again when it changed something (or none was
    left by a finished push), else the last push's. A push of the recent sessions after a finished push sums the
    days its rows touched and copies the others from the last push's usage (rollup.build)."""
    if not changed and last and last["done"] and last["usage_version"]:
        return int(last["usage_slot"]), int(last["usage_version"])
    slot = rollup.next_slot(last)
    kept = _usage_of(last) if recent and last and last["usage_version"] else None
    rollup.build(engine, src, slot, write.version, (kept, sorted(write.days)) if kept else None)
    write.inserted("mirror_usage")
    return slot, write.version


def recent_since(pushed_through: str | None, margin_s: float = RECENT_MARGIN_S) -> str | None:
    """The instant a push after one that copied the record through `pushed_through` looks at sessions from: a
    margin before it, for a call that began before and was written after (None: from the start)."""
    if pushed_through is None:
        return None
    then = dt.datetime.fromisoformat(pushed_through.replace("Z", "+00:00")) - dt.timedelta(seconds=margin_s)
    return then.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def caught_up(cursor: dict | None, mark: str) -> bool:
    """Whether a cursor's last push finished at the record's current mark (nothing added or removed since)."""
    return bool(cursor and cursor["done"] and cursor["mark"] == mark)


def _version(engine: Engine, src: str) -> int:
    """This push's version: now in nanoseconds, and past every version the source wrote before (a clock that went
    back must not make a push's rows lose to the last one's)."""
    rows = engine.query(f"SELECT max(version) FROM {engine.database}.mirror_cursors WHERE src = {literal(src)}")
    last = rows[0][0] if rows and rows[0][0] is not None else 0
    return max(time.time_ns(), int(last) + 1)


def _mirrored_prints(engine: Engine, src: str, ids: list[str] | None) -> dict[str, str]:
    """The fingerprints the mirror holds: of every session, or of these (by the table's key, each one's newest
    version, without FINAL)."""
    if ids is None:
        return dict(engine.query(f"SELECT id, fingerprint FROM {engine.database}.mirror_sessions FINAL"
                                 f" WHERE src = {literal(src)} AND deleted = 0"))
    out: dict[str, str] = {}
    for start in range(0, len(ids), BATCH):
        out.update((sid, fp) for sid, fp, deleted in engine.query(
            f"SELECT id, argMax(fingerprint, version), argMax(deleted, version) FROM {engine.database}.mirror_sessions"
            f" WHERE src = {literal(src)} AND id IN {_set(ids[start:start + BATCH])} GROUP BY id") if not deleted)
    return out


def _with_descendants(changed: set[str], prints: dict[str, tuple[str, str | None]]) -> set[str]:
    """The changed sessions and every session spawned under one of them, at any depth."""
    children: dict[str, list[str]] = {}
    for sid, (_, parent) in prints.items():
        if parent is not None:
            children.setdefault(parent, []).append(sid)
    out, todo = set(changed), list(changed)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


class _Writer:
    """The inserts of one push, all with its version."""

    def __init__(self, engine: Engine, src: str, version: int, inserted: Callable[[str], None], known: set[str]):
        self.engine, self.src, self.version, self.inserted = engine, src, version, inserted
        self.db, self.known = engine.database, known  # the sessions the mirror holds rows of (others have none)
        self.days: set[dt.date] = set()  # the days of the call rows written, new or gone (their usage changes)

    def _insert(self, table: str, columns: tuple[str, ...], rows: list[tuple]) -> None:
        if rows:
            self.engine.insert(table, columns, rows)
            self.inserted(table)

    def calls(self, ids: list[str], rows: dict) -> int:
        irregular, replies = set(rows["irregular"]), rows["replies"]
        new = [self._entry(e, e["session_id"] in irregular, replies) for e in rows["entries"]]
        new += [self._twin(t, t[1] in irregular, replies.get(t[0], "")) for t in rows["twins"]]
        fresh = {(r[1], r[2]) for r in new}
        stale = [(sid, entry, day) for sid, entry, day in self._live("mirror_calls", "entry, day", ids)
                 if (sid, entry) not in fresh]
        gone = [self._gone_entry(sid, entry, day) for sid, entry, day in stale]
        self._insert("mirror_calls", schema.CALL_COLUMNS, new + gone)
        self.days.update(r[6] for r in new + gone)
        return len(new)

    def messages(self, ids: list[str], rows: dict) -> int:
        new = [(self.src, sid, idx, self.version, 0, role, at, call_id, text.lower())
               for sid, idx, role, at, call_id, text in rows["messages"]]
        fresh = {(r[1], r[2]) for r in new}
        gone = [(self.src, sid, idx, self.version, 1, None, "", None, "")
                for sid, idx in self._live("mirror_messages", "idx", ids) if (sid, idx) not in fresh]
        self._insert("mirror_messages", schema.MESSAGE_COLUMNS, new + gone)
        return len(new)

    def texts(self, ids: list[str], rows: dict) -> None:
        new = [(self.src, sid, kind, rowid, self.version, 0, text.lower()) for kind, sid, rowid, text in rows["texts"]]
        fresh = {(r[1], r[2], r[3]) for r in new}
        gone = [self._gone_text(sid, kind, ref) for sid, kind, ref in self._live("mirror_texts", "kind, ref", ids)
                if (sid, kind, ref) not in fresh]
        self._insert("mirror_texts", schema.TEXT_COLUMNS, new + gone)

    def sessions(self, rows: dict, prints: dict[str, str]) -> None:
        labels, models = rows["labels"], rows["models"]
        self._insert("mirror_sessions", schema.SESSION_COLUMNS, [
            (self.src, s["id"], self.version, 0, prints[s["id"]], s["parent_session_id"], s["run"], s["agent"],
             s["model"], s["status"], s["started_at"], _day(s["started_at"]),
             sorted(f"{k}\t{v}" for k, v in labels.get(s["id"], ())), sorted(models.get(s["id"], ())),
             orjson.dumps(s).decode())
            for s in rows["sessions"]])

    def forget(self, ids: list[str]) -> None:
        """Sessions the record no longer holds: their rows written again as deleted."""
        self._insert("mirror_calls", schema.CALL_COLUMNS,
                     [self._gone_entry(sid, entry, day) for sid, entry, day in self._live("mirror_calls", "entry, day",
                                                                                          ids)])
        self._insert("mirror_messages", schema.MESSAGE_COLUMNS,
                     [(self.src, sid, idx, self.version, 1, None, "", None, "")
                      for sid, idx in self._live("mirror_messages", "idx", ids)])
        self._insert("mirror_texts", schema.TEXT_COLUMNS,
                     [self._gone_text(*row) for row in self._live("mirror_texts", "kind, ref", ids)])
        self._insert("mirror_sessions", schema.SESSION_COLUMNS,
                     [(self.src, sid, self.version, 1, "", None, None, None, None, "", "", dt.date(1970, 1, 1), [],
                       [], "") for sid in ids])

    def cursor(self, through: str | None, mark: str, done: bool, sessions: int = 0,
               usage: tuple[int, int] = (0, 0)) -> None:
        at = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        self._insert("mirror_cursors", schema.CURSOR_COLUMNS,
                     [(self.src, self.version + int(done), through, mark, int(done), sessions, at, *usage)])

    def _live(self, table: str, columns: str, ids: list[str]) -> list[tuple]:
        """The rows the mirror holds of these sessions (none of a session it never held: no query for those)."""
        ids = [i for i in ids if i in self.known]
        if not ids:
            return []
        return self.engine.query(f"SELECT session_id, {columns} FROM {self.db}.{table} FINAL"
                                 f" WHERE src = {literal(self.src)} AND session_id IN {_set(ids)} AND deleted = 0")

    def _gone_text(self, sid: str, kind: str, ref: int) -> tuple:
        return (self.src, sid, kind, ref, self.version, 1, "")

    def _entry(self, e: dict, irregular: bool, replies: dict[str, str]) -> tuple:
        key = e["id"] if e["kind"] == "call" else f"reported:{e['exchange_id']}:{e['model']}"
        cost = e["cost_usd"]
        return (self.src, e["session_id"], key, e["kind"], self.version, 0, _day(e["started_at"]), e["started_at"],
                e["model"], e["status"], e["latency_ms"], *(int(e.get(t) or 0) for t in TOKENS),
                float(cost or 0.0), int(cost is not None),
                int(e["kind"] == "call" and cost is None and e.get("input_tokens") is not None),
                e["run"], e["agent"], e["source"] or "recorded", int(irregular),
                replies.get(e["id"], "") if e["kind"] == "call" else "", _bucket(e["latency_ms"]))

    def _twin(self, twin: tuple, irregular: bool, reply: str) -> tuple:
        call_id, sid, started_at, model, latency, status = twin
        return (self.src, sid, call_id, "twin", self.version, 0, _day(started_at), started_at, model, status,
                latency, *(0 for _ in TOKENS), 0.0, 0, 0, None, None, "", int(irregular), reply, _bucket(latency))

    def _gone_entry(self, sid: str, entry: str, day: Any) -> tuple:
        return (self.src, sid, entry, "gone", self.version, 1, day, "", None, None, None, *(0 for _ in TOKENS),
                0.0, 0, 0, None, None, "", 0, "", 0)


def _bucket(latency_ms: float | None) -> int:
    """The latency's bucket in the record's histograms (0 for none: a row without a latency is not timed)."""
    return 0 if latency_ms is None else bucket_of(latency_ms)


def _day(instant: str) -> dt.date:
    return dt.date.fromisoformat(instant[:10])


def _set(ids: Iterable[str]) -> str:
    return "(" + ", ".join(literal(i) for i in ids) + ")"


def source_of(store: StoreReader) -> str:
    """The name a record's rows carry in the mirror unless `--source` says another: its SQLite file's absolute
    path, or its PostgreSQL URL without the password. `serve --mirror` finds its rows by the same name."""
    from pathlib import Path

    from ..store import safe_target

    url = store.url
    if url.startswith("sqlite:///"):
        return "sqlite://" + str(Path(url.removeprefix("sqlite:///")).resolve())
    return safe_target(url)


def lag_seconds(through: str | None) -> float | None:
    """Seconds from the newest instant a push copied to now: how far behind the mirror is while the record grows."""
    if through is None:
        return None
    then = dt.datetime.fromisoformat(through.replace("Z", "+00:00"))
    return max(0.0, (dt.datetime.now(dt.UTC) - then).total_seconds())
