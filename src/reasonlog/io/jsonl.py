"""reasonlog's own JSONL: a lossless copy of a store (or some of its sessions), one record a line.

Every error an import raises names the file and the line, including the errors the store finds
after inserting (a session that would not read back is reported at its session's line).
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import IO

import orjson

from ..store import Store, StoreError
from ..store.transfer_checks import BadRecord, RecordChecker
from .importer import ImportStore


def dump_lines(store: Store, session_ids: Iterable[str] | None = None) -> Iterator[bytes]:
    """The export, as canonical JSON lines (sorted keys), so equal stores give equal bytes."""
    for record in store.export_records(session_ids):
        yield orjson.dumps(record, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS) + b"\n"


def write_export(store: Store, out: IO[bytes], session_ids: Iterable[str] | None = None) -> int:
    n = 0
    for line in dump_lines(store, session_ids):
        out.write(line)
        n += 1
    return n


class ExportFile:
    """The records of an export stream, remembering the line each came from (blank lines are skipped)."""

    def __init__(self, name: str | Path, stream: IO[bytes]):
        self.name, self.stream = str(name), stream
        self.lines: list[int] = []  # record position - 1 -> line number

    def __iter__(self) -> Iterator[dict]:
        for lineno, line in enumerate(self.stream, 1):
            if line.strip():
                self.lines.append(lineno)
                yield self._parse(lineno, line)

    def _parse(self, lineno: int, line: bytes) -> dict:
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            what = "not UTF-8 text" if "UTF-8" in str(exc) else "not valid JSON"
            # A last line without its newline is what a copy cut short mid-line looks like.
            cut = "" if line.endswith(b"\n") else "; it has no newline at its end, so the export is incomplete"
            raise StoreError(f"{self.name}:{lineno}: {what} ({exc}){cut}") from None
        if not isinstance(record, dict):
            raise StoreError(f"{self.name}:{lineno}: expected a JSON object, got {type(record).__name__}")
        return record

    def line_of(self, index: int) -> int:
        """The line of the record at 1-based position `index` (the last line for one past the end)."""
        return self.lines[min(index, len(self.lines)) - 1] if self.lines else 1

    def error(self, exc: BadRecord) -> StoreError:
        return StoreError(exc.render(self.name, self.line_of))


def _open(path: str | Path) -> IO[bytes]:
    try:
        return open(path, "rb")
    except OSError as exc:  # missing, a folder, unreadable: one line, not a traceback
        raise StoreError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def _opened(path: str | Path, stream: IO[bytes] | None):
    """The caller's stream, left open for them, or the file at `path`, closed after use."""
    return nullcontext(stream) if stream is not None else _open(path)


def check_file(path: str | Path, stream: IO[bytes] | None = None) -> list[str]:
    """Check an export without any database: its warnings, or StoreError naming the file and line."""
    with _opened(path, stream) as f:
        source = ExportFile(path, f)
        checker = RecordChecker()
        try:
            for index, record in enumerate(source, 1):
                checker.check(index, checker.as_row(index, record))
            return checker.finish()
        except BadRecord as exc:
            raise source.error(exc) from None


def import_file(store: ImportStore, path: str | Path, stream: IO[bytes] | None = None) -> dict:
    """Import an export into `store` in one transaction; nothing is written if any line is bad."""
    with _opened(path, stream) as f:
        source = ExportFile(path, f)
        try:
            return store.import_records(source)
        except BadRecord as exc:
            raise source.error(exc) from None
