"""The wire contract is used, not declared: the event checks, the line codec, the export checker and the API's
response models all come from `reasonlog.wire`, and what each writes matches the shapes there."""
from __future__ import annotations

import dataclasses
import re
import typing

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reasonlog
from reasonlog.demo import run_demo
from reasonlog.io import jsonl
from reasonlog.model import EVENT_TYPES, check_event, dump_event, load_event
from reasonlog.store.transfer_checks import BadRecord, check_fields
from reasonlog.wire import EVENTS, PARSED, RECORDS, decode_line, encode_line, row_of
from reasonlog.wire.rules import EVENT, RECORD, RecordError, checks_of, first_wrong


def _keys(shape: type) -> set[str]:
    return set(typing.get_type_hints(shape)) - {"event", "type"}


@pytest.mark.parametrize("kind", sorted(EVENT_TYPES))
def test_each_event_dataclass_has_the_fields_of_its_shape(kind):
    assert {f.name for f in dataclasses.fields(EVENT_TYPES[kind])} == _keys(EVENTS[kind])


class _Opaque:
    """A value no field may hold (it has no JSON form)."""


def _event_with(kind: str, name: str, value):
    cls = EVENT_TYPES[kind]
    good = {"session_id": "s", "started_at": "2026-01-01T00:00:00Z", "ended_at": "2026-01-01T00:00:00Z",
            "at": "2026-01-01T00:00:00Z", "exchange_id": "e", "call_id": "c", "tool_result_id": "t",
            "outcome_id": "o", "outcome_kind": "k", "record_id": "r", "phase": "p", "compact": {},
            "request": {}, "response": None, "tool_use_id": None, "content": None, "title": "t",
            "path": "p", "format": "f", "size": 0, "mtime_ns": 0, "consumed": 0, "tail_hash": None, "state": None,
            "sessions": [], "skipped": 0, "imported_at": "2026-01-01T00:00:00Z"}
    required = {f.name: good[f.name] for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    return cls(**{**required, name: value})


_CHECKED = [(kind, check.name) for kind in sorted(EVENT_TYPES)
            for check in checks_of(EVENTS[kind], EVENT, skip=("event",)) if not check.test(_Opaque())]


@pytest.mark.parametrize(("kind", "name"), _CHECKED)
def test_every_typed_field_of_every_event_is_checked_by_name(kind, name):
    """Not a hand-kept table: every field whose shape refuses a stray object is refused, naming the field."""
    with pytest.raises(RecordError, match=rf"^{name}: expected "):
        check_event(_event_with(kind, name, _Opaque()))


_FIELD_VALUES = st.none() | st.sampled_from(["", "s", "2026-01-01T00:00:00Z", "2026-01-01", True, 0, -1, 2.5,
                                              float("nan"), {}, {"a": 1}, [], ["t", ""], _Opaque()])


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(EVENT_TYPES)), st.data())
def test_an_event_is_refused_exactly_when_the_first_wrong_field_says_so(kind, data):
    """`check_event` reads an event's fields in one go (the store checks every event it writes): it refuses what
    `first_wrong`, asking field by field in the shape's order, finds wrong, naming that field, and nothing else.
    (A call's usage and response, which hold objects in process, stay None.)"""
    checks = checks_of(EVENTS[kind], EVENT, skip=("event",))
    values = {check.name: None if check.name in ("usage", "response") else data.draw(_FIELD_VALUES, label=check.name)
              for check in checks}
    event = _event_with(kind, checks[0].name, values[checks[0].name])
    for name, value in values.items():
        setattr(event, name, value)
    wrong = first_wrong(checks, values.get, EVENT)
    if wrong is None:
        check_event(event)
    else:
        with pytest.raises(RecordError, match=rf"^{wrong[0]}: expected {re.escape(wrong[1])}, got "):
            check_event(event)


def test_fields_that_take_any_json_are_the_ones_the_shapes_say():
    loose = {(kind, check.name) for kind in EVENT_TYPES for check in checks_of(EVENTS[kind], EVENT, skip=("event",))
             } - set(_CHECKED)
    assert loose == {("call", "raw"), ("call", "started_at"), ("exchange_ended", "result"),
                     ("exchange_started", "input"), ("outcome", "payload"), ("tool_result", "content"),
                     ("tool_result", "input")}


