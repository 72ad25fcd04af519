"""The embedding backlog: unit texts without a vector of the current model, worked off batch by batch.

A pass cuts the sessions with new text into units (store/units.py), then embeds the texts no vector of the
embedder's model has, `batch` at a time, each batch committed with its vectors: a pass killed at any point loses
the batches under way at most, and the next pass embeds exactly what has no vector (a vector is stored once per
text and model). The backlog is read `WINDOW` texts at a time and each window sorted by length, so that the texts a
batch pads to one length are of nearly one length (benchmarks/bench_semantic.py embed: padding was most of the
model's work when batches mixed a 20-word message with a 150-word tool output).

With `workers` above 1 (`reasonlog embed`), that many batches are embedded at once on a thread pool, each on one
core (the local model runs one thread: semantic/embedders.py), and committed on the caller's thread, in the order
they were submitted: a pass that fails keeps every batch before the failing one and nothing after it, so what is
stored stays a prefix of the backlog's order. A window's batches are then submitted longest first, so that the
last to finish are short; with one worker (a server's background pass, which leaves the other cores to requests)
they are embedded shortest first on the caller's thread, no pool. Then the sessions' mean vectors are brought up to
date. On PostgreSQL with pgvector, a pass first gives the vectors stored before the extension was there their
indexed form (store/pg_vectors.py). Runs in `reasonlog embed` and in `reasonlog serve`'s background thread, never on
a recorder's thread.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from ..store import Store
from .embedders import Embedder

BATCH = 64  # texts embedded and committed together, on one worker
# ... on several: smaller, so that the last batches to finish (the shortest: longest first) leave no worker waiting
# long for the others, and a long batch at the head holds few finished ones back from their commit.
BATCH_EACH = 16
WINDOW = 1024  # texts read from the backlog at a time and sorted by length
HELD = 2  # batches embedded and not committed yet, at most, per worker (the first of them may still be computing)

Batch = list[tuple[int, str]]  # (text id, text)


@dataclass
class Pass:
    """What one pass did: units cut, texts embedded, sessions whose mean vector changed, seconds spent."""

    units_cut: int = 0
    embedded: int = 0
    sessions: int = 0
    seconds: float = 0.0
    left: int = 0  # texts still without a vector (a pass stopped by `limit` or `stop`)
    indexed: int = 0  # vectors stored before the database could index them, indexed now (PostgreSQL's pgvector)


def embed_backlog(store: Store, embedder: Embedder, limit: int | None = None, batch: int | None = None,
                  progress: Callable[[str, int, int], None] | None = None,
                  stop: threading.Event | None = None, always_refresh: bool = True, workers: int = 1) -> Pass:
    """Cut new text into units and embed up to `limit` texts (None: all), `workers` batches of `batch` texts at once
    (None: `BATCH` on one worker, `BATCH_EACH` on several). `progress(stage, done, total)` is called as it goes
    (stage "cut" or "embed"), on the caller's thread; `stop`, once set, ends the pass after the batches under way.
    An embedder's error ends the pass after committing the batches before the failing one, and is raised. The
    sessions' means are brought up to date after (with `always_refresh=False` only when the pass cut or embedded
    something: finding which are stale reads every unit, which a server's idle pass every 30 s need not)."""
    started = time.monotonic()
    done = Pass(units_cut=store.cut_units(None if progress is None else lambda d, t: progress("cut", d, t)),
                indexed=store.fill_vector_index(stop))
    total = store.semantic_counts(embedder.model)["backlog"]
    goal = total if limit is None else min(limit, total)
    size = batch or (BATCH if workers == 1 else BATCH_EACH)
    batches = _batches(store, embedder.model, goal, size, longest_first=workers > 1)

    def commit(todo: Batch, vectors: list[bytes]) -> None:
        store.save_vectors(embedder.model, [(tid, v) for (tid, _), v in zip(todo, vectors, strict=True)])
        done.embedded += len(todo)
        if progress is not None:
            progress("embed", done.embedded, goal)

    if workers == 1:
        while not _stopped(stop) and (todo := next(batches, None)) is not None:
            commit(todo, embedder.embed([text for _, text in todo]))
    else:
        _embed_at_once(workers, embedder, batches, commit, stop)
    if always_refresh or done.units_cut or done.embedded:
        done.sessions = store.refresh_session_vectors(embedder.model)  # a pass killed before it did this, too
    done.left = total - done.embedded
    done.seconds = time.monotonic() - started
    return done


