"""What an export must be before any of it is written: every record's fields and types, no record
twice, references only to what came before, and (versions 2 and 3) an end record whose counts match.

Needs no database, so a file can be checked before a store is even opened. Every error is a
`BadRecord` that knows which record (and, for duplicates, which earlier record) is at fault.
"""
from __future__ import annotations

import base64
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import orjson

from ..wire import EXPORT_VERSION, PARSED, WireError, row_of
from . import Invalid
from .content import canonical, content_hash

FORMAT = "reasonlog"
VERSION = EXPORT_VERSION  # 2: ends with an `end` record counting its records; 3: parsed JSON fields
COUNTED = (2, 3)  # versions that end with an `end` record
END = "end"
RECORD_KINDS = ("session", "exchange", "call", "message", "tool_result", "outcome", "content", "counters")
INT64 = (-(2 ** 63), 2 ** 63 - 1)
_HASH = re.compile(r"[0-9a-f]{32}")


class BadRecord(Invalid):
    """A record of an export that cannot be imported; `index` is its 1-based position among the records."""

    def __init__(self, index: int, text: str, other: int | None = None, relation: str = "first at"):
        self.index, self.text, self.other, self.relation = index, text, other, relation
        also = "" if other is None else f" ({relation} record {other})"
        super().__init__(f"record {index}: {text}{also}")

    def render(self, where: str, line_of: Callable[[int], int]) -> str:
        """The message as `<where>:<line>: text`, with `line_of` turning record positions into lines."""
        also = "" if self.other is None else f" ({self.relation} line {line_of(self.other)})"
        return f"{where}:{line_of(self.index)}: {self.text}{also}"


# ------------------------------------------------------------------ field types


def _int(v: Any) -> bool:
    return type(v) is int and INT64[0] <= v <= INT64[1]  # bool is an int to Python, not to us


def _num(v: Any) -> bool:
    return _int(v) or type(v) is float


def _json_text(want: type | None) -> Callable[[Any], bool]:
    def check(v: Any) -> bool:
        if not isinstance(v, str):
            return False
        try:
            parsed = orjson.loads(v)
        except orjson.JSONDecodeError:
            return False
        return want is None or isinstance(parsed, want)
    return check


def _hash(v: Any) -> bool:
    return isinstance(v, str) and _HASH.fullmatch(v) is not None


def _context(v: Any) -> bool:
    """Content hashes and `[start, end]` runs into the previous call's context."""
    items = _loads_list(v)
    return items is not None and all(
        _hash(i) or (isinstance(i, list) and len(i) == 2 and all(_int(n) and n >= 0 for n in i)) for i in items)


def _hashes(v: Any) -> bool:
    items = _loads_list(v)
    return items is not None and all(_hash(i) for i in items)


def _loads_list(v: Any) -> list | None:
    try:
        parsed = orjson.loads(v) if isinstance(v, str) else None
    except orjson.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, list) else None


def _tags(v: Any) -> bool:
    items = _loads_list(v)
    return items is not None and all(isinstance(t, str) and t for t in items)


def _counters(v: Any) -> bool:
    return isinstance(v, dict) and all(_int(n) for n in v.values())


TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "str": (lambda v: isinstance(v, str), "text"),
    "int": (_int, "an integer (64-bit)"),
    "num": (_num, "a number"),
    "flag": (lambda v: type(v) is int and v in (0, 1), "0 or 1"),
    "json": (_json_text(None), "JSON text"),
    "obj": (_json_text(dict), "JSON text of an object"),
    "hash": (_hash, "a content hash (32 hex digits)"),
    "context": (_context, "JSON text of a list of content hashes and [start, end] runs"),
    "hashes": (_hashes, "JSON text of a list of content hashes"),
    "kind": (lambda v: v in ("message", "system", "tool"), "one of 'message', 'system', 'tool'"),
    "counters": (_counters, "an object of integers"),
    "tags": (_tags, "JSON text of a list of tag names"),
    "any": (lambda v: True, "any JSON value"),
    "raw_format": (lambda v: v in ("skeleton", "bytes"), "'skeleton' or 'bytes'"),
    "raw_encoding": (lambda v: v == "base64", "'base64'"),
    "version": (_int, "an integer"),
}

