"""reasonlog's own JSONL: a lossless copy of a store (or some of its sessions), one record a line."""
from __future__ import annotations

from pathlib import Path
from typing import IO, Iterable, Iterator

import orjson

from ..store import Store, StoreError


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


def read_records(path: str | Path, stream: IO[bytes]) -> Iterator[dict]:
    """Parse export lines, naming the file and line of anything that is not a JSON object."""
    for lineno, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise StoreError(f"{path}:{lineno}: not valid JSON ({exc})") from None
        if not isinstance(record, dict):
            raise StoreError(f"{path}:{lineno}: expected a JSON object, got {type(record).__name__}")
        yield record


def import_file(store: Store, path: str | Path, stream: IO[bytes] | None = None) -> dict:
    """Import an export into `store` in one transaction; nothing is written if any line is bad."""
    if stream is not None:
        return store.import_records(read_records(path, stream))
    with open(path, "rb") as f:
        return store.import_records(read_records(path, f))
