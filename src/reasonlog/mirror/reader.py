"""Reading the mirror: the answers `serve --mirror` takes from ClickHouse instead of the record.

`MirrorReader` answers the three reads that grow with the archive as the record's store does, to the same dicts:
`usage_groups` (statistics and the usage page), `list_sessions` and `count_sessions` (session lists and filters,
and `?q=` search over sessions: the timeline's text and the searched records' are in the mirror). `Mirrored` is the
reader store the routes get: those three from the mirror while it is caught up with the record (its cursor's last
push finished at the record's current mark), everything else, and those too when behind, when the mirror cannot be
read, or when asked for what the mirror does not hold (scores, notes), from the record.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

import orjson

from ..accounting import TOKENS
from ..store import MirrorSource, SessionFilter, StoreReader
from ..store.rollups import CHART_TOKENS, DayUsage, pivoted, point_of
from ..store.search import Query
from ..wire import SessionJSON
from . import push, rollup
from .engine import Engine, MirrorError, literal

# the keys over `mirror_calls` and `mirror_usage` alike (the rollup's columns are named as the calls')
STAT_KEYS = {"day": "toString(day)", "model": "model", "agent": "agent", "run": "run", "source": "source_label"}
PAIR = "\t"
SEARCHED = {"mirror_messages": "idx", "mirror_texts": "kind, ref"}  # the tables a search reads, and their keys
SPARE = 16  # rows a page reads past its end without FINAL, for the older versions among them
CHECKED = 2000  # a text held by at most this many sessions is checked session by session, not through FINAL
WALK = 8  # a search's page is first looked for among this many times its sessions, newest first (at least 200)


class MirrorReader:
    """The mirror's rows of one source, read as the record's store reads its own."""

    def __init__(self, engine: Engine, src: str):
        self.engine, self.src, self.db = engine, src, engine.database

    def cursor(self) -> dict | None:
        return push.cursor(self.engine, self.src)

    # ------------------------------------------------------------ sessions

    def list_sessions(self, flt: SessionFilter) -> list[SessionJSON]:
        """The record's session rows as pushed (its `SessionJSON`, kept whole in `row`)."""
        table, order = f"{self.db}.mirror_sessions FINAL", "ORDER BY started_at DESC, id DESC"
        if flt.limit is None:
            return [orjson.loads(r[0]) for r in self.engine.query(
                f"SELECT row FROM {table} WHERE {self._where(flt)} {order}")]
        if flt.text is None:
            page = self._page(flt)
            if page is not None:
                return page
        # A page: its ids first from the narrow columns, then only their rows, found by the table's key
        ids = self._searched(flt) if flt.text is not None else [r[0] for r in self.engine.query(
            f"SELECT id FROM {table} WHERE {self._where(flt)} {order} LIMIT {int(flt.limit)}")]
        newest = self._newest(ids)
        return [orjson.loads(newest[i][1]) for i in ids]

    def _page(self, flt: SessionFilter) -> list[SessionJSON] | None:
        """A page without FINAL: the first rows of any version the filter selects, newest first, and a few more;
        those that are their session's newest version are the page (a session's newest row that the filter selects
        is among them, ranked as FINAL ranks it; an older one is passed over). None when older versions took so
        many places that fewer than the page are left (FINAL reads it then)."""
        assert flt.limit is not None
        first = self._first(flt, int(flt.limit), rows=True)
        if first is None:
            return None

        page, newest = first
        return [orjson.loads(newest[sid][1]) for sid in page]

    def _first(self, flt: SessionFilter, n: int, rows: bool) -> tuple[list[str], dict[str, tuple[int, str]]] | None:
        """The ids of the first `n` sessions the filter selects, newest first, as FINAL ranks them, read without
        FINAL (see `_page`), and each one's newest version (with its list row when `rows`); None when older
        versions took so many places that fewer than `n` are left, in a few more rows and then in many more (the
        newest sessions are those a `--watch` pushes again and again, or a deletion wrote last, until merges)."""
        for spare in (SPARE, 4 * n + 64):
            wanted = n + spare
            found = self.engine.query(f"SELECT id, version FROM {self.db}.mirror_sessions WHERE {self._where(flt)}"
                                      f" ORDER BY started_at DESC, id DESC LIMIT {wanted}")
            newest = self._newest([sid for sid, _ in found], rows)
            page = [sid for sid, version in found if newest[sid][0] == version][:n]
            if len(page) == n or len(found) < wanted:
                return page, newest
        return None


    def _newest(self, ids: list[str], rows: bool = True) -> dict[str, tuple[int, str]]:
        """The newest version of these sessions' rows and its list row (or '' without `rows`), by the table's key
        and without FINAL (which costs a ClickHouse 18.16 server twenty times the read): what FINAL would keep."""
        newest: dict[str, tuple[int, str]] = {}
        if not ids:
            return newest
        column = "row" if rows else "''"
        for sid, version, row in self.engine.query(
                f"SELECT id, version, {column} FROM {self.db}.mirror_sessions"
                f" WHERE src = {literal(self.src)} AND id IN ({', '.join(literal(i) for i in set(ids))})"):
            if sid not in newest or version > newest[sid][0]:
                newest[sid] = (version, row)
        return newest

    def count_sessions(self, flt: SessionFilter) -> int:
        return int(self.engine.query(f"SELECT count() FROM {self.db}.mirror_sessions FINAL"
                                     f" WHERE {self._where(flt)}")[0][0])

    def _where(self, flt: SessionFilter, held: str | None = None) -> str:
        """The sessions a filter selects (run, agent, status, model, dates, labels, parent, page cursor, text:
        `held`, the condition `_held_by` gave for it, when known)."""
        where = [f"src = {literal(self.src)}", "deleted = 0"]
        for column in ("run", "agent", "status"):
            value = getattr(flt, column)
            if value is not None:
                where.append(f"{column} = {literal(value)}")
        if flt.model is not None:
            where.append(f"(model = {literal(flt.model)} OR has(models, {literal(flt.model)}))")
        if flt.since or flt.until:
            span = _span(flt)
            where.append(f"(({span.replace('@', 'started_at')}) OR id IN (SELECT session_id FROM"
                         f" {self.db}.mirror_calls FINAL WHERE src = {literal(self.src)} AND deleted = 0"
                         f" AND kind != 'reported' AND {span.replace('@', 'started_at')}))")
        for key, value in flt.labels.items():
            where.append(f"has(labels, {literal(key + PAIR + value)})")
        if flt.parent is not None:
            where.append(f"parent_session_id = {literal(flt.parent)}")
        if flt.text is not None:
            where.append(held or self._matching(flt.text))
        if flt.after is not None:
            at, sid = flt.after
            where.append(f"(started_at < {literal(at)} OR (started_at = {literal(at)} AND id < {literal(sid)}))")
        return " AND ".join(where)

    def _searched(self, flt: SessionFilter) -> list[str]:
        """The ids of a page of a search. The newest sessions the filter selects are looked in first, session by
        session through the tables' keys (as the record walks a common text): a common word fills its page there.
        Else, a text held by few sessions is found in all of them at once (through the skip index where there is
        one); one held by many is looked for among more of the newest, and then in every session through FINAL."""
        assert flt.limit is not None
        text, plain, walk = str(flt.text), replace(flt, text=None), max(WALK * flt.limit, 200)
        ranked = self._first(plain, walk, rows=False)  # without FINAL over every session
        newest = ranked[0] if ranked is not None else [r[0] for r in self.engine.query(
            f"SELECT id FROM {self.db}.mirror_sessions FINAL WHERE {self._where(plain)}"
            f" ORDER BY started_at DESC, id DESC LIMIT {walk}")]
        first = max(2 * flt.limit, 100)
        page = self._hits(text, newest[:first])
        if len(page) >= flt.limit or len(newest) <= first:
            return page[:flt.limit]
        held = self._held_by(text)
        if held is None:  # held by many: the rest of the walk, then every session
            page += self._hits(text, newest[first:])
            if len(page) >= flt.limit or len(newest) < walk:
                return page[:flt.limit]
            held = f"id IN ({self._found(text)})"
        return [r[0] for r in self.engine.query(
            f"SELECT id FROM {self.db}.mirror_sessions FINAL WHERE {self._where(flt, held)}"
            f" ORDER BY started_at DESC, id DESC LIMIT {int(flt.limit)}")]

    def _hits(self, text: str, among: list[str]) -> list[str]:
        """Those of `among` (in their order) that hold the text."""
        if not among:
            return []
        hits = {r[0] for r in self.engine.query(self._found(text, among))}
        return [sid for sid in among if sid in hits]


    def _matching(self, text: str) -> str:
        """The condition on `id` of the sessions holding the text (`_held_by`); a text held by too many sessions for
        that, through FINAL."""
        return self._held_by(text) or f"id IN ({self._found(text)})"

    def _held_by(self, text: str) -> str | None:
        """The condition on `id` of the sessions holding the text: the sessions any row of whose holds it (no FINAL:
        where the engine has a skip index on the text, only the granules that may hold it are read), each then
        checked by its records' newest versions; None when more than CHECKED sessions hold it."""
        held = self._held(text)
        # the text tested first (PREWHERE, no FINAL here), so that the other columns are read only where it is held:
        # on 18.16, which has no skip index, that halves a rare text's scan of 5,000,000 messages
        any_row = " UNION ALL ".join(f"SELECT session_id FROM {self.db}.{table} PREWHERE {held}"
                                     f" WHERE src = {literal(self.src)} AND deleted = 0" for table in SEARCHED)
        candidates = [r[0] for r in self.engine.query(
            f"SELECT DISTINCT session_id FROM ({any_row}) LIMIT {CHECKED + 1}")]
        if len(candidates) > CHECKED:
            return None
        found = [r[0] for r in self.engine.query(self._found(text, candidates))] if candidates else []
        return f"id IN ({', '.join(literal(i) for i in found)})" if found else "0"

    def _held(self, text: str) -> str:
        """Whether a record's text satisfies the query, as the record's search decides it (store/search.py: every
        group in one record, no excluded term in it; text lowered as the record lowers)."""
        query = Query.parse(text)
        has = [" OR ".join(_contains(term) for term in group) for group in query.groups]
        if query.excluded:
            has.append("NOT (" + " OR ".join(_contains(term) for term in query.excluded) + ")")
        return " AND ".join(f"({h})" for h in has)

    def _found(self, text: str, among: list[str] | None = None) -> str:
        """The sessions holding a record whose text satisfies the query: all of them through FINAL, or those of
        `among` by the tables' key."""
        held = self._held(text)
        if among is None:
            return " UNION ALL ".join(f"SELECT session_id FROM {self.db}.{table} FINAL WHERE src = {literal(self.src)}"
                                      f" AND deleted = 0 AND {held}" for table in SEARCHED)
        # a few sessions, found by the key: each record's newest version decides, as FINAL would, without FINAL
        sessions = ", ".join(literal(i) for i in among)
        return " UNION ALL ".join(
            f"SELECT session_id FROM (SELECT session_id, argMax(deleted = 0 AND {held}, version) AS hit"
            f" FROM {self.db}.{table} WHERE src = {literal(self.src)} AND session_id IN ({sessions})"
            f" GROUP BY session_id, {key}) WHERE hit" for table, key in SEARCHED.items())

    # ------------------------------------------------------------ usage

    def usage_groups(self, by: str, flt: SessionFilter, latencies: bool = True,
                     finished: bool = False) -> dict[str | None, dict]:
        """Totals by day, model, agent, run or source (or a pair `day+model`), as the record's `usage_groups`: from
        the usage summed by the last push when the filter is whole days or none (mirror/rollup.py), else from the
        calls' rows. `finished`: the caller found the source's last push finished (`Mirrored`, once a second), so
        the usage is read with its slot in one query, the cursor not asked first."""
        where = self._usage(flt, finished)
        if where:
            rows = rollup.read(self.engine, self.src, where, _key(by), flt, latencies)
        else:
            rows = self._summed_calls(_key(by), flt, latencies)
        return {r[0]: _totals(r, latencies) for r in rows}

    def usage_series(self, split: str, flt: SessionFilter, names: list[str],
                     finished: bool = False) -> list[DayUsage]:
        """The usage chart's days by `split` (model or agent), as the record's `usage_series`: from the rollup, the
        days pivoted in ClickHouse as the record pivots in SQL (a row a day reaches Python: 500, where a row a day and
        name was 10,000 at 5,000,000 messages)."""
        where = self._usage(flt, finished)
        if not where:
            groups = self.usage_groups(f"day+{split}", flt, False)
            return pivoted((point_of(key, t) for key, t in groups.items()), names)
        rows = rollup.read_sums(self.engine, self.src, where, "toString(day)",
                                rollup.pivot(f"ifNull({STAT_KEYS[split]}, '')", names, CHART_TOKENS), flt)
        width = len(names) + 1
        return sorted((day, tuple(int(n) for n in row[:width]),
                       tuple(round(cost, 12) if priced else None
                             for cost, priced in zip(row[width:2 * width], row[2 * width:3 * width], strict=True)),
                       int(row[-1])) for day, *row in rows)

    def _usage(self, flt: SessionFilter, finished: bool) -> str | None:
        """The rollup's rows that answer `flt` (rollup.slot_of), or None when they cannot: a filter the rollup does
        not answer, or, unless the caller found the last push `finished`, a push under way, none yet, or no cursor
        table (the cursor's row asked first)."""
        if not rollup.answers(flt):
            return None
        if finished:
            return rollup.slot_of(self.engine, self.src, None)
        try:
            rows = self.engine.query(f"SELECT done, usage_slot, usage_version FROM {self.db}.mirror_cursors FINAL"
                                     f" WHERE src = {literal(self.src)}")
        except MirrorError:
            return None
        if not rows or not rows[0][0] or not rows[0][2]:
            return None
        return rollup.slot_of(self.engine, self.src, (int(rows[0][1]), int(rows[0][2])))

    def _summed_calls(self, key: str, flt: SessionFilter, latencies: bool) -> list[tuple]:
        where = [f"src = {literal(self.src)}", "deleted = 0", "kind != 'gone'"]
        chosen = replace(flt, since=None, until=None, limit=None)
        if chosen != SessionFilter(limit=None):
            where.append(f"session_id IN (SELECT id FROM {self.db}.mirror_sessions FINAL WHERE {self._where(flt)})")
        if flt.since or flt.until:
            where.append(_span(flt).replace("@", "started_at"))
        sums = ", ".join(rollup.CALL_SUMS.values())
        return self.engine.query(f"SELECT {key} AS k, {sums}{rollup.histogram(rollup.CALL_HISTOGRAM, latencies)}"
                                 f" FROM {self.db}.mirror_calls FINAL WHERE {' AND '.join(where)} GROUP BY k")


