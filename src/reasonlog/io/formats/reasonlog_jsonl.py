"""reasonlog's own export (`reasonlog export`, versions 1 to 3): all or nothing, by the export's own import.

The file is checked whole before anything is written, imported in one transaction, and every session
it brings is read back and every call replayed before the commit (see `store/transfer.py`). Sessions
the database holds already are skipped, so importing the same export again adds nothing.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...store import StoreError
from .. import jsonl
from ..importer import Checkpoint, Feed, FileImporter, Report, first_values, walk

NAME = "reasonlog-jsonl"


class ReasonlogJsonlImporter(FileImporter):
    name = NAME
    description = "reasonlog's own export (reasonlog export), all or nothing"
    incremental = False

    def candidates(self, folder: Path) -> Iterator[Path]:
        return walk(folder, "*.jsonl")

    def mine(self, path: Path) -> bool:
        return _is_export(path)

    def read(self, feed: Feed) -> Iterator[Any | Checkpoint]:
        raise NotImplementedError("imported whole, by import_whole")

    def import_whole(self, store: Any, path: Path, report: Report) -> bool:
        try:
            for warning in jsonl.check_file(path):
                report.skipped.append((str(path), warning))
            jsonl.import_file(store, path)
        except StoreError as exc:  # "<file>:<line>: why": the place, and the reason
            text = str(exc)
            where, _, why = text.partition(": ") if text.startswith(f"{path}:") else (str(path), "", text)
            report.failed.append((where, why))
        return True


importer = ReasonlogJsonlImporter()


def _is_export(path: Path) -> bool:
    first = first_values(path, 1)
    return bool(first) and isinstance(first[0], dict) and first[0].get("type") == "reasonlog"
