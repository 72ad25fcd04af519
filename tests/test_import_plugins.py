"""Importers are plug-ins: a package that declares one under the `reasonlog.importers` entry-point group is
listed, detected and run like the built-in ones, and a broken one never breaks the others."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PLUGIN = '''
from reasonlog.io.importing import walk
from reasonlog.model import CallRecorded, SessionStarted, SessionEnded, Usage, stable_id


class Csv:
    name = "tiny-csv"
    description = "one call a line: when,model,prompt,answer,input,output"
    incremental = True

    def detect(self, path):
        return path.suffix == ".tinycsv"

    def sources(self, path):
        return walk(path, "*.tinycsv")

    def read(self, feed):
        sid = stable_id(None, "tiny-csv", str(feed.path))
        if not feed.exists("session", sid):
            yield SessionStarted(session_id=sid, started_at="2026-01-01T00:00:00Z", agent="csv")
        last = None
        with open(feed.path, "rb") as f:
            f.seek(feed.start)
            offset = feed.start
            for raw in f:
                offset += len(raw)
                when, model, prompt, answer, i, o = raw.decode().strip().split(",")
                yield CallRecorded(call_id=stable_id(when, "tiny-csv", when), session_id=sid, exchange_id=None,
                                   started_at=when, request={"model": model,
                                                             "messages": [{"role": "user", "content": prompt}]},
                                   response={"role": "assistant", "content": answer}, model=model,
                                   usage=Usage(input_tokens=int(i), output_tokens=int(o)))
                last = when
        if last:
            yield SessionEnded(session_id=sid, ended_at=last)
        from reasonlog.io.importing import Checkpoint
        yield Checkpoint(offset, 0, None)


importer = Csv()
'''


def _plugin(tmp_path: Path, body: str, name: str, layout: str = "dist-info") -> Path:
    site = tmp_path / "site"
    info = site / (f"{name}-0.1.dist-info" if layout == "dist-info" else f"{name}.egg-info")
    info.mkdir(parents=True)
    (site / f"{name}.py").write_text(body)
    (info / ("METADATA" if layout == "dist-info" else "PKG-INFO")).write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[reasonlog.importers]\n{name.replace('_', '-')} = {name}:importer\n")
    return site


def _run(site: Path, *args: str) -> subprocess.CompletedProcess:
    code = "import sys; sys.path.insert(0, sys.argv.pop(1)); from reasonlog.cli.main import main; main()"
    return subprocess.run([sys.executable, "-c", code, str(site), *args], capture_output=True, text=True)


@pytest.mark.slow
def test_an_entry_point_importer_is_listed_detected_and_incremental(tmp_path):
    site = _plugin(tmp_path, PLUGIN, "tiny_csv")
    data = tmp_path / "calls.tinycsv"
    data.write_text("2026-01-01T10:00:00Z,gpt-5,hi,hello,10,2\n2026-01-01T10:01:00Z,gpt-5,more,ok,20,3\n")
    db = str(tmp_path / "t.db")
    listed = _run(site, "import", "--list-formats")
    assert any(line.split()[0] == "tiny-csv" for line in listed.stdout.splitlines()), listed.stderr
    first = _run(site, "--db", db, "import", str(data))
    assert first.stdout == "Imported 1 file(s): 1 sessions, 2 calls, 4 messages, 0 tool results, 0 outcomes added.\n"
    with open(data, "a") as f:
        f.write("2026-01-01T10:02:00Z,gpt-5,last,bye,30,4\n")
    grown = _run(site, "--db", db, "import", str(data))
    assert grown.stdout == ("Imported 1 file(s) (1 grown): 0 sessions, 1 calls, 2 messages, 0 tool results, "
                            "0 outcomes added.\n")


@pytest.mark.parametrize("layout", ["dist-info", "egg-info"])
def test_a_broken_plugin_is_named_and_the_others_still_work(tmp_path, layout):
    site = _plugin(tmp_path, "raise RuntimeError('boom')\n", "broken_fmt", layout)
    listed = _run(site, "import", "--list-formats")
    assert listed.returncode == 0
    line = next(s for s in listed.stdout.splitlines() if s.startswith("broken-fmt"))
    assert "cannot load broken_fmt:importer: boom" in line
    assert any(s.startswith("claude-code ") for s in listed.stdout.splitlines())
    forced = _run(site, "--db", str(tmp_path / "t.db"), "import", "--format", "broken-fmt", str(tmp_path))
    assert forced.returncode == 1
    assert textwrap.dedent(forced.stderr).strip() == "error: importer broken-fmt: cannot load broken_fmt:importer: boom"
