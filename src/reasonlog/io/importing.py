"""Importing what agents already write: the importer seam, and the loop that feeds a store.

An *importer* reads one format. It names itself, recognises its files, lists the files under a
folder, and turns a file into events, the same events the recorder makes, with the instants the
file gives. The loop here does everything formats share, so an importer holds only its format:

- **Incremental.** For each file the store remembers how far it was consumed (`import_files`),
  the hash of the 4 KiB before that point and the importer's own state. Importing again skips a
  file whose size and mtime did not change, reads only what was appended to one that grew, and
  removes and imports again one that was rewritten (the bytes before the offset changed).
- **Atomic per checkpoint.** An importer yields events and, where its state is consistent,
  `Checkpoint`s. Events are written in batches that end at a checkpoint, in one transaction with
  that checkpoint's offset and state: a killed import resumes where its last batch ended. Events
  yielded after the last checkpoint are not written: the next import reads those lines again.
- **Never twice.** Importers name what they import with `stable_id`, and ask `Feed.exists`
  before emitting a call that another file may hold already.
- **Reported.** Every line or file skipped is reported with file:line and why; nothing raises
  past one file.

The contract of an importer (`Importer`): `name`, `description`, `incremental` (reads appended
bytes from an offset, like JSONL; else a changed file is read again whole), `detect(path)`
(a file or folder of this format?), `sources(path)` (the files to import under it, in order) and
`read(feed)` (events and checkpoints). A format kept as a tree of files read through one of them
defines `signature(path) -> (size, mtime_ns)` of the whole tree, so a change anywhere in it counts
as a change of that file; if it is also `incremental` (a database, JSON files rewritten whole), a changed
tree is read again with the state its last checkpoint left, and the importer itself emits only what is
new (raising `ReimportFile` when what it imported changed). A format that has its own all-or-nothing import instead
(reasonlog's export) defines `import_whole(store, path, report)` and is called with that alone.
Third-party importers register under the entry-point group `reasonlog.importers`, as an object
with that shape.
"""
from __future__ import annotations

import hashlib
import itertools
import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Protocol, cast

import orjson

from .. import providers
from ..model import (
    CallRecorded,
    Event,
    OutcomeRecorded,
    SessionStarted,
    ToolResultRecorded,
    check_event,
    format_instant,
    utc_now,
)
from ..parts import RecordError

ENTRY_POINT_GROUP = "reasonlog.importers"
TAIL = 4096           # bytes before the consumed offset whose hash tells appended from rewritten
BATCH_EVENTS = 2000   # a batch ends at the first checkpoint after this many events
ADDED = ("sessions", "calls", "messages", "tool_results", "outcomes")
_EVENT_KINDS: dict[type, tuple[str, str]] = {
    SessionStarted: ("session", "session_id"), CallRecorded: ("call", "call_id"),
    ToolResultRecorded: ("tool_result", "tool_result_id"), OutcomeRecorded: ("outcome", "outcome_id"),
}


class ReimportFile(Exception):
    """Raised by an importer that finds, reading what was appended, that something it imported earlier
    has changed (a response that was still being written): the file's sessions are removed and the
    whole file is imported again."""


class ImportError_(ValueError):
    """A path or format the import cannot take (no such file, unknown format): one line for the user."""


@dataclass(frozen=True)
class Checkpoint:
    """All events yielded before it reflect the file up to byte `offset` (line `line`); `state` is what the
    importer must know to go on from there, as JSON text (taken at once, so later changes don't leak in)."""

    offset: int
    line: int
    state: bytes | None


@dataclass(frozen=True)
class Line:
    """One line of a JSONL file: its 1-based number, byte range, and parsed value (or why it has none)."""

    number: int
    start: int
    end: int
    value: Any = None
    error: str | None = None


class Importer(Protocol):
    """A format reasonlog reads (see docs/importing.md). `detect`, `sources` and `read` are the format's own;
    the hooks have `BaseImporter`'s answers unless a format needs another:

    - `default_folders()`: where the agent writes (what `import` with no path and `watch` follow);
    - `signature(path)`: for a tree of files read through one, the tree's size and newest change (None: the
      file's own);
    - `import_whole(store, path, report)`: True when the format imported the file itself, all or nothing
      (reasonlog's export), with no offsets;
    - `sessions_from_path`: the format names sessions after the file's place, so a copy of a file imported
      before is not taken for the same sessions.
    """

    name: str
    description: str
    incremental: bool
    sessions_from_path: bool

    def detect(self, path: Path) -> bool: ...
    def sources(self, path: Path) -> Iterator[Path]: ...
    def read(self, feed: Feed) -> Iterator[Event | Checkpoint]: ...
    def default_folders(self) -> list[Path]: ...
    def signature(self, path: Path) -> tuple[int, int] | None: ...
    def import_whole(self, store: ImportStore, path: Path, report: Report) -> bool: ...


