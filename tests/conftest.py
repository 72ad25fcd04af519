"""Shared fixtures: a fresh database per test, recorders on it, and the shared real data."""
from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

import platformdirs
import pytest

# Tests never touch the user's own reasonlog data: the whole run (and every process it starts) gets a home and
# XDG folders of its own, and no REASONLOG_* setting of the user's (their database, server, key, config). The
# user's real data folder is snapshot now and compared at the end (`users_data_folder_untouched`).
REAL_DATA = Path(platformdirs.user_data_dir("reasonlog", appauthor=False))
# The run's temporary folders (`tmp_path`, the test home, what the processes it starts write) are in memory where the
# system has a tmpfs with room: each SQLite commit syncs to disk, and a suite that makes thousands of databases waited
# on the disk for minutes (no test here is about the fsync; the disk-full ones mount their own tmpfs). pyproject's
# `tmp_path_retention_policy = "failed"` deletes a passed test's folder when it ends, so the memory holds the running
# tests' folders and the failures' only. A TMPDIR of the user's own is kept.
MEMORY = Path("/dev/shm")
if "TMPDIR" not in os.environ and MEMORY.is_dir() and os.access(MEMORY, os.W_OK) \
        and shutil.disk_usage(MEMORY).free > 4 << 30:
    os.environ["TMPDIR"] = tempfile.tempdir = str(MEMORY)
TEST_HOME = Path(tempfile.mkdtemp(prefix="reasonlog-tests-home-"))
atexit.register(shutil.rmtree, TEST_HOME, True)  # however the run ends (a run that selects no test included)
_KEPT = {"REASONLOG_TEST_POSTGRES", "REASONLOG_TEST_POSTGRES_VECTOR", "REASONLOG_REQUIRE_POSTGRES",
         "REASONLOG_TEST_CLICKHOUSE", "REASONLOG_REQUIRE_CLICKHOUSE", "REASONLOG_RAISE_INTERNAL_ERRORS",
         "REASONLOG_TIMELINE_EXAMPLES",
         "REASONLOG_SCREENSHOTS", "REASONLOG_REQUIRE_PGVECTOR"}
for _name in [n for n in os.environ if n.startswith("REASONLOG_") and n not in _KEPT]:
    del os.environ[_name]
# A terminal's size is each CLI test's own (CliRunner's COLUMNS): an inherited one (pytest-xdist's workers are
# started with COLUMNS=80) would fix the width of the CLI's console when it is first made, whatever a test asks.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)
os.environ.update({"HOME": str(TEST_HOME), "XDG_DATA_HOME": str(TEST_HOME / ".local" / "share"),
                   "XDG_CONFIG_HOME": str(TEST_HOME / ".config"), "XDG_STATE_HOME": str(TEST_HOME / ".local" / "state"),
                   "XDG_CACHE_HOME": str(TEST_HOME / ".cache")})

import reasonlog  # noqa: E402  (after the environment above: nothing may see the user's folders)

pytest_plugins = ("browser",)  # the `browser` and `page` fixtures of the browser tests (tests/browser.py)

# reasonlog's own errors inside capture are logged and counted in production; here they fail the test.
os.environ.setdefault("REASONLOG_RAISE_INTERNAL_ERRORS", "1")
# Masks take their digests from this key, never from a key file in the user's data folder.
os.environ.setdefault("REASONLOG_REDACTION_KEY", "reasonlog tests")

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
FIXTURES = SHARED / "fixtures" / "real"


