"""OTLP as SDKs send it by default: compressed (gzip, deflate) spans, and message content on log records.

The real OpenTelemetry SDK and its OTLP/HTTP exporters talk to a real server on 127.0.0.1. The log records are
shaped as OpenTelemetry's own openai-v2 instrumentation emits them (`event_name` gen_ai.user.message /
gen_ai.choice, the content in the body, inside the call's span); that instrumentation itself (2.4b0) does not
import with the only opentelemetry-util-genai the package index offers (1.3b0 lacks the module it imports)."""
from __future__ import annotations

import contextlib
import gzip

import orjson
import pytest
from fastapi.testclient import TestClient
from opentelemetry._logs import LogRecord
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from test_ingest import Served, free_port
from test_otlp import A1, Q1, genai_attributes

from reasonlog.server.app import create_app
from reasonlog.store import SessionFilter, open_store

ALL = SessionFilter(limit=None)


@pytest.fixture
def served(db, tmp_path, monkeypatch):
    """A server on the test database with a write key: the database, the key and the server's URL."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    with contextlib.closing(open_store(db)) as store:
        key = store.create_api_key("write", "otel")["secret"]
    port = free_port()
    with Served(db, port):
        yield db, key, f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("compression", [Compression.Gzip, Compression.Deflate])
def test_compressed_spans_from_the_sdks_exporter_are_stored(served, compression):
    db, key, base = served
    provider = TracerProvider(resource=Resource.create({"service.name": "trader-agent"}))
    exporter = OTLPSpanExporter(endpoint=f"{base}/v1/traces", headers={"Authorization": f"Bearer {key}"},
                                compression=compression)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("test").start_as_current_span("chat gpt-5", attributes=genai_attributes(Q1, A1, 40, 0)):
        pass
    provider.shutdown()
    with contextlib.closing(open_store(db, read_only=True)) as store:
        (session,) = store.list_sessions(ALL)
        (call,) = store.get_session(session["id"])["calls"]
        assert store.replay_call(call["id"])["messages"] == [{"role": "user", "content": "What is NVDA trading at?"}]


def openai_v2_call(tracer, logger, question: str, answer: str) -> None:
    """One chat call as openai-v2 records it: a span without content, and a log record a message inside it."""
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o-mini",
                  "gen_ai.response.model": "gpt-4o-mini-2024-07-18", "gen_ai.usage.input_tokens": 12,
                  "gen_ai.usage.output_tokens": 5, "gen_ai.response.finish_reasons": ["stop"]}
    with tracer.start_as_current_span("chat gpt-4o-mini", attributes=attributes):
        logger.emit(LogRecord(event_name="gen_ai.system.message", attributes={"gen_ai.system": "openai"},
                              body={"content": "You answer in one word."}))
        logger.emit(LogRecord(event_name="gen_ai.user.message", attributes={"gen_ai.system": "openai"},
                              body={"content": question}))
        logger.emit(LogRecord(event_name="gen_ai.choice", attributes={"gen_ai.system": "openai"},
                              body={"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": answer}}))


def test_messages_sent_as_log_records_join_the_call_of_their_span(served):
    db, key, base = served
    auth = {"Authorization": f"Bearer {key}"}
    tracer_provider = TracerProvider(resource=Resource.create({"service.name": "chatbot"}))
    tracer_provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
        endpoint=f"{base}/v1/traces", headers=auth, compression=Compression.Gzip)))
    logger_provider = LoggerProvider(resource=Resource.create({"service.name": "chatbot"}))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(OTLPLogExporter(
        endpoint=f"{base}/v1/logs", headers=auth, compression=Compression.Gzip)))
    logger = logger_provider.get_logger("opentelemetry.instrumentation.openai_v2")
    openai_v2_call(tracer_provider.get_tracer("openai_v2"), logger, "Capital of France?", "Paris.")
    logger_provider.shutdown()  # the log processor exports first, as the SDK's schedule has it
    tracer_provider.shutdown()
    with contextlib.closing(open_store(db, read_only=True)) as store:
        (session,) = store.list_sessions(ALL)
        (call,) = store.get_session(session["id"])["calls"]
        sent, answered = store.replay_call(call["id"]), store.get_call(call["id"])["response"]
    assert (sent["system"], sent["messages"]) == ("You answer in one word.",
                                                  [{"role": "user", "content": "Capital of France?"}])
    assert answered["content"] == "Paris."


def test_log_records_that_are_not_genai_events_are_counted_in_the_partial_success(db):
    body = {"resourceLogs": [{"scopeLogs": [{"logRecords": [
        {"timeUnixNano": "1", "body": {"stringValue": "a plain log line"}},
        {"timeUnixNano": "2", "eventName": "gen_ai.user.message", "traceId": "0" * 31 + "1",
         "spanId": "0" * 15 + "2", "body": {"kvlistValue": {"values": [
             {"key": "content", "value": {"stringValue": "hi"}}]}}}]}]}]}
    with TestClient(create_app(lambda: open_store(db))) as client:
        answer = client.post("/v1/logs", content=orjson.dumps(body), headers={"Content-Type": "application/json"})
    assert (answer.status_code, answer.json()) == (200, {"partialSuccess": {
        "rejectedLogRecords": "1", "errorMessage": "1 log record(s) are not GenAI events of a span and were left out"}})


def test_a_compressed_body_is_limited_by_what_it_inflates_to(db):
    with TestClient(create_app(lambda: open_store(db), max_body_bytes=1 << 20)) as client:
        limited_by_what_it_inflates_to(client)


def limited_by_what_it_inflates_to(client: TestClient) -> None:
    bomb = gzip.compress(b"\0" * (64 << 20))  # 64 KB that inflates to 64 MB
    answer = client.post("/v1/traces", content=bomb, headers={"Content-Type": "application/x-protobuf",
                                                             "Content-Encoding": "gzip"})
    assert (answer.status_code, answer.json()["detail"]) == (
        413, "body: more than max_bytes 1048576 once inflated from gzip")
    answer = client.post("/v1/traces", content=b"not gzip", headers={"Content-Encoding": "gzip"})
    assert answer.status_code == 400 and answer.json()["detail"].startswith("body: not valid compressed data")
    answer = client.post("/v1/traces", content=b"x", headers={"Content-Encoding": "br"})
    assert answer.status_code == 415
