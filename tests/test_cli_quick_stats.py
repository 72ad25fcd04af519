"""`reasonlog stats --json` answers without importing click or the other commands, and says exactly what the full
command line says (issue 20: a usage question of a local archive faster than re-reading the transcripts).

On SQLite with no irregular session it reads the file with `sqlite3` alone (cli/quick_stats.py, step 1); the
hypothesis test below compares its bytes with click's over generated databases, every --by key."""
from __future__ import annotations

import io
import itertools
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reasonlog
from reasonlog import accounting
from reasonlog.cli import quick_stats
from reasonlog.cli.main import cli
from reasonlog.store import database_target, schema, usage_sql

FIXTURES = Path(__file__).parent / "fixtures"
HEAVY = ("click", "rich", "reasonlog.cli.main", "reasonlog.io.importing", "reasonlog.store", "reasonlog.query",
         "orjson", "typing")
# What the full command line loads, and what the store's path (PostgreSQL, irregular sessions) loads before it.
CLICK = "click orjson reasonlog.query reasonlog.store rich typing"  # the full command: its own module only
STORE = "orjson reasonlog.query reasonlog.store typing"


# The command in a process that then names the modules it loaded (os._exit, which the SQLite reader ends with,
# leaves as SystemExit here so that they can be named).
ENTRY = """
import os, runpy, sys
def leave(code):
    sys.stdout.flush()
    raise SystemExit(code)
os._exit = leave
sys.argv = ["reasonlog", *sys.argv[1:]]
try:
    runpy.run_module("reasonlog", run_name="__main__")
except SystemExit as end:
    code = end.code
print(code, *sorted(sys.modules), file=sys.stderr)
"""


def run_reasonlog(*args: str, env: dict | None = None) -> tuple[str, str, set[str]]:
    """stdout, the exit code and every module the command loaded."""
    done = subprocess.run([sys.executable, "-c", ENTRY, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})
    code, *loaded = done.stderr.splitlines()[-1].split()
    return done.stdout, code, set(loaded)


def reasonlog_cli(*args: str, env: dict | None = None) -> tuple[str, str]:
    """stdout, and the exit code with the heavy modules the command loaded."""
    out, code, imported = run_reasonlog(*args, env=env)
    return out, " ".join([code, *sorted(m for m in HEAVY if m in imported)])


def full_command(*args: str) -> tuple[str, str]:
    """stdout and stderr of the whole command line (`--limit 0` keeps it from the quick path)."""
    done = subprocess.run([sys.executable, "-m", "reasonlog", *args, "--limit", "0"], capture_output=True, text=True,
                          timeout=120)
    return done.stdout, done.stderr


@pytest.fixture
def recorded(db):
    """Two sessions on two days and models, on SQLite and on PostgreSQL."""
    rec = reasonlog.Recorder(db, writer="sync")
    for day, model in (("2025-03-01", "gpt-5"), ("2025-03-02", "claude-haiku-4-5")):
        with rec.session(agent=f"agent-{model}", started_at=f"{day}T10:00:00Z") as s:
            s.call(messages=[{"role": "user", "content": "hi"}], response="ok", model=model,
                   usage=reasonlog.Usage(input_tokens=120, output_tokens=30), latency_ms=800.0,
                   started_at=f"{day}T10:00:01Z")
    rec.close()
    return db


@pytest.mark.parametrize("by", ["day", "model", "agent", "run", "source"])
def test_stats_json_prints_what_the_full_command_prints_without_loading_it(recorded, by):
    quick, loaded = reasonlog_cli("--db", str(recorded), "stats", "--by", by, "--json")
    full, loaded_full = reasonlog_cli("--db", str(recorded), "stats", "--by", by, "--json", "--limit", "0")
    assert quick == full and quick.startswith("[\n")
    assert (loaded, loaded_full) == ("0" if isinstance(recorded, Path) else f"0 {STORE}", f"0 {CLICK}")


@pytest.mark.slow
def test_the_database_comes_from_the_environment_or_a_db_after_the_command(recorded, tmp_path):
    by_env, loaded = reasonlog_cli("stats", "--json", env={"REASONLOG_DB": str(recorded)})
    by_option, _ = reasonlog_cli("--db", str(tmp_path / "other.db"), "stats", "--json", "--db", str(recorded))
    full, _ = reasonlog_cli("--db", str(recorded), "stats", "--json", "--limit", "0")
    assert by_env == by_option == full and loaded == ("0" if isinstance(recorded, Path) else f"0 {STORE}")


def test_on_sqlite_the_plain_form_imports_one_module_of_ours_beside_the_entry(tmp_path):
    path = tmp_path / "r.db"
    reasonlog.open_store(path).close()
    out, code, loaded = run_reasonlog("--db", str(path), "stats", "--by", "model", "--json")
    assert (out, code) == ("[]\n", "0")
    assert sorted(m for m in loaded if m.startswith("reasonlog")) == [
        "reasonlog", "reasonlog.cli", "reasonlog.cli.entry", "reasonlog.cli.quick_stats", "reasonlog.store.usage_sql"]
    assert not loaded & {*HEAVY, "json", "re", "statistics", "pathlib", "platformdirs", "datetime"}
    real = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(path), "stats", "--json"],
                          capture_output=True, timeout=120)  # and ended by os._exit: all of it printed, status 0
    assert (real.stdout, real.stderr, real.returncode) == (b"[]\n", b"", 0)


