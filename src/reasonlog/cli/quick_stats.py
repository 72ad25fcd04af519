"""`reasonlog stats --json`, answered before click and the other commands are imported (see cli/entry.py).

A usage question asked of a local archive should come back far faster than a tool that re-reads the
transcripts (ccusage takes 0.3-0.4 s over 211 MB of them; issue 20 asks for a tenth of that, start-up included).
The plain form, `stats [--by KEY] --json` with at most `--db`, is answered here in three steps, each tried only
when the one before cannot answer:

1. A SQLite file of the current schema in which no session is irregular (no exchange reports its own cost, so
   every session's usage is the plain sums kept as its calls were written; store/usage.py) is read here with
   the `sqlite3` C module alone: the kept sums and latency histograms (for the medians), by the same SQL texts
   the store runs (store/usage_sql.py, loaded by its path: importing it by name would first import the
   store package), in one read transaction, the file opened read-only and never migrated. The
   rows are built as `query.stats` builds them and written as orjson writes them, and the process ends without
   tearing the interpreter down. Importing the store, `query` and orjson (which imports `dataclasses`, `uuid`
   and `json` as it loads) would cost several times the whole command.
2. Anything else the store can read (PostgreSQL, irregular sessions, a file it opens immutable) goes through
   `query.stats`, as `reasonlog stats` does, still without click.
3. What neither answers (a filter, a table, an unknown key, no database yet, an error to explain) goes to click,
   which says it as usual.

Every answer is byte for byte what click's command prints (tests/test_cli_quick_stats.py).
"""
import os
import sys

TYPE_CHECKING = False  # `typing` costs more than this command; mypy reads the name as typing's


def store_module(name: str):
    """store/NAME.py as the module `reasonlog.store.NAME`, loaded from its file (its bytecode cached as any import's)
    without running the store package's `__init__` (the seam, its dataclasses and the model)."""
    from importlib.machinery import SourceFileLoader

    name = f"reasonlog.store.{name}"
    if name not in sys.modules:
        path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "store", name.rsplit(".", 1)[1] + ".py")
        module = type(sys)(name)
        module.__file__, module.__loader__ = path, SourceFileLoader(name, path)
        module.__loader__.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name]


if TYPE_CHECKING:
    from ..store import usage_sql
else:
    usage_sql = store_module("usage_sql")
STAT_KEYS, TOKENS, median_of, read_kept = (usage_sql.STAT_KEYS, usage_sql.TOKENS, usage_sql.median_of,
                                          usage_sql.read_kept)

# The schema the SQLite reader knows (store/schema.py, SQLITE_MIGRATIONS); another goes through the store.
SCHEMA = 26  # 18 keeps usage by day, model, agent, run and source, which this reads; 19-26 changed nothing it reads


def parse(argv: list[str]) -> tuple[str | None, str] | None:
    """(--db, --by) when `argv` is `[--db X] stats [--by KEY] [--db X] --json` in any order after `stats`;
    None for anything else."""
    values: dict[str, str | None] = {"--db": None, "--by": "day"}
    words: list[str] = []
    i = 0
    while i < len(argv):
        name, eq, value = argv[i].partition("=")
        if name in values and (name == "--db" or words):  # --by belongs to `stats`, after it
            if not eq:
                if i + 1 >= len(argv):
                    return None
                i, value = i + 1, argv[i + 1]
            values[name] = value
        else:
            words.append(argv[i])
        i += 1
    if words != ["stats", "--json"] or values["--db"] == "":
        return None
    return values["--db"], str(values["--by"])


def run(db: str | None, by: str) -> bool:
    """Print the statistics as `reasonlog stats --by BY --json` does; False (nothing printed) when click must
    answer instead: an unknown key, no database yet, or an error it explains."""
    if by not in STAT_KEYS:
        return False
    path = sqlite_file(db)
    out = sqlite_stats(path, by) if path is not None else None
    if out is None:
        return through_store(db, by)
    sys.stdout.buffer.write(out)
    return True


def leave() -> None:
    """End the process once the answer is printed. After the SQLite reader alone, without the interpreter's
    teardown of every module (about a tenth of the command): it holds nothing to flush or close but stdout."""
    if "reasonlog.store" in sys.modules:  # the store answered: leave as any command does
        sys.exit(0)
    try:
        sys.stdout.flush()
    except BaseException:  # noqa: BLE001 - a closed pipe: the interpreter says it as it would have
        sys.exit(0)
    os._exit(0)


# ---------------------------------------------------------------------------- 1. a SQLite file, read here


def sqlite_file(db: str | None) -> str | None:
    """The absolute path of the SQLite file `--db` (else $REASONLOG_DB, else the default) names, as the store
    finds it (`store.database_target`); None when that takes more than string work (PostgreSQL, a URL the store
    refuses, a default folder only platformdirs knows)."""
    db = db if db is not None else os.environ.get("REASONLOG_DB")
    if db is None:
        base = user_data_dir()
        return None if base is None else os.path.abspath(os.path.join(base, "reasonlog", "reasonlog.db"))
    if db.startswith("sqlite:///"):  # expanded once (store.sqlite_path), a plain path twice (`target_of` first)
        path = os.path.expanduser(db[len("sqlite:///"):])
    elif "://" in db:
        return None
    else:
        path = os.path.expanduser(os.path.expanduser(db))
    return os.path.abspath(path) if path and not path.startswith("~") else None


