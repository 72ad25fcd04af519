"""OTLP in (`POST /v1/traces`) and out (`export --format otlp`), with the real OpenTelemetry SDK and exporter."""
from __future__ import annotations

import json

import orjson
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from test_ingest import Served, free_port

import reasonlog
from reasonlog.cli.main import cli
from reasonlog.server.app import create_app
from reasonlog.store import SessionFilter, open_store
from reasonlog.wire.codec import canonical

ALL = SessionFilter(limit=None)
Q1 = [{"role": "user", "parts": [{"type": "text", "content": "What is NVDA trading at?"}]}]
A1 = {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "quote", "arguments": {"s": "NVDA"}}],
      "finish_reason": "tool_call"}
Q2 = [*Q1, {k: v for k, v in A1.items() if k != "finish_reason"},
      {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "189.60"}]}]
A2 = {"role": "assistant", "parts": [{"type": "text", "content": "NVDA is at 189.60."}], "finish_reason": "stop"}


def genai_attributes(inputs, output, input_tokens, cached) -> dict:
    return {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-5",
            "gen_ai.conversation.id": "conv-42", "gen_ai.system_instructions": json.dumps(
                [{"type": "text", "content": "You are a trading assistant."}]),
            "gen_ai.input.messages": json.dumps(inputs), "gen_ai.output.messages": json.dumps([output]),
            "gen_ai.usage.input_tokens": input_tokens, "gen_ai.usage.output_tokens": 12,
            "gen_ai.usage.cache_read.input_tokens": cached, "gen_ai.response.finish_reasons": [output["finish_reason"]]}


