"""Secrets never leak: not through identifiers, not after a JSON escape, and base64 data is never altered.

Issue 7, defect 8. Each secret below is in a format the default patterns know; the tests look for
it, whole or in part, in the database files, the export, `show` and the spill files.
"""
from __future__ import annotations

import base64
import random
import re
import sqlite3

import orjson
import pytest
from click.testing import CliRunner
from helpers import SECRETS

import reasonlog
from reasonlog import query
from reasonlog.cli.main import cli
from reasonlog.io.jsonl import dump_lines
from reasonlog.redact import Redactor
from reasonlog.store import sqlite as sqlite_store
from reasonlog.wire.codec import canonical

# Keys that stand alone in any text (an AWS secret key is masked only beside its label, tested elsewhere).
EXAMPLES = {name: value for name, value in SECRETS.items() if name != "aws_secret_key"}
# Where a token must still be found: alone, at either end, after a newline or tab, in quotes, after = or :.
PLACES = ["{}", "{} tail", "head {}", "line one\n{}", "col\t{}", 'say "{}" now', "KEY={}", "key:{}", "x\r\n{}\n"]
# Tokens that can be spelt in base64's alphabets (no space, dot or dash-run of their own).
BASE64_SHAPED = ["anthropic_key", "openai_key", "google_api_key", "aws_access_key", "github_token", "slack_token",
                 "huggingface_token", "groq_key", "xai_key", "stripe_key"]


DIGEST = re.compile(r"\[REDACTED:(\w+):[0-9a-f]{12}\]")


def kinds(text: str) -> str:
    """`text` with each mask's digest left out: `[REDACTED:openai_key]`."""
    return DIGEST.sub(r"[REDACTED:\1]", text)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
@pytest.mark.parametrize("place", PLACES)
def test_every_pattern_masks_its_example_in_text_and_in_json(name, place):
    token, r = EXAMPLES[name], Redactor()
    text = place.format(token)
    assert kinds(r.text(text)) == place.format(f"[REDACTED:{name}]")
    masked = r.bytes(orjson.dumps({"k": text}))
    assert kinds(orjson.loads(masked)["k"]) == place.format(f"[REDACTED:{name}]")
    assert r.masked == 2


# Inside base64 data: 80 characters of it on either side (a key stands in shorter runs: see test_redaction_rules).
@pytest.mark.parametrize("name", BASE64_SHAPED)
@pytest.mark.parametrize("around", ["QUJD" * 20 + "{}" + "REVG" * 20, "AbC+" * 20 + "{}" + "/xYz" * 20,
                                    "AbC_" * 20 + "{}" + "-xYz" * 20, "a/" * 40 + "{}+b", "9" * 80 + "{}9"])
def test_no_pattern_matches_inside_base64_data(name, around):
    r = Redactor()
    data = around.format(EXAMPLES[name])
    assert r.text(data) == data
    assert r.bytes(orjson.dumps({"data": data})) == orjson.dumps({"data": data})
    assert r.masked == 0


def _blobs() -> list[str]:
    """200 random 64 KB base64 strings (half URL-safe) and three of 1 MB, from a fixed seed."""
    rng = random.Random(20240614)
    out = []
    for i in range(203):
        raw = rng.randbytes(1 << 20 if i >= 200 else 48 << 10)
        out.append((base64.urlsafe_b64encode if i % 2 else base64.b64encode)(raw).decode())
    return out


@pytest.mark.slow
def test_random_base64_images_replay_byte_exact_and_nothing_is_masked(db_path, store_of):
    blobs = _blobs()
    # The seed is worth something only if the data holds the prefixes that used to match in it.
    assert sum(b.count("AIza") for b in blobs) == 2 and sum(b.count("sk-") for b in blobs[1::2]) == 29
    rec = reasonlog.Recorder(db_path, writer="sync")
    requests = []
    with rec.session(agent="painter") as s:
        for i in range(0, len(blobs), 20):
            images = [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b}}
                      for b in blobs[i:i + 20]]
            messages = [{"role": "user", "content": [{"type": "text", "text": f"batch {i}"}, *images]}]
            requests.append((s.call(messages=messages, response="seen", model="m"), messages))
    rec.close()
    store = store_of()
    for call_id, messages in requests:
        assert canonical(store.replay_call(call_id)["messages"]) == canonical(messages)
    assert store.status()["redacted_secrets"] == 0


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_a_token_after_an_escaped_newline_or_tab_never_reaches_disk(name, db_path):
    token = EXAMPLES[name]
    rec = reasonlog.Recorder(db_path, writer="sync")
    with rec.session(agent="a") as s:
        s.call(messages=[{"role": "user", "content": f"env:\n{token}\n\t{token}\tend"}], response="ok",
               raw={"note": f"\n{token}"})
        s.tool_result("t1", f"out\n{token}", input={"cmd": f"\t{token}"})
    rec.close()
    blob = _everything_on_disk(db_path)
    assert _leaks(blob, token) == []
    assert reasonlog.open_store(db_path).status()["redacted_secrets"] == 5


