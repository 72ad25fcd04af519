"""What an export must be before any of it is written: every record's fields and types, no record
twice, references only to what came before, and (versions 2 to 4) an end record whose counts match.

Needs no database, so a file can be checked before a store is even opened. Every error is a
`BadRecord` that knows which record (and, for duplicates, which earlier record) is at fault.
"""
from __future__ import annotations

import base64
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from ..wire import EXPORT_VERSION, PARSED, RECORDS, WireError, row_of
from ..wire.codec import canonical, content_hash
from ..wire.rules import RECORD, checks_of
from .terms import Invalid

FORMAT = "reasonlog"
VERSION = EXPORT_VERSION  # 2: ends with an `end` record counting its records; 3: parsed JSON fields; 4: annotations
COUNTED = (2, 3, 4)  # versions that end with an `end` record
PARSED_FIELDS = (3, 4)  # versions whose JSON fields are parsed values
END = "end"
RECORD_KINDS = ("session", "exchange", "call", "message", "tool_result", "outcome", "content", "counters",
                "annotation")


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
# The fields of every record and their types are the shapes of `wire.RECORDS`; a version 3 record is checked
# in its row form (`wire.row_of`), where a parsed field is JSON text under its row name (`labels_json`).


@dataclass(frozen=True, slots=True)
class _Field:
    column: str            # its name in the row form
    test: Callable[[Any], bool]
    expected: str          # as the row form says it
    need: str              # "!" required and not null, "=" not null when present, "" may be null or absent
    name: str              # its name in a version 3 record
    expected_parsed: str   # as a version 3 record says it


def _compile(kind: str, shape: type) -> tuple[_Field, ...]:
    columns = PARSED.get(kind, {})
    out = []
    for check in checks_of(shape, RECORD, skip=("type",)):
        need = "" if check.nullable else "=" if check.defaulted or not check.required else "!"
        column = columns.get(check.name)
        if column is None:
            out.append(_Field(check.name, check.test, check.expected, need, check.name, check.expected))
            continue
        parsed = "a JSON value" if check.expected == RECORD.anything else check.expected
        row = "JSON text" if check.expected == RECORD.anything else f"JSON text of {check.expected}"
        out.append(_Field(column, _json_text(check.test, check.nullable), row, need, check.name, parsed))
    return tuple(out)


def _json_text(test: Callable[[Any], bool], nullable: bool) -> Callable[[Any], bool]:
    def check(v: Any) -> bool:
        if not isinstance(v, str):
            return False
        try:
            parsed = orjson.loads(v)
        except orjson.JSONDecodeError:
            return False
        return nullable if parsed is None else test(parsed)
    return check


_COMPILED = {kind: _compile(kind, shape) for kind, shape in RECORDS.items()}  # checked per record: keep it cheap
FIELDS = {kind: {f.column for f in fields} for kind, fields in _COMPILED.items()}


def _base64(text: Any) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (TypeError, ValueError):
        return False
    return True


def check_fields(index: int, kind: str, record: dict, wire: bool = False) -> None:
    """Every field known, present when required, and of its type. `wire`: the record came in version 3, so
    errors name its fields as the file does (`labels`, not the row's `labels_json`)."""
    if len(record) - 1 > len(FIELDS[kind]) or not record.keys() - {"type"} <= FIELDS[kind]:
        unknown = sorted(set(record) - FIELDS[kind] - {"type"})
        raise BadRecord(index, f"{kind} record: unknown field(s) {', '.join(map(repr, unknown))}")
    for field in _COMPILED[kind]:
        value = record.get(field.column)
        if value is None:
            if field.need == "!" or (field.need == "=" and field.column in record):
                shown, what = _shown(field, wire)
                raise BadRecord(index, f"{kind} record: field {shown!r}: expected {what},"
                                       f" got {'nothing' if field.column not in record else 'null'}")
        elif not field.test(value):
            shown, what = _shown(field, wire)
            what += " or null" if field.need == "" else ""
            got = orjson.loads(value) if shown != field.column else value
            raise BadRecord(index, f"{kind} record: field {shown!r}: expected {what},"
                                   f" got {type(got).__name__} {_brief(got)}")


def _shown(field: _Field, wire: bool) -> tuple[str, str]:
    """The field's name and expected type as the file says them."""
    return (field.name, field.expected_parsed) if wire else (field.column, field.expected)


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
        if self.version not in PARSED_FIELDS or not isinstance(record, dict) or not isinstance(record.get("type"), str):
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
        check_fields(index, kind, record, wire=self.version in PARSED_FIELDS)
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

    def _annotation(self, index: int, record: dict) -> None:
        if self.version not in (4,):
            raise BadRecord(index, f"an annotation record in a version {self.version} export, which has none"
                                   " (was its header changed?)")
        self._in_session(index, record)
        self._once(index, ("annotation", record["id"]), f"annotation {_brief(record['id'])}")
        number = record.get("number")
        if (record["kind"] == "note") == isinstance(record.get("name"), str) or (
                number is not None and (record["kind"] != "score" or not math.isfinite(number))):
            raise BadRecord(index, "annotation record: a score has a name and a finite number or none; a label a"
                                   " name; a note neither a name nor a number")

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
