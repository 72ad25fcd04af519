"""The SQL that reads the usage kept as calls are written (`usage_rollup`, `usage_daily`, `latency_daily`), and the
latency histograms' buckets, importing nothing.

store/usage.py builds its statistics queries from these texts, and `reasonlog stats --json` (cli/quick_stats.py)
runs the same texts on a SQLite file without importing the store (`read_kept`, here so that the CLI holds no SQL),
so both add the same rows in the same order (a float sum depends on it). See store/usage.py for what the table
keeps and which sessions it does not answer for.
"""

STAT_KEYS = ("day", "model", "agent", "run", "source")
PAIR = "\t"  # between the keys of a pair (`day+model`) in its one text: a name holds no tab
# Must equal reasonlog.accounting.TOKENS (tests/test_cli_quick_stats.py checks it): the rollup's columns.
TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cache_write_1h_tokens",
          "reasoning_tokens")
SUMS = ("calls", "errors", *TOKENS, "cost_usd", "calls_without_cost", "latency_ms_sum", "latency_count")

# Where a session came from: the `source` label importers set (claude-code, codex, …), else "recorded".
# A session holding two `source` labels (none of ours writes two) is counted under the first in byte order.
SOURCE = ("COALESCE((SELECT MIN(l.value) FROM session_labels l WHERE l.key = 'source' AND l.session_id = s.id),"
          " 'recorded')")

# Exchanges whose stats may report a cost (store/usage.py: what makes a session irregular).
_REPORTING = "SELECT id, session_id FROM exchanges WHERE stats_json IS NOT NULL AND stats_json LIKE '%\"cost_usd\"%'"
# Whether any session is irregular: none is unless an exchange reports (a covered sub-agent needs one above it).
ANY_REPORTING = f"SELECT EXISTS ({_REPORTING})"
# A session whose totals the accounting rule may make other than the plain sums of its calls (alias `s`): one
# with an exchange whose stats may report a cost, and a sub-agent spawned (at any depth) inside such an exchange.
# Stats without the key `cost_usd` report nothing (Claude Code's exchanges state only a duration), and a sub-agent
# no reporting exchange covers counts its own calls, so both are regular: 15,300 of 16,500 imported calls went
# through the ledger before. The LIKE may take in more than `accounting.reported_cost` would (a null cost, a
# `cost_usd` inside `by_model`): such a session is read through the ledger, which is never wrong, only slower.
# The subquery is evaluated once (a set, probed per row), not once per session or call.
IRREGULAR_IDS = (
    f"(WITH RECURSIVE reporting AS ({_REPORTING}),"
    " covered (id) AS (SELECT sub.id FROM sessions sub JOIN calls pc ON pc.id = sub.parent_call_id"
    " JOIN reporting r ON r.id = pc.exchange_id"
    " UNION SELECT sub.id FROM sessions sub JOIN calls pc ON pc.id = sub.parent_call_id"
    " JOIN covered v ON v.id = pc.session_id)"
    " SELECT session_id FROM reporting UNION SELECT id FROM covered)")
IRREGULAR = f"s.id IN {IRREGULAR_IDS}"

# A statistics key as the rollup's rows (alias `u`, with sessions `s`) and as the calls' (alias `c`) name it.
GROUP_KEYS = {"day": "u.day", "model": "NULLIF(u.model, '')", "agent": "s.agent", "run": "s.run", "source": SOURCE}
CALL_KEYS = {"day": "SUBSTR(c.started_at, 1, 10)", "model": "c.model", "agent": "s.agent", "run": "s.run",
             "source": SOURCE}


# The same keys as `usage_daily`'s rows (alias `d`, migration 18) name them: '' there stands for no model, agent, run.
DAILY_KEYS = {"day": "d.day", "model": "NULLIF(d.model, '')", "agent": "NULLIF(d.agent, '')",
              "run": "NULLIF(d.run, '')", "source": "d.source"}
KEY_COLUMNS = ("day", "model", "agent", "run", "source")
DAILY_SUMS = (*SUMS, "priced")  # priced: how many usage_rollup rows under the key have a cost (0: cost_usd is None)

# ---------------------------------------------------------------- latency histograms (migration 18)
# Bucket k holds the latencies in [2 ** (k / 32), 2 ** ((k + 1) / 32)) milliseconds: 32 a doubling, each 2.2 %
# wide, from 2 ** -10 ms (about 1 microsecond) up; bucket LOWEST - 1 holds anything below (0 and less), and the
# highest is open above 2 ** 24 ms (4.7 hours). Every edge is the float Python computes here, stored as it is in
# `latency_buckets`, so that SQL (a comparison of two floats) and Python (bisect) put a latency in one bucket.
PER_DOUBLING, LOWEST, HIGHEST = 32, -320, 768
EDGES = [2.0 ** (k / PER_DOUBLING) for k in range(LOWEST, HIGHEST + 1)]


def bucket_of(latency_ms: float) -> int:
    """The bucket of a latency (see EDGES)."""
    from bisect import bisect_right

    return LOWEST - 1 + bisect_right(EDGES, latency_ms)


