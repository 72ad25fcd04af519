"""The mirror's tables in ClickHouse, shaped for the reads that grow with the archive (see docs/scale.md).

Every table is a ReplacingMergeTree over a `version` column: a push writes each row with its push's version, and a
row pushed again (a session that changed) replaces the older one; a row that left the record is written again with
`deleted = 1`. Readers read `FINAL` and skip deleted rows, so what they see is the last push of each row whatever
merges ran. `src` names the record a row came from: several records push into one mirror, each its own rows.

- `mirror_calls`: one wide row per accounting entry (reasonlog.accounting): a call, or an exchange's reported
  figures, with the session's run, agent and source label beside its own model, status, latency, tokens and cost,
  already zeroed where a reported cost covers it. Usage and statistics are sums over it with no join. Partitioned by
  month and ordered by (src, day, session, entry): a date range reads its months and days only. A call's row
  carries its reply's text (`reply`), so a question about what the model answered needs no join, and its latency's
  bucket (`latency_bucket`, store/usage_sql.py: the record's histograms), so a median needs no list of latencies.
- `mirror_usage`: `mirror_calls` summed by day, model, agent, run and source label, rebuilt by each push that
  changed something (mirror/rollup.py) into one of three slots, the one the cursor names being read: the usage page
  and the statistics over everything, or over whole days, read a few thousand rows instead of every call.
- `mirror_sessions`: one row per session with what its filters test (run, agent, model and the models of its calls,
  status, start, labels) and its list row as the record gives it (totals counted), ordered by (src, id).
- `mirror_messages`: the timeline's text by session and position, for search (`low`: lowercased as the record's
  search folds case, by Python's `str.lower`, so that ClickHouse compares bytes and finds exactly what the record
  finds: its own lowerUTF8 folds fewer characters).
- `mirror_texts`: the same for what a search finds beside the messages: tool results, outcomes and kept reasoning
  records, by session, kind and the record's rowid.
- `mirror_cursors`: per source, how far its last push got (`pushed_through`, the newest instant the record held
  when that push began), its `mark` (store/mirrored.py), whether it finished, and the slot and version of the usage
  it left (`usage_slot`, `usage_version`).
"""
from __future__ import annotations

from ..accounting import TOKENS
from .engine import Engine

CALL_COLUMNS = ("src", "session_id", "entry", "kind", "version", "deleted", "day", "started_at", "model", "status",
                "latency_ms", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
                "cache_write_1h_tokens", "reasoning_tokens", "cost_usd", "has_cost", "without_cost", "run", "agent",
                "source_label", "irregular", "reply", "latency_bucket")
SESSION_COLUMNS = ("src", "id", "version", "deleted", "fingerprint", "parent_session_id", "run", "agent", "model",
                   "status", "started_at", "day", "labels", "models", "row")
MESSAGE_COLUMNS = ("src", "session_id", "idx", "version", "deleted", "role", "at", "call_id", "low")
TEXT_COLUMNS = ("src", "session_id", "kind", "ref", "version", "deleted", "low")
CURSOR_COLUMNS = ("src", "version", "pushed_through", "mark", "done", "sessions", "pushed_at", "usage_slot",
                  "usage_version")
USAGE_KEYS = ("day", "model", "agent", "run", "source_label")
USAGE_SUMS = ("calls", "errors", *TOKENS, "cost_usd", "priced", "without_cost", "latency_ms_sum", "latency_count")
USAGE_COLUMNS = ("src", "slot", "version", *USAGE_KEYS, *USAGE_SUMS, "buckets", "bucket_calls")


# Rows a granule of `mirror_sessions`: a page reads its sessions' list rows by id, and a granule of 8,192 rows is
# 10 MB of them to decompress for one (14 ms of a ClickHouse 18.16 server's CPU for a page of 66; 2 ms at 1,024).
SESSION_GRANULE = 1024

TABLES = {"mirror_calls": CALL_COLUMNS, "mirror_sessions": SESSION_COLUMNS, "mirror_messages": MESSAGE_COLUMNS,
          "mirror_texts": TEXT_COLUMNS, "mirror_cursors": CURSOR_COLUMNS,
          "mirror_usage": USAGE_COLUMNS}