def _batches(store: Store, model: str, goal: int, batch: int, longest_first: bool) -> Iterator[Batch]:
    """The first `goal` texts of the backlog, read `WINDOW` at a time (on the caller's thread: a store's connection
    is its own), each window sorted by length, shortest or longest first, and cut `batch` at a time."""
    read = after = 0
    while read < goal:
        window = store.unit_backlog(model, min(WINDOW, goal - read), after)
        if not window:
            return
        read, after = read + len(window), window[-1][0]
        window.sort(key=lambda item: len(item[1]), reverse=longest_first)  # longest first: the short rest is last
        for start in range(0, len(window), batch):
            yield window[start:start + batch]


def _embed_at_once(workers: int, embedder: Embedder, batches: Iterator[Batch],
                   commit: Callable[[Batch, list[bytes]], None], stop: threading.Event | None) -> None:
    """Embed `batches` on `workers` threads, a new batch whenever one is free, and `commit` each on this thread in the
    order they were submitted, as soon as it and those before it are done. Nothing is submitted once `stop` is set or
    a batch failed; the first failing batch in that order raises its error after those before it are committed, and
    no thread outlives the call (what has not started is cancelled, what has is waited for)."""
    under_way: deque[tuple[Batch, Future[list[bytes]]]] = deque()
    pool = ThreadPoolExecutor(workers, thread_name_prefix="reasonlog-embed")
    try:
        more = True
        while True:
            while more and _room(under_way, workers) and not _stopped(stop):
                todo = next(batches, None)
                more = todo is not None
                if todo is not None:
                    under_way.append((todo, pool.submit(embedder.embed, [text for _, text in todo])))
            if not under_way:
                return
            todo, first = under_way[0]
            if first.done():
                under_way.popleft()
                commit(todo, first.result())
            else:
                wait([future for _, future in under_way if not future.done()], return_when=FIRST_COMPLETED)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _room(under_way: deque[tuple[Batch, Future[list[bytes]]]], workers: int) -> bool:
    """Whether to submit another batch: a worker is free, not too many are held uncommitted, none failed."""
    computing = sum(not future.done() for _, future in under_way)
    failed = any(future.done() and future.exception() is not None for _, future in under_way)
    return computing < workers and len(under_way) < HELD * workers and not failed


def _stopped(stop: threading.Event | None) -> bool:
    return stop is not None and stop.is_set()


def backlog_note(store: Store) -> str | None:
    """A line for after an import: how much awaits embedding and how to embed it; None when search by meaning is
    not installed here, or nothing waits."""
    from .embedders import SemanticUnavailable, choose_embedder, missing_packages

    try:
        embedder = choose_embedder()
    except SemanticUnavailable:
        return None
    if missing_packages(local=not hasattr(embedder, "url"), sqlite=store.url.startswith("sqlite")):
        return None
    counts = store.semantic_counts(embedder.model, sessions=True)
    if not counts["sessions_to_cut"] and not counts["backlog"]:
        return None
    waiting = [f"{counts['sessions_to_cut']} session(s) with new text"] if counts["sessions_to_cut"] else []
    waiting += [f"{counts['backlog']} text(s)"] if counts["backlog"] else []
    return (f"search by meaning: {' and '.join(waiting)} await embedding; run `reasonlog embed` (`reasonlog serve`"
            " embeds in the background)")


class Ticker:
    """A `progress` for `embed_backlog` that says how the embedding goes in lines, for a log or a console that is not
    a terminal: texts done of the total, the rate and the time left, at most one line every `every_s` seconds (0: a
    line after every batch), and a last line when the pass ends after saying anything."""

    def __init__(self, say: Callable[[str], None], every_s: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self._say, self._every_s, self._clock = say, every_s, clock
        self._started = self._last = clock()
        self._said = False

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage != "embed":
            return
        now = self._clock()
        if now - self._last < self._every_s and not (done >= total and self._said):
            return
        self._last, self._said = now, True
        self._say(progress_line(done, total, now - self._started))


def progress_line(done: int, total: int, seconds: float) -> str:
    """`embedding: 640 / 1,270 texts (50 %), 12.3 a second, about 51 s left`."""
    rate = done / seconds if seconds > 0 else 0.0
    left = f", about {_duration((total - done) / rate)} left" if rate and done < total else ""
    share = f" ({100 * done // total} %)" if total else ""
    return f"embedding: {done:,} / {total:,} texts{share}, {rate:,.1f} a second{left}"


def _duration(seconds: float) -> str:
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, rest = divmod(whole, 60)
    return f"{minutes} min {rest:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"