# ------------------------------------------------------------------ identifiers


def _secret(n: int) -> str:
    """A distinct OpenAI-shaped key per field; its tail `Zq9Zq9` shows any part of it that leaks."""
    return f"sk-proj-{n:02d}" + "Zq9" * 8


FIELDS = ["session", "agent", "run", "model", "provider", "external", "label_key", "call", "stop", "message",
          "request", "tool_use", "tool_name", "outcome", "child_external"]
S = {name: _secret(i) for i, name in enumerate(FIELDS)}


def record_identifiers(rec) -> None:
    """Every identifier a caller gives carries a secret; the child session points at the parent and its call."""
    with rec.session(id="alpha:" + S["session"], agent=S["agent"], run=S["run"], model=S["model"],
                     provider=S["provider"], external_id=S["external"], labels={S["label_key"]: "v"}) as s:
        tool_use = {"type": "tool_use", "id": "tu=" + S["tool_use"], "name": S["tool_name"], "input": {}}
        s.call(id="call:" + S["call"], messages=[{"role": "user", "content": "go"}],
               response={"role": "assistant", "content": [tool_use]}, stop_reason=S["stop"],
               provider_message_id=S["message"], request_id=S["request"], usage={"input_tokens": 3})
        s.tool_result("tu=" + S["tool_use"], "done", name=S["tool_name"])
        s.outcome(S["outcome"], {"ok": True}, call_id="call:" + S["call"])
        child = rec.session(agent="child", parent=s, parent_call="call:" + S["call"],
                            external_id="ext " + S["child_external"])
        with child as c:
            c.call(messages=[{"role": "user", "content": "sub"}], response="ok")


def test_secrets_in_identifiers_are_masked_and_references_still_hold(db_path, store_of):
    rec = reasonlog.Recorder(db_path, writer="sync", strict=True)
    record_identifiers(rec)
    rec.close()
    store = store_of()
    sessions = {x["agent"]: x for x in store.list_sessions(reasonlog.SessionFilter())}
    assert sorted(map(kinds, sessions)) == ["[REDACTED:openai_key]", "child"]
    parent_id = Redactor().text("alpha:" + S["session"])
    call_id = Redactor().text("call:" + S["call"])
    assert kinds(parent_id) == "alpha:[REDACTED:openai_key]" and kinds(call_id) == "call:[REDACTED:openai_key]"
    parent = store.get_session(parent_id)
    assert [c["id"] for c in parent["calls"]] == [call_id]
    assert [o["call_id"] for o in parent["outcomes"]] == [call_id]
    child = store.get_session(sessions["child"]["id"])
    assert (child["parent_session_id"], child["parent_call_id"]) == (parent_id, call_id)
    tool_uses = [p for item in query.timeline(parent) if item["kind"] == "message"
                 for p in item["parts"] if p["kind"] == "tool_use"]
    assert [(kinds(p["tool_use_id"]), p["result"]["content"]) for p in tool_uses] == [
        ("tu=[REDACTED:openai_key]", "done")]
    show = CliRunner().invoke(cli, ["--db", str(db_path), "show", parent_id], catch_exceptions=False)
    assert show.exit_code == 0 and parent_id in show.output
    blob = _everything_on_disk(db_path) + show.output.encode()
    assert [name for name in FIELDS if _leaks(blob, S[name])] == []
    assert b"Zq9Zq9" not in blob