class ImportStore(Protocol):
    """What an import asks of a store: a `Store` has it all, and so does the import's batching store."""

    def write_batch(self, events: list[Event], counters: dict[str, int] | None = None, *,
                    imports: list[dict] | None = None, batch_id: str | None = None) -> bool: ...
    def existing_ids(self, kind: str, ids: Iterable[str]) -> set[str]: ...
    def is_store_failure(self, exc: BaseException) -> bool: ...
    def get_session(self, session_id: str, page: tuple[int, int] | None = None) -> dict: ...
    def get_call(self, call_id: str) -> dict: ...
    def replay_call(self, call_id: str) -> dict: ...
    def last_call_id(self, session_id: str) -> str | None: ...
    def delete_sessions(self, session_ids: Iterable[str], forget_file: str | None = None) -> int: ...
    def record_counts(self) -> dict[str, int]: ...
    def import_records(self, records: Iterable[dict]) -> dict: ...
    def status(self) -> dict: ...
    def import_file(self, path: str) -> dict | None: ...
    def import_files(self) -> list[dict]: ...


class BaseImporter:
    """The hooks of `Importer`, answered as by a format of plain files with no folder of its own."""

    sessions_from_path = False

    def default_folders(self) -> list[Path]:
        return []

    def signature(self, path: Path) -> tuple[int, int] | None:
        return None

    def import_whole(self, store: ImportStore, path: Path, report: Report) -> bool:
        return False


def as_importer(given: Any, name: str = "plugin") -> Importer:
    """`given` as an `Importer`: a `BaseImporter` as it is; any other object with `name`, `description`,
    `incremental`, `detect`, `sources` and `read` (a plug-in) with the hooks it has, else `BaseImporter`'s."""
    return cast(Importer, given) if isinstance(given, BaseImporter) else _Plugin(given, name)


class _Plugin(BaseImporter):
    """An importer registered under `reasonlog.importers` that may leave hooks out: those it has, else
    `BaseImporter`'s."""

    def __init__(self, given: Any, name: str):
        self.given, self.name = given, getattr(given, "name", name)
        self.description = getattr(given, "description", "")
        self.incremental = bool(getattr(given, "incremental", False))
        self.sessions_from_path = bool(getattr(given, "sessions_from_path", False))
        for hook in ("default_folders", "signature", "import_whole"):
            if callable(getattr(given, hook, None)):
                setattr(self, hook, getattr(given, hook))

    def detect(self, path: Path) -> bool:
        return self.given.detect(path)

    def sources(self, path: Path) -> Iterator[Path]:
        return self.given.sources(path)

    def read(self, feed: Feed) -> Iterator[Event | Checkpoint]:
        return self.given.read(feed)


@dataclass
class Report:
    """What an import did: counts of what it added, and every skip with its place and reason."""

    files: int = 0
    unchanged: int = 0
    appended: int = 0
    rewritten: int = 0
    added: dict[str, int] = field(default_factory=dict)   # sessions, calls, messages, tool_results, outcomes
    rejected: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file:line, reason)
    failed: list[tuple[str, str]] = field(default_factory=list)   # (file, reason): files not imported at all
    copies: list[tuple[str, str]] = field(default_factory=list)   # (file, the path it was imported from)

    def to_dict(self) -> dict:
        return {"files": self.files, "unchanged": self.unchanged, "appended": self.appended,
                "rewritten": self.rewritten, "added": self.added, "rejected": self.rejected,
                "copies": [{"file": f, "imported_from": o} for f, o in self.copies],
                "skipped": [{"where": w, "reason": r} for w, r in self.skipped],
                "failed": [{"file": f, "reason": r} for f, r in self.failed]}


