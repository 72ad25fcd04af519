"""Spill files: batches a sink refused, kept beside the database until they can be written.

Layout of `<db>.spill/`:
- `<ulid>.spill`: one batch. The first line is a header `{"$reasonlog": "spill", "counters": {...}}`
  carrying the counters that travel with the batch (drops, rejections, masked secrets: the
  text is masked before it is written, so the store that replays it counts nothing); then one
  JSON line per event. Names sort in the order the batches were taken from the queue.
- `<ulid>.tmp`: a file being written, locked by its writer; one that can be locked is stale.
- `counters-<ulid>.json`: counters that could reach neither the database nor a spill file's
  header (kept when the database could not be written at close).
- `set-aside.jsonl`: events that could not be replayed (one JSON line each: the event or its
  line, the error, the file it came from). Nothing reads it back; people inspect it.
- `*.bad`: a whole file that could not be read (from reasonlog before schema 5).
A file is claimed with `flock` before it is replayed or merged, so two processes never write
the same file twice.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ..model import Event, dump_event, load_event, new_id
from ..wire import masked_line

SET_ASIDE = "set-aside.jsonl"


@contextlib.contextmanager
def claimed(path: Path) -> Iterator[int | None]:
    """An exclusively locked descriptor of `path`, or None if another process holds it or it is gone."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        yield None
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None
            return
        yield None if os.fstat(fd).st_nlink == 0 else fd  # unlinked: its replayer has finished
    finally:
        os.close(fd)


