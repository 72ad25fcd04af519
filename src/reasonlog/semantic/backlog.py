"""The embedding backlog: unit texts without a vector of the current model, worked off batch by batch.

A pass cuts the sessions with new text into units (store/units.py), then embeds the texts no vector of the
embedder's model has, `batch` at a time, each batch committed with its vectors: a pass killed at any point loses
the batch under way at most, and the next pass embeds exactly what has no vector (a vector is stored once per
text and model). Then the sessions' mean vectors are brought up to date. Runs in `reasonlog embed` and in
`reasonlog serve`'s background thread, never on a recorder's thread.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..store import Store
from .embedders import Embedder

BATCH = 64  # texts embedded and committed together


@dataclass
class Pass:
    """What one pass did: units cut, texts embedded, sessions whose mean vector changed, seconds spent."""

    units_cut: int = 0
    embedded: int = 0
    sessions: int = 0
    seconds: float = 0.0
    left: int = 0  # texts still without a vector (a pass stopped by `limit` or `stop`)


def embed_backlog(store: Store, embedder: Embedder, limit: int | None = None, batch: int = BATCH,
                  progress: Callable[[str, int, int], None] | None = None,
                  stop: threading.Event | None = None, always_refresh: bool = True) -> Pass:
    """Cut new text into units and embed up to `limit` texts (None: all). `progress(stage, done, total)` is called
    as it goes (stage "cut" or "embed"); `stop`, once set, ends the pass after the batch under way. The sessions'
    means are brought up to date after (with `always_refresh=False` only when the pass cut or embedded something:
    finding which are stale reads every unit, which a server's idle pass every 30 s need not)."""
    started = time.monotonic()
    done = Pass(units_cut=store.cut_units(None if progress is None else lambda d, t: progress("cut", d, t)))
    total = store.semantic_counts(embedder.model)["backlog"]
    goal = total if limit is None else min(limit, total)
    after = 0
    while done.embedded < goal and not (stop is not None and stop.is_set()):
        todo = store.unit_backlog(embedder.model, min(batch, goal - done.embedded), after)
        if not todo:
            break
        vectors = embedder.embed([text for _, text in todo])
        store.save_vectors(embedder.model, [(tid, v) for (tid, _), v in zip(todo, vectors, strict=True)])
        done.embedded += len(todo)
        after = todo[-1][0]
        if progress is not None:
            progress("embed", done.embedded, goal)
    if always_refresh or done.units_cut or done.embedded:
        done.sessions = store.refresh_session_vectors(embedder.model)  # a pass killed before it did this, too
    done.left = total - done.embedded
    done.seconds = time.monotonic() - started
    return done


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