@pytest.fixture
def served_db(db, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    key = open_store(db).create_api_key("write", "otel")["secret"]
    port = free_port()
    with Served(db, port):
        yield db, key, f"http://127.0.0.1:{port}"


def export_with_the_sdk(base: str, key: str, spans: list[tuple[str, dict]]) -> None:
    """The real SDK's OTLP/HTTP protobuf exporter, as an instrumented agent sends spans."""
    provider = TracerProvider(resource=Resource.create({"service.name": "trader-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
        endpoint=f"{base}/v1/traces", headers={"Authorization": f"Bearer {key}"})))
    tracer = provider.get_tracer("test")
    for name, attributes in spans:
        with tracer.start_as_current_span(name, attributes=attributes):
            pass
    provider.shutdown()


def test_genai_spans_from_the_sdk_become_one_session_with_its_context_stored_once(served_db):
    db, key, base = served_db
    export_with_the_sdk(base, key, [("chat gpt-5", genai_attributes(Q1, A1, 120, 0)),
                                    ("chat gpt-5", genai_attributes(Q2, A2, 180, 100)),
                                    ("http GET /quote", {"http.method": "GET"})])
    store = open_store(db, read_only=True)
    (session,) = store.list_sessions(ALL)
    assert (session["external_id"], session["agent"], session["model"], session["call_count"]) == \
        ("conv-42", "trader-agent", "gpt-5", 2)
    assert (session["input_tokens"], session["cache_read_tokens"], session["output_tokens"]) == (200, 100, 24)
    got = store.get_session(session["id"])
    assert [m["role"] for m in got["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert got["messages"][2]["content"]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "189.60"}]  # a string stays a string
    second = store.get_call(got["calls"][1]["id"])
    assert second["request"]["system"] == "You are a trading assistant."
    assert second["request"]["messages"][1]["content"] == [
        {"type": "tool_use", "id": "c1", "name": "quote", "input": {"s": "NVDA"}}]
    assert second["response"] == {"role": "assistant", "content": [{"type": "text", "text": "NVDA is at 189.60."}]}
    assert second["stop_reason"] == "stop"
    assert store.status()["counts"]["contents"] == 5  # system, question, tool call, tool result, answer: once each


def test_a_span_sent_twice_is_one_call(client, db):
    body = json_request([{"name": "chat", "attributes": {"gen_ai.request.model": "gpt-5", "gen_ai.conversation.id": "c",
                                                         "gen_ai.usage.input_tokens": 9}}])
    for _ in range(2):  # the same request again, as an exporter retrying after a lost answer
        assert post(client, body).status_code == 200
    store = open_store(db, read_only=True)
    assert [(s["call_count"], s["input_tokens"]) for s in store.list_sessions(ALL)] == [(1, 9)]
    assert store.status()["rejected_records"] == 0


def _otlp_lines(db) -> list[bytes]:
    result = CliRunner().invoke(cli, ["--db", str(db), "export", "--format", "otlp"])
    assert result.exit_code == 0, result.output
    return [line for line in result.stdout_bytes.split(b"\n") if line]


def json_request(spans: list[dict]) -> bytes:
    def attrs(values: dict) -> list:
        return [{"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": str(v)}}
                for k, v in values.items()]
    return orjson.dumps({"resourceSpans": [{"resource": {"attributes": attrs({"service.name": "svc"})},
                                            "scopeSpans": [{"spans": [
        {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": f"{n + 1:016x}", "name": s["name"],
         "startTimeUnixNano": str(1_760_000_000_000_000_000 + n * 1_000_000_000),
         "endTimeUnixNano": str(1_760_000_000_500_000_000 + n * 1_000_000_000),
         "attributes": attrs(s.get("attributes", {})),
         "events": [{"name": e, "timeUnixNano": "1760000000000000000", "attributes": attrs(a)}
                    for e, a in s.get("events", [])]} for n, s in enumerate(spans)]}]}]})


@pytest.fixture
def client(db):
    return TestClient(create_app(lambda: open_store(db)))


def post(client, body: bytes, content_type: str = "application/json"):
    return client.post("/v1/traces", content=body, headers={"Content-Type": content_type})


def test_older_per_message_events_and_spans_that_are_not_model_calls(client, db):
    r = post(client, json_request([
        {"name": "chat", "attributes": {"gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o",
                                        "gen_ai.usage.input_tokens": 30, "gen_ai.usage.output_tokens": 4},
         "events": [("gen_ai.system.message", {"content": "Be brief."}),
                    ("gen_ai.user.message", {"content": "Hello?"}),
                    ("gen_ai.choice", {"message": '{"content": "Hi."}', "finish_reason": "stop"})]},
        {"name": "db.query", "attributes": {"db.system": "postgresql"}}]))
    assert (r.status_code, r.json()) == (200, {"partialSuccess": {
        "rejectedSpans": "1", "errorMessage": "1 span(s) are not model calls and were left out"}})
    store = open_store(db, read_only=True)
    (session,) = store.list_sessions(ALL)
    call = store.get_call(store.get_session(session["id"])["calls"][0]["id"])
    assert (call["request"]["system"], call["request"]["messages"], call["response"]["content"]) == \
        ("Be brief.", [{"role": "user", "content": "Hello?"}], "Hi.")
    assert (call["model"], call["provider"], call["input_tokens"], call["output_tokens"]) == ("gpt-4o", "openai", 30, 4)
    assert session["external_id"] == "trace:5b8efff798038103d269b633813fc60c"


def test_openinference_attributes(client, db):
    attributes = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini", "llm.provider": "openai",
                  "session.id": "oi-session", "llm.input_messages.0.message.role": "system",
                  "llm.input_messages.0.message.content": "You count.",
                  "llm.input_messages.1.message.role": "user", "llm.input_messages.1.message.content": "1, 2, ?",
                  "llm.output_messages.0.message.role": "assistant",
                  "llm.output_messages.0.message.content": "3",
                  "llm.token_count.prompt": 50, "llm.token_count.completion": 1,
                  "llm.token_count.prompt_details.cache_read": 20}
    assert post(client, json_request([{"name": "ChatCompletion", "attributes": attributes}])).status_code == 200
    store = open_store(db, read_only=True)
    (session,) = store.list_sessions(ALL)
    assert (session["external_id"], session["input_tokens"], session["cache_read_tokens"]) == ("oi-session", 30, 20)
    call = store.get_call(store.get_session(session["id"])["calls"][0]["id"])
    assert call["request"]["system"] == "You count."
    assert call["request"]["messages"] == [{"role": "user", "content": "1, 2, ?"}]
    assert call["response"] == {"role": "assistant", "content": [{"type": "text", "text": "3"}]}


def test_claude_code_llm_request_spans_count_tokens_as_anthropic_does(client, db):
    attributes = {"session.id": "cc-1", "model": "claude-sonnet-4-5", "input_tokens": 7, "output_tokens": 310,
                  "cache_read_tokens": 41000, "cache_creation_tokens": 1200, "ttft_ms": 850, "stop_reason": "end_turn"}
    r = post(client, json_request([{"name": "claude_code.llm_request", "attributes": attributes}]))
    assert r.status_code == 200
    store = open_store(db, read_only=True)
    (session,) = store.list_sessions(ALL)
    call = store.get_call(store.get_session(session["id"])["calls"][0]["id"])
    assert (call["input_tokens"], call["output_tokens"], call["cache_read_tokens"], call["cache_write_tokens"],
            call["ttft_ms"], call["stop_reason"], call["provider"]) == \
        (7, 310, 41000, 1200, 850.0, "end_turn", "anthropic")


@pytest.mark.parametrize(("body", "content_type", "status", "detail"), [
    (b"\x0a\xff\xff", "application/x-protobuf", 400, "body: not an OTLP/protobuf ExportTraceServiceRequest"),
    (b"{", "application/json", 400, "body: not JSON"),
    (b"{}", "application/json", 400, "body.resourceSpans: missing"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "01"}]}]}]}', "application/json",
     400, "resourceSpans[0].scopeSpans[0].spans[0].traceId: expected hex, got 'zz'"),
    (b"<xml/>", "text/xml", 415, "Content-Type 'text/xml': send application/x-protobuf or application/json"),
])
def test_malformed_requests_are_named_never_a_500(client, body, content_type, status, detail):
    r = post(client, body, content_type)
    assert r.status_code == status
    assert r.json()["detail"].startswith(detail)


