"""reasonlog's own JSONL form of a store: every row, with contents by hash, in a fixed order.

Export then import into an empty database then export again gives the same bytes: rows are
written in a stable order, contents appear once (before their first use), ids are kept, and
raw payloads travel as their exact text.
"""
from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Iterable, Iterator

import orjson

from ..wire import record_of
from ..wire.codec import canonical, content_hash
from . import annotation, reading
from .answers import CallDetail
from .content import pack_raw, unpack_raw
from .reading import CALL_COLUMNS, SESSION_COLUMNS, ContentReader
from .terms import NotFound, StoreError
from .transfer_checks import END, FORMAT, RECORD_KINDS, VERSION, BadRecord, RecordChecker

EXCHANGE_COLUMNS = ("id", "session_id", "idx", "input_json", "result_json", "status", "stats_json", "started_at",
                    "ended_at")
MESSAGE_COLUMNS = ("session_id", "idx", "role", "content_id", "call_id", "at")
TOOL_COLUMNS = ("id", "session_id", "tool_use_id", "name", "input_json", "content_json", "is_error", "duration_ms",
                "at", "message_idx")
OUTCOME_COLUMNS = ("id", "session_id", "kind", "payload_json", "call_id", "at", "message_idx")
# Imported calls replayed at once when an import is verified: a session's chain decoded once for them all.
VERIFIED_AT_ONCE = 256
_CALL_SELECT = CALL_COLUMNS + ("raw", "raw_format")


def _rows(cur, table: str, columns: tuple[str, ...], session_id: str, order: str) -> list[dict]:
    sql = f"SELECT {', '.join(columns)} FROM {table} WHERE session_id = ? ORDER BY {order}"
    return [dict(zip(columns, r, strict=True)) for r in cur.execute(sql, (session_id,))]


def export_records(cur, session_ids: Iterable[str] | None, dicts) -> Iterator[dict]:
    """Yield the export records, session by session (oldest first), then an end record counting them.

    The end record is how an import tells a whole file from one cut short at a line boundary.
    """
    counts: Counter[str] = Counter()
    for record in _export_body(cur, session_ids, dicts):
        counts[record["type"]] += 1
        yield record_of(record["type"], record)  # the wire form: parsed fields, not JSON text
    yield {"type": END, "records": sum(counts.values()),
           "counts": {kind: counts[kind] for kind in RECORD_KINDS}}


