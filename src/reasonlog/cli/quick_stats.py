"""`reasonlog stats --json`, answered before click and the other commands are imported (see cli/entry.py).

A usage question asked of a local archive should come back faster than a tool that re-reads the transcripts
(ccusage takes 0.3-0.4 s over 211 MB of them). The full command line imports click, rich and every command's
modules, about 0.2 s before the first query; the statistics themselves come from the kept sums in a few ms.
So the plain form, `stats [--by KEY] --json` with at most `--db`, opens the store and prints the JSON here.
Anything else (a filter, a table, an unknown key, an error to explain) goes to click, which says it as usual.
"""
from __future__ import annotations

import os
import sys


def parse(argv: list[str]) -> tuple[str | None, str] | None:
    """(--db, --by) when `argv` is `[--db X] stats [--by KEY] [--db X] --json` in any order after `stats`;
    None for anything else."""
    values: dict[str, str | None] = {"--db": None, "--by": "day"}
    words: list[str] = []
    i = 0
    while i < len(argv):
        name, eq, value = argv[i].partition("=")
        if name in values and (name == "--db" or words):  # --by belongs to `stats`, after it
            if not eq:
                if i + 1 >= len(argv):
                    return None
                i, value = i + 1, argv[i + 1]
            values[name] = value
        else:
            words.append(argv[i])
        i += 1
    if words != ["stats", "--json"] or values["--db"] == "":
        return None
    return values["--db"], str(values["--by"])


def target_of(db: str | None):
    """The SQLite file or `postgresql://` URL that `--db` (else $REASONLOG_DB, else the default) names."""
    from ..store import database_target

    db = db if db is not None else os.environ.get("REASONLOG_DB")
    return database_target(os.path.expanduser(db) if db and "://" not in db else db)


def run(db: str | None, by: str) -> bool:
    """Print the statistics as `reasonlog stats --by BY --json` does; False (nothing printed) when click must
    answer instead: an unknown key, no database yet, or an error it explains."""
    from pathlib import Path

    import orjson

    from .. import query
    from ..store import SessionFilter, open_store

    if by not in query.STAT_KEYS:
        return False
    try:
        target = target_of(db)
        if isinstance(target, Path) and not target.exists():
            return False
        store = open_store(target, read_only=True)
        try:
            rows = query.stats(store, by, SessionFilter(limit=None))
        finally:
            store.close()
    except Exception:  # noqa: BLE001 - click's path meets the same error and says it in one line
        return False
    sys.stdout.buffer.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
                                         | orjson.OPT_NON_STR_KEYS) + b"\n")
    return True
