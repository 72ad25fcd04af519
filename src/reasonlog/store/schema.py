"""Numbered migrations. Each runs in one transaction together with its bookkeeping row.

Every migration opens with a comment saying what changes and what NULL means. Never edit a
migration that has shipped: add the next number.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import kept, rollups, search
from .usage_sql import REPORTS_COST


@dataclass(frozen=True)
class Migration:
    """One numbered change of the schema: its SQL, then its Python, in one transaction with its record."""

    number: int
    name: str
    sql: str
    # Runs after `sql`, in the same transaction, with a cursor: for what SQL alone cannot do
    # (decompressing contents to index their text).
    python: Callable[[Any], None] | None = None


# Migration 18's tables (schema_pg.py takes them in its types).
DAILY_TABLES = '''
-- usage_daily: per UTC day, model, agent, run and source (the session's `source` label, else 'recorded'), the sums of
-- the usage_rollup rows under that key, and priced: how many of them have a cost (0: cost_usd means none). ''
-- stands for no model, agent or run (a key column cannot be NULL). latency_daily: per the same key and latency
-- bucket (bucket k: [2^(k/32), 2^((k+1)/32)) ms; latency_buckets holds each bucket's lower edge), how many calls that
-- bill themselves took that long. Triggers keep both in the transaction that changes usage_rollup, the calls or a
-- session's source (store/rollups.py); /usage, stats and the dashboard's charts read them. Python fills the edges
-- and both tables from what is stored; `reasonlog db recount` rebuilds them. No NULLs.
CREATE TABLE usage_daily (
    day {T} NOT NULL,
    model {T} NOT NULL,
    agent {T} NOT NULL,
    run {T} NOT NULL,
    source {T} NOT NULL,
    calls {I} NOT NULL,
    errors {I} NOT NULL,
    input_tokens {I} NOT NULL,
    output_tokens {I} NOT NULL,
    cache_read_tokens {I} NOT NULL,
    cache_write_tokens {I} NOT NULL,
    cache_write_1h_tokens {I} NOT NULL,
    reasoning_tokens {I} NOT NULL,
    cost_usd {R} NOT NULL,
    calls_without_cost {I} NOT NULL,
    latency_ms_sum {R} NOT NULL,
    latency_count {I} NOT NULL,
    priced {I} NOT NULL,
    PRIMARY KEY (day, model, agent, run, source)
){W};
CREATE TABLE latency_daily (
    day {T} NOT NULL,
    model {T} NOT NULL,
    agent {T} NOT NULL,
    run {T} NOT NULL,
    source {T} NOT NULL,
    bucket INTEGER NOT NULL,
    calls {I} NOT NULL,
    PRIMARY KEY (day, model, agent, run, source, bucket)
){W};
CREATE TABLE latency_buckets (
    bucket INTEGER PRIMARY KEY,
    lower_ms {R} NOT NULL
);
CREATE INDEX latency_buckets_lower ON latency_buckets(lower_ms, bucket);
'''

SQLITE_MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "first schema", """
-- The first schema: sessions, exchanges, calls, the message timeline, tool results, outcomes,
-- content-addressed contents with a full-text index, and recorder counters.
-- NULL means "not reported": a NULL token count is unknown, not zero; a NULL ended_at is a
-- session or exchange still open (or interrupted, see status).
CREATE TABLE contents (
    id INTEGER PRIMARY KEY,
    hash BLOB NOT NULL UNIQUE,          -- BLAKE2b-128 of the canonical JSON
    kind TEXT NOT NULL,                 -- message | system | tool
    size INTEGER NOT NULL,              -- bytes of the canonical JSON
    codec INTEGER NOT NULL,             -- 0 plain, 1 zstd
    data BLOB NOT NULL
);
-- Contentless and without positions: the text lives compressed in `contents`; phrases are
-- checked against it after the index narrows the candidates.
CREATE VIRTUAL TABLE contents_fts USING fts5(text, content='', detail=none);

CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    run TEXT,
    agent TEXT,
    model TEXT,
    provider TEXT,
    labels_json TEXT NOT NULL DEFAULT '{}',
    parent_session_id TEXT,
    parent_call_id TEXT,
    external_id TEXT,                   -- the id the agent or provider gave the session
    host TEXT,
    pid INTEGER,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    status TEXT NOT NULL DEFAULT 'open',   -- open | completed | failed | interrupted
    summary TEXT,
    error_json TEXT
);
CREATE INDEX sessions_started ON sessions(started_at);
CREATE INDEX sessions_run ON sessions(run, started_at);
CREATE INDEX sessions_agent ON sessions(agent, started_at);
CREATE INDEX sessions_model ON sessions(model, started_at);
CREATE INDEX sessions_status ON sessions(status, started_at);
CREATE INDEX sessions_external ON sessions(external_id);

CREATE TABLE session_labels (
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    session_id TEXT NOT NULL,
    PRIMARY KEY (key, value, session_id)
) WITHOUT ROWID;

CREATE TABLE exchanges (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    input_json TEXT,
    result_json TEXT,
    status TEXT NOT NULL DEFAULT 'open',
    stats_json TEXT,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    UNIQUE (session_id, idx)
);

CREATE TABLE calls (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    exchange_id TEXT,
    provider TEXT,
    model TEXT,
    started_at TEXT NOT NULL,
    latency_ms REAL,
    ttft_ms REAL,
    status TEXT NOT NULL,               -- ok | error | partial
    stop_reason TEXT,
    error_json TEXT,
    input_tokens INTEGER,               -- uncached input only
    output_tokens INTEGER,              -- includes reasoning_tokens
    cache_read_tokens INTEGER,
    cache_write_tokens INTEGER,         -- 5-minute and 1-hour writes together
    cache_write_1h_tokens INTEGER,      -- the 1-hour part of cache_write_tokens
    reasoning_tokens INTEGER,
    cost_usd REAL,                      -- NULL: unknown (see cost_source)
    cost_source TEXT,                   -- reported | computed@<table version> | unknown_model
    provider_message_id TEXT,
    request_id TEXT,
    params_json TEXT NOT NULL,          -- the request without its messages, system and tools
    shape_json TEXT,                    -- NULL: the request keys are messages/system/tools
    system_id INTEGER,                  -- NULL: the request had no system prompt
    tools_json TEXT,                    -- content ids of the tool schemas; NULL: no tools key
    context_json TEXT NOT NULL,         -- runs into the previous call's context + new content ids
    context_len INTEGER NOT NULL,
    response_id INTEGER,                -- content id of the assistant message; NULL: no response
    raw BLOB,                           -- zstd of the raw payload, against the response message
    raw_format TEXT,                    -- json | text; NULL: no raw payload
    context_facts_json TEXT,
    UNIQUE (session_id, idx)
);
CREATE INDEX calls_started ON calls(started_at);

CREATE TABLE messages (
    session_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    role TEXT,
    content_id INTEGER NOT NULL,
    call_id TEXT,                       -- the call that first sent or produced it
    at TEXT NOT NULL,
    PRIMARY KEY (session_id, idx)
) WITHOUT ROWID;
CREATE INDEX messages_content ON messages(content_id);

CREATE TABLE tool_results (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    tool_use_id TEXT,
    name TEXT,
    input_json TEXT,
    content_json TEXT,
    is_error INTEGER NOT NULL DEFAULT 0,
    duration_ms REAL,
    at TEXT NOT NULL,
    message_idx INTEGER NOT NULL        -- messages in the timeline before it
);
CREATE INDEX tool_results_session ON tool_results(session_id, message_idx);

CREATE TABLE outcomes (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload_json TEXT,
    call_id TEXT,
    at TEXT NOT NULL,
    message_idx INTEGER NOT NULL        -- messages in the timeline before it
);
CREATE INDEX outcomes_session ON outcomes(session_id, message_idx);
CREATE INDEX outcomes_kind ON outcomes(kind, at);

CREATE TABLE counters (
    name TEXT PRIMARY KEY,              -- dropped | rejected | spilled_batches | replayed_batches
    value INTEGER NOT NULL
);
"""),
    Migration(2, "tags that call tools inside text", """