def _entries(folder: Path) -> dict[str, tuple]:
    """Every file and folder under `folder` with its size and modification time: what a test could change."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): (p.is_dir(), *((st.st_size, st.st_mtime_ns) if p.is_file() else ()))
            for p in folder.rglob("*") for st in [p.lstat()]}


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook
def pytest_xdist_auto_num_workers(config):
    """`-n auto` (the README's command): one worker per core. Two a core was 1.4 x faster here, but the tests that
    time processes (a SIGKILL's loss window, a recorder's first batch) then failed under the load the suite itself
    made. PYTEST_XDIST_AUTO_NUM_WORKERS still overrides it."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return os.cpu_count() or 1


# Each collected test module: has it a test that `-m "not slow"` runs? (tests/test_quick_run.py reads it.)
QUICK_MODULES = pytest.StashKey[dict[str, bool]]()


@pytest.hookimpl(tryfirst=True)  # before `-m` and `-k` deselect anything
def pytest_collection_modifyitems(config, items):
    quick = config.stash.setdefault(QUICK_MODULES, {})
    for item in items:
        module = item.nodeid.split("::")[0]
        quick[module] = quick.get(module, False) or item.get_closest_marker("slow") is None


@pytest.fixture(scope="session", autouse=True)
def users_data_folder_untouched():
    """Fails the run when the user's real reasonlog data folder changed while it ran."""
    before = _entries(REAL_DATA)
    yield
    after = _entries(REAL_DATA)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if changed:
        pytest.fail(f"the tests changed the user's data folder {REAL_DATA}: {', '.join(changed[:10])}"
                    f"{' …' if len(changed) > 10 else ''}", pytrace=False)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "test.db"


@pytest.fixture
def db_target(db_path: Path):
    """Where `recorder`, `rec` and `store_of` write and read: the SQLite file `db_path`. A suite that runs on
    both dialects overrides it with `db` (see test_capture_anthropic.py)."""
    return db_path


@pytest.fixture
def recorder(db_target):
    rec = reasonlog.Recorder(db_target, writer="sync", strict=True)
    yield rec
    rec.close()


@pytest.fixture(params=["strict", pytest.param("default", marks=pytest.mark.slow)])
def rec(request, db_target):
    """A synchronous recorder for the SDK tests, strict and in the default mode users run (the quick run takes the
    strict one only: it raises what the default mode would log)."""
    rec = reasonlog.Recorder(db_target, writer="sync", strict=request.param == "strict")
    yield rec
    rec.close()


@pytest.fixture
def server():
    """A local HTTP server on 127.0.0.1 answering with the recorded provider payloads."""
    from sdk_server import FixtureServer

    with FixtureServer() as s:
        yield s


@pytest.fixture
def store_of(db_target):
    """Open the test database for reading (after the recorder has written)."""
    opened = []

    def open_():
        store = reasonlog.open_store(db_target)
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()


def demo_and_trading_logs(db) -> None:
    """The demo's sessions and the AI-Trader logs imported: the data the server's page and schema tests read."""
    from reasonlog.demo import run_demo
    from reasonlog.io.importing import plan, run_import

    run_demo(db, exchanges=2)
    store = reasonlog.open_store(db)
    run_import(store, plan([FIXTURES / "ai-trader-agent-log" / "agent_data"]))
    store.close()


@pytest.fixture(scope="session")
def workload():
    """The deterministic agent-session generator shared with the benchmarks."""
    sys.path.insert(0, str(SHARED / "bench"))
    import workload as module

    return module


POSTGRES = os.environ.get("REASONLOG_TEST_POSTGRES")
if os.environ.get("REASONLOG_REQUIRE_POSTGRES") and not POSTGRES:  # CI: skipping them would hide a failure
    raise RuntimeError("REASONLOG_REQUIRE_POSTGRES is set but REASONLOG_TEST_POSTGRES is not")
NO_POSTGRES = ("no PostgreSQL server: set REASONLOG_TEST_POSTGRES=postgresql://user@host:port/db "
               "(.ci/run starts one with .ci/postgres)")


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def dialect(request) -> str:
    """Each test that takes it runs once on SQLite and once on PostgreSQL (skipped without a server). The
    PostgreSQL run is `slow`: the quick run (`-m "not slow"`) takes each such test on SQLite only, the whole suite on
    both; PostgreSQL's own SQL keeps quick tests in the modules about it (test_postgres.py, test_pg_*.py)."""
    if request.param == "postgresql" and not POSTGRES:
        pytest.skip(NO_POSTGRES)
    return request.param


@pytest.fixture
def db(dialect: str, tmp_path: Path):
    """A fresh, empty database of the dialect: a file path, or the URL of a migrated, empty PostgreSQL schema."""
    with fresh_database(dialect, tmp_path) as target:
        yield target


@contextlib.contextmanager
def fresh_database(dialect: str, folder: Path):
    """A new database target of the dialect: a file in `folder`, or a migrated, empty PostgreSQL schema
    (tests/pg_schemas.py)."""
    if dialect == "sqlite":
        yield folder / "store.db"
        return
    from pg_schemas import migrated_schema  # migrated and empty: new, or one an earlier test used, emptied

    yield from migrated_schema(POSTGRES)


@contextlib.contextmanager
def empty_database(dialect: str, folder: Path):
    """A database target no store has opened yet (a file in `folder`, or a new PostgreSQL schema): for the tests of
    migrating itself."""
    if dialect == "sqlite":
        yield folder / "store.db"
        return
    yield from postgres_schema()


def postgres_schema():
    """A URL whose connections use a new, empty schema; the schema is dropped afterwards."""
    from pg_schemas import new_schema

    yield from new_schema(POSTGRES)
