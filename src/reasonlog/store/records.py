"""Reading reasoning records (written by `writing.Applier._apply_reasoning`). Dialect-neutral."""
from __future__ import annotations

from ..wire.api import ReasoningRecordJSON
from . import answers

COLUMNS = ("id", "session_id", "agent", "group_name", "phase", "state", "compact_json", "details", "artifact_path",
           "details_tokens", "compact_tokens", "tokenizer", "redacted", "confidence", "references_json", "at")


def list_records(cur, session_id: str | None = None, group: str | None = None, phase: str | None = None,
                 record_id: str | None = None, include_held: bool = True) -> list[ReasoningRecordJSON]:
    """Records in the order they were saved, filtered by whatever is given."""
    where, args = [], []
    for column, value in (("session_id", session_id), ("group_name", group), ("phase", phase), ("id", record_id)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    if not include_held:
        where.append("state = 'kept'")
    rows = cur.execute(f"SELECT {', '.join(COLUMNS)} FROM reasoning_records"
                       f" WHERE {' AND '.join(where) or '1=1'} ORDER BY rowid", args).fetchall()
    return [answers.reasoning_record(r) for r in rows]