def _export_body(cur, session_ids: Iterable[str] | None, dicts) -> Iterator[dict]:
    yield {"type": FORMAT, "version": VERSION}
    if session_ids is None:
        session_ids = [r[0] for r in cur.execute("SELECT id FROM sessions ORDER BY started_at, id")]
    hashes: dict[int, str] = {}  # content id -> hex hash, for contents already written
    reader = ContentReader(cur, dicts)
    for sid in session_ids:
        row = cur.execute(f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions WHERE id = ?", (sid,)).fetchone()
        if row is None:
            raise NotFound(f"no session {sid!r}")
        yield {"type": "session", **dict(zip(SESSION_COLUMNS, row, strict=True))}
        for ex in _rows(cur, "exchanges", EXCHANGE_COLUMNS, sid, "idx"):
            yield {"type": "exchange", **ex}
        for call in _rows(cur, "calls", _CALL_SELECT, sid, "idx"):
            yield from _export_call(cur, call, hashes, reader)
        for msg in _rows(cur, "messages", MESSAGE_COLUMNS, sid, "idx"):
            yield from _content_records(cur, [msg["content_id"]], hashes, reader)
            msg["content"] = hashes[msg.pop("content_id")]
            yield {"type": "message", **msg}
        for tool in _rows(cur, "tool_results", TOOL_COLUMNS, sid, "message_idx, at, id"):
            yield {"type": "tool_result", **tool}
        for outcome in _rows(cur, "outcomes", OUTCOME_COLUMNS, sid, "message_idx, at, id"):
            yield {"type": "outcome", **outcome}
        for note in annotation.rows_of(cur, sid):
            yield {"type": "annotation", **note}
    counters = dict(cur.execute("SELECT name, value FROM counters ORDER BY name").fetchall())
    yield {"type": "counters", "values": counters}


def _export_call(cur, call: dict, hashes: dict[int, str], reader: ContentReader) -> Iterator[dict]:
    context = orjson.loads(call["context_json"])
    tools = orjson.loads(call["tools_json"]) if call["tools_json"] else None
    refs = [i for i in context if not isinstance(i, list)] + (tools or []) + [call["system_id"], call["response_id"]]
    yield from _content_records(cur, [r for r in refs if r is not None], hashes, reader)
    raw = call.pop("raw")
    if raw is not None:  # as stored: a JSON skeleton that refers to the response, or text
        response = reader.get(call["response_id"]) if call["response_id"] is not None else None
        data = unpack_raw(raw, call["raw_format"], None if response is None else canonical(response))
        call.update(_raw_text(data))
        call["raw_format"] = {"json": "skeleton", "text": "bytes"}.get(call["raw_format"], call["raw_format"])
    call["context_json"] = orjson.dumps([i if isinstance(i, list) else hashes[i] for i in context]).decode()
    call["tools_json"] = None if tools is None else orjson.dumps([hashes[i] for i in tools]).decode()
    call["system_id"] = hashes.get(call["system_id"])
    call["response_id"] = hashes.get(call["response_id"])
    if call.get("window_json") is None:
        call.pop("window_json", None)  # written before schema 12: the record stays as version 3 wrote it
    if call.get("replay_of") is None:
        call.pop("replay_of", None)  # most calls are no replay: their records stay as before schema 14
    if call.get("counted_in") is None:
        call.pop("counted_in", None)  # most calls bill themselves: their records stay as before schema 16
    yield {"type": "call", **call}


def _raw_text(data: bytes) -> dict[str, str]:
    """A raw payload as JSON text: itself when it is UTF-8, else base64 with `raw_encoding` saying so (a
    payload given as bytes may be anything: a protobuf, a gzip body)."""
    try:
        return {"raw": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"raw": base64.b64encode(data).decode("ascii"), "raw_encoding": "base64"}


def _content_records(cur, ids: list[int], hashes: dict[int, str], reader: ContentReader) -> Iterator[dict]:
    for cid in ids:
        if cid in hashes:
            continue
        digest, kind, codec, dict_id, data = cur.execute(
            "SELECT hash, kind, codec, dict_id, data FROM contents WHERE id = ?", (cid,)).fetchone()
        hashes[cid] = bytes(digest).hex()
        value = orjson.loads(reader.bytes_of(codec, dict_id, data))
        yield {"type": "content", "hash": hashes[cid], "kind": kind, "value": value}


_ROWS_OF_SESSIONS = frozenset({"session", "exchange", "call", "message", "tool_result", "outcome", "annotation"})


class Importer:
    """Inserts exported records into the store behind `cur`, inside the caller's open transaction.

    Every record is checked (`RecordChecker`) before it is written. Sessions the store already
    holds are skipped with all their records, so importing the same file twice changes nothing.
    The recorder counters travel only into an empty store, where they cannot be counted twice.
    """

    def __init__(self, cur, applier):
        self.cur, self.applier = cur, applier
        self.checker = RecordChecker()
        self.ids: dict[str, int] = {}  # hex hash -> local content id
        self.present: set[str] = set()  # sessions the store already had
        self.sessions: dict[str, int] = {}  # imported session id -> position of its record
        self.calls: dict[str, int] = {}  # imported call id -> position of its record
        self.empty = cur.execute("SELECT 1 FROM sessions LIMIT 1").fetchone() is None
        self.records = 0

    def run(self, records: Iterable[dict]) -> dict:
        """Import every record; the counts of what was imported and skipped, and any warnings."""
        for index, record in enumerate(records, 1):
            self.add(index, record)
        warnings = self.checker.finish()
        return {"records": self.records, "sessions": len(self.sessions), "sessions_skipped": len(self.present),
                "warnings": warnings}

    def add(self, index: int, record: dict) -> None:
        if record.get("type") != "content":  # a content is masked when stored, after its hash is checked
            record = self.applier.redactor.value(record)  # an export made with redaction off holds secrets
        record = self.checker.as_row(index, record)
        kind = self.checker.check(index, record)
        if kind == "session" and _exists(self.cur, record["id"]):
            self.present.add(record["id"])
        sid = record["id"] if kind == "session" else record.get("session_id")
        if kind == END or sid in self.present or (kind == "counters" and not self.empty):
            return
        try:
            _IMPORTERS[kind](self.cur, {k: v for k, v in record.items() if k != "type"}, self.ids, self.applier)
        except (TypeError, ValueError, OverflowError, KeyError) as exc:
            raise BadRecord(index, f"{kind} record: cannot be stored: {exc}") from None
        except Exception as exc:
            if type(exc).__name__ != "IntegrityError":  # dialect-neutral: each driver names it so
                raise
            raise BadRecord(index, f"{kind} record: the database already holds it ({exc})") from None
        if kind in ("session", "call"):
            (self.sessions if kind == "session" else self.calls)[record["id"]] = index
        if kind in _ROWS_OF_SESSIONS:  # contents are shared and deduplicated; header and counters are no rows
            self.records += 1

    def verify(self, dicts) -> None:
        """Read back every imported session and replay every imported call, as `show` and `replay` would.

        Call before commit: a record that is well formed but does not read back (a context run
        past the previous call's end, a raw payload that does not parse) fails here, by its line.
        """
        for sid, index in self.sessions.items():
            try:
                reading.get_session(self.cur, sid, dicts)
            except Exception as exc:  # whatever reading trips on, the record is at fault, not the store
                raise BadRecord(index, f"session {sid!r} does not read back after import ({exc})") from None
        ids = list(self.calls)
        for start in range(0, len(ids), VERIFIED_AT_ONCE):
            self._verify_calls(ids[start:start + VERIFIED_AT_ONCE], dicts)

    def _verify_calls(self, ids: list[str], dicts) -> None:
        """Replay these calls, their sessions' chains decoded once; when one does not read back, find which."""
        try:
            calls = reading.call_details(self.cur, ids, dicts)
        except Exception:  # whatever reading trips on: read them one by one to name the record at fault
            calls = [self._read_call(cid, dicts) for cid in ids]
        for call in calls:
            self._check_context(call)

    def _read_call(self, cid: str, dicts) -> CallDetail:
        try:
            return reading.get_call(self.cur, cid, dicts)
        except Exception as exc:  # as above: the record is at fault
            raise BadRecord(self.calls[cid], f"call {cid!r} does not read back or replay ({exc})") from None

    def _check_context(self, call: CallDetail) -> None:
        cid, index = call["id"], self.calls[call["id"]]
        if len(call["context_ids"]) != call["context_len"]:
            raise BadRecord(index, f"call {cid!r} does not replay as recorded: its context decodes to"
                                   f" {len(call['context_ids'])} messages, but context_len says {call['context_len']}")


def _exists(cur, session_id: str) -> bool:
    return cur.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is not None


def _import_content(cur, rec, ids, applier) -> None:
    data = canonical(rec["value"])
    digest = content_hash(data)
    if digest.hex() != rec["hash"]:
        raise ValueError(f"its value does not hash to {rec['hash']}")
    cid = applier.content_id(cur, rec["value"], rec["kind"])
    ids[rec["hash"]] = cid


_COLUMNS = {"sessions": SESSION_COLUMNS, "exchanges": EXCHANGE_COLUMNS, "messages": MESSAGE_COLUMNS,
            "tool_results": TOOL_COLUMNS, "outcomes": OUTCOME_COLUMNS, "calls": _CALL_SELECT}


def _insert(cur, table: str, rec: dict, applier=None) -> None:
    """Insert one row; through `applier` for a searchable record table, which notes its rowid for the index."""
    cols = list(rec)
    unknown = set(cols) - set(_COLUMNS[table])
    if unknown:
        raise StoreError(f"{table}: unknown field(s) {sorted(unknown)}")
    sql = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    if applier is None:
        cur.execute(sql, [rec[c] for c in cols])
    else:
        applier.insert_record(cur, table, sql, [rec[c] for c in cols])


def _import_session(cur, rec, ids, applier) -> None:
    _insert(cur, "sessions", rec)
    labels = orjson.loads(rec.get("labels_json") or "{}")
    cur.executemany("INSERT INTO session_labels (key, value, session_id) VALUES (?,?,?) ON CONFLICT DO NOTHING",
                    [(str(k), str(v), rec["id"]) for k, v in labels.items()])


def _import_call(cur, rec, ids, applier) -> None:
    context = orjson.loads(rec["context_json"])
    rec["context_json"] = orjson.dumps([i if isinstance(i, list) else ids[i] for i in context]).decode()
    if rec.get("tools_json"):
        rec["tools_json"] = orjson.dumps([ids[h] for h in orjson.loads(rec["tools_json"])]).decode()
    rec["system_id"] = ids[rec["system_id"]] if rec.get("system_id") else None
    rec["response_id"] = ids[rec["response_id"]] if rec.get("response_id") else None
    raw, encoding = rec.pop("raw", None), rec.pop("raw_encoding", None)
    if raw is not None:
        rec["raw"] = pack_raw(base64.b64decode(raw) if encoding == "base64" else raw.encode("utf-8", "surrogateescape"))
    _insert(cur, "calls", rec)


def _import_message(cur, rec, ids, applier) -> None:
    rec["content_id"] = ids[rec.pop("content")]
    _insert(cur, "messages", rec)


def _import_counters(cur, rec, ids, applier) -> None:
    for name, value in rec["values"].items():
        cur.execute("INSERT INTO counters (name, value) VALUES (?, ?)"
                    " ON CONFLICT (name) DO UPDATE SET value = value + excluded.value", (name, value))


_IMPORTERS = {
    FORMAT: lambda cur, rec, ids, a: None,  # checked by RecordChecker
    "content": _import_content,
    "session": _import_session,
    "exchange": lambda cur, rec, ids, a: _insert(cur, "exchanges", rec),
    "call": _import_call,
    "message": _import_message,
    "tool_result": lambda cur, rec, ids, a: _insert(cur, "tool_results", rec, a),
    "outcome": lambda cur, rec, ids, a: _insert(cur, "outcomes", rec, a),
    "counters": _import_counters,
    "annotation": lambda cur, rec, ids, a: annotation.insert_rows(cur, [rec]),
}