-- Sessions can name XML-like tags that their model writes inside its text to call tools.
-- NULL means the session named none: its text is only text.
ALTER TABLE sessions ADD COLUMN xml_tool_tags_json TEXT;
"""),
    Migration(3, "zstd dictionaries for contents", """
-- Contents may be compressed with a zstd dictionary trained on the database's first contents
-- (codec 2). NULL dict_id means the content was stored without one (codec 0 or 1).
CREATE TABLE zstd_dicts (
    id INTEGER PRIMARY KEY,
    data BLOB NOT NULL,
    trained_at TEXT NOT NULL
);
ALTER TABLE contents ADD COLUMN dict_id INTEGER;
"""),
    Migration(4, "full-text index merges less often", """
-- The full-text index merges its segments once 8 of a level exist instead of 4: bulk writes
-- get about a quarter faster and the index smaller (measured with benchmarks/bench_store.py).
-- No column changes; nothing becomes NULL.
INSERT INTO contents_fts (contents_fts, rank) VALUES ('automerge', 8);
"""),
    Migration(5, "liveness by lock", """
-- An open session names the liveness lock its recording process holds (<db>.live/<token>.lock):
-- when that lock can be taken, the recorder is gone and the session is marked interrupted,
-- whatever its pid now belongs to. NULL means the session was recorded before schema 5 (or
-- where no lock file could be made): its liveness falls back to host and pid.
ALTER TABLE sessions ADD COLUMN live_token TEXT;
"""),
    Migration(6, "search finds any part of any recorded text", """
-- Search finds substrings (the middle of a word, CJK words inside a run), tool results and
-- outcomes: the word index contents_fts gives way to trigram indexes over lowercased text, one
-- per kind of record (see store/search.py). Contentless, rowids only (detail=none), no per-row
-- sizes (columnsize=0): the stored text is checked after the index narrows the candidates.
-- Python fills them from the existing records in this same transaction. No column changes.
DROP TABLE contents_fts;
CREATE VIRTUAL TABLE contents_search USING fts5(text, content='', detail=none, columnsize=0,
    tokenize='trigram case_sensitive 1');
CREATE VIRTUAL TABLE tool_results_search USING fts5(text, content='', detail=none, columnsize=0,
    tokenize='trigram case_sensitive 1');
CREATE VIRTUAL TABLE outcomes_search USING fts5(text, content='', detail=none, columnsize=0,
    tokenize='trigram case_sensitive 1');
INSERT INTO contents_search (contents_search, rank) VALUES ('automerge', 8);
"""),  # Python filled them here until schema 26, which drops them and fills its blocks from what is stored

    Migration(7, "imported files", """
-- What `reasonlog import` and `reasonlog watch` have taken from each file, so that importing
-- again reads only what was appended. `consumed` is the byte offset up to which the file is
-- reflected in the database; `tail_hash` the BLAKE2b-128 (hex) of the up to 4 KiB before it,
-- which tells an appended file (same bytes there) from a rewritten one. `state_json` is the
-- importer's own memory between runs (open exchange, pending tool calls); `sessions_json` the
-- sessions made from the file, removed and made again when the file was rewritten. NULL
-- tail_hash means nothing was consumed yet; NULL state_json, no state.
CREATE TABLE import_files (
    path TEXT PRIMARY KEY,
    format TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    consumed INTEGER NOT NULL,
    tail_hash TEXT,
    state_json TEXT,
    sessions_json TEXT NOT NULL DEFAULT '[]',
    skipped INTEGER NOT NULL DEFAULT 0,   -- lines or records skipped so far, with a reason each time
    imported_at TEXT NOT NULL
);
"""),
    Migration(8, "API keys", """
-- Keys that `reasonlog serve` accepts as bearer tokens. Only a SHA-256 of each key is kept (keys are
-- 32 random bytes: a slow hash would add nothing), with its first characters to tell keys apart.
-- scope is read, write or admin (each includes the ones before it). NULL revoked_at: the key works.
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    name TEXT,
    scope TEXT NOT NULL,
    hash TEXT NOT NULL UNIQUE,
    prefix TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
