"""Which files under a folder an import read to their end as they are now: what a re-import with nothing changed
needs to know, with nothing but `os` (no `pathlib`, no importer, no store).

`reasonlog import FOLDER` of a folder it has imported before plans the folder from the store's `import_files` rows
when every file under it has one with its size and change time (io/planning.py `plan_unchanged`), and the command
answers before click or the store is loaded when nothing at all changed (cli/quick_import.py): both ask `unchanged`.
Paths are strings here: building 400 `Path` objects and comparing them cost more than the rest of the check.
"""
from __future__ import annotations

import os

TYPE_CHECKING = False  # `typing` costs a tenth of a re-sync that answers before click (cli/quick_import.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import TypeVar

    T = TypeVar("T")

SUFFIXES = (".jsonl", ".json", ".db")  # the files a folder's planning considers (io/planning.py)


def entries(folder: str) -> list[tuple[str, bool]]:
    """Every entry under `folder` with whether it is a file, as `Path.rglob` walks it: symbolic links to folders are
    not followed, a folder that cannot be listed is passed over. Paths are `folder` joined with the names below it."""
    found: list[tuple[str, bool]] = []
    todo = [folder]
    while todo:
        parent = todo.pop()
        try:
            with os.scandir(parent) as listing:
                for entry in listing:
                    child = os.path.join(parent, entry.name)
                    found.append((child, _is(entry.is_file)))
                    if _is(entry.is_dir, follow_symlinks=False):
                        todo.append(child)
        except (PermissionError, FileNotFoundError, NotADirectoryError):
            continue
    return found


def _is(test, **how: bool) -> bool:
    try:
        return bool(test(**how))
    except OSError:
        return False


def unchanged(folder: str, rows: Mapping[str, Mapping], reads: Callable[[str, str], T | None]
              ) -> list[tuple[str, T]] | None:
    """Each candidate file under `folder` (a `SUFFIXES` file) with `reads(format, path)`, when every one has a row in
    `rows` (keyed by the resolved path, as `import_files` keys them) whose size and change time are the file's and
    which was read to the file's end, and `reads` gives something for each (the format's importer, known now and not a
    tree). None as soon as one has not, or the folder holds no candidate: it is planned file by file."""
    folder = folder.rstrip(os.sep) or os.sep
    root = os.path.realpath(folder)
    cut = len(folder) if folder != os.sep else 0
    out: list[tuple[str, T]] = []
    for path, is_file in entries(folder):
        if not is_file or os.path.splitext(path)[1] not in SUFFIXES:
            continue
        row = rows.get(root + path[cut:] if cut else path)
        if row is None:
            return None
        try:
            st = os.stat(path)
        except OSError:
            return None
        if (row["size"], row["mtime_ns"]) != (st.st_size, st.st_mtime_ns) or row["consumed"] < st.st_size:
            return None
        found = reads(row["format"], path)
        if found is None:
            return None
        out.append((path, found))
    return out or None