class Feed:
    """What an importer reads one file through: its bytes from where the last import stopped, the state it
    left, deterministic ids, and questions to the store."""

    def __init__(self, path: Path, importer: Importer, store: ImportStore, start: int, line: int, state: dict | None,
                 report: Report, emitted: dict[str, set[str]]):
        self.path, self.importer, self.store = path, importer, store
        self.start, self.first_line, self.state = start, line, state
        self.report, self._emitted = report, emitted
        self.where = str(path)
        self.line = line  # the number of the line `lines()` gave last: what the events yielded now come from
        # True under `reasonlog watch`: the file may still be being written, so an importer may leave a
        # record that looks unfinished for the next pass instead of importing half of it.
        self.live = False

    # ---------------------------------------------------------------- reading

    def lines(self, ignore: Callable[[bytes], bool] | None = None) -> Iterator[Line]:
        """The file's lines from the start offset, parsed as JSON, streaming (never the whole file in memory).

        A blank line is passed over, and so is one for which `ignore(raw bytes)` is true (a cheap test
        for records the importer has no use for: they are not even parsed). A line that is not JSON or
        not UTF-8 comes with `error` set and no value. A last line without its newline that does not
        parse is not yielded: a writer may be halfway through it, and the next import reads it whole."""
        number, offset = self.first_line, self.start
        with open(self.path, "rb") as f:
            f.seek(offset)
            for raw in f:
                number += 1
                self.line = number
                start, offset = offset, offset + len(raw)
                text = raw.strip()
                if not text or (ignore is not None and raw.endswith(b"\n") and ignore(raw)):
                    continue
                try:
                    value = orjson.loads(text)
                except orjson.JSONDecodeError as exc:
                    if not raw.endswith(b"\n"):
                        return  # a partial last line: left for the next import
                    yield Line(number, start, offset, error=_json_error(raw, exc))
                    continue
                yield Line(number, start, offset, value)

    def read_bytes(self) -> bytes:
        """The whole file (for formats that are one JSON document)."""
        return self.path.read_bytes()

    def checkpoint(self, line: Line | None, state: dict | None) -> Checkpoint:
        """Everything yielded so far reflects the file up to the end of `line` (None: the whole file)."""
        if line is None:
            return Checkpoint(self.path.stat().st_size, self.first_line, _dump_state(state))
        return Checkpoint(line.end, line.number, _dump_state(state))

    def skip(self, line: Line | int | None, reason: str, record: str | None = None) -> None:
        """Report a line (or the whole file, with None) that the import passed over, and why; `record` names
        it where a file has no lines (a database's row, an entry of a JSON array)."""
        number = line.number if isinstance(line, Line) else line
        where = f"{self.where}:{number}" if number else self.where
        self.report.skipped.append((f"{where} ({record})" if record else where, reason))

    # ---------------------------------------------------------------- ids and the store

    def exists(self, kind: str, ident: str) -> bool:
        """Whether a session, call, tool_result or outcome with this id was written (by any import) already."""
        if ident in self._emitted[kind]:
            return True
        return bool(self.store.existing_ids(kind, [ident]))

    def history(self, session_id: str) -> list:
        """The conversation as the session's last stored call left it: its request's messages and its response
        (to go on from when a file grew)."""
        last_id = self.store.last_call_id(session_id)
        if last_id is None:
            return []
        last = self.store.get_call(last_id)
        messages = list(providers.messages_of(last["request"]))
        if last.get("response") is not None:
            messages.append(last["response"])
        return messages


def _json_error(raw: bytes, exc: Exception) -> str:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as bad:
        return f"not UTF-8 (byte {bad.start + 1})"
    return f"not JSON ({str(exc).split(':', 1)[0]})"


def _dump_state(state: dict | None) -> bytes | None:
    return None if state is None else orjson.dumps(state)


# -------------------------------------------------------------------------------------- the registry


def importers() -> dict[str, Importer]:
    """Every importer by name: the built-in ones, then those registered under `reasonlog.importers`."""
    from . import builtin_importers

    found: dict[str, Importer] = {imp.name: imp for imp in builtin_importers()}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in found:
            continue
        try:
            imp = ep.load()
        except Exception as exc:  # a broken plug-in must not break the built-in formats
            found.setdefault(ep.name, _Broken(ep.name, f"cannot load {ep.value}: {exc}"))
            continue
        plugin = as_importer(imp, ep.name)
        found[plugin.name] = plugin
    return found


@dataclass
class _Broken(BaseImporter):
    name: str
    description: str
    incremental: bool = False

    def detect(self, path: Path) -> bool:
        return False

    def sources(self, path: Path) -> Iterator[Path]:
        raise ImportError_(f"importer {self.name}: {self.description}")

    def read(self, feed: Feed) -> Iterator[Event | Checkpoint]:
        raise ImportError_(f"importer {self.name}: {self.description}")


