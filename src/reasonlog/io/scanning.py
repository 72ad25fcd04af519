"""What importers look at to recognise their files before reading them: the files under a folder, and the first
records of a file.

Planning a folder asks every importer whether the folder is its own, which files under it are, and which importer
recognises each file alone, so the same folder is listed and the same file's first lines are read a dozen times
over (a re-import of 400 unchanged transcripts spent most of its CPU there). Inside `remembered()` (what `plan`
runs in) each listing and each file's first records are read once and given again; outside it nothing is kept, so
`watch`, which plans every few seconds, sees the folder as it is now.
"""
from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import orjson

from .unchanged import entries

_MEMO: ContextVar[dict | None] = ContextVar("reasonlog_scanning_memo", default=None)


@contextmanager
def remembered() -> Iterator[None]:
    """Inside the block, `walk` and `first_values` read each folder and file once (see the module's docstring)."""
    token = _MEMO.set({} if _MEMO.get() is None else _MEMO.get())
    try:
        yield
    finally:
        _MEMO.reset(token)


def walk(path: Path, pattern: str) -> Iterator[Path]:
    """`path` itself when it is a file, else the files under it matching `pattern`, sorted (a stable order): what
    `path.rglob(pattern)` finds that is a file."""
    if path.is_file():
        yield path
        return
    match = re.compile(fnmatch.translate(pattern)).fullmatch
    # Sorted by parts, the order of paths themselves (`Path.__lt__` compares them), at a fraction of its cost.
    yield from sorted((p for p, is_file in _tree(path) if is_file and match(p.name)), key=lambda p: p.parts)


def _tree(folder: Path) -> list[tuple[Path, bool]]:
    """Every entry under `folder` with whether it is a file, as `rglob` walks it (io/unchanged.py `entries`), listed
    once inside `remembered()`."""
    memo = _MEMO.get()
    if memo is not None and ("tree", folder) in memo:
        return memo["tree", folder]
    found = [(Path(path), is_file) for path, is_file in entries(str(folder))]
    if memo is not None:
        memo["tree", folder] = found
    return found


def first_values(path: Path, n: int = 5, limit: int = 1 << 16) -> list[object]:
    """The first `n` JSON objects of a JSONL file (lines that do not parse, or are not objects, are left out: a
    record of a JSONL log is an object, and one bad line must not hide the file's format): what `detect` sniffs.

    It reads `limit` bytes, and up to 1 MiB when no whole line fitted in them (a long first line)."""
    memo = _MEMO.get()
    if memo is None:
        return _first_values(path, n, limit)
    asked, values = memo.get(("first", path, limit), (0, []))
    if n > asked and (asked == 0 or len(values) >= asked):  # (fewer than asked: the file holds no more)
        asked, values = max(n, 8), _first_values(path, max(n, 8), limit)  # 8: the most a built-in format sniffs
        memo["first", path, limit] = asked, values
    return values[:n]


def _first_values(path: Path, n: int, limit: int) -> list[object]:
    for size in dict.fromkeys((limit, max(limit, 1 << 20))):
        try:
            with open(path, "rb") as f:
                data = f.read(size)
        except OSError:
            return []
        out = _values(data, n, whole=len(data) < size)
        if out or len(data) < size:
            return out
    return []


def _values(data: bytes, n: int, whole: bool) -> list[object]:
    """The first `n` JSON objects of the lines of `data` (its last line too when `whole`: not cut by a limit)."""
    out: list[object] = []
    start = 0
    while len(out) < n:
        end = data.find(b"\n", start)
        if end < 0 and not whole:
            break  # cut by the limit
        raw = data[start:] if end < 0 else data[start:end]
        if raw.strip():
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError:
                value = None
            if isinstance(value, dict):
                out.append(value)
        if end < 0:
            break
        start = end + 1
    return out


def head(path: Path, size: int = 4096) -> bytes:
    """The first `size` bytes of a file (none when it cannot be read): what sniffing a JSON document or a text
    looks at."""
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except OSError:
        return b""
