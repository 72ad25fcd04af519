"""The long form of reasoning records: `<root>/<session>/<group>_<phase>.md`, with `reasoning_index.json` beside.

Each record appends a section to its file (a group that revisits a phase keeps every version) and an entry to
the index, under a lock on the session's folder, so agents saving at once never lose each other's entries.
The index is replaced whole (written beside and renamed), so a reader never sees half of it.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import re
from pathlib import Path
from typing import Any

import orjson

INDEX = "reasoning_index.json"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME = 120  # characters of a folder or file name; file systems allow 255 bytes


def default_root() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("reasonlog", appauthor=False)) / "artifacts"


def write(root: Path, session: str, entry: dict, body: str) -> Path:
    """Append the record's section to its file and its entry to the index; returns the file's path."""
    folder = root / _name(session)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{_name(entry.get('group') or 'session')}_{_name(entry['phase'])}.md"
    with open(folder / ".lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(path, "a", encoding="utf-8") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        index = read_index(folder)
        index.append({**entry, "file": path.name})
        tmp = folder / f".{INDEX}.{os.getpid()}"
        tmp.write_bytes(orjson.dumps(index, option=orjson.OPT_INDENT_2))
        os.replace(tmp, folder / INDEX)
    return path


def read_index(folder: Path) -> list[dict]:
    try:
        data = orjson.loads((folder / INDEX).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return []
    return data if isinstance(data, list) else []


def section(record: dict[str, Any], details: str | None, moved: dict) -> str:
    """The markdown a record adds to its artifact."""
    head = [f"## {record['phase']} — {record.get('agent') or 'agent'} — {record['at']}", "",
            f"record `{record['record_id']}`" + (f", confidence {record['confidence']}" if record.get("confidence")
                                                  else "")]
    if record.get("references"):
        head.append("references: " + ", ".join(map(str, record["references"])))
    parts = ["\n".join(head), "### Compact", "```json\n" + orjson.dumps(record["compact"],
                                                                        option=orjson.OPT_INDENT_2).decode() + "\n```"]
    if moved:
        parts += ["### Over the compact limits", "```json\n" + orjson.dumps(moved, option=orjson.OPT_INDENT_2).decode()
                  + "\n```"]
    if details:
        parts += ["### Details", details.rstrip()]
    return "\n\n".join(parts) + "\n\n"


def _name(text: str) -> str:
    """A file name of `text`: safe characters only, and short enough for any file system (a long name keeps
    its start and a digest of the whole, so two long names stay two names)."""
    name = _UNSAFE.sub("_", text).strip("._") or "_"
    if len(name) > MAX_NAME:
        name = name[:MAX_NAME - 17] + "-" + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
    return name