class SpillFiles:
    """The spill folders of one database: the first that can be written takes a batch; all are replayed,
    in name order (names are time-sortable ids, so order holds across folders)."""

    def __init__(self, directory: Path | list[Path] | None, redactor: Any = None):
        folders = [] if directory is None else [directory] if isinstance(directory, Path) else list(directory)
        self.directories: list[Path] = folders
        self.directory = folders[0] if folders else None
        self.redactor = redactor
        self.last_folder: Path | None = None  # where the last file went (the user is told once)

    def _glob(self, pattern: str) -> list[Path]:
        found = [p for d in self.directories if d.exists() for p in d.glob(pattern)]
        return sorted(found, key=lambda p: (p.name, str(p)))

    @contextlib.contextmanager
    def replaying(self) -> Iterator[bool]:
        """True while this process alone replays: files must be written in order, so one replayer at a time."""
        fd = self._lock_file()
        if fd is None:
            yield False
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            yield False
            return
        try:
            yield True
        finally:
            os.close(fd)

    def _lock_file(self) -> int | None:
        for folder in self.directories:
            if folder.exists():
                try:
                    return os.open(folder / ".replay.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
                except OSError:
                    continue
        return None

    def pending(self) -> list[Path]:
        return self._glob("*.spill")

    def counter_files(self) -> list[Path]:
        return self._glob("counters-*.json")

    # ------------------------------------------------------------ writing

    def write(self, events: list[Event], counters: dict[str, int], name: str | None = None) -> int | None:
        """Spill a batch; the number of events rejected (no JSON form), or None if nothing could be written."""
        lines, rejected = [], 0
        masked = self.redactor.masked if self.redactor else 0
        for ev in events:
            try:
                line = dump_event(ev)
            except (TypeError, ValueError, OverflowError):
                rejected += 1  # this event alone: its neighbours are kept
                continue
            lines.append(masked_line(line, self.redactor) if self.redactor else line)
        counters = dict(counters)
        for key, n in (("rejected", rejected), ("redacted", (self.redactor.masked if self.redactor else 0) - masked)):
            if n:
                counters[key] = counters.get(key, 0) + n
        header = orjson.dumps({"$reasonlog": "spill", "counters": counters})
        return rejected if self._write_file(f"{name or new_id()}.spill", [header, *lines]) else None

    def write_counters(self, counters: dict[str, int]) -> bool:
        return self._write_file(f"counters-{new_id()}.json", [orjson.dumps(counters)])

    def _write_file(self, name: str, lines: list[bytes]) -> bool:
        for folder in self.directories:
            if self._write_in(folder, name, lines):
                self.last_folder = folder
                return True
        return False

    @staticmethod
    def _write_in(folder: Path, name: str, lines: list[bytes]) -> bool:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / name
            tmp = path.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # a cleaner that can lock a .tmp knows its writer is gone
                os.write(fd, b"\n".join(lines) + b"\n")
                os.fsync(fd)
                os.rename(tmp, path)
            finally:
                os.close(fd)
            return True
        except OSError:
            return False

    def set_aside(self, entries: list[bytes]) -> None:
        if not entries:
            return
        for folder in self.directories:
            try:
                with open(folder / SET_ASIDE, "ab") as f:
                    f.write(b"".join(e + b"\n" for e in entries))
                    f.flush()
                    os.fsync(f.fileno())
                return
            except OSError:
                continue
        raise OSError(f"cannot write {SET_ASIDE} in any of {[str(d) for d in self.directories]}")

    def aside_entry(self, path: Path, what: Event | bytes, exc: BaseException) -> bytes:
        error = f"{type(exc).__name__}: {exc}"
        entry: dict[str, Any] = {"file": path.name, "error": self.redactor.text(error) if self.redactor else error}
        if isinstance(what, bytes):
            entry["line"] = what.decode("utf-8", "replace")
        else:
            try:
                entry["event"] = orjson.loads(dump_event(what))
            except (TypeError, ValueError):
                entry["line"] = repr(what)
        return orjson.dumps(entry)

    # ------------------------------------------------------------ reading

    def read(self, fd: int, path: Path) -> tuple[dict[str, int], list[Event], list[bytes]]:
        """The header's counters, the events, and the lines set aside because they do not parse."""
        with open(fd, "rb", closefd=False) as f:
            lines = [ln for ln in f.read().split(b"\n") if ln.strip()]
        counters: dict[str, int] = {}
        if lines and lines[0].startswith(b'{"$reasonlog":"spill"'):
            counters = orjson.loads(lines.pop(0)).get("counters") or {}
        events, aside = [], []
        for line in lines:
            try:
                events.append(load_event(line))
            except Exception as exc:  # a torn or foreign line: set aside, never block the rest
                aside.append(self.aside_entry(path, line, exc))
        return counters, events, aside

    @staticmethod
    def read_counters(fd: int) -> dict[str, int]:
        with open(fd, "rb", closefd=False) as f:
            try:
                data = orjson.loads(f.read())
            except orjson.JSONDecodeError:
                return {}
        return {k: v for k, v in data.items() if isinstance(v, int)} if isinstance(data, dict) else {}

    def clean_stale(self) -> None:
        """Remove `.tmp` files whose writer is gone and empty spill files."""
        for path in self._glob("*.tmp") + [p for p in self.pending() if _empty(p)]:
            with claimed(path) as fd:
                if fd is not None:
                    path.unlink()


def spill_dirs(db_path: Path | str) -> list[Path]:
    """Where a recorder spills for a database: the folder beside it (`store.sqlite.spill_dir`), then one in the
    user's data folder for when the database's own folder cannot be written (read-only, or the disk is full): both
    are replayed, in name order. A PostgreSQL database (a URL) has only the second, named after its URL without the
    password."""
    import hashlib

    import platformdirs

    from ..store import safe_target
    from ..store.sqlite import spill_dir

    if isinstance(db_path, str) and "://" in db_path:
        absolute, name, beside = safe_target(db_path), "postgresql", []
    else:
        absolute = os.path.abspath(db_path)
        name, beside = Path(db_path).name, [spill_dir(Path(absolute))]
    key = hashlib.blake2b(absolute.encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()
    fallback = Path(platformdirs.user_data_dir("reasonlog", appauthor=False)) / "spill" / f"{name}-{key}"
    return [*beside, fallback]


def spill_status(folders: list[Path]) -> dict:
    """What waits in `folders` (all a recorder may have used): the files and their events, the folders, the files
    that could not be read, and where set-aside events are (`reasonlog db status`)."""
    files, events = waiting(folders)
    there = [d for d in folders if d.is_dir()]
    asides = [d / "set-aside.jsonl" for d in there if (d / "set-aside.jsonl").exists()]
    return {"pending_spill_files": [str(p) for p in files], "pending_spill_records": events,
            "spill_folders": sorted({str(p.parent) for p in files}),
            "unreadable_spill_files": [str(p) for d in there for p in sorted(d.glob("*.bad"))],
            "set_aside_file": ", ".join(map(str, asides)) or None}


def waiting(folders: list[Path]) -> tuple[list[Path], int]:
    """The spill files waiting in `folders`, in replay order, and how many events they hold."""
    files = sorted((p for d in folders if d.is_dir() for p in d.glob("*.spill")), key=lambda p: (p.name, str(p)))
    events = 0
    for path in files:
        try:
            with open(path, "rb") as f:
                events += sum(1 for line in f if line.strip() and not line.startswith(b'{"$reasonlog":"spill"'))
        except OSError:  # replayed (and removed) meanwhile
            continue
    return files, events


def _empty(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except OSError:
        return False