def user_data_dir() -> str | None:
    """platformdirs' `user_data_dir()` on Linux when $XDG_DATA_HOME is absolute, or unset or empty with an absolute
    $HOME; None elsewhere (the store asks platformdirs, which costs more than this whole command)."""
    if sys.platform != "linux" or hasattr(sys, "getandroidapilevel") or "ANDROID_DATA" in os.environ:
        return None
    xdg = os.environ.get("XDG_DATA_HOME", "")
    if xdg.startswith("/"):
        return xdg
    home = os.environ.get("HOME", "")
    return os.path.expanduser("~/.local/share") if not xdg and home.startswith("/") else None


def sqlite_stats(path: str, by: str) -> bytes | None:
    """What `reasonlog stats --by BY --json` prints for the SQLite file at `path`, or None when this reader does
    not answer for it: no such file, not a database, another schema, an irregular session, anything unexpected."""
    conn = read_only(path)
    if conn is None:
        return None
    try:
        read = read_kept(conn, by, SCHEMA)
    except Exception:  # noqa: BLE001
        return None
    finally:
        conn.close()
    if read is None:
        return None
    sums, histograms = read
    rows = [_row(by, key, sums[key], histograms.get(key)) for key in sorted({*sums}, key=str)]
    return dumps(rows)


def read_only(path: str):
    """A connection to the SQLite file at `path`, opened read-only and never created; None when it cannot be."""
    try:  # the C module that `sqlite3` re-exports: the package adds date adapters, and imports datetime for them
        from _sqlite3 import connect
    except ImportError:
        from sqlite3 import connect
    try:
        uri = "file://" + path.replace("%", "%25").replace("?", "%3F").replace("#", "%23") + "?mode=ro"
        return connect(uri, uri=True, timeout=5.0, isolation_level=None)
    except Exception:  # noqa: BLE001 - the store meets the same and says what it is
        return None


def _row(by: str, key, sums: dict, histogram: dict | None) -> dict:
    """A statistics row as `query.stats` makes it of the kept sums alone (store/usage.py: `merge`, with no
    ledger entries; query.py: `_summarise`)."""
    out = {by: key, **{k: int(sums[k] or 0) for k in ("calls", "errors", *TOKENS)}}
    out["cost_usd"] = None if sums["cost_usd"] is None else round(0.0 + sums["cost_usd"], 12)
    out["calls_without_cost"] = int(sums["calls_without_cost"] or 0)
    out["latency_ms_p50"] = median_of(histogram or {})
    latency_sum, count = 0 + (sums["latency_ms_sum"] or 0.0), int(sums["latency_count"] or 0)
    out["latency_ms_mean"] = round(latency_sum / count, 3) if count else None
    return out


def dumps(rows: list[dict]) -> bytes:
    """`orjson.dumps(rows, option=OPT_INDENT_2 | OPT_SORT_KEYS | OPT_NON_STR_KEYS) + b"\\n"`: written here for
    the values whose text is Python's own (None, an int of 64 bits, a float without an exponent, a printable
    string with no quote or backslash), by orjson otherwise."""
    items = []
    for row in rows:
        fields = []
        for name in sorted(row):
            text = _json_value(row[name])
            if text is None or not name.isidentifier():
                return _orjson(rows)
            fields.append(f'    "{name}": {text}')
        items.append("  {\n" + ",\n".join(fields) + "\n  }")
    return ("[\n" + ",\n".join(items) + "\n]\n" if items else "[]\n").encode()


def _json_value(value) -> str | None:
    kind = type(value)
    if value is None:
        return "null"
    if kind is int:
        return str(value) if -(1 << 63) <= value < 1 << 64 else None
    if kind is float:
        text = repr(value)
        return text if "e" not in text and "n" not in text else None  # an exponent, inf, nan: orjson's own way
    if kind is str:
        return f'"{value}"' if value.isprintable() and '"' not in value and "\\" not in value else None
    return None


def _orjson(rows: list) -> bytes:
    import orjson

    return orjson.dumps(rows, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS) + b"\n"


# ---------------------------------------------------------------------------- 2. through the store


def target_of(db: str | None):
    """The SQLite file or `postgresql://` URL that `--db` (else $REASONLOG_DB, else the default) names."""
    from ..store import database_target

    db = db if db is not None else os.environ.get("REASONLOG_DB")
    return database_target(os.path.expanduser(db) if db and "://" not in db else db)


def through_store(db: str | None, by: str) -> bool:
    """`query.stats` over the store (any dialect, any session); False when click must answer instead."""
    from pathlib import Path

    from .. import query
    from ..store import SessionFilter, open_store

    try:
        target = target_of(db)
        if isinstance(target, Path) and not target.exists():
            return False
        store = open_store(target, read_only=True)
        try:
            rows = query.stats(store, by, SessionFilter(limit=None))
        finally:
            store.close()
    except Exception:  # noqa: BLE001 - click's path meets the same error and says it in one line
        return False
    sys.stdout.buffer.write(_orjson(rows))
    return True
