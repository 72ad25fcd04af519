"""A password in a URL's userinfo is masked, of any scheme, on every path (issue 30 item 5).

`postgresql://alice:<password>@host/db` keeps its scheme, user, host, port and path readable; the password becomes
`[REDACTED:url_password:<digest>]`. Named cases beside a hypothesis property over generated URLs; what is not a
password in a URL (a user alone, a port, an e-mail address, base64, ids, hashes) is left as it was.
"""
from __future__ import annotations

import base64
import hashlib
import re
from urllib.parse import urlsplit

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reasonlog
from reasonlog.redact import Redactor
from reasonlog.store import SessionFilter, open_store

MASK = r"\[REDACTED:url_password:[0-9a-f]{12}\]"


def masked_as(template: str, text: str) -> bool:
    """Whether `text` is `template` with its `{}` replaced by one password mask."""
    before, after = template.split("{}")
    return re.fullmatch(re.escape(before) + MASK + re.escape(after), text) is not None


NAMED = [  # (text, the same text as masked, with {} where the password was)
    ("postgresql://alice:s3cr3t-Pa55@db.example.com:5432/app", "postgresql://alice:{}@db.example.com:5432/app"),
    ("DATABASE_URL=postgres://app_user:Xy7%40z%3A9@10.0.0.5/prod?sslmode=require",
     "DATABASE_URL=postgres://app_user:{}@10.0.0.5/prod?sslmode=require"),
    ("redis://:hunter2hunter2@cache:6379/0", "redis://:{}@cache:6379/0"),
    ("mysql://root:p@ss@localhost/db", "mysql://root:{}@localhost/db"),  # a raw @ in it: up to the last one
    ("amqp://guest:guest@rabbit", "amqp://guest:{}@rabbit"),
    ("mongodb+srv://bob:pw:with:colons@cluster0.mongodb.net/test", "mongodb+srv://bob:{}@cluster0.mongodb.net/test"),
    ("clone https://oauth2:glpat1234abcd@gitlab.com/g/r.git now", "clone https://oauth2:{}@gitlab.com/g/r.git now"),
    ("ftp://u:p@h", "ftp://u:{}@h"),
    ('{"dsn": "postgresql://alice:pw1234@h/db"}', '{"dsn": "postgresql://alice:{}@h/db"}'),
    ("line one\npostgresql://alice:pw1234@h/db\tnext", "line one\npostgresql://alice:{}@h/db\tnext"),
]
UNCHANGED = [
    "https://user@example.com/path", "ssh://git@github.com:org/repo.git", "http://localhost:8080/a@b",
    "write to me@example.com: http://example.com", "https://example.com/?next=a:b@c", "x://a:@host",
    "http://host:8080#frag:x@y", "sha256:" + hashlib.sha256(b"x").hexdigest(), "01JD6Q4KZ8R2M0X9ABCDEF@1",
    "no url: a:b@c", "http://a.com and mail a:b@c",
]


@pytest.mark.parametrize(("text", "expected"), NAMED)
def test_a_password_in_a_url_is_masked_and_the_rest_stays_readable(text, expected):
    r = Redactor()
    masked = r.text(text)
    assert masked_as(expected, masked), masked
    assert r.masked == 1 and r.text(masked) is masked and r.masked == 1  # idempotent: masks to itself


@pytest.mark.parametrize("text", UNCHANGED)
def test_what_is_not_a_password_in_a_url_is_left_as_it_was(text):
    r = Redactor()
    assert r.text(text) is text and r.masked == 0


def test_urls_in_json_bytes_and_raw_payloads_are_masked_string_by_string():
    r = Redactor()
    data = orjson.dumps({"dsn": "postgresql://alice:pw1234@h/db", "url://a:b@c": ["x"]})
    out = orjson.loads(r.json(data, orjson.dumps))
    assert masked_as("postgresql://alice:{}@h/db", out["dsn"]) and r.masked == 2
    assert [k for k in out if masked_as("url://a:{}@c", k)]
    raw = b'{"error": "could not connect to postgresql://alice:pw1234@h/db\\n"}'
    assert b"pw1234" not in r.bytes(raw) and r.masked == 3


def test_two_passwords_mask_to_two_texts_and_one_password_to_one():
    r = Redactor()
    a, b = r.text("pg://u:first-pass@h"), r.text("pg://u:second-pass@h")
    assert a != b and a == r.text("pg://u:first-pass@h")


# ------------------------------------------------------------------ generated URLs

UNRESERVED = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
SUB_DELIMS = "!$&'()*+,;="
schemes = st.one_of(st.sampled_from(["postgresql", "postgres", "mysql", "redis", "rediss", "amqp", "mongodb+srv",
                                     "https", "http", "ftp", "sftp", "ws", "s3", "clickhouse"]),
                    st.from_regex(r"[a-z][a-z0-9+.\-]{0,9}", fullmatch=True))
pct = st.integers(0, 255).map(lambda n: f"%{n:02X}")
users = st.lists(st.one_of(st.sampled_from(UNRESERVED + SUB_DELIMS), pct), max_size=12).map("".join)
passwords = st.lists(st.one_of(st.sampled_from(UNRESERVED + SUB_DELIMS + ":"), pct), min_size=1,
                     max_size=40).map("".join)
hosts = st.one_of(st.from_regex(r"[a-z0-9]([a-z0-9\-]{0,12}[a-z0-9])?(\.[a-z]{2,6}){0,2}", fullmatch=True),
                  st.from_regex(r"(\d{1,3}\.){3}\d{1,3}", fullmatch=True))
