"""A replay from plan to record: the recorded calls prepared for the target and priced before anything is sent,
then sent (several at a time) and recorded as one session of the run `replays` in call order, and compared."""
from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..capture.arguments import answer_fields
from ..model import CallRecorded, Event, SessionEnded, SessionStarted, Usage, new_id, utc_now
from ..providers import protocol_of
from ..wire.codec import canonical
from . import RUN, ReplayError
from .compare import Answer, compare, totals
from .send import Prepared, Sent, Target, prepare, send, target_for

if TYPE_CHECKING:
    from ..store import StoreReader, StoreWriter

ESTIMATED_OUTPUT = 1024  # output tokens assumed for a call that recorded none and sets no limit


@dataclass(frozen=True)
class Planned:
    """One recorded call made ready to send, with what it would cost by the price table."""

    original: dict  # the stored call (Store.get_call)
    prepared: Prepared
    estimate_usd: float | None  # None: the target model has no price in the table


@dataclass
class Outcome:
    planned: Planned
    started_at: str
    sent: Sent | None = None
    error: str | None = None
    done: bool = False


def plan(store: StoreReader, call_ids: list[str], *, provider: str | None, model: str | None,
         base_url: str | None) -> tuple[Target, list[Planned]]:
    """The target and every call prepared for it; raises ReplayError (no key, an untranslatable protocol)."""
    calls = store.call_details(call_ids)
    if not calls:
        raise ReplayError("nothing to replay: the session has no calls")
    first = calls[0]
    target = target_for(provider, protocol_of(first.get("provider"), first["request"]), model, base_url)
    return target, [_planned(dict(call), target) for call in calls]


def _planned(call: dict, target: Target) -> Planned:
    from ..pricing import load_price_table  # the table loads once, when first needed

    prepared = prepare(call["request"], call.get("provider"), target, call.get("model"))
    price = load_price_table().cost(prepared.model or "", _expected_usage(call, prepared.request))
    return Planned(call, prepared, price.usd)


def _expected_usage(call: dict, request: dict) -> Usage:
    """The recorded call's tokens, all input priced as uncached (the other model's cache is cold); without
    recorded tokens, about four characters a token of the request and its output limit."""
    sent = sum(call.get(k) or 0 for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens"))
    limit = next((request[k] for k in ("max_tokens", "max_completion_tokens") if isinstance(request.get(k), int)),
                 ESTIMATED_OUTPUT)
    return Usage(input_tokens=sent or len(canonical(request)) // 4,
                 output_tokens=call.get("output_tokens") or limit)


def estimate(planned: list[Planned]) -> float | None:
    """What sending every planned call would cost; None when the target model has no price."""
    costs = [p.estimate_usd for p in planned]
    return None if any(c is None for c in costs) else round(sum(c for c in costs if c is not None), 6)


@dataclass
class Recorded:
    """A replay as recorded: its session, each call's outcome and the recorded calls' ids, in order."""

    session_id: str
    outcomes: list[Outcome]
    ids: list[str]
    spilled: bool = False  # the database could not be written: the replay waits in spill files beside it
    error: str | None = None  # why, when it spilled


def send_and_record(store: StoreWriter, planned: list[Planned], target: Target, original_session: dict,
                    concurrency: int, tick: Callable[[], None] = lambda: None) -> Recorded:
    """Send every call, `concurrency` at a time, and record the replay as one session of the run `replays`: each
    answer is written as soon as every call before it has answered (so the session keeps the original's order,
    and what came back before a Ctrl-C is kept). It is written through the recorder's write path: a database that
    cannot be written now (locked, full) gets it later, from spill files beside it."""
    from ..capture.opening import store_writer

    writer = store_writer(store)
    recorded = Recorded(new_id(), [Outcome(p, utc_now()) for p in planned], [])
    outcomes, ids = recorded.outcomes, recorded.ids

    def write(event: Event) -> None:
        recorded.spilled |= writer.write([event]) == "spilled"

    write(SessionStarted(
        session_id=recorded.session_id, started_at=utc_now(), agent=original_session.get("agent"), run=RUN,
        model=target.model or original_session.get("model"), provider=target.protocol.name,
        labels={"replay_of": original_session["id"]}, host=os.uname().nodename, pid=os.getpid()))

    def finished(outcome: Outcome) -> None:
        outcome.done = True
        while len(ids) < len(outcomes) and outcomes[len(ids)].done:
            event = _call_event(recorded.session_id, outcomes[len(ids)], target)
            write(event)
            ids.append(event.call_id)
        tick()

    status = "interrupted"
    try:
        _send_all(outcomes, target, concurrency, finished)
        status = "failed" if any(o.error for o in outcomes) else "completed"
    finally:
        write(SessionEnded(session_id=recorded.session_id, ended_at=utc_now(), status=status))
        recorded.error = writer.stats()["last_error"] if recorded.spilled else None
        writer.close()
    return recorded


def _send_all(outcomes: list[Outcome], target: Target, concurrency: int, done: Callable[[Outcome], None]) -> None:
    """Send every call; `done` is told of each as it finishes (on this thread). An interruption cancels what has
    not started, rather than waiting for every queued call to be sent."""
    pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="reasonlog-replay")
    try:
        futures: dict[Future, Outcome] = {pool.submit(_send_one, target, o): o for o in outcomes}
        for future in as_completed(futures):
            future.result()  # _send_one keeps a send's failure on its outcome; anything else is a bug
            done(futures[future])
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _send_one(target: Target, outcome: Outcome) -> None:
    outcome.started_at = utc_now()
    try:
        outcome.sent = send(target, outcome.planned.prepared)
    except ReplayError as exc:
        outcome.error = str(exc)
        return
    if target.protocol.unwrap(outcome.sent.body) is None:
        outcome.error = f"the answer is no {target.protocol.name} response: {sorted(outcome.sent.body)[:6]} at its top"


def _call_event(session_id: str, outcome: Outcome, target: Target) -> CallRecorded:
    prepared, sent = outcome.planned.prepared, outcome.sent
    error = {"message": outcome.error} if outcome.error else None
    answer = answer_fields(sent.body, target.protocol.unwrap) if sent is not None else {}
    return CallRecorded(
        call_id=new_id(), session_id=session_id, exchange_id=None, started_at=outcome.started_at,
        request=prepared.request, response=answer.get("response"), model=prepared.model,
        provider=target.protocol.name, stop_reason=answer.get("stop_reason"), usage=answer.get("usage"),
        latency_ms=sent.latency_ms if sent else None, provider_message_id=answer.get("provider_message_id"),
        request_id=sent.request_id if sent else None, raw=sent.body if sent else None, error=error,
        status="error" if error else "ok", replay_of=outcome.planned.original["id"])


def report(store: StoreReader, outcomes: list[Outcome], replay_ids: list[str]) -> dict:
    """Each call's comparison (from what the store holds of both) and the totals."""
    rows = []
    for outcome, replay_id in zip(outcomes, replay_ids, strict=True):
        original = outcome.planned.original
        row = compare(Answer.of_call(original), Answer.of_call(store.get_call(replay_id)))
        rows.append({"call": original["id"], "idx": original["idx"], "replay_call": replay_id,
                     "notices": outcome.planned.prepared.notices, **row})
    return {"calls": rows, "totals": totals(rows)}