def test_secrets_in_identifiers_are_masked_in_spill_files(db_path):
    reasonlog.open_store(db_path).close()
    blocker = sqlite3.connect(db_path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    rec = reasonlog.Recorder(db_path, writer="sync", store_options={"busy_timeout_ms": 50})
    record_identifiers(rec)
    rec.close()
    blocker.execute("ROLLBACK")
    blocker.close()
    spilled = b"".join(p.read_bytes() for p in sqlite_store.spill_dir(db_path).glob("*.spill"))
    # The parent session's five events (start, call, tool result, outcome, end), each under its masked id.
    parent_id = Redactor().text("alpha:" + S["session"]).encode()
    assert spilled.count(b'"session_id":"' + parent_id + b'"') == 5 and b"Zq9Zq9" not in spilled


# ------------------------------------------------------------------ spilled or not, the same rows


def record_everything(rec) -> None:
    """Secrets in identifiers, texts, JSON columns and raw payloads; ids given so both stores can be compared."""
    record_identifiers(rec)
    with rec.session(id="beta", agent="texts", labels={"k": EXAMPLES["github_token"]}) as s:
        with s.exchange(input={"ask": "\n" + EXAMPLES["aws_access_key"]}) as ex:
            ex.call(id="beta-1", system=f"use {EXAMPLES['anthropic_key']}",
                    messages=[{"role": "user", "content": f"token:\n{EXAMPLES['slack_token']}"}],
                    response=f"{EXAMPLES['jwt']}\tok", raw={"h": EXAMPLES["bearer_token"]},
                    params={"metadata": {"user": EXAMPLES["google_api_key"]}})
            ex.end(result={"key": EXAMPLES["huggingface_token"]})
        s.tool_result("t9", EXAMPLES["private_key"], input={"k": "=" + EXAMPLES["stripe_key"]}, name="fetch")
        s.outcome("paid", {"card": EXAMPLES["groq_key"]})
        s.end(summary="xai " + EXAMPLES["xai_key"], status="completed")


ULID = re.compile(rb"\b[0-9A-HJKMNP-TV-Z]{26}\b")
INSTANT = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def _normalised_export(db_path) -> list[bytes]:
    """The export with generated ids numbered in order of appearance and instants blanked; counters aside."""
    store = reasonlog.open_store(db_path)
    lines = [line for line in dump_lines(store) if b'"type":"counters"' not in line]
    store.close()
    seen: dict[bytes, bytes] = {}
    text = INSTANT.sub(b"T", b"".join(lines))
    text = ULID.sub(lambda m: seen.setdefault(m.group(), b"id%d" % len(seen)), text)
    return text.splitlines()


def test_a_spilled_batch_is_stored_masked_exactly_like_a_written_one(tmp_path):
    direct, spilled = tmp_path / "direct.db", tmp_path / "spilled.db"
    rec = reasonlog.Recorder(direct, writer="sync")
    record_everything(rec)
    rec.close()

    reasonlog.open_store(spilled).close()
    blocker = sqlite3.connect(spilled, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    rec = reasonlog.Recorder(spilled, writer="sync", store_options={"busy_timeout_ms": 50})
    record_everything(rec)
    rec.close()
    blocker.execute("ROLLBACK")
    blocker.close()
    assert len(list(sqlite_store.spill_dir(spilled).glob("*.spill"))) == 15  # one per event
    upgrade = CliRunner().invoke(cli, ["--db", str(spilled), "db", "upgrade"], catch_exceptions=False)
    assert upgrade.exit_code == 0 and "spill files left: 0" in upgrade.output

    assert _normalised_export(spilled) == _normalised_export(direct)
    blob = _everything_on_disk(spilled)
    assert [name for name in EXAMPLES if _leaks(blob, EXAMPLES[name])] == [] and b"Zq9Zq9" not in blob
    # Needs the writer's part of issue 7: the masked count carried through the spill file.
    assert (reasonlog.open_store(spilled).status()["redacted_secrets"]
            == reasonlog.open_store(direct).status()["redacted_secrets"])


# ------------------------------------------------------------------ helpers


def _everything_on_disk(db_path) -> bytes:
    store = reasonlog.open_store(db_path)
    exported = b"".join(dump_lines(store))
    store.checkpoint()
    store.close()
    files = [p for p in db_path.parent.iterdir() if p.is_file()]
    spill = sqlite_store.spill_dir(db_path)
    files += list(spill.glob("*")) if spill.exists() else []
    return exported + b"".join(p.read_bytes() for p in files)


def _leaks(blob: bytes, token: str) -> list[str]:
    """The parts of `token` (its whole, and each line of a multi-line one) found in `blob`."""
    return [part for part in [token, *token.split("\n")[1:-1]] if part.encode() in blob]