"""),
    Migration(9, "ingested batches", """
-- Batches that recorders sent to `reasonlog serve` (POST /v1/ingest), by the id the client gave each:
-- a batch sent again (a retry after a lost answer) is recognised and adds nothing. Written in the
-- same transaction as the batch's events. No column is NULL.
CREATE TABLE ingested_batches (
    id TEXT PRIMARY KEY,
    received_at TEXT NOT NULL,
    events INTEGER NOT NULL
);
"""),
    Migration(10, "reasoning records", """
-- Tiered reasoning records (see reasoning/): what an agent saved of its reasoning in a phase, compact (a
-- small validated JSON object) and, in full mode, its long form (details, also written to the artifact
-- file named by artifact_path). state is kept, or held: an on_failure record waits for its session's
-- outcome (kept if the session fails, deleted when it completes). rowid orders records and names them in
-- the full-text index. NULL agent, group_name, confidence, references_json: not given. NULL details,
-- artifact_path, details_tokens: no long form (compact mode). NULL tokenizer: no count was made.
CREATE TABLE reasoning_records (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    agent TEXT,
    group_name TEXT,
    phase TEXT NOT NULL,
    state TEXT NOT NULL,
    compact_json TEXT NOT NULL,
    details TEXT,
    artifact_path TEXT,
    details_tokens INTEGER,
    compact_tokens INTEGER,
    tokenizer TEXT,
    redacted INTEGER NOT NULL DEFAULT 0,
    confidence TEXT,
    references_json TEXT,
    at TEXT NOT NULL
);
CREATE INDEX reasoning_records_session ON reasoning_records(session_id, group_name, phase);
CREATE VIRTUAL TABLE reasoning_records_search USING fts5(text, content='', detail=none, columnsize=0,
    tokenize='trigram case_sensitive 1');
"""),
    Migration(11, "summaries", """
