"""A raw payload given as bytes that are not UTF-8 exports, imports and reads back as it was (issue 19 item 13)."""
from __future__ import annotations

import base64
import subprocess
import sys

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reasonlog
from reasonlog.cli.main import cli

CLI = [sys.executable, "-m", "reasonlog"]


def _in_process(*args: str) -> tuple[int, str]:
    """The command run in this process (an exception escaping it fails the test): its exit code and stderr."""
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stderr


def _record(db, raws: list) -> list[str]:
    rec = reasonlog.Recorder(db, writer="sync", strict=True)
    with rec.session(agent="raw bytes") as s:
        ids = [s.call(messages=[{"role": "user", "content": f"q{i}"}], response="ok", raw=raw)
               for i, raw in enumerate(raws)]
    rec.close()
    return ids


def _export(db, out) -> list[bytes]:
    """The raw payload of each call in the export of `db`, as bytes."""
    code, stderr = _in_process("--db", str(db), "export", "-o", str(out))
    assert code == 0 and stderr == "", stderr
    calls = [r for r in map(orjson.loads, out.read_bytes().splitlines()) if r["type"] == "call"]
    return [base64.b64decode(c["raw"]) if c.get("raw_encoding") else c["raw"].encode() for c in calls]


def _round_trip(tmp_path, raws: list) -> tuple[list, list, bytes]:
    """What the export of the recorded database holds, what the export of its import holds, and the first file."""
    _record(tmp_path / "a.db", raws)
    before = _export(tmp_path / "a.db", tmp_path / "a.jsonl")
    code, stderr = _in_process("--db", str(tmp_path / "b.db"), "import", str(tmp_path / "a.jsonl"))
    assert code == 0, stderr
    return before, _export(tmp_path / "b.db", tmp_path / "b.jsonl"), (tmp_path / "a.jsonl").read_bytes()


def test_raw_bytes_that_are_not_utf8_export_as_base64_and_import_as_they_were(tmp_path):
    raws = [b"\xff\xfe\x00binary", b"\x1f\x8b\x08\x00gzip", "text \u00e9", b"plain ascii"]
    before, after, export = _round_trip(tmp_path, raws)
    assert before == after == [r if isinstance(r, bytes) else r.encode() for r in raws]
    calls = [r for r in map(orjson.loads, export.splitlines()) if r["type"] == "call"]
    assert [c.get("raw_encoding") for c in calls] == ["base64", "base64", None, None]
    assert calls[0]["raw"] == "//4AYmluYXJ5" and calls[2]["raw"] == "text \u00e9"


@pytest.mark.slow
def test_an_import_refuses_a_raw_encoding_over_text_that_is_not_base64(tmp_path):
    _record(tmp_path / "a.db", [b"\xff\xfe"])
    export = tmp_path / "a.jsonl"
    subprocess.run([*CLI, "--db", str(tmp_path / "a.db"), "export", "-o", str(export)], check=True, timeout=60)
    lines = export.read_bytes().splitlines()
    n = next(i for i, line in enumerate(lines) if b'"raw_encoding"' in line)
    lines[n] = lines[n].replace(b'"raw":"//4="', b'"raw":"not base64!"')
    export.write_bytes(b"\n".join(lines) + b"\n")
    done = subprocess.run([*CLI, "--db", str(tmp_path / "b.db"), "import", str(export)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().endswith("call record: field 'raw': expected base64 text, as 'raw_encoding' says")
    assert f"a.jsonl:{n + 1}" in done.stderr and "Traceback" not in done.stderr


@settings(max_examples=25, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(st.binary(min_size=1, max_size=64), min_size=1, max_size=4))
@pytest.mark.slow
def test_any_raw_bytes_survive_export_and_import(tmp_path_factory, raws):
    before, after, _ = _round_trip(tmp_path_factory.mktemp("raw"), raws)
    assert before == after == raws
