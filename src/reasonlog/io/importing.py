"""Importing what agents already write: the loop that feeds a store, and the registry of importers.

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
  past one file, and a record an importer fails on costs that record alone (io/import_file.py).
- **Each file as itself.** A folder is read file by file, each with the importer that recognises it,
  and a JSONL file no importer reads is named (io/planning.py).

The importer seam (what a format implements, and the helpers formats share) is `io/importer.py`;
its names are imported here too, where the loop uses them.
"""
from __future__ import annotations

import gc
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..capture.opening import store_writer
from ..model import Event
from ..store import Store

if TYPE_CHECKING:
    from ..store.answers import CallDetail
    from ..wire.api import SessionDetailJSON
from .import_file import BATCH_EVENTS, EVENT_KINDS, Copies, import_file
from .importer import (  # noqa: F401  (also the names plug-ins take from here: docs/importing.md)
    BaseImporter,
    Checkpoint,
    Feed,
    FileImporter,
    Importer,
    ImportError_,
    ImportStore,
    Line,
    ReimportFile,
    Report,
    as_importer,
    dump_state,
    first_values,
    instant,
    walk,
)
from .planning import PassedOver, plan_as, plan_folder, plan_unchanged  # noqa: F401  (PassedOver: what plan() names)
from .scanning import remembered

ENTRY_POINT_GROUP = "reasonlog.importers"
ADDED = ("sessions", "calls", "messages", "tool_results", "outcomes")
_TABLE_OF = {"session": "sessions", "call": "calls", "tool_result": "tool_results", "outcome": "outcomes"}


# -------------------------------------------------------------------------------------- the registry


def importers() -> dict[str, Importer]:
    """Every importer by name: the built-in ones, then those registered under `reasonlog.importers`."""
    from . import builtin_importers

    found: dict[str, Importer] = {imp.name: imp for imp in builtin_importers()}
    for ep in _entry_points(ENTRY_POINT_GROUP):
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


def _entry_points(group: str) -> list:
    """The entry points registered under `group`. Importing and asking `importlib.metadata` costs about 0.1 s of
    CPU (it reads every installed distribution's metadata, with the email package): a third of a small import's
    CPU. So the folders on the path are looked through first for an `entry_points.txt` naming the group, and
    importlib is asked only when one does, or when the path holds what only importlib reads (a zip, an egg, a
    finder of its own)."""
    if _declared_nowhere(f"[{group}]"):
        return []
    from importlib import metadata

    return list(metadata.entry_points(group=group))


def _declared_nowhere(section: str) -> bool:
    """Whether no distribution on the path can declare `section` (an entry-point group's header)."""
    from importlib.machinery import PathFinder

    if any(hasattr(f, "find_distributions") and f is not PathFinder for f in sys.meta_path):
        return False
    for entry in sys.path:
        folder = entry or "."
        if not os.path.isdir(folder):
            if os.path.exists(folder):  # a zip: importlib reads those
                return False
            continue
        if folder.endswith(".egg"):
            return False
        try:
            names = os.listdir(folder)
        except OSError:
            return False
        for name in names:
            if name.endswith((".dist-info", ".egg-info")):
                try:
                    with open(os.path.join(folder, name, "entry_points.txt"), encoding="utf-8") as f:
                        if section in f.read():
                            return False
                except OSError:  # no entry points (or an egg-info file): nothing declared there
                    continue
    return True


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


def choose_importer(path: Path, name: str | None = None, known: dict[str, Importer] | None = None) -> Importer:
    """The importer `name`, or the first whose `detect` recognises `path`."""
    known = importers() if known is None else known
    if name is not None:
        if name not in known:
            raise ImportError_(f"--format {name}: not a format reasonlog knows; "
                               f"one of {', '.join(sorted(known))} (see --list-formats)")
        return known[name]
    for imp in known.values():
        try:
            if imp.detect(path):
                return imp
        except (OSError, LookupError, TypeError, ValueError, AttributeError):
            continue  # (a format's guess that failed on what it sniffed: not its file)
    raise ImportError_(f"{path}: no importer recognises it; if it is one of {', '.join(sorted(known))},"
                       " name it with --format NAME (reasonlog import --list-formats describes them)")