ports = st.one_of(st.just(""), st.integers(1, 65535).map(lambda p: f":{p}"))
paths = st.one_of(st.just(""), st.from_regex(r"(/[A-Za-z0-9._~%\-]{0,10}){1,3}(\?[a-z]{1,5}=[a-z0-9@:]{0,8})?",
                                             fullmatch=True))


@settings(max_examples=400, deadline=None)
@given(schemes, users, passwords, hosts, ports, paths, st.sampled_from(["{}", "url {} end", '"{}"', "dsn={}\n"]))
@pytest.mark.slow
def test_every_generated_url_keeps_all_but_its_password(scheme, user, password, host, port, path, place):
    r = Redactor()
    url = f"{scheme}://{user}:{password}@{host}{port}{path}"
    masked = r.text(place.format(url))
    assert masked_as(place.format(f"{scheme}://{user}:{{}}@{host}{port}{path}"), masked), (url, masked)
    assert r.masked == 1 and r.text(masked) is masked
    shown = re.sub(MASK, "x", re.search(rf"{re.escape(scheme)}://\S*?(?=\"| end|\n|$)", masked).group())
    parts = urlsplit(shown)  # still a URL a reader (and a URL parser) takes apart: user, host, port, path
    assert (parts.username, parts.password, parts.hostname) == (user, "x", host)
    assert (parts.port, parts.path) == (int(port[1:]) if port else None, path.split("?")[0])


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=600), st.sampled_from([base64.b64encode, base64.urlsafe_b64encode]))
def test_base64_ids_and_hashes_are_never_altered(data, encode):
    r = Redactor()
    for text in (encode(data).decode(), data.hex(), hashlib.sha256(data).hexdigest(), f"id-{data.hex()[:26]}"):
        assert r.text(text) is text
    assert r.masked == 0


def test_a_recorded_url_password_reaches_no_table(tmp_path):
    db = tmp_path / "t.db"
    rec = reasonlog.Recorder(db, writer="sync", strict=True)
    secret = "Zq9-url-pass-Zq9"
    with rec.session(agent="a", labels={"db": f"postgresql://alice:{secret}@db.internal/app"}) as s:
        s.call(messages=[{"role": "user", "content": f"connect to mysql://root:{secret}@10.0.0.5/x"}],
               response="ok", raw={"url": f"redis://:{secret}@cache:6379"}, error=RuntimeError(f"amqp://g:{secret}@r"))
        s.tool_result("t1", f"ftp://u:{secret}@h/f", input={"dsn": f"pg://u:{secret}@h"})
        s.outcome("note", {"text": f"https://oauth2:{secret}@gitlab.com/r.git"})
    rec.close()
    blob = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    store = open_store(db)
    (session,) = store.list_sessions(SessionFilter(limit=None))
    status = store.status()
    store.close()
    assert secret.encode() not in blob and status["redacted_secrets"] == 7
    assert masked_as("postgresql://alice:{}@db.internal/app", session["labels"]["db"])


def test_a_url_password_sent_through_the_recording_proxy_reaches_no_table(tmp_path):
    """The proxy's path: an SDK client sends a message holding a connection URL; the upstream gets it as sent."""
    import anthropic
    from proxy_upstream import Upstream
    from proxying import ANTHROPIC_KEY, database_bytes, recording_proxy

    secret = "Zq9-proxy-pass-Zq9"
    db = tmp_path / "p.db"
    with Upstream() as up, recording_proxy(db, up.url) as proxied:
        client = anthropic.Anthropic(base_url=proxied.url, api_key=ANTHROPIC_KEY, max_retries=0)
        client.messages.create(model="claude-opus-4-5", max_tokens=64, messages=[
            {"role": "user", "content": f"why does postgresql://alice:{secret}@db.internal/app refuse me?"}])
    assert secret.encode() in up.received[0].body  # forwarded unchanged: masking is for what is kept
    store = open_store(db)
    (session,) = store.list_sessions(SessionFilter(limit=None))
    (call,) = store.get_session(session["id"])["calls"]
    text = store.replay_call(call["id"])["messages"][0]["content"]
    store.close()
    assert masked_as("why does postgresql://alice:{}@db.internal/app refuse me?", text)
    assert secret.encode() not in database_bytes(db)


def test_a_url_password_in_an_instrumented_sdk_call_reaches_no_table(server, tmp_path):
    """The SDK adapters' path: `instrument_anthropic` records the request and the raw response it was given."""
    import anthropic
    from sdk_server import load_json

    from reasonlog.capture.anthropic import instrument_anthropic

    secret = "Zq9-sdk-pass-Zq9"
    payload = load_json("anthropic-messages", "anthropic-text.json")
    payload["content"][0]["text"] = f"use redis://:{secret}@cache:6379/0"
    server.reply_json(payload)
    db = tmp_path / "sdk.db"
    rec = reasonlog.Recorder(db, writer="sync")
    client = anthropic.Anthropic(base_url=server.url, api_key="test-key", max_retries=0)
    instrument_anthropic(client, rec)
    with rec.session(agent="sdk") as s:
        client.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=[
            {"role": "user", "content": f"connect with mysql://root:{secret}@10.0.0.5/app"}])
    rec.close()
    store = open_store(db)
    (call,) = store.get_session(s.id)["calls"]
    got = store.get_call(call["id"])
    store.close()
    assert masked_as("connect with mysql://root:{}@10.0.0.5/app", got["request"]["messages"][0]["content"])
    assert masked_as("use redis://:{}@cache:6379/0", got["response"]["content"][0]["text"])
    assert secret.encode() not in b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