# Field -> type. A trailing "!" means NOT NULL and required; "=" means NOT NULL but the database has a
# default for it when absent. Other fields may be null or absent (NULL).
FIELDS: dict[str, dict[str, str]] = {
    FORMAT: {"version": "version!"},
    "session": {"id": "str!", "run": "str", "agent": "str", "model": "str", "provider": "str", "labels_json": "obj=",
                "parent_session_id": "str", "parent_call_id": "str", "external_id": "str", "host": "str",
                "pid": "int", "started_at": "str!", "ended_at": "str", "status": "str=", "summary": "str",
                "error_json": "json", "xml_tool_tags_json": "tags"},
    "exchange": {"id": "str!", "session_id": "str!", "idx": "int!", "input_json": "json", "result_json": "json",
                 "status": "str=", "stats_json": "obj", "started_at": "str!", "ended_at": "str"},
    "call": {"id": "str!", "session_id": "str!", "idx": "int!", "exchange_id": "str", "provider": "str",
             "model": "str", "started_at": "str!", "latency_ms": "num", "ttft_ms": "num", "status": "str!",
             "stop_reason": "str", "error_json": "json", "input_tokens": "int", "output_tokens": "int",
             "cache_read_tokens": "int", "cache_write_tokens": "int", "cache_write_1h_tokens": "int",
             "reasoning_tokens": "int", "cost_usd": "num", "cost_source": "str", "provider_message_id": "str",
             "request_id": "str", "params_json": "obj!", "shape_json": "obj", "system_id": "hash",
             "tools_json": "hashes", "context_json": "context!", "context_len": "int!", "response_id": "hash",
             "context_facts_json": "obj", "window_json": "obj", "replay_of": "str", "raw": "str",
             "raw_format": "raw_format", "raw_encoding": "raw_encoding"},
    "message": {"session_id": "str!", "idx": "int!", "role": "str", "content": "hash!", "call_id": "str",
                "at": "str!"},
    "tool_result": {"id": "str!", "session_id": "str!", "tool_use_id": "str", "name": "str", "input_json": "json",
                    "content_json": "json", "is_error": "flag=", "duration_ms": "num", "at": "str!",
                    "message_idx": "int!"},
    "outcome": {"id": "str!", "session_id": "str!", "kind": "str!", "payload_json": "json", "call_id": "str",
                "at": "str!", "message_idx": "int!"},
    "content": {"hash": "hash!", "kind": "kind!", "value": "any!"},
    "counters": {"values": "counters!"},
    END: {"records": "int!", "counts": "counters!"},
}


def _compile(spec: dict[str, str]) -> list[tuple[str, Callable[[Any], bool], str, str]]:
    """Field, test, what is expected, and "!" (required), "=" (required unless absent) or "" (nullable)."""
    return [(name, *TYPES[typ.rstrip("!=")], typ[-1] if typ[-1] in "!=" else "") for name, typ in spec.items()]


_COMPILED = {kind: _compile(spec) for kind, spec in FIELDS.items()}  # checked per record: keep it cheap
WIRE_NAMES = {kind: {column: name for name, (column, _) in fields.items()} for kind, fields in PARSED.items()}


def _base64(text: Any) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (TypeError, ValueError):
        return False
    return True


def check_fields(index: int, kind: str, record: dict, wire: bool = False) -> None:
    """Every field known, present when required, and of its type. `wire`: the record came in version 3, so
    errors name its fields as the file does (`labels`, not the row's `labels_json`)."""
    if len(record) - 1 > len(FIELDS[kind]) or not record.keys() - {"type"} <= FIELDS[kind].keys():
        unknown = sorted(set(record) - set(FIELDS[kind]) - {"type"})
        raise BadRecord(index, f"{kind} record: unknown field(s) {', '.join(map(repr, unknown))}")
    for name, valid, expected, need in _COMPILED[kind]:
        value = record.get(name)
        if value is None:
            if need == "!" or (need == "=" and name in record):
                shown, what = _shown(kind, name, expected, wire)
                raise BadRecord(index, f"{kind} record: field {shown!r}: expected {what},"
                                       f" got {'nothing' if name not in record else 'null'}")
        elif not valid(value):
            shown, what = _shown(kind, name, expected, wire)
            got = orjson.loads(value) if shown != name else value
            raise BadRecord(index, f"{kind} record: field {shown!r}: expected {what},"
                                   f" got {type(got).__name__} {_brief(got)}")