def _totals(row: tuple, latencies: bool) -> dict:
    n = len(TOKENS)
    calls, errors, *rest = row[1:]
    out: dict[str, Any] = {"calls": int(calls), "errors": int(errors),
                           **{t: int(v) for t, v in zip(TOKENS, rest[:n], strict=True)}}
    cost, priced, without, latency_sum, latency_count = rest[n:n + 5]
    out["cost_usd"] = round(cost, 12) if priced else None
    out["calls_without_cost"] = int(without)
    out["latency_ms_sum"], out["latency_count"] = latency_sum, int(latency_count)
    if latencies:
        middle, count = rest[n + 5:n + 7]
        # the middle call's bucket, as one call: the record's median (the histogram's other buckets are not sent)
        out["histogram"] = {int(middle): 1} if count else {}
    return out


def _key(by: str) -> str:
    if "+" not in by:
        return STAT_KEYS[by]
    parts = f", '{PAIR}', ".join(f"ifNull({STAT_KEYS[k]}, '')" for k in by.split("+"))  # a pair, or more
    return f"concat({parts})"


def _contains(term: str) -> str:
    """Whether the lowered text holds `term`, byte for byte: a LIKE with the pattern's own characters escaped (an
    n-gram skip index serves LIKE, not `position`)."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"low LIKE {literal('%' + escaped + '%')}"


def _span(flt: SessionFilter) -> str:
    parts = []
    if flt.since:
        parts.append(f"@ >= {literal(flt.since)}")
    if flt.until:
        parts.append(f"@ < {literal(_exclusive_end(flt.until))}")
    return " AND ".join(parts)


def _exclusive_end(until: str) -> str:
    if len(until) == 10:
        from datetime import date, timedelta

        return (date.fromisoformat(until) + timedelta(days=1)).isoformat()
    return until


class Record(StoreReader, MirrorSource, Protocol):
    """The record a mirrored reader answers from when the mirror cannot: a reader that says how far it is."""


class Mirrored:
    """The reader store of `serve --mirror`: the record, with its growing reads taken from the mirror when the
    mirror is caught up. Whether it is, is asked at most once a second, and the record's mark is counted again only
    when the record changed: at 5,000,000 messages the count of its calls costs more than a mirrored answer. Once
    answered, it is asked again beside the requests, which take the last answer meanwhile: PostgreSQL's change
    marker moves with any write on its server, and there the count takes 250 ms that no request should wait. Nor
    should it take the server's CPU: a check that took t seconds is not asked again for t / CHECK_SHARE seconds
    (5 s after a 250 ms count), so the checks cost at most a twentieth of the time, whatever the record's size."""

    CHECK_EVERY_S = 1.0  # 0: asked again by every read, which waits for it (the tests')
    CHECK_SHARE = 0.05  # the most of the time the checks may take

    def __init__(self, record: Record, mirror: MirrorReader):
        self._record, self._mirror = record, mirror
        self._lock = threading.Lock()
        self._checked: tuple[float, bool] = (float("-inf"), False)
        self._spent = 0.0  # how long the last check took
        self._asking = False  # a check under way
        self._marked: tuple[object, str] | None = None  # the record's change marker, and its mark then

    def __getattr__(self, name: str) -> Any:
        return getattr(self._record, name)

    def caught_up(self) -> bool:
        """Whether the mirror's last push finished at the record's current mark, as last found: found the first
        time by the read that asks (reads meanwhile take the record), then again at most once a second by a thread
        beside the reads."""
        with self._lock:
            at, answer = self._checked
            every = self.CHECK_EVERY_S and max(self.CHECK_EVERY_S, self._spent / self.CHECK_SHARE)
            if self._asking or time.monotonic() - at < every:
                return answer
            self._asking = True
            beside = at != float("-inf") and self.CHECK_EVERY_S > 0
        if beside:
            threading.Thread(target=self._ask, args=(True,), daemon=True, name="reasonlog-mirror-check").start()
            return answer
        return self._ask(False)

    def _ask(self, beside: bool) -> bool:
        answer, began = False, time.monotonic()
        try:
            try:
                cursor = self._mirror.cursor()
            except MirrorError:  # the mirror cannot be read now: the record answers
                cursor = None
            answer = bool(cursor and cursor["done"]) and push.caught_up(cursor, self._mark())
        except Exception:  # noqa: BLE001 - the record cannot be read now: it says so to the read that asks it
            if not beside:
                raise
        finally:
            with self._lock:
                now = time.monotonic()
                self._checked, self._asking, self._spent = (now, answer), False, now - began
        return answer


    def _mark(self) -> str:
        """The record's mark, counted again only when its change marker moved (read first: a write that lands
        while the mark is counted moves the marker again, so the next check counts again)."""
        marker = self._record.change_marker()
        if self._marked is None or self._marked[0] != marker:
            self._marked = (marker, self._record.mirror_mark()[1])
        return self._marked[1]

    def _answer(self, flt: SessionFilter, read: Callable[[Any], Any],
                mirrored: Callable[[MirrorReader], Any] | None = None) -> Any:
        """`read` of the mirror (or `mirrored`, the mirror's own form of it) when it can answer `flt` and is caught
        up, else (or when it fails) `read` of the record."""
        if not flt.scores and not flt.has_note and self.caught_up():
            try:
                return (mirrored or read)(self._mirror)

            except MirrorError:
                with self._lock:
                    self._checked = (time.monotonic(), False)
        return read(self._record)

    def list_sessions(self, flt: SessionFilter) -> list[SessionJSON]:
        return self._answer(flt, lambda reader: reader.list_sessions(flt))

    def count_sessions(self, flt: SessionFilter) -> int:
        return self._answer(flt, lambda reader: reader.count_sessions(flt))

    def usage_groups(self, by: str, flt: SessionFilter, latencies: bool = True) -> dict[str | None, dict]:
        return self._answer(flt, lambda reader: reader.usage_groups(by, flt, latencies),
                            lambda mirror: mirror.usage_groups(by, flt, latencies, finished=True))

    def usage_series(self, split: str, flt: SessionFilter, names: list[str]) -> list[DayUsage]:
        return self._answer(flt, lambda reader: reader.usage_series(split, flt, names),
                            lambda mirror: mirror.usage_series(split, flt, names, finished=True))