def choose_importer(path: Path, name: str | None = None) -> Importer:
    """The importer `name`, or the first whose `detect` recognises `path`."""
    known = importers()
    if name is not None:
        if name not in known:
            raise ImportError_(f"--format {name}: not a format reasonlog knows; "
                               f"one of {', '.join(sorted(known))} (see --list-formats)")
        return known[name]
    for imp in known.values():
        try:
            if imp.detect(path):
                return imp
        except OSError:
            continue
    raise ImportError_(f"{path}: no importer recognises it; if it is one of {', '.join(sorted(known))},"
                       " name it with --format NAME (reasonlog import --list-formats describes them)")


# -------------------------------------------------------------------------------------- the loop


def plan(paths: Iterable[Path], fmt: str | None = None) -> list[tuple[Path, Importer]]:
    """Each file to import with its importer. A missing path is an error before anything is imported."""
    out: list[tuple[Path, Importer]] = []
    for path in paths:
        if not path.exists():
            raise ImportError_(f"{path}: no such file or folder")
        imp = choose_importer(path, fmt)
        files = list(imp.sources(path))
        out.extend((f, imp) for f in files)
    return out


def run_import(store: Any, files: list[tuple[Path, Importer]],
               progress: Callable[[Path, int], None] | None = None, live: bool = False) -> Report:
    """Import `files` into `store`; every file is imported alone, so one bad file never stops the others.

    One import at a time per database (a lock beside it): a second `reasonlog import` or `watch` waits,
    then finds the files imported. When the database refuses a write (disk full, read-only, locked past
    its timeout) the import stops there and says so; what was committed stays, and the next import
    resumes from it."""
    files = [(path, as_importer(imp)) for path, imp in files]
    report = Report()
    with _import_lock(store):
        before = store.record_counts()
        rejected = store.status().get("rejected_records", 0)
        emitted: dict[str, set[str]] = {kind: set() for kind, _ in _EVENT_KINDS.values()}
        batched, ok, copies = _Batched(store), True, _Copies(store.import_files())
        for path, imp in files:
            ok = _import_one(batched, path, imp, report, emitted, live, copies=copies)
            if not ok:
                break
            if progress is not None:
                progress(path, path.stat().st_size if path.exists() else 0)
        if ok and files:
            _import_one(batched, files[-1][0], files[-1][1], report, emitted, live, flush=True)
        after = store.record_counts()
    report.added = {k: after[k] - before.get(k, 0) for k in ADDED}
    report.rejected = store.status().get("rejected_records", 0) - rejected
    return report


def _import_one(store: _Batched, path: Path, imp: Importer, report: Report, emitted: dict[str, set[str]],
                live: bool, flush: bool = False, copies: _Copies | None = None) -> bool:
    """Import one file (or, with `flush`, write what small files left waiting), reporting a failure; False
    when the database itself refused (stop there)."""
    try:
        if flush:
            store.flush_if(full=True)
        else:
            _import_file(store, path, imp, report, emitted, live, copies)
    except (OSError, ImportError_) as exc:
        report.failed.append((str(path), str(exc)))
    except Exception as exc:
        if store.is_store_failure(exc):
            report.failed.append((str(path), f"the database refused the write ({exc}); what was not committed"
                                              " yet (this file, maybe small ones before it) waits for the next"
                                              " import"))
            return False
        if os.environ.get("REASONLOG_RAISE_INTERNAL_ERRORS"):  # an importer's own bug: this file fails
            raise
        report.failed.append((str(path), f"internal error ({type(exc).__name__}: {exc}); please report it"))
    return True