def test_export_then_ingest_gives_the_same_sessions_calls_messages_and_tokens(db, tmp_path):
    source = tmp_path / "source.db"
    rec = reasonlog.Recorder(source, writer="sync")
    history = []
    with rec.session(agent="roundtrip", model="claude-sonnet-4-5") as s:
        for i in range(3):
            history.append({"role": "user", "content": f"step {i}"})
            reply = {"role": "assistant", "content": [{"type": "text", "text": f"done {i}"},
                                                      {"type": "tool_use", "id": f"t{i}", "name": "run",
                                                       "input": {"n": i}}]}
            s.call(system="sys", messages=list(history), response=reply, model="claude-sonnet-4-5",
                   usage=reasonlog.Usage(input_tokens=10 + i, output_tokens=5, cache_read_tokens=100 * i,
                                         cache_write_tokens=3), stop_reason="tool_use", latency_ms=250.0)
            history += [reply, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}",
                                                             "content": "ok"}]}]
    rec.close()
    lines = _otlp_lines(source)
    assert len(lines) == 1
    client = TestClient(create_app(lambda: open_store(db)))
    assert post(client, lines[0]).status_code == 200
    before, after = open_store(source, read_only=True), open_store(db, read_only=True)
    (a,), (b,) = before.list_sessions(ALL), after.list_sessions(ALL)
    tokens = ("call_count", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
    assert [b[k] for k in tokens] == [a[k] for k in tokens] == [3, 33, 15, 300, 9]
    sa, sb = before.get_session(a["id"]), after.get_session(b["id"])
    assert [(m["role"], canonical(m["content"])) for m in sb["messages"]] == \
        [(m["role"], canonical(m["content"])) for m in sa["messages"]]
    for ca, cb in zip(sa["calls"], sb["calls"], strict=True):
        assert canonical(after.replay_call(cb["id"])["messages"]) == canonical(before.replay_call(ca["id"])["messages"])
        assert (cb["stop_reason"], cb["latency_ms"]) == (ca["stop_reason"], ca["latency_ms"])


@pytest.mark.slow
def test_spans_from_openinferences_own_openai_instrumentation(served_db, server):
    """The `openinference-instrumentation-openai` package tracing the real OpenAI SDK against a local server."""
    import openai
    from openinference.instrumentation import using_session
    from openinference.instrumentation.openai import OpenAIInstrumentor
    from sdk_server import load_json

    db, key, base = served_db
    payload = load_json("openai-chat", "openai-text.json")
    server.reply_json(payload)
    provider = TracerProvider(resource=Resource.create({"service.name": "oi-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
        endpoint=f"{base}/v1/traces", headers={"Authorization": f"Bearer {key}"})))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="test-key", max_retries=0)
        with using_session("oi-real"):
            client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Write a haiku"}])
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    store = open_store(db, read_only=True)
    (session,) = store.list_sessions(ALL)
    usage = payload["usage"]
    assert (session["external_id"], session["agent"], session["call_count"]) == ("oi-real", "oi-agent", 1)
    assert (session["input_tokens"], session["output_tokens"]) == (usage["prompt_tokens"], usage["completion_tokens"])
    call = store.get_call(store.get_session(session["id"])["calls"][0]["id"])
    assert call["request"]["messages"] == [{"role": "user", "content": "Write a haiku"}]
    assert call["response"]["content"] == [{"type": "text", "text": payload["choices"][0]["message"]["content"]}]