# -------------------------------------------------------------------------------------- the loop


def plan(paths: Iterable[Path], fmt: str | None = None,
         imported: Callable[[], list[dict]] | None = None) -> list[tuple[Path, Importer]]:
    """Each file to import with its importer. A missing path is an error before anything is imported.

    A folder with no `fmt` is read file by file, each file as itself, and every JSONL file no importer reads
    is named in the report (io/planning.py); with `fmt`, a folder is read as that format. `imported` gives the
    store's `import_files()` rows (asked once, for a folder): a folder whose every file an import read to its end
    as it is now is planned from those rows, with no file sniffed (`plan_unchanged`)."""
    out: list[tuple[Path, Importer]] = []
    known = importers()
    rows: dict[str, dict] | None = None
    with remembered():  # every importer sniffs the same folders and files: each is read once (io/scanning.py)
        for path in paths:
            if not path.exists():
                raise ImportError_(f"{path}: no such file or folder")
            if path.is_dir() and fmt is None:
                if rows is None:
                    rows = {r["path"]: r for r in imported()} if imported is not None else {}
                out += plan_unchanged(path, known, rows) or plan_folder(path, known, lambda p: _recognising(p, known))
            else:
                out += plan_as(path, choose_importer(path, fmt, known))
    return out


def _recognising(path: Path, known: dict[str, Importer]) -> Importer | None:
    try:
        return choose_importer(path, None, known)
    except ImportError_:
        return None