def test_what_the_quick_path_does_not_answer_the_full_command_explains(tmp_path):
    out, loaded = reasonlog_cli("--db", str(tmp_path / "none.db"), "stats", "--json")
    assert (out, loaded) == ("", f"1 {CLICK}")


@pytest.mark.parametrize(("argv", "parsed"), [
    (["stats", "--json"], (None, "day")),
    (["--db", "a.db", "stats", "--by", "model", "--json"], ("a.db", "model")),
    (["--db=a.db", "stats", "--json", "--by=agent", "--db", "b.db"], ("b.db", "agent")),
    (["stats"], None), (["stats", "--json", "--since", "2025-01-01"], None), (["--by", "day", "stats", "--json"], None),
    (["sessions", "--json"], None), (["stats", "--json", "--by"], None), (["--db=", "stats", "--json"], None),
    (["stats", "--json", "--help"], None), (["--json", "stats"], None),
])
def test_only_the_plain_form_is_taken_from_click(argv, parsed):
    assert quick_stats.parse(argv) == parsed


# ---------------------------------------------------------------------------- the SQLite reader (step 1)


def test_the_reader_knows_the_schema_and_columns_the_store_has():
    assert quick_stats.SCHEMA == schema.SQLITE_MIGRATIONS[-1].number  # a new migration: check the reader still holds
    assert usage_sql.TOKENS == accounting.TOKENS


