"""What the tests of the coding agents' importers share: import a file cut at any byte, then whole.

The property: an import of a file cut anywhere (a writer half way through a line) never raises and never
fails the file; bad lines are reported; and once the rest is appended, the next import leaves the database
as one import of the whole file would. So nothing was half-written by the import of the cut file.
"""
from __future__ import annotations

import os
from pathlib import Path

from reasonlog.io.importing import plan, run_import
from reasonlog.store import SessionFilter, open_store

ALL = SessionFilter(limit=None)


def totals(store) -> tuple:
    """Sessions, calls, messages, tool results and tokens of every session, comparable across databases."""
    sessions = store.list_sessions(ALL)
    calls = [c for s in sessions for c in store.get_session(s["id"])["calls"]]
    tokens = tuple(sum(c[k] or 0 for c in calls) for k in ("input_tokens", "output_tokens", "cache_read_tokens",
                                                            "cache_write_tokens"))
    return store.record_counts(), len(calls), tokens, round(sum(c["cost_usd"] or 0 for c in calls), 9)


def import_cut_then_whole(folder: Path, source: Path, relative: str, cut: int, fmt: str) -> None:
    """Import `source` cut after `cut` bytes (at `folder/relative`), then whole; compare with a fresh import."""
    data = source.read_bytes()
    target = folder / "cut" / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data[:cut])
    assert os.environ.get("REASONLOG_RAISE_INTERNAL_ERRORS")  # (conftest) an importer's bug raises, not reported
    store = open_store(folder / "cut.db")
    first = run_import(store, plan([target], fmt))
    assert first.failed == []
    target.write_bytes(data)
    second = run_import(store, plan([target], fmt))
    assert second.failed == []
    whole_path = folder / "whole" / relative
    whole_path.parent.mkdir(parents=True, exist_ok=True)
    whole_path.write_bytes(data)
    whole = open_store(folder / "whole.db")
    run_import(whole, plan([whole_path], fmt))
    assert totals(store) == totals(whole)
    store.close()
    whole.close()