class _Batched:
    """The store, with the batches of several small files written in one transaction (a commit is an fsync).

    Each file's events still commit with its own row, never apart from it. Only the store's methods an import
    uses are here, each by name: every one that reads what was written (a session's last call, counts) or
    deletes writes what waits first; `existing_ids` and a file's own row need not, since the import remembers
    what it emitted and each file has its own row. A method not listed is not there, so a new read cannot
    silently see stale data."""

    def __init__(self, store: ImportStore):
        self._store: ImportStore = store
        self._events: list[Event] = []
        self._rows: list[dict] = []

    def write_batch(self, events: list[Event], counters: dict[str, int] | None = None, *,
                    imports: list[dict] | None = None, batch_id: str | None = None) -> bool:
        self._events += events
        self._rows += imports or []
        self.flush_if(full=len(self._events) >= BATCH_EVENTS)
        return True

    def flush_if(self, full: bool) -> None:
        if full and (self._events or self._rows):
            events, rows = self._events, self._rows
            self._events, self._rows = [], []
            self._store.write_batch(events, None, imports=rows)

    def _written(self) -> ImportStore:
        """The store, once what waits is written."""
        self.flush_if(full=True)
        return self._store

    def existing_ids(self, kind: str, ids: Iterable[str]) -> set[str]:
        return self._store.existing_ids(kind, ids)

    def is_store_failure(self, exc: BaseException) -> bool:
        return self._store.is_store_failure(exc)

    def get_session(self, session_id: str, page: tuple[int, int] | None = None) -> dict:
        return self._written().get_session(session_id, page)

    def get_call(self, call_id: str) -> dict:
        return self._written().get_call(call_id)

    def replay_call(self, call_id: str) -> dict:
        return self._written().replay_call(call_id)

    def last_call_id(self, session_id: str) -> str | None:
        return self._written().last_call_id(session_id)

    def delete_sessions(self, session_ids: Iterable[str], forget_file: str | None = None) -> int:
        return self._written().delete_sessions(session_ids, forget_file)

    def record_counts(self) -> dict[str, int]:
        return self._written().record_counts()

    def import_records(self, records: Iterable[dict]) -> dict:
        return self._written().import_records(records)  # an export imported whole, in its own transaction

    def status(self) -> dict:
        return self._written().status()

    def import_file(self, path: str) -> dict | None:
        return self._store.import_file(path)  # each file's own row: a row waiting here is another file's

    def import_files(self) -> list[dict]:
        return self._store.import_files()  # read once, before anything is written


@contextmanager
def _import_lock(store: Any) -> Iterator[None]:
    """The store's exclusive "import" lock while importing (none for a store that has no such lock)."""
    exclusive = getattr(store, "exclusive", None)
    if exclusive is None:
        yield
        return
    with exclusive("import"):
        yield


def _import_file(store: ImportStore, given: Path, imp: Importer, report: Report, emitted: dict[str, set[str]],
                 live: bool = False, copies: _Copies | None = None) -> None:
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
    feed = Feed(path, imp, store, start, line, state, report, emitted)
    feed.live, feed.where = live, str(given)
    pending: list[Event] = []   # events up to the last checkpoint, not yet written
    since: list[Event] = []     # events after it: written only once a checkpoint covers them
    last: Checkpoint | None = None
    try:
        for item in imp.read(feed):
            if isinstance(item, Checkpoint):
                last = item
                pending += since
                since = []
                if len(pending) >= BATCH_EVENTS:
                    progress.write(store, pending, item, report)
                    pending = []
                continue
            if not _storable(item, feed):
                continue
            kind, id_field = _EVENT_KINDS.get(type(item), (None, None))
            if kind is not None:
                emitted[kind].add(getattr(item, id_field))  # type: ignore[arg-type]
                if kind == "session":
                    sessions.add(item.session_id)  # type: ignore[attr-defined]
            since.append(item)
    except ReimportFile as again:
        if start == 0 or row is None:
            raise ValueError(f"{path}: {again}") from None
        store.delete_sessions(row["sessions"], forget_file=key)  # what was written of it goes, then all again
        report.rewritten += 1
        report.appended -= 1
        report.files -= 1
        return _import_file(store, given, imp, report, emitted, live)
    if last is None:  # nothing consumed: remember the file all the same
        last = Checkpoint(start, line, _dump_state(state))
    progress.write(store, pending, last, report)
    if copies is not None and row is None:
        copies.add(path, imp.name, st.st_size)


class _Copies:
    """The files imported whole, by name, format and size, to tell a copy of one (the same transcripts in a
    second folder) from a new file: a copy has the same last 4 KiB too. Its sessions are in the database
    already, so it is reported as a copy and not read (reading it would add its exchanges a second time)."""

    def __init__(self, rows: list[dict]):
        self._by: dict[tuple[str, str, int], list[tuple[str, str | None]]] = {}
        for r in rows:
            if r["consumed"] == r["size"]:
                self._by.setdefault((Path(r["path"]).name, r["format"], r["size"]), []).append(
                    (r["path"], r["tail_hash"]))

    def original_of(self, path: Path, fmt: str, size: int) -> str | None:
        found = self._by.get((path.name, fmt, size), [])
        tail = _tail_hash(path, size) if found else None
        return next((p for p, h in found if p != str(path) and h is not None and h == tail), None)

    def add(self, path: Path, fmt: str, size: int) -> None:
        if path.exists() and path.stat().st_size == size:
            self._by.setdefault((path.name, fmt, size), []).append((str(path), _tail_hash(path, size)))


