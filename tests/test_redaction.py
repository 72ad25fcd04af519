"""Secrets placed in a prompt, a tool input and a raw payload reach neither the database, the spill file
nor the logs."""
from __future__ import annotations

import logging
import re
import sqlite3

import pytest

import reasonlog
from reasonlog.io.jsonl import dump_lines
from reasonlog.redact import Redactor
from reasonlog.store import sqlite as sqlite_store

ANTHROPIC = "sk-ant-api03-" + "Q" * 40
OPENAI = "sk-proj-" + "a1B2" * 10
BEARER = "Bearer " + "eyZ" * 10
PRIVATE = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----"
CUSTOM = "ACME-INTERNAL-4242-SECRET"
SECRETS = [ANTHROPIC, OPENAI, BEARER.split()[1], "MIIEpAIBAAKCAQEA7", CUSTOM]


def record_secrets(rec):
    with rec.session(agent="leaky", labels={"token": OPENAI}) as s:
        s.call(system=f"Use key {ANTHROPIC} if asked.",
               messages=[{"role": "user", "content": f"my key is {OPENAI} and {CUSTOM}"}],
               response=[{"type": "tool_use", "id": "t1", "name": "http",
                          "input": {"headers": {"Authorization": BEARER}}}],
               raw={"echo": PRIVATE, "key": ANTHROPIC})
        s.tool_result("t1", f"server said {CUSTOM}", input={"auth": BEARER})
        s.outcome("config", {"key": OPENAI})
        s.call(usage={"input_tokens": -1, "note": ANTHROPIC})  # rejected: the log line must not carry the key
        s.end(summary=f"done with {ANTHROPIC}")


def everything_on_disk(db_path) -> bytes:
    store = reasonlog.open_store(db_path)
    exported = b"".join(dump_lines(store))
    store.checkpoint()
    store.close()
    files = [p for p in db_path.parent.iterdir() if p.is_file()]
    spilled = sqlite_store.spill_dir(db_path)
    files += list(spilled.glob("*")) if spilled.exists() else []
    return exported + b"".join(p.read_bytes() for p in files)


def test_secrets_are_masked_everywhere(db_path, caplog):
    caplog.set_level(logging.DEBUG)
    rec = reasonlog.Recorder(db_path, writer="sync", redact=[r"ACME-INTERNAL-\d+-SECRET"])
    record_secrets(rec)
    rec.close()
    blob = everything_on_disk(db_path) + caplog.text.encode()
    for secret in SECRETS:
        assert secret.encode() not in blob, secret
    assert re.search(rb"\[REDACTED:anthropic_key:[0-9a-f]{12}\]", blob)
    assert re.search(rb"\[REDACTED:custom_0:[0-9a-f]{12}\]", blob)
    status = reasonlog.open_store(db_path).status()
    assert status["redacted_secrets"] >= 8


def test_spilled_batches_are_masked_too(db_path):
    reasonlog.open_store(db_path).close()
    blocker = sqlite3.connect(db_path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    # The documented seam for faults: a 20 ms busy timeout, so each batch gives up on the held lock at once.
    rec = reasonlog.Recorder(db_path, writer="sync", redact=[r"ACME-INTERNAL-\d+-SECRET"],
                             store_options={"busy_timeout_ms": 20})
    record_secrets(rec)
    rec.close()
    spilled = list(sqlite_store.spill_dir(db_path).glob("*.spill"))
    assert spilled
    text = b"".join(p.read_bytes() for p in spilled)
    for secret in SECRETS:
        assert secret.encode() not in text, secret
    blocker.execute("ROLLBACK")


def test_masked_content_still_replays_as_valid_json(db_path):
    rec = reasonlog.Recorder(db_path, writer="sync")
    with rec.session(agent="a") as s:
        call = s.call(messages=[{"role": "user", "content": f"key {ANTHROPIC} end"}], response="ok",
                      raw={"k": ANTHROPIC})
    rec.close()
    got = reasonlog.open_store(db_path).get_call(call)
    mask = Redactor().text(ANTHROPIC)
    assert re.fullmatch(r"\[REDACTED:anthropic_key:[0-9a-f]{12}\]", mask)
    assert got["request"]["messages"][0]["content"] == f"key {mask} end"
    assert got["raw"] == {"k": mask}


def test_redaction_can_be_turned_off(db_path):
    rec = reasonlog.Recorder(db_path, writer="sync", redact=False)
    with rec.session(agent="a") as s:
        call = s.call(messages=[{"role": "user", "content": ANTHROPIC}], response="ok")
    rec.close()
    assert reasonlog.open_store(db_path).replay_call(call)["messages"][0]["content"] == ANTHROPIC


def test_ordinary_text_is_left_alone():
    r = Redactor()
    text = "the task-runner uses sk-short and bearer of bad news; AKIA is a prefix"
    assert r.text(text) == text and r.masked == 0


def test_a_bad_user_pattern_is_a_clear_error():
    with pytest.raises(ValueError, match="redaction pattern 'custom_0'"):
        Redactor.with_extra(["(unclosed"])