def bucket_value(bucket: int) -> float:
    """What a bucket answers for a latency in it: its geometric middle (within 1.1 % of anything in it), to the
    microsecond; 0.0 for the bucket below the lowest edge."""
    return 0.0 if bucket < LOWEST else round(2.0 ** ((bucket + 0.5) / PER_DOUBLING), 3)


def median_of(histogram: dict[int, int]) -> float | None:
    """The median of a latency histogram (bucket -> calls): the value of the bucket holding the middle call, the
    lower of the two middle ones when the count is even. None for no calls."""
    total = sum(histogram.values())
    seen, rank = 0, (total + 1) // 2
    for bucket in sorted(histogram):
        seen += histogram[bucket]
        if rank and seen >= rank:
            return bucket_value(bucket)
    return None


REALS = ("cost_usd", "latency_ms_sum")  # the kept sums that are not integers


def summed(column: str) -> str:
    """The sum of a kept column (alias `d`): an integer's as BIGINT, which PostgreSQL's SUM of a BIGINT (a NUMERIC,
    read as a Python Decimal a value) is not; the same integer either way."""
    return f"SUM(d.{column})" if column in REALS else f"CAST(SUM(d.{column}) AS BIGINT)"


def daily_sql(key_sql: str, where: list[str]) -> str:
    """The kept sums by day, model, agent, run and source (`usage_daily`, alias `d`), grouped by `key_sql` under the
    conditions `where`; a key whose calls were all deleted (every sum back to 0) is no row."""
    return (f"SELECT {key_sql}, {', '.join(map(summed, DAILY_SUMS))} FROM usage_daily d"
            f"{' WHERE ' + ' AND '.join(where) if where else ''} GROUP BY {key_sql} HAVING SUM(d.calls) <> 0")


def histogram_sql(key_sql: str, where: list[str]) -> str:
    """The kept latency histograms (`latency_daily`, alias `d`) grouped by `key_sql` under the conditions `where`."""
    return (f"SELECT {key_sql}, d.bucket, {summed('calls')} FROM latency_daily d"
            f"{' WHERE ' + ' AND '.join(where) if where else ''} GROUP BY {key_sql}, d.bucket HAVING SUM(d.calls) <> 0")


def daily_totals(row: tuple) -> dict:
    """A `daily_sql` row's sums by name, cost None where no row under the key had one."""
    sums = dict(zip(DAILY_SUMS, row[1:], strict=True))
    if not sums.pop("priced"):
        sums["cost_usd"] = None
    return sums


def grouped_sql(key_sql: str, where: str, days: list[str]) -> str:
    """The regular sessions' kept sums grouped by `key_sql`, for the sessions `where` selects (alias `s`) and the
    conditions on the rollup's day in `days`."""
    # Unfiltered and grouped by the rollup's own columns, the sessions are not joined (half the time).
    joined = where != "1=1" or "s." in key_sql
    source = f"usage_rollup u JOIN sessions s ON s.id = u.session_id WHERE {where} AND NOT {IRREGULAR}" if joined \
        else f"usage_rollup u WHERE u.session_id NOT IN {IRREGULAR_IDS}"
    return (f"SELECT {key_sql}, {', '.join(f'SUM(u.{c})' for c in SUMS)} FROM {source}"
            f"{''.join(' AND ' + d for d in days)} GROUP BY {key_sql}")


def latencies_sql(key_sql: str, where: str, span: str) -> str:
    """The regular sessions' call latencies with their key (`key_sql` over calls `c` and sessions `s`), for the
    sessions `where` selects and the calls the condition `span` (on `c.started_at`, or '') keeps."""
    return (f"SELECT {key_sql}, c.latency_ms FROM calls c JOIN sessions s ON s.id = c.session_id"
            f" WHERE {where} AND NOT {IRREGULAR} AND c.latency_ms IS NOT NULL AND c.counted_in IS NULL"
            f"{' AND ' + span if span else ''}")


def read_kept(conn, by: str, schema: int) -> tuple[dict, dict] | None:
    """The kept sums by `by` and the latency histograms by `by` (bucket -> calls), from a DB-API connection to a
    SQLite file of `schema` in which no session is irregular; None when the file is of another schema or holds an
    exchange reporting its own cost (the store answers those)."""
    conn.execute("BEGIN")  # one snapshot: no reporting exchange may come in between the queries
    if conn.execute("SELECT MAX(number) FROM _reasonlog_migrations").fetchone()[0] != schema:
        return None
    if conn.execute(ANY_REPORTING).fetchone()[0]:
        return None
    sums = {r[0]: daily_totals(r) for r in conn.execute(daily_sql(DAILY_KEYS[by], [])).fetchall()}
    histograms: dict = {}
    for key, bucket, calls in conn.execute(histogram_sql(DAILY_KEYS[by], [])):
        histograms.setdefault(key, {})[bucket] = calls
    return sums, histograms
