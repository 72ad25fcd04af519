"""Importing one file: its place in the store (unchanged, grown, rewritten, a copy), and its events written at the
importer's checkpoints, with the per-record error boundary every format shares.

**One bad record costs one record.** When an importer fails on a record (an exception while it works on the line
`Feed.lines()` gave it, or on what `Feed.record()` names), the loop here, not the importer, reports that record
with file:line and the error, forgets what was yielded since the last checkpoint, and reads the file again from
that checkpoint with the record passed over (`Feed.passed`). The rest of the file is imported as if the record
were not there. An exception with no record to blame (an importer that failed after reading everything) still
fails the file, as before: `run_import` reports it as an internal error.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson

from ..model import (
    CallRecorded,
    Event,
    FileImported,
    OutcomeRecorded,
    SessionStarted,
    ToolResultRecorded,
    check_event,
    utc_now,
)
from ..wire.rules import RecordError
from .importer import Checkpoint, Feed, Importer, ImportError_, ImportStore, ReimportFile, Report, dump_state

TAIL = 4096           # bytes before the consumed offset whose hash tells appended from rewritten
BATCH_EVENTS = 2000   # a batch ends at the first checkpoint after this many events
PASSED_MAX = 100      # records of one file an importer may fail on before the file itself is given up
EVENT_KINDS: dict[type, tuple[str, str]] = {
    SessionStarted: ("session", "session_id"), CallRecorded: ("call", "call_id"),
    ToolResultRecorded: ("tool_result", "tool_result_id"), OutcomeRecorded: ("outcome", "outcome_id"),
}


def import_file(store: ImportStore, given: Path, imp: Importer, report: Report, emitted: dict[str, set[str]],
                 live: bool = False, copies: Copies | None = None) -> None:
    """Import one file; `given` is the path as the user named it (reports say that), the store keys the
    file by its resolved path (one file reached through two links is one file)."""
    path = given.resolve()
    st = path.stat()
    key = str(path)
    row = store.import_file(key)
    report.files += 1
    if imp.import_whole(store, path, report):  # a format with its own all-or-nothing import: no offsets
        return
    signature = imp.signature(path)
    if signature is not None:  # a tree read through one file: the tree's size and newest change
        size, mtime_ns = signature
        st = SimpleNamespace(st_size=size, st_mtime_ns=mtime_ns)  # type: ignore[assignment]
    start, line, state = 0, 0, None
    # A copy holds the sessions of its original, unless the importer names sessions after the file's place.
    if row is None and signature is None and copies is not None and not imp.sessions_from_path:
        original = copies.original_of(path, imp.name, st.st_size)
        if original is not None:  # the same file in a second folder: its sessions are in the database already
            report.copies.append((str(given), original))
            return
    if row is not None:
        tree = signature is not None  # no byte offsets: an incremental tree goes on from its state alone
        if (row["size"] == st.st_size and row["mtime_ns"] == st.st_mtime_ns and row["format"] == imp.name
                and (row["consumed"] >= st.st_size or not imp.incremental or tree)):
            report.unchanged += 1  # (an import killed half way left consumed short of the size: it goes on)
            return
        if imp.incremental and row["format"] == imp.name and (tree or (
                st.st_size >= row["consumed"] and _tail_hash(path, row["consumed"]) == row["tail_hash"])):
            start, state = row["consumed"], row["state"]
            line = (state or {}).pop("$line", 0)
            report.appended += 1
        else:
            store.delete_sessions(row["sessions"], forget_file=key)
            report.rewritten += 1
            row = None
    sessions = set(row["sessions"]) if row else set()
    progress = _FileProgress(path, imp, st, sessions, row["skipped"] if row else 0, len(report.skipped))
    before = len(report.skipped)
    try:
        _read(store, path, given, imp, (start, line, state), report, emitted, progress, live)
    except ReimportFile as again:
        if start == 0 or row is None:
            raise ValueError(f"{path}: {again}") from None
        store.delete_sessions(row["sessions"], forget_file=key)  # what was written of it goes, then all again
        report.rewritten += 1
        report.appended -= 1
        report.files -= 1
        return import_file(store, given, imp, report, emitted, live)
    if start == 0 and not progress.sessions:
        report.empty.append(str(given))
        _one_line_for_an_unknown_version(report, before, str(given), imp.name)
    if copies is not None and row is None and progress.row is not None:
        copies.add(progress.row)


def _one_line_for_an_unknown_version(report: Report, before: int, where: str, fmt: str) -> None:
    """A file of which no record was read (a version of the format the importer does not know) is one line of the
    report, naming the file and what was expected, not a skip per line."""
    skipped = report.skipped[before:]
    if len(skipped) < 2 or not all(w.startswith(where) for w, _ in skipped):
        return
    first, why = skipped[0]
    del report.skipped[before:]
    report.skipped.append((where, f"nothing read: none of its {len(skipped)} records is one the {fmt} importer "
                                  f"knows (the first, {first[len(where):].lstrip(':') or 'the file'}: {why}); "
                                  "is it written by a version of the agent this reasonlog does not read yet?"))


def _read(store: ImportStore, path: Path, given: Path, imp: Importer, origin: tuple[int, int, dict | None],
          report: Report, emitted: dict[str, set[str]], progress: _FileProgress, live: bool) -> None:
    """Read the file from `origin` (offset, line, state) and write its events; a record the importer fails on is
    passed over (see the module's docstring)."""
    passed: dict[int | str, str] = {}
    start, line, state = origin
    blamed: list[tuple[str, str]] = []  # the skips of records passed over: kept however often the file is read
    while True:
        feed = Feed(path, imp, store, start, line, state, report, emitted)
        feed.live, feed.where, feed.passed = live, str(given), passed
        reading = _Reading(store, feed, progress, emitted)
        try:
            reading.run(imp)
            return
        except (ReimportFile, ImportError_, OSError):
            raise
        except Exception as exc:
            where = feed.current
            if where is None or where in passed or len(passed) >= PASSED_MAX or store.is_store_failure(exc):
                raise
            resume = reading.undo(incremental=imp.incremental)
            if resume is None:
                raise
            passed[where] = f"not imported: the {imp.name} importer failed on it ({type(exc).__name__}: {exc})"
            feed.skip(where if isinstance(where, int) else None, passed[where],
                      record=None if isinstance(where, int) else where)
            blamed.append(report.skipped.pop())
            report.skipped += [s for s in blamed if s not in report.skipped]
            start, line, state = resume if resume != () else origin


@dataclass
class _Reading:
    """One pass of an importer over a file: events wait until a checkpoint covers them, and are written in
    batches that end at one."""

    store: ImportStore
    feed: Feed
    progress: _FileProgress
    emitted: dict[str, set[str]]
    pending: list[Event] = field(default_factory=list)  # up to the last checkpoint, not yet written
    since: list[Event] = field(default_factory=list)    # after it: written only once a checkpoint covers them
    last: Checkpoint | None = None
    written: bool = False
    # What was emitted first here, (kind, id): covered by a checkpoint but not written yet, and not yet covered
    covered: list[tuple[str, str]] = field(default_factory=list)
    uncovered: list[tuple[str, str]] = field(default_factory=list)
    skips: int = -1       # len(report.skipped) at the last checkpoint
    skips_at_start: int = -1
    refused: set[str] = field(default_factory=set)  # sessions the store could not hold (their skip says why)

    def run(self, imp: Importer) -> None:
        report = self.feed.report
        self.skips = self.skips_at_start = len(report.skipped)
        for item in imp.read(self.feed):
            if isinstance(item, Checkpoint):
                self.last, self.skips = item, len(report.skipped)
                self.pending += self.since
                self.since = []
                self.covered += self.uncovered
                self.uncovered = []
                if len(self.pending) >= BATCH_EVENTS:
                    self._write(item)
                    self.feed.batch_due = False
                continue
            started = isinstance(item, SessionStarted)
            if isinstance(item, SessionStarted) and not _storable(item, self.feed):
                self.refused.add(item.session_id)  # what follows in it is left out with it, not rejected one by one
            elif getattr(item, "session_id", None) not in self.refused and (started or _storable(item, self.feed)):
                self._add(item)  # (a start was checked above)
                if len(self.since) + len(self.pending) >= BATCH_EVENTS:
                    self.feed.batch_due = True
        start = self.feed
        self._write(self.last or Checkpoint(start.start, start.first_line, dump_state(start.state)))

    def _add(self, item: Event) -> None:
        kind, id_field = EVENT_KINDS.get(type(item), (None, None))
        if kind is not None:
            ident = getattr(item, id_field)  # type: ignore[arg-type]
            if ident not in self.emitted[kind]:
                self.emitted[kind].add(ident)
                self.uncovered.append((kind, ident))
            if kind == "session" and ident not in self.progress.sessions:
                self.progress.sessions.add(ident)
                self.uncovered.append(("$session", ident))
        self.since.append(item)

    def _write(self, cp: Checkpoint) -> None:
        self.progress.write(self.store, self.pending, cp, self.feed.report)
        self.pending, self.written = [], True
        self.covered = []

    def undo(self, incremental: bool) -> tuple | None:
        """Forget what was yielded after the last checkpoint (its ids, its skips); return where to read from
        again: the last checkpoint (written first), () for the file's start, None when that cannot be done (an
        importer that reads whole files wrote a batch already)."""
        report = self.feed.report
        if incremental and self.last is not None:
            del report.skipped[self.skips:]
            self._forget(self.uncovered)
            self.uncovered = []
            self._write(self.last)
            state = orjson.loads(self.last.state) if self.last.state is not None else None
            return (self.last.offset, self.last.line, state)
        if self.written:
            return None
        del report.skipped[self.skips_at_start:]
        self._forget(self.covered + self.uncovered)
        return ()

    def _forget(self, fresh: list[tuple[str, str]]) -> None:
        for kind, ident in fresh:
            if kind == "$session":
                self.progress.sessions.discard(ident)
            else:
                self.emitted[kind].discard(ident)


class Copies:
    """The files imported, by name, format and size, to tell a copy of one (the same transcripts in a second folder)
    from a new file: a copy has the same 4 KiB before where the import stopped too. Its sessions are in the database
    already, so it is reported as a copy and not read (reading it would add its exchanges a second time). Told from
    the files' rows alone (`add` takes the row just written), so a copy is one at every import: a file read short of
    its end (a last line cut) is an original too, else its copy, passed over first, would be read by the next."""

    def __init__(self, rows: list[dict]):
        self._by: dict[tuple[str, str, int], list[tuple[str, int, str | None]]] = {}
        for r in rows:
            self.add(r)

    def original_of(self, path: Path, fmt: str, size: int) -> str | None:
        found = self._by.get((path.name, fmt, size), [])
        tails: dict[int, str | None] = {}  # this file's tail hash before each offset asked: read once each (the
        #                                    copies of one transcript in N folders were N reads of it per file)
        for p, consumed, h in found:
            if p != str(path) and h is not None:
                if consumed not in tails:
                    tails[consumed] = _tail_hash(path, consumed)
                if h == tails[consumed]:
                    return p
        return None

    def add(self, row: dict) -> None:
        self._by.setdefault((Path(row["path"]).name, row["format"], row["size"]), []).append(
            (row["path"], row["consumed"], row["tail_hash"]))


def _storable(event: Event, feed: Feed) -> bool:
    """Whether the store can hold `event` (the check it makes first); if not, the event is left out and reported
    with the file and line it came from, which the store, seeing only the event, cannot name."""
    try:
        check_event(event)
    except (RecordError, TypeError, ValueError) as exc:  # (a value of a type the check does not expect)
        feed.skip(feed.line or None, f"{event.kind} not stored: {exc}")
        return False
    return True


@dataclass
class _FileProgress:
    """What goes into a file's `import_files` row with each batch."""

    path: Path
    importer: Importer
    stat: Any  # st_size and st_mtime_ns: the file's, or its tree's (`signature`)
    sessions: set[str]
    skipped: int           # skips counted in the row so far
    reported: int          # len(report.skipped) when they were counted
    row: dict | None = None  # the file's row as last written

    def write(self, store: ImportStore, events: list[Event], cp: Checkpoint, report: Report) -> None:
        self.skipped += len(report.skipped) - self.reported
        self.reported = len(report.skipped)
        state = orjson.loads(cp.state) if cp.state is not None else {}
        state["$line"] = cp.line
        self.row = {
            "path": str(self.path), "format": self.importer.name, "size": self.stat.st_size,
            "mtime_ns": self.stat.st_mtime_ns, "consumed": cp.offset, "tail_hash": _tail_hash(self.path, cp.offset),
            "state": state, "sessions": sorted(self.sessions), "skipped": self.skipped, "imported_at": utc_now()}
        store.write_batch([*events, FileImported(**self.row)], None)


def _tail_hash(path: Path, offset: int) -> str | None:
    if offset <= 0:
        return None
    with open(path, "rb") as f:
        f.seek(max(0, offset - TAIL))
        data = f.read(min(TAIL, offset))
    if len(data) < min(TAIL, offset):
        return None  # the file is shorter than what was consumed: it was rewritten
    return hashlib.blake2b(data, digest_size=16).hexdigest()