def _storable(event: Event, feed: Feed) -> bool:
    """Whether the store can hold `event` (the check it makes first); if not, the event is left out and reported
    with the file and line it came from, which the store, seeing only the event, cannot name."""
    try:
        check_event(event)
    except RecordError as exc:
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

    def write(self, store: ImportStore, events: list[Event], cp: Checkpoint, report: Report) -> None:
        self.skipped += len(report.skipped) - self.reported
        self.reported = len(report.skipped)
        state = orjson.loads(cp.state) if cp.state is not None else {}
        state["$line"] = cp.line
        store.write_batch(events, None, imports=[{
            "path": str(self.path), "format": self.importer.name, "size": self.stat.st_size,
            "mtime_ns": self.stat.st_mtime_ns, "consumed": cp.offset, "tail_hash": _tail_hash(self.path, cp.offset),
            "state": state, "sessions": sorted(self.sessions), "skipped": self.skipped, "imported_at": utc_now()}])


def _tail_hash(path: Path, offset: int) -> str | None:
    if offset <= 0:
        return None
    with open(path, "rb") as f:
        f.seek(max(0, offset - TAIL))
        data = f.read(min(TAIL, offset))
    if len(data) < min(TAIL, offset):
        return None  # the file is shorter than what was consumed: it was rewritten
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def follow(store: Any, paths: list[Path], fmt: str | None, interval: float, stop: Callable[[], bool],
           on_report: Callable[[Report], None]) -> None:
    """Import `paths` again every `interval` seconds until `stop()` says so (reasonlog watch)."""
    while not stop():
        files = []
        for p in paths:
            if p.exists():
                try:
                    files.extend(plan([p], fmt))
                except ImportError_:
                    continue
        report = run_import(store, files, live=True)
        on_report(report)
        deadline = time.monotonic() + interval
        while time.monotonic() < deadline and not stop():
            time.sleep(min(0.2, interval))


# -------------------------------------------------------------------------------------- helpers for formats


def first_values(path: Path, n: int = 5, limit: int = 1 << 16) -> list[Any]:
    """The first `n` JSON values of a JSONL file (lines that do not parse are left out): what `detect` sniffs.

    It reads `limit` bytes, and up to 1 MiB when no whole line fitted in them (a long first line)."""
    for size in dict.fromkeys((limit, max(limit, 1 << 20))):
        try:
            with open(path, "rb") as f:
                data = f.read(size)
        except OSError:
            return []
        lines = data.split(b"\n")
        if len(data) == size:
            lines.pop()  # cut by the limit
        out = []
        for raw in lines:
            if raw.strip():
                try:
                    out.append(orjson.loads(raw))
                except orjson.JSONDecodeError:
                    continue
            if len(out) >= n:
                break
        if out or len(data) < size:
            return out
    return []


def walk(path: Path, pattern: str) -> Iterator[Path]:
    """`path` itself when it is a file, else the files under it matching `pattern`, sorted (a stable order)."""
    if path.is_file():
        yield path
        return
    yield from sorted(p for p in path.rglob(pattern) if p.is_file())


def instant(value: Any, numbers: bool = False) -> str | None:
    """A file's timestamp as UTC text, or None when it is missing or not an instant (ISO text; with `numbers`,
    epoch seconds too). Importers report or work around a missing time; they never fail on one."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float) if numbers else str):
        return None
    try:
        return format_instant(value)
    except RecordError:
        return None


class FileImporter(BaseImporter):
    """The shape most importers share: a file of the format is told by sniffing it (`mine`), and the files
    under a folder worth sniffing are its `candidates`. `detect` sniffs a file, or a folder's first five."""

    def candidates(self, folder: Path) -> Iterable[Path]:
        raise NotImplementedError

    def mine(self, path: Path) -> bool:
        raise NotImplementedError

    def detect(self, path: Path) -> bool:
        if path.is_dir():
            return any(self.mine(p) for p in itertools.islice(self.candidates(path), 5))
        return self.mine(path)

    def sources(self, path: Path) -> Iterator[Path]:
        if path.is_file():
            yield path
            return
        yield from (p for p in self.candidates(path) if self.mine(p))