_json = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
    | st.integers(min_value=-(2 ** 80), max_value=2 ** 80) | st.binary(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(_json)
def test_the_line_codec_gives_back_every_value_as_it_was(value):
    """Spill files and `POST /v1/ingest` carry bytes and integers past 64 bits, which JSON alone cannot."""
    codec_gives_back(value)


@settings(max_examples=40, deadline=None)
@given(_json)
def test_the_line_codec_gives_back_a_few_values_as_they_were(value):
    """The same property over 40 values, for the quick run (`-m "not slow"`)."""
    codec_gives_back(value)


def codec_gives_back(value) -> None:
    line = encode_line({"v": value})
    assert b"\n" not in line
    assert decode_line(line) == {"v": value}


def test_spill_and_ingest_lines_are_the_wire_encoding_of_the_event():
    event = _event_with("call", "raw", b"\x00\xff raw bytes")
    line = dump_event(event)
    assert line == encode_line(event.to_dict())
    assert load_event(line) == event


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> list[dict]:
    db = tmp_path_factory.mktemp("wire") / "demo.db"
    run_demo(db, exchanges=2)
    store = reasonlog.open_store(db)
    try:
        session = store.list_sessions(reasonlog.SessionFilter(limit=1))[0]["id"]
        store.annotate(session, note="n", scores={"task_done": 0.5}, by="ana")  # every record type, once at least
        return [orjson.loads(line) for line in jsonl.dump_lines(store)]
    finally:
        store.close()


def test_every_exported_record_has_exactly_the_fields_of_its_shape(exported):
    kinds = {r["type"] for r in exported}
    assert kinds == set(RECORDS)
    for record in exported:
        shape = RECORDS[record["type"]]
        required = {check.name for check in checks_of(shape, RECORD, skip=("type",)) if check.required}
        assert required <= record.keys() - {"type"} <= _keys(shape), record["type"]


def test_the_export_checker_refuses_what_the_shape_refuses(exported):
    call = next(r for r in exported if r["type"] == "call")
    row = {**row_of("call", call), PARSED["call"]["params"]: orjson.dumps([1]).decode()}
    with pytest.raises(BadRecord, match="field 'params': expected an object, got list"):
        check_fields(7, "call", row, wire=True)


def test_the_api_publishes_every_field_of_its_response_shapes(tmp_path):
    pytest.importorskip("fastapi")
    from reasonlog.server.app import create_app
    from reasonlog.wire import CallDetailJSON, SessionPageJSON, SessionsPageJSON

    schemas = create_app(lambda: reasonlog.open_store(tmp_path / "db")).openapi()["components"]["schemas"]
    for shape in (SessionsPageJSON, SessionPageJSON, CallDetailJSON):
        assert set(schemas[shape.__name__]["properties"]) == set(typing.get_type_hints(shape)), shape.__name__


# A request as the provider takes it is the provider's own shape; every other answer has a described schema.
_PROVIDER_SHAPED = {("get", "/v1/calls/{call_id}/request")}


def test_every_json_answer_of_the_api_has_a_described_schema(tmp_path):
    pytest.importorskip("fastapi")
    from reasonlog.server.app import create_app

    spec = create_app(lambda: reasonlog.open_store(tmp_path / "db")).openapi()
    loose = []
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            ok = operation["responses"].get("200") or operation["responses"].get("201")
            schema = ((ok or {}).get("content") or {}).get("application/json", {}).get("schema")
            if schema is None or (method, path) in _PROVIDER_SHAPED:
                continue
            if "$ref" not in schema and "properties" not in schema:
                loose.append(f"{method.upper()} {path}")
    assert loose == []


def test_a_call_and_a_session_declare_their_shared_fields_once():
    """The export record and the API answer of a call extend one base (issue 33): a field added to a call is added
    to both; the counters of a stored call or session are the usage's names, which every reader takes from TOKENS."""
    from reasonlog.accounting import TOKENS as ACCOUNTED
    from reasonlog.wire import CallJSON, CallRecord, SessionJSON, SessionRecord
    from reasonlog.wire.api import SessionTotalsJSON
    from reasonlog.wire.shapes import TOKENS, CallFields, CountedJSON, SessionFields, UsageJSON

    assert TOKENS == ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
                      "cache_write_1h_tokens", "reasoning_tokens") == ACCOUNTED
    assert tuple(CountedJSON.__annotations__) == tuple(UsageJSON.__annotations__) == TOKENS
    shared = set(typing.get_type_hints(CallFields))
    assert len(shared) == 25
    assert shared <= set(typing.get_type_hints(CallJSON)) & set(typing.get_type_hints(CallRecord))
    assert set(typing.get_type_hints(SessionFields)) <= set(typing.get_type_hints(SessionJSON)) \
        & set(typing.get_type_hints(SessionRecord))
    assert CallJSON.__orig_bases__ == CallRecord.__orig_bases__ == (CallFields,)  # extended, not copied
    assert SessionJSON.__orig_bases__ == (SessionFields, SessionTotalsJSON)
    assert SessionTotalsJSON.__orig_bases__ == CallFields.__orig_bases__ == (CountedJSON,)


def test_no_route_casts_what_the_store_read():
    """The store's readers return the wire's TypedDicts built with keywords (store/answers.py), so mypy checks every
    key from the row to the answer; a `cast` in the server would take that check away again (issue 33). The mirror's
    reader has the store reader's signatures (`list_sessions` gives `SessionJSON`), so it needs none either."""
    import ast
    from pathlib import Path

    server = Path(reasonlog.__file__).parent / "server"
    casts = sorted((str(p.relative_to(server)), ast.unparse(node.args[0])) for p in server.rglob("*.py")
                   for node in ast.walk(ast.parse(p.read_text()))
                   if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "cast")
    assert casts == []