def create(engine: Engine) -> None:
    """Create the mirror's tables where they are missing (a destroyed mirror is rebuilt by the next push). A mirror
    of an older layout (a table whose columns are not these) is dropped first: the push fills it again, whole."""
    if not current(engine):
        drop(engine)
    d, db = engine.dialect, engine.database
    label, nullable_label, settings = d.label, d.nullable_label, d.table_settings()
    engine.command(f"""CREATE TABLE IF NOT EXISTS {db}.mirror_calls (
        src String, session_id String, entry String, kind {label}, version UInt64, deleted UInt8,
        day Date, started_at String, model {nullable_label}, status {nullable_label}, latency_ms Nullable(Float64),
        input_tokens UInt64, output_tokens UInt64, cache_read_tokens UInt64, cache_write_tokens UInt64,
        cache_write_1h_tokens UInt64, reasoning_tokens UInt64, cost_usd Float64, has_cost UInt8,
        without_cost UInt8, run Nullable(String), agent {nullable_label}, source_label {label}, irregular UInt8,
        reply String, latency_bucket Int32
    ) ENGINE = ReplacingMergeTree(version) PARTITION BY toYYYYMM(day) ORDER BY (src, day, session_id, entry)
    {settings}""")
    engine.command(f"""CREATE TABLE IF NOT EXISTS {db}.mirror_sessions (
        src String, id String, version UInt64, deleted UInt8, fingerprint String, parent_session_id Nullable(String),
        run Nullable(String), agent {nullable_label}, model {nullable_label}, status {label}, started_at String,
        day Date, labels Array(String), models Array(String), row String
    ) ENGINE = ReplacingMergeTree(version) ORDER BY (src, id){d.table_settings(SESSION_GRANULE)}""")
    engine.command(f"""CREATE TABLE IF NOT EXISTS {db}.mirror_messages (
        src String, session_id String, idx UInt64, version UInt64, deleted UInt8, role {nullable_label},
        at String, call_id Nullable(String), low String{d.text_index}
    ) ENGINE = ReplacingMergeTree(version) ORDER BY (src, session_id, idx){settings}""")
    engine.command(f"""CREATE TABLE IF NOT EXISTS {db}.mirror_texts (
        src String, session_id String, kind {label}, ref UInt64, version UInt64, deleted UInt8, low String{d.text_index}
    ) ENGINE = ReplacingMergeTree(version) ORDER BY (src, session_id, kind, ref){settings}""")
    engine.command(f"""CREATE TABLE IF NOT EXISTS {db}.mirror_cursors (
        src String, version UInt64, pushed_through Nullable(String), mark String, done UInt8, sessions UInt64,
        pushed_at String, usage_slot UInt8, usage_version UInt64
    ) ENGINE = ReplacingMergeTree(version) ORDER BY src{settings}""")
    _create_usage(engine)


def _create_usage(engine: Engine) -> None:
    """The usage rollup: a ReplacingMergeTree whose merges leave one row per key and slot (the newest push's), so
    a slot's older rows go without a delete; the key's NULLs told from empty texts (18.16 sorts by no Nullable)."""
    d, db = engine.dialect, engine.database
    sums = ", ".join(f"{name} {'Float64' if name in ('cost_usd', 'latency_ms_sum') else 'UInt64'}"
                     for name in USAGE_SUMS)
    key = ", ".join(f"isNull({k}), ifNull({k}, '')" for k in ("model", "agent", "run"))
    engine.command(f"""CREATE TABLE IF NOT EXISTS {db}.mirror_usage (
        src String, slot UInt8, version UInt64, day Date, model {d.nullable_label}, agent {d.nullable_label},
        run Nullable(String), source_label {d.label}, {sums}, buckets Array(Int32), bucket_calls Array(UInt64)
    ) ENGINE = ReplacingMergeTree(version) ORDER BY (src, slot, day, {key}, source_label){d.table_settings()}""")


def current(engine: Engine) -> bool:
    """Whether every mirror table present has this layout's columns (none present counts as current)."""
    found: dict[str, set[str]] = {}
    for table, name in engine.query(f"SELECT table, name FROM system.columns WHERE database = '{engine.database}'"
                                    " AND table LIKE 'mirror%'"):  # 18.16's system.columns has no position
        found.setdefault(table, set()).add(name)
    return all(columns == set(TABLES.get(table, ())) for table, columns in found.items())


def drop(engine: Engine) -> None:
    """Drop the mirror's tables (tests and `mirror push --rebuild`): the next push fills them again."""
    for table in TABLES:
        engine.command(f"DROP TABLE IF EXISTS {engine.database}.{table}")