def run_import(store: Store, files: list[tuple[Path, Importer]],
               progress: Callable[[Path, int], None] | None = None, live: bool = False) -> Report:
    """Import `files` into `store`; every file is imported alone, so one bad file never stops the others.

    One import at a time per database (a lock beside it): a second `reasonlog import` or `watch` waits,
    then finds the files imported. When the database refuses a write (disk full, read-only, locked past
    its timeout) the import stops there and says so; what was committed stays, and the next import
    resumes from it."""
    files = [(path, as_importer(imp)) for path, imp in files]
    report = Report()
    with _import_lock(store), _young_collections_rarer():
        before = store.record_counts()
        rejected = store.status().get("rejected_records", 0)
        emitted: dict[str, set[str]] = {kind: set() for kind, _ in EVENT_KINDS.values()}
        none_before = {kind for kind, _ in EVENT_KINDS.values() if not before.get(_TABLE_OF[kind], 0)}
        batched, ok, copies = _Batched(store, emitted, none_before), True, Copies(store.import_files())
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
                live: bool, flush: bool = False, copies: Copies | None = None) -> bool:
    """Import one file (or, with `flush`, write what small files left waiting), reporting a failure; False
    when the database itself refused (stop there)."""
    try:
        if flush:
            store.flush_if(full=True)
        else:
            import_file(store, path, imp, report, emitted, live, copies)
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
    uses are here, each by name: every one that reads what was written (counts, a call) or deletes writes what
    waits first (a session's last call, when something of that session waits); `existing_ids` and a file's own
    row need not, since the import remembers what it emitted and each file has its own row. A method not listed is
    not there, so a new read cannot silently see stale data."""

    def __init__(self, store: Store, emitted: dict[str, set[str]] | None = None, none_before: set[str] | None = None):
        self._store: ImportStore = store
        # The kinds of records the store held none of when the import began (a first import): every one of them it
        # holds now, this import emitted (the import lock keeps other imports out, and what else writes names its
        # records with ids of its own), so `existing_ids` answers from what was emitted, with no query a call.
        self._emitted, self._none_before = emitted or {}, none_before or set()
        self._last_of: dict[str, str] = {}  # call id -> its session, for the calls `last_call_id` answered
        # The recorder's write path, without spill folders: a batch the database refuses raises, and the import
        # stops there (what a spill file held would be read again by the next import anyway).
        self._writer = store_writer(store, spill=False)
        self._events: list[Event] = []

    def write_batch(self, events: list[Event], counters: dict[str, int] | None = None, *,
                    batch_id: str | None = None) -> bool:
        self._events += events
        self.flush_if(full=len(self._events) >= BATCH_EVENTS)
        return True

    def flush_if(self, full: bool) -> None:
        if full and self._events:
            events, self._events = self._events, []
            self._writer.write(events)

    def _written(self) -> ImportStore:
        """The store, once what waits is written."""
        self.flush_if(full=True)
        return self._store

    def existing_ids(self, kind: str, ids: Iterable[str]) -> set[str]:
        if kind in self._none_before:
            return {i for i in ids if i in self._emitted[kind]}
        return self._store.existing_ids(kind, ids)

    def is_store_failure(self, exc: BaseException) -> bool:
        return self._store.is_store_failure(exc)

    def get_session(self, session_id: str, page: tuple[int, int] | None = None) -> SessionDetailJSON:
        return self._written().get_session(session_id, page)

    def get_call(self, call_id: str) -> CallDetail:
        session = self._last_of.get(call_id)
        if session is None or self._waits(session):
            return self._written().get_call(call_id)
        return self._store.get_call(call_id)  # a session's last call, nothing of that session waiting

    def replay_call(self, call_id: str) -> dict:
        return self._written().replay_call(call_id)

    def last_call_id(self, session_id: str) -> str | None:
        """Written first only when something of the session waits, and so is `get_call` of the call it names: a
        sub-agent's file goes on from the calls its parent's file stored (`Feed.history`), and a commit for each
        such file (68 of the 78 of a 211 MB first import) made the import's batches small. A call's answer is read
        from its session's rows alone, so what waits of other sessions cannot change it."""
        if self._waits(session_id):
            return self._written().last_call_id(session_id)
        found = self._store.last_call_id(session_id)
        if found is not None:
            self._last_of[found] = session_id
        return found

    def _waits(self, session_id: str) -> bool:
        return any(getattr(e, "session_id", None) == session_id for e in self._events)

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


# The cyclic collector's first generation is collected once this many more container objects were made than freed
# (Python's default: 700). An import holds a batch of events (2,000, each a request of dicts and lists) while it
# builds it: at 700, young collections ran 657 times over the 211 MB import and moved the batch's objects up into the
# older generations, which were walked again and again (0.30-0.38 s of CPU, docs/performance.md). The import's
# objects die by their reference counts, not in cycles, so rarer collections free the same memory.
YOUNG_THRESHOLD = 50_000


class _Importing:
    """The imports running in this process (threads may import into other databases), and the collector's
    thresholds from before the first of them."""

    lock = threading.Lock()
    running = 0
    thresholds: tuple[int, ...] = ()


@contextmanager
def _young_collections_rarer() -> Iterator[None]:
    """The collector's young generation collected every `YOUNG_THRESHOLD` objects while any import of the process runs,
    as before once the last has ended."""
    with _Importing.lock:
        if not _Importing.running:
            _Importing.thresholds = gc.get_threshold()
            gc.set_threshold(max(_Importing.thresholds[0], YOUNG_THRESHOLD), *_Importing.thresholds[1:])
        _Importing.running += 1
    try:
        yield
    finally:
        with _Importing.lock:
            _Importing.running -= 1
            if not _Importing.running:
                gc.set_threshold(*_Importing.thresholds)


@contextmanager
def _import_lock(store: ImportStore) -> Iterator[None]:
    """The store's exclusive "import" lock while importing (none for a store that has no such lock)."""
    exclusive = getattr(store, "exclusive", None)
    if exclusive is None:
        yield
        return
    with exclusive("import"):
        yield


def follow(store: Store, paths: list[Path], fmt: str | None, interval: float, stop: Callable[[], bool],
           on_report: Callable[[Report], None]) -> None:
    """Import `paths` again every `interval` seconds until `stop()` says so (reasonlog watch)."""
    while not stop():
        files = []
        for p in paths:
            if p.exists():
                try:
                    files.extend(plan([p], fmt, imported=store.import_files))
                except ImportError_:
                    continue
        report = run_import(store, files, live=True)
        on_report(report)
        deadline = time.monotonic() + interval
        while time.monotonic() < deadline and not stop():
            time.sleep(min(0.2, interval))