-- Summaries: derived text for a session, an exchange or an assistant message, made off the recording
-- path by `reasonlog summarize` or the server (see summaries/). Never the only copy of anything: each
-- can be recomputed from what it summarises. One row per target, keyed by target_kind (session |
-- exchange | message) and target_id (the session's id, the exchange's id, or `<session id>:<idx>` for a
-- message of the session's timeline); session_id is the session the target belongs to.
-- text, source_hash, summarizer, model, prompt_hash, version and created_at describe the last summary
-- that succeeded (source_hash: a hash of the ids and states of what it summarised, so a summary of a
-- session that has grown since is recomputed without comparing clocks); status, error, failures and
-- attempted_at describe the last attempt. A failed attempt keeps the text it failed to replace (never
-- a cut copy of the input): NULL text means no attempt succeeded yet.
-- NULL error: the last attempt succeeded. NULL model: no model made it (the offline summarizer).
-- NULL prompt_hash: no prompt was sent (the offline summarizer).
CREATE TABLE summaries (
    target_kind TEXT NOT NULL,
    target_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    status TEXT NOT NULL,               -- ok | failed
    text TEXT,
    error TEXT,
    source_hash TEXT NOT NULL,
    summarizer TEXT NOT NULL,           -- offline | anthropic | openai
    model TEXT,
    prompt_hash TEXT,                   -- BLAKE2b-128 (hex) of the prompt template
    version TEXT NOT NULL,              -- the summarizer's own version
    failures INTEGER NOT NULL DEFAULT 0, -- failed attempts since the last that succeeded
    created_at TEXT NOT NULL,
    attempted_at TEXT NOT NULL,
    PRIMARY KEY (target_kind, target_id)
);
CREATE INDEX summaries_session ON summaries(session_id);
"""),
    Migration(12, "the timeline by position", """
-- How each call's context follows from the previous call's context plus its reply, aligned as sequences
-- (see conversation.py and store/timeline.py): {"map": runs [i, j] into the previous call's slots and
-- reply, new timeline entries as themselves; "reply": [timeline entry, items] or null; "added", "trimmed",
-- "edited", "compacted", "unsent", "held"; optional "edits" [[old entry, new entry]], "chain" (the
-- previous_response_id a chained request named)}.
-- NULL: the call was written before this migration; readers derive its window from its content ids.
ALTER TABLE calls ADD COLUMN window_json TEXT;
"""),
    Migration(13, "usage kept as calls are written", """
-- usage_rollup: per session, UTC day (the first ten characters of a call's started_at) and model, the plain
-- sums of its calls, added in the transaction that writes them (store/usage.py): calls, errors, the token
-- columns (a NULL count adds 0), cost, calls with tokens but no cost, latency sum and count, the last call's
-- instant. model '' stands for calls without a model (a key column cannot be NULL). cost_usd NULL: none of
-- those calls has a cost. Readers (session lists, stats, /usage) add these rows up instead of every call;
-- the accounting rule's exceptions (an exchange with reported figures, a sub-agent) still read the calls.
-- Python fills it from the existing calls in this transaction; `reasonlog db recount` rebuilds it.
-- Three indexes: spawned sessions by their parent call (the sub-agents a reporting exchange may cover),
-- exchanges with SDK-reported figures by session (with the former: the sessions the plain sums do not
-- answer for), and a session's labels by session (the `source` each statistics row names).
CREATE TABLE usage_rollup (
    session_id TEXT NOT NULL,
    day TEXT NOT NULL,
    model TEXT NOT NULL,
    calls INTEGER NOT NULL,
    errors INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL,
    cache_write_1h_tokens INTEGER NOT NULL,
    reasoning_tokens INTEGER NOT NULL,
    cost_usd REAL,
    calls_without_cost INTEGER NOT NULL,
    latency_ms_sum REAL NOT NULL,
    latency_count INTEGER NOT NULL,
    last_call_at TEXT NOT NULL,
    PRIMARY KEY (session_id, day, model)
) WITHOUT ROWID;
CREATE INDEX usage_rollup_day ON usage_rollup(day);
CREATE INDEX sessions_parent_call ON sessions(parent_call_id) WHERE parent_call_id IS NOT NULL;
CREATE INDEX exchanges_reported ON exchanges(session_id) WHERE stats_json IS NOT NULL;
CREATE INDEX session_labels_session ON session_labels(session_id, key);
""", python=kept.recount_before_16),
    Migration(14, "replays linked to their originals", """
-- replay_of: the id of the recorded call this call re-sent (`reasonlog replay CALL --send`), which may live in
-- another session; replays are recorded as sessions of the run `replays`. NULL: the call is no replay.
-- The index finds the replays of a session's calls (the dashboard's compare link).
ALTER TABLE calls ADD COLUMN replay_of TEXT;
CREATE INDEX calls_replay_of ON calls(replay_of) WHERE replay_of IS NOT NULL;
"""),
    Migration(15, "search by meaning", """
-- Search by meaning (docs/search.md, store/units.py, store/vectors.py). All of it is derived from what is stored,
-- in the background (`reasonlog embed`, `reasonlog serve`), never by a recorder; plain tables, so a file stays
-- readable by any sqlite3 (the vector functions of sqlite-vec are loaded only by the search's own connection).
-- unit_texts: each distinct text that is embedded, once: a chunk of a user message's text, of an assistant's text
-- and thinking, of a tool result of 200 characters or more, or a session's summary. hash: BLAKE2b-128 of its
-- UTF-8 bytes; size: those bytes; codec: 0 plain, 1 zstd (as contents).
CREATE TABLE unit_texts (
    id INTEGER PRIMARY KEY,
    hash BLOB NOT NULL UNIQUE,
    size INTEGER NOT NULL,
    codec INTEGER NOT NULL,
    data BLOB NOT NULL
);
-- search_units: where each text occurs. kind: user | assistant | tool_result | summary. message_idx: the timeline
-- position of the message (or the tool_results row's message_idx); NULL: a session's summary. tool_result_id: the
-- tool_results row it was cut from; NULL: a part of a message, or no tool result. part: the n-th tool result of
-- its message (0 otherwise); chunk: the n-th chunk of that text.
CREATE TABLE search_units (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    message_idx INTEGER,
    tool_result_id TEXT,
    part INTEGER NOT NULL,
    chunk INTEGER NOT NULL,
    text_id INTEGER NOT NULL
);
CREATE INDEX search_units_session ON search_units(session_id, message_idx);
CREATE INDEX search_units_text ON search_units(text_id);
-- unit_vectors: a text's embedding by one model. model: its name and version (a vector of another model is
-- never compared, and a new model embeds again); vector: `dim` float32 numbers, little-endian, L2-normalised;
-- code: the vector's sign bits (bit i set: number i > 0; numpy's packbits order, zero-padded to whole 8-byte words:
-- 48 bytes at 384 dimensions), the prefilter a search ranks first (store/vector_index.py). id: never reused
-- (AUTOINCREMENT), so a searching process reads only the rows added since it last looked; the index on
-- (model, dim, id) holds the codes, so that reading them never reads the vectors.
CREATE TABLE unit_vectors (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    model TEXT NOT NULL,
    text_id INTEGER NOT NULL,
    dim INTEGER NOT NULL,
    code BLOB NOT NULL,
    vector BLOB NOT NULL,
    UNIQUE (model, text_id)
);
CREATE INDEX unit_vectors_codes ON unit_vectors(model, dim, id, text_id, code);
-- session_vectors: per model and session, the L2-normalised mean of its units' vectors ("sessions like this one");
-- units: how many unit vectors it averages (fewer than the session has now: it is recomputed).
CREATE TABLE session_vectors (
    model TEXT NOT NULL,
    session_id TEXT NOT NULL,
    dim INTEGER NOT NULL,
    units INTEGER NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, session_id)
);
-- unit_marks: how far each session was cut into units: its first `messages` timeline entries, its tool results up
-- to rowid `tool_results`, and the summary whose text has the BLAKE2b-128 hex `summary` (NULL: no summary yet).
CREATE TABLE unit_marks (
    session_id TEXT PRIMARY KEY,
    messages INTEGER NOT NULL,
    tool_results INTEGER NOT NULL,
    summary TEXT
);
"""),
    Migration(16, "calls counted once", """