_PARSED_EXPECTED = {"JSON text of an object": "an object", "JSON text": "a JSON value",
                    "JSON text of a list of content hashes and [start, end] runs":
                        "a list of content hashes and [start, end] runs",
                    "JSON text of a list of content hashes": "a list of content hashes",
                    "JSON text of a list of tag names": "a list of tag names"}


def _shown(kind: str, column: str, expected: str, wire: bool) -> tuple[str, str]:
    """The field's name and expected type as a version 3 file says them."""
    name = WIRE_NAMES.get(kind, {}).get(column) if wire else None
    return (name, _PARSED_EXPECTED.get(expected, expected)) if name else (column, expected)


def _brief(value: Any) -> str:
    text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode() if value is not None else "null"
    return text if len(text) <= 40 else text[:37] + "..."


class RecordChecker:
    """Checks an export's records one at a time, in file order; `finish` says whether the file was whole."""

    def __init__(self) -> None:
        self.version: int | None = None
        self.seen: dict[tuple, int] = {}  # what identifies a record -> position of the record that had it
        self.counts: Counter[str] = Counter()
        self.unused: dict[str, int] = {}  # content hash -> its position, until a record uses it
        self.ended: int | None = None
        self.last = 0

    def as_row(self, index: int, record: Any) -> Any:
        """A version 3 record in the row form the checks and the store use (parsed fields back to JSON text)."""
        if self.version != 3 or not isinstance(record, dict) or not isinstance(record.get("type"), str):
            return record
        try:
            return row_of(record["type"], record)
        except WireError as exc:
            raise BadRecord(index, f"{record['type']} record: {exc}") from None

    def check(self, index: int, record: Any) -> Any:
        """The record's type, once it is known to be well formed and in its place; else BadRecord.

        Give a version 3 record through `as_row` first."""
        self.last = index
        if not isinstance(record, dict):
            raise BadRecord(index, f"expected a JSON object, got {type(record).__name__}")
        kind: Any = record.get("type")
        self._check_place(index, kind)
        check_fields(index, kind, record, wire=self.version == 3)
        getattr(self, "_" + kind)(index, record)
        if kind in RECORD_KINDS:
            self.counts[kind] += 1
        return kind

    def _check_place(self, index: int, kind: Any) -> None:
        if self.ended is not None:
            raise BadRecord(index, "a record after the end record", self.ended, "the end record is at")
        if self.version is None and kind != FORMAT:
            raise BadRecord(index, f'expected the header {{"type": "reasonlog", "version": {VERSION}}} first,'
                                   f" got a record of type {_brief(kind)}")
        if not isinstance(kind, str) or kind not in FIELDS:
            raise BadRecord(index, f"unknown record type {_brief(kind)}; expected one of {', '.join(sorted(FIELDS))}")

    def finish(self) -> list[str]:
        """Raise BadRecord when the file was cut short or left a content unused; else any warnings."""
        if self.last == 0:
            raise BadRecord(1, "empty file: a reasonlog export starts with its header line")
        if self.version in COUNTED and self.ended is None:
            raise BadRecord(self.last, "the export is incomplete: it ends here without its end record"
                                       " (was the file cut short?)")
        for digest, index in self.unused.items():
            raise BadRecord(index, f"content {digest} is used by no record")
        if self.version == 1:
            return ["this is a version-1 export, which does not count its own records: reasonlog cannot tell"
                    " whether it was cut short at a line boundary. Export it again to get a checked copy."]
        return []

    def _once(self, index: int, key: tuple, what: str) -> None:
        if key in self.seen:
            raise BadRecord(index, f"{what} again", self.seen[key])
        self.seen[key] = index

    def _in_session(self, index: int, record: dict) -> None:
        sid = record["session_id"]
        if ("session", sid) not in self.seen:
            raise BadRecord(index, f"{record['type']} record: no session record for {_brief(sid)} before it")

    def _use(self, index: int, digests: list[str]) -> None:
        for digest in digests:
            if ("content", digest) not in self.seen:
                raise BadRecord(index, f"the record refers to content {digest}, which no earlier"
                                       " content record holds")
            self.unused.pop(digest, None)

    def _reasonlog(self, index: int, record: dict) -> None:
        version = record["version"]
        if self.version is not None:
            raise BadRecord(index, "a second header", 1)
        if version not in (1, *COUNTED):
            newer = "; upgrade reasonlog" if version > VERSION else ""
            raise BadRecord(index, f"export version {version}: this reasonlog reads versions 1 to {VERSION}{newer}")
        self.version = version

    def _session(self, index: int, record: dict) -> None:
        self._once(index, ("session", record["id"]), f"session {_brief(record['id'])}")

    def _exchange(self, index: int, record: dict) -> None:
        self._in_session(index, record)
        self._once(index, ("exchange", record["id"]), f"exchange {_brief(record['id'])}")
        self._once(index, ("exchange", record["session_id"], record["idx"]), f"exchange index {record['idx']}")

    def _call(self, index: int, record: dict) -> None:
        self._in_session(index, record)
        self._once(index, ("call", record["id"]), f"call {_brief(record['id'])}")
        self._once(index, ("call", record["session_id"], record["idx"]), f"call index {record['idx']}")
        refs = [i for i in orjson.loads(record["context_json"]) if isinstance(i, str)]
        refs += orjson.loads(record["tools_json"]) if record.get("tools_json") else []
        self._use(index, refs + [record[k] for k in ("system_id", "response_id") if record.get(k)])
        if (record.get("raw") is None) != (record.get("raw_format") is None):
            raise BadRecord(index, "call record: fields 'raw' and 'raw_format' must both be null or both be set")
        if record.get("raw_encoding") is not None and not _base64(record.get("raw")):
            raise BadRecord(index, "call record: field 'raw': expected base64 text, as 'raw_encoding' says")

    def _message(self, index: int, record: dict) -> None:
        self._in_session(index, record)
        self._once(index, ("message", record["session_id"], record["idx"]), f"message index {record['idx']}")
        self._use(index, [record["content"]])

    def _tool_result(self, index: int, record: dict) -> None:
        self._in_session(index, record)
        self._once(index, ("tool_result", record["id"]), f"tool result {_brief(record['id'])}")

    def _outcome(self, index: int, record: dict) -> None:
        self._in_session(index, record)
        self._once(index, ("outcome", record["id"]), f"outcome {_brief(record['id'])}")

    def _content(self, index: int, record: dict) -> None:
        self._once(index, ("content", record["hash"]), f"content {record['hash']}")
        try:
            digest = content_hash(canonical(record["value"])).hex()
        except (TypeError, ValueError) as exc:  # orjson refuses what JSON does not have (integers past 64 bits)
            raise BadRecord(index, f"content record: field 'value' cannot be stored ({exc})") from None
        if digest != record["hash"]:
            raise BadRecord(index, f"content record: its value does not hash to {record['hash']}")
        self.unused[record["hash"]] = index

    def _counters(self, index: int, record: dict) -> None:
        self._once(index, ("counters",), "counters record")

    def _end(self, index: int, record: dict) -> None:
        if self.version not in COUNTED:
            raise BadRecord(index, f"an end record in a version {self.version} export, which has none"
                                   " (was its header changed?)")
        self.ended = index
        for kind in sorted(set(record["counts"]) | set(self.counts)):
            said, found = record["counts"].get(kind, 0), self.counts.get(kind, 0)
            if said != found:
                raise BadRecord(index, f"the export is incomplete or altered: its end record counts {said} {kind}"
                                       f" record(s), but {found} came before it")
        if record["records"] != index - 1:
            raise BadRecord(index, f"the export is incomplete or altered: its end record counts"
                                   f" {record['records']} records, but {index - 1} came before it")
