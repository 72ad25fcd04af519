"""Which targets need a summary, what making them would cost, and making them.

A target is chosen when it has no summary (`missing`), its last attempt failed (`failed`: retried on every
run), or what it summarises has changed since (`outdated`: a session that grew). With `stale=True` only
summaries made by something other than the current summarizer (summarizer, model, prompt or version) or
outdated ones are chosen. The summarizer's own run (`RUN`) is never summarised.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..model import Usage, utc_now
from ..pricing import load_price_table
from ..store import SessionFilter, Store
from . import RUN, Provenance, Summarizer, SummaryError
from .targets import KINDS, Target, targets_of

Progress = Callable[["Work", dict], None]


@dataclass(frozen=True)
class Work:
    target: Target
    reason: str  # missing | failed | outdated | stale


@dataclass
class Report:
    ok: int = 0
    failed: int = 0
    errors: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, target id, error)


def plan(store: Store, flt: SessionFilter, summarizer: Summarizer, kinds: tuple[str, ...] = ("session", "exchange"),
         stale: bool = False) -> list[Work]:
    """The targets of the sessions `flt` selects that need a summary from `summarizer`, in session order."""
    for kind in kinds:
        if kind not in KINDS:
            raise ValueError(f"kinds: expected some of {', '.join(KINDS)}, got {kind!r}")
    sessions = [s for s in store.list_sessions(flt) if s.get("run") != RUN]
    rows = {(r["target_kind"], r["target_id"]): r for r in store.list_summaries([s["id"] for s in sessions])}
    work = []
    for target in _targets(store, sessions, kinds):
        reason = _reason(rows.get((target.kind, target.id)), target, summarizer.provenance(target), stale)
        if reason is not None:
            work.append(Work(target, reason))
    return work


def _targets(store: Store, sessions: Sequence[Mapping[str, Any]], kinds: tuple[str, ...]) -> Iterator[Target]:
    for s in sessions:
        yield from targets_of(store.get_session(s["id"]), kinds)


def _reason(row: dict | None, target: Target, made_by: Provenance, stale: bool) -> str | None:
    if row is None:
        return None if stale else "missing"
    if row["text"] is not None and row["source_hash"] != target.source_hash:
        return "outdated"
    if stale:
        was = Provenance(row["summarizer"], row["model"], row["prompt_hash"], row["version"])
        return "stale" if row["text"] is not None and was != made_by else None
    return "failed" if row["status"] == "failed" else None


def estimate(work: list[Work], summarizer: Summarizer) -> dict:
    """What running `work` would spend: calls, tokens (input estimated, output at its limit) and USD.

    `usd` is None when nothing is spent (offline) or no price is known for a model (`unpriced` names them)."""
    calls = tokens_in = tokens_out = 0
    usd, unpriced = 0.0, set()
    prices = load_price_table()
    for item in work:
        spent = summarizer.estimate(item.target)
        if spent is None:
            continue
        model = summarizer.provenance(item.target).model or "?"
        calls, tokens_in, tokens_out = calls + 1, tokens_in + spent[0], tokens_out + spent[1]
        cost = prices.cost(model, Usage(input_tokens=spent[0], output_tokens=spent[1]))
        if cost.usd is None:
            unpriced.add(model)
        else:
            usd += cost.usd
    return {"calls": calls, "input_tokens": tokens_in, "output_tokens": tokens_out,
            "usd": round(usd, 6) if calls and not unpriced else None, "unpriced": sorted(unpriced)}


def run(store: Store, work: list[Work], summarizer: Summarizer, progress: Progress | None = None,
        batch: int = 200) -> Report:
    """Summarise each target and store the result (ok, or failed with its error), `batch` rows a transaction.

    A summarizer that spends money (its `estimate` is not None) has each result stored at once, so an
    interrupted run keeps what it paid for."""
    report, pending = Report(), []
    try:
        for item in work:
            row = _attempt(item.target, summarizer)
            if row["status"] == "ok":
                report.ok += 1
            else:
                report.failed += 1
                report.errors.append((item.target.kind, item.target.id, row["error"]))
            pending.append(row)
            if len(pending) >= batch or summarizer.estimate(item.target) is not None:
                store.save_summaries(pending)
                pending = []
            if progress is not None:
                progress(item, row)
    finally:
        if pending:
            store.save_summaries(pending)
        summarizer.close()
    return report


def _attempt(target: Target, summarizer: Summarizer) -> dict:
    made_by = summarizer.provenance(target)
    try:
        text, error = summarizer.summarize(target), None
    except SummaryError as exc:
        text, error = None, str(exc) or type(exc).__name__
    except Exception as exc:  # noqa: BLE001 - one target's failure is recorded as its summary's, not the run's
        text, error = None, f"{type(exc).__name__}: {exc}"
    now = utc_now()
    return {"target_kind": target.kind, "target_id": target.id, "session_id": target.session_id,
            "status": "ok" if error is None else "failed", "text": text, "error": error,
            "source_hash": target.source_hash, "summarizer": made_by.summarizer, "model": made_by.model,
            "prompt_hash": made_by.prompt_hash, "version": made_by.version, "created_at": now, "attempted_at": now}


def summarize(store: Store, flt: SessionFilter, summarizer: Summarizer,
              kinds: tuple[str, ...] = ("session", "exchange"), stale: bool = False) -> Report:
    """Plan and run in one step (the server's background pass, and Python callers)."""
    return run(store, plan(store, flt, summarizer, kinds, stale), summarizer)