-- counted_in: the id of the call that bills this one: the same model call reached the database by another path (the
-- proxy or an SDK recorded it, and an import read it from the agent's log; store/twins.py). This row keeps what
-- its path gave (its messages, ids) with its tokens and cost set to 0, and readers count it in no total. NULL: the
-- call bills itself. The index finds a call by its provider message id, which both paths hold.
ALTER TABLE calls ADD COLUMN counted_in TEXT;
CREATE INDEX calls_provider_message ON calls(provider_message_id) WHERE provider_message_id IS NOT NULL;
"""),
    Migration(17, "annotations and scores", """
-- annotations: what a person, a code check or an LLM judge said about a session, one of its exchanges or one of its
-- calls after it was recorded (docs/review.md). One row per item. kind: note (value: its text; name NULL) | label
-- (name = value) | score (name; value: the score as given, as text; number: that score as a number, NULL for a
-- categorical score such as 'pass'). exchange_id and call_id NULL: about the whole session; call_id set: about that
-- call; exchange_id set and call_id NULL: about that exchange. author: who or what gave it (NULL: not said);
-- source: human | code | llm. Nothing recorded before 17 has any.
CREATE TABLE annotations (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    exchange_id TEXT,
    call_id TEXT,
    kind TEXT NOT NULL,
    name TEXT,
    value TEXT NOT NULL,
    number REAL,
    author TEXT,
    source TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX annotations_session ON annotations(session_id, created_at);
CREATE INDEX annotations_scores ON annotations(name, number) WHERE kind = 'score';
"""),
    Migration(18, "usage by day, model, agent, run and source", DAILY_TABLES.format(T="TEXT", I="INTEGER", R="REAL",
                                                                                   W=" WITHOUT ROWID")
              + rollups.trigger_sql("sqlite"), python=rollups.fill),
    Migration(19, "contents found by what refers to them", """
-- Nothing changes in a SQLite file: PostgreSQL's migration 19 indexes the contents each call names, so that its
-- prune (in bounded transactions beside live writers) asks about the contents a pruned session used alone. SQLite's
-- prune runs in one transaction and compares whole sets (store/maintenance.py), which needs no index.
"""),
    Migration(20, "search holds words, contents in blocks", """
-- Nothing changes in a SQLite file: PostgreSQL's migration 20 makes its trigram index hold each text's words once and
-- a block of contents a row (store/pg_search.py). FTS5's contentless trigram index keeps no text beside it.
"""),
    Migration(21, "vectors ranked by pgvector where PostgreSQL has it", """
-- Nothing changes in a SQLite file: PostgreSQL's migration 21 stores each vector a second time in pgvector's type
-- when the server has the extension, and ranks there (store/pg_vectors.py). SQLite ranks by the codes in memory and
-- sqlite-vec's exact scan, as before (store/vector_index.py, store/vectors.py).
"""),
    Migration(22, "exchanges that report a cost indexed alone", """
-- The exchanges whose stats may report a cost (store/usage_sql.py, REPORTS_COST: what makes a session
-- irregular to the accounting rule), indexed alone: every statistics read (the usage page three times) asks
-- which are under its filter, and read every exchange's stats for it (14 ms at 100,000 exchanges, each
-- time). The condition is REPORTS_COST itself: a planner uses a partial index for a query with its condition.
CREATE INDEX exchanges_reporting ON exchanges(session_id, id) WHERE """ + REPORTS_COST + ";\n"),
    Migration(23, "contents searched by their own text, in blocks", """
-- Nothing changes in a SQLite file: PostgreSQL's migration 23 makes each block of its trigram index hold its contents'
-- texts whole, so that a content's own text is checked in SQL (store/pg_search.py). FTS5 indexes each content alone.
"""),
    Migration(24, "calls added to the latency histograms a statement at a time", """
-- Nothing changes in a SQLite file: PostgreSQL's migration 24 makes the trigger that adds an inserted call to
-- latency_daily run once a statement (a batch's calls are one COPY there). SQLite has no transition tables, and its
-- row trigger costs no round trip.
"""),
    Migration(25, "text waits to be indexed in bulk", """
-- Rows of the full-text indexes may wait before they are indexed: the writer notes each new content (kind 0), tool
-- result (1), outcome (2) and reasoning record (3) here by id, and indexes every waiting row in one transaction once
-- enough text waits (store/fts_pending.py), since FTS5's work at each commit cost as much as the text's own. A
-- search takes every waiting row as a candidate and checks its stored text, as it does whatever the index finds.
-- Nothing waits in an existing file: its indexes stay as they are. No NULLs.
CREATE TABLE search_pending (
    kind INTEGER NOT NULL,
    id INTEGER NOT NULL,
    PRIMARY KEY (kind, id)
) WITHOUT ROWID;
"""),
    Migration(26, "searched text in blocks, without an index", """
-- Search keeps no index on SQLite: the FTS5 trigram tables give way to blocks of the same text (store/text_blocks.py),
-- each the index form of a run of records of one kind (kind: 0 contents, 1 tool results, 2 outcomes, 3 reasoning
-- records, as in search_pending), UTF-8 and each text ended by a NUL, compressed by zstd (data); ids the records'
-- ids (8-byte integers, little-endian), ends the offset after each one's NUL (4-byte, little-endian), lo and hi the
-- least and greatest id. A search reads every block. Python fills them from what is stored, in this transaction;
-- what waited in search_pending is in them then. No NULLs.
DROP TABLE contents_search;
DROP TABLE tool_results_search;
DROP TABLE outcomes_search;
DROP TABLE reasoning_records_search;
DELETE FROM search_pending;
CREATE TABLE search_blocks (
    id INTEGER PRIMARY KEY,
    kind INTEGER NOT NULL,
    lo INTEGER NOT NULL,
    hi INTEGER NOT NULL,
    ids BLOB NOT NULL,
    ends BLOB NOT NULL,
    data BLOB NOT NULL
);
CREATE INDEX search_blocks_kind ON search_blocks(kind, lo);
""", python=search.rebuild),
)