def click_says(path, by: str) -> bytes:
    """What click's `reasonlog stats --by BY --json` prints, in this process."""
    result = CliRunner().invoke(cli, ["--db", str(path), "stats", "--by", by, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout_bytes


def quick_says(db: str, by: str) -> bytes:
    """What the quick path prints (any step), in this process."""
    out, stdout = io.BytesIO(), sys.stdout
    sys.stdout = wrapper = io.TextIOWrapper(out)
    try:
        assert quick_stats.run(db, by)
    finally:
        sys.stdout = stdout
        wrapper.detach()
    return out.getvalue()


DAYS = ["2025-03-01", "2025-03-02", "2025-12-31"]
call_st = st.fixed_dictionaries({
    "day": st.sampled_from(DAYS),
    "model": st.sampled_from(["claude-haiku-4-5", "gpt-5", "acme-llm-9000", None]),  # the third has no price
    "tokens": st.none() | st.tuples(*[st.integers(0, 10**6)] * 4),
    "cost": st.none() | st.sampled_from([0.1, 0.2, 0.3, 1e-7]) | st.floats(0, 50),
    "latency": st.none() | st.sampled_from([800.0, 1200.5, 1e-5, 3e16]) | st.floats(0, 1e6),
    "error": st.booleans(),
})
exchange_st = st.fixed_dictionaries({
    "calls": st.lists(call_st, max_size=4),
    "stats": st.sampled_from([None, "duration", "reported"]),  # reported only where the database reports at all
    "child": st.none() | st.lists(call_st, min_size=1, max_size=3),  # a sub-agent spawned from the last call
})
session_st = st.fixed_dictionaries({
    "agent": st.sampled_from(["coder", "reviewer", None]), "run": st.sampled_from(["r1", "r2", None]),
    "source": st.sampled_from([None, "claude-code", "codex"]),
    "exchanges": st.lists(exchange_st, min_size=1, max_size=3),
})
DATABASES = itertools.count()


def record(path: Path, sessions: list[dict], reporting: bool) -> bool:
    """The sessions written to a new database; whether an exchange reported a cost (an irregular session)."""
    reasonlog.open_store(path).close()
    rec, reported, minute = reasonlog.Recorder(path, writer="sync"), False, itertools.count()

    def calls(session, specs) -> list[str]:
        ids = []
        for c in specs:
            usage = None if c["tokens"] is None else reasonlog.Usage(*c["tokens"])
            ids.append(session.call(messages=[{"role": "user", "content": "hi"}], response="ok", model=c["model"],
                                    usage=usage, cost_usd=c["cost"], latency_ms=c["latency"],
                                    error="boom" if c["error"] else None,
                                    started_at=f"{c['day']}T10:{next(minute) % 60:02d}:00Z"))
        return ids

    for spec in sessions:
        labels = {"source": spec["source"]} if spec["source"] else None
        with rec.session(agent=spec["agent"], run=spec["run"], labels=labels,
                         started_at="2025-03-01T09:00:00Z") as s:
            for ex_spec in spec["exchanges"]:
                with s.exchange("go") as ex:
                    ids = calls(s, ex_spec["calls"])
                    if ex_spec["child"] and ids:
                        with rec.session(agent="sub", run=spec["run"], parent=s, parent_call=ids[-1]) as child:
                            calls(child, ex_spec["child"])
                    if ex_spec["stats"] == "reported" and reporting:
                        ex.end("done", stats={"cost_usd": 0.25, "input_tokens": 300, "output_tokens": 30})
                        reported = True
                    elif ex_spec["stats"] is not None:  # as Claude Code's transcripts state: a duration, no figures
                        ex.end("done", stats={"duration_ms": 1200})
    rec.close()
    return reported


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sessions=st.lists(session_st, max_size=4), reporting=st.booleans(), dead_recorder=st.booleans())
@pytest.mark.slow
def test_the_reader_prints_clicks_bytes_for_every_key_over_generated_databases(tmp_path, sessions, reporting,
                                                                               dead_recorder):
    path = tmp_path / f"generated-{next(DATABASES)}.db"
    reported = record(path, sessions, reporting)
    if dead_recorder and sessions:  # a reader shows its session as interrupted (a temporary view over `sessions`)
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE sessions SET status = 'open' WHERE rowid = (SELECT MIN(rowid) FROM sessions)")
        conn.close()
    for by in usage_sql.STAT_KEYS:
        expected = click_says(path, by)
        answered = quick_stats.sqlite_stats(str(path), by)
        assert (answered is None) == reported  # irregular sessions go through the store
        assert answered in (None, expected)
        assert quick_says(str(path), by) == expected


def test_an_empty_database_is_an_empty_list(tmp_path):
    path = tmp_path / "empty.db"
    reasonlog.open_store(path).close()
    assert quick_stats.sqlite_stats(str(path), "day") == b"[]\n" == click_says(path, "day")


def test_a_file_name_that_a_uri_would_cut_is_read(tmp_path):
    path = tmp_path / "a?b#c%20d.db"
    record(path, [{"agent": "a", "run": None, "source": None,
                   "exchanges": [{"calls": [{"day": DAYS[0], "model": "gpt-5", "tokens": (10, 2, 0, 0), "cost": None,
                                             "latency": 5.0, "error": False}], "stats": None, "child": None}]}], False)
    answered = quick_stats.sqlite_stats(str(path), "model")
    assert answered is not None and answered == click_says(path, "model") and b'"gpt-5"' in answered


def not_sqlite(path: Path) -> None:
    path.write_text("these are notes, not a database\n")


def foreign_sqlite(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    conn.close()


def older_schema(path: Path) -> None:
    shutil.copy(FIXTURES / "schema1.db", path)  # written by `reasonlog demo` at schema 1


def empty_file(path: Path) -> None:
    path.write_bytes(b"")


@pytest.mark.parametrize("make", [not_sqlite, foreign_sqlite, older_schema, empty_file, Path.mkdir])
def test_what_the_reader_cannot_read_click_explains_and_nothing_is_written(tmp_path, make):
    path = tmp_path / "thing.db"
    make(path)
    before = sorted((p.name, p.read_bytes() if p.is_file() else None) for p in tmp_path.rglob("*"))
    assert quick_stats.sqlite_stats(str(path), "day") is None
    quick = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(path), "stats", "--json"],
                           capture_output=True, text=True, timeout=120)
    full = full_command("--db", str(path), "stats", "--json")
    assert (quick.stdout, quick.stderr) == full and quick.returncode == 1 and full[1].strip()
    assert sorted((p.name, p.read_bytes() if p.is_file() else None) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("db", ["a.db", "~/a.db", "./x/../b.db", "//srv/c.db", "/abs//d.db/", "sqlite:///~/e.db",
                                "sqlite:///rel/f.db", "sqlite:////abs/g.db"])
def test_the_reader_names_the_file_the_store_names(db):
    assert quick_stats.sqlite_file(db) == str(quick_stats.target_of(db))


@pytest.mark.parametrize("db", ["postgresql://u@h/d", "postgres://h/d", "https://h/x", "sqlite:///", "~nobody-x/a.db"])
def test_what_is_no_plain_file_goes_to_the_store(db):
    assert quick_stats.sqlite_file(db) is None


@pytest.mark.parametrize(("xdg", "home"), [("/data/xdg", "/home/u"), ("/data/xdg/", None), ("", "/home/u"),
                                           (None, "/home/u/")])
def test_the_default_database_is_the_stores(monkeypatch, xdg, home):
    for name, value in (("XDG_DATA_HOME", xdg), ("HOME", home)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    monkeypatch.delenv("REASONLOG_DB", raising=False)
    assert quick_stats.sqlite_file(None) == str(database_target(None))
    monkeypatch.setenv("XDG_DATA_HOME", "relative/xdg")  # platformdirs' own rule: the store asks it
    assert quick_stats.sqlite_file(None) is None


json_value_st = (st.none() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text()
                 | st.sampled_from([0.0, -0.0, 1e16, 1e-5, 1e15, 0.0001, 123.456, "a\"b", "a\\b", "é", "\u2028"]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.dictionaries(st.sampled_from([*usage_sql.STAT_KEYS, "calls", "cost_usd", "latency_ms_p50"]),
                                json_value_st, min_size=1)))
@pytest.mark.slow
def test_the_json_is_orjsons(rows):
    assert quick_stats.dumps(rows) == orjson.dumps(rows, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
                                                   | orjson.OPT_NON_STR_KEYS) + b"\n"
