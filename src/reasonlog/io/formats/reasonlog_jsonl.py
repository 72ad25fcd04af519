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
from ..importer import Checkpoint, Feed, FormatImporter, ImportStore, Report

NAME = "reasonlog-jsonl"


class ReasonlogJsonlImporter(FormatImporter):
    def import_whole(self, store: ImportStore, path: Path, report: Report) -> bool:
        try:
            for warning in jsonl.check_file(path):
                report.skipped.append((str(path), warning))
            jsonl.import_file(store, path)
        except StoreError as exc:  # "<file>:<line>: why": the place, and the reason
            text = str(exc)
            where, _, why = text.partition(": ") if text.startswith(f"{path}:") else (str(path), "", text)
            report.failed.append((where, why))
        return True


def _read(feed: Feed) -> Iterator[Any | Checkpoint]:
    raise NotImplementedError("imported whole, by import_whole")


importer = ReasonlogJsonlImporter(NAME, "reasonlog's own export (reasonlog export), all or nothing", _read,
                                  incremental=False, opens=lambda first: first.get("type") == "reasonlog")
