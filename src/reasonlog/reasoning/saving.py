"""Saving a reasoning record into a store: the session found or made, the write retried while the database is
busy, and the record read back before anyone is told it is saved."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..model import SessionStarted, stable_id, utc_now
from ..redact import Redactor
from ..wire.api import ReasoningRecordJSON
from . import ReasonError
from .policy import Policy
from .records import prepare

TRIES = 12

if TYPE_CHECKING:  # the store is imported where a record is saved, not where this module is
    from ..store import StoreReader, StoreWriter

    class ReasoningStore(StoreReader, StoreWriter, Protocol):
        """What saving a record asks: whether its session exists (by id or name), its row, the write, the read-back."""


def save(store: ReasoningStore, policy: Policy, session: str, phase: str, compact: Any, *, agent: str | None = None,
         group: str | None = None, details: str | None = None, confidence: str | None = None,
         references: list | None = None, artifacts_root: Path | None = None
         ) -> tuple[ReasoningRecordJSON | None, str]:
    """The record as stored (None when the policy skips the phase) and the one-line receipt."""
    if not isinstance(session, str) or not session:
        raise ReasonError("session: required, a session id or name")
    session_id, start = _session(store, session, agent)
    prepared = prepare(policy, session_id, phase, compact, agent=agent, group=group, details=details,
                       confidence=confidence, references=references, artifacts_root=artifacts_root,
                       session_name=session)
    if prepared.event is None:
        return None, prepared.receipt
    _write(store, [*start, prepared.event], {"redacted": prepared.masked} if prepared.masked else None)
    stored = store.list_reasoning_records(record_id=prepared.event.record_id)
    if len(stored) != 1 or stored[0]["compact"] != prepared.event.compact:
        raise ReasonError(f"record {prepared.event.record_id} did not read back as written; it is not saved")
    return stored[0], prepared.receipt


def find_session(store: ReasoningStore, ref: str) -> str | None:
    """The session `ref` names exactly: its id, its external id, or the name a record gave it; else None.
    A secret in `ref` is looked for masked, as the store holds it."""
    ref = Redactor().text(ref)
    if store.existing_ids("session", [ref]):
        return ref
    named = stable_id(None, "reasoning", ref)  # agents saving at once for a new name all make this one id
    if store.existing_ids("session", [named]):
        return named
    from ..store import StoreError

    try:
        found = store.resolve_id("session", ref)
    except StoreError:
        return None
    return found if store.session_row(found).get("external_id") == ref else None


def _session(store: ReasoningStore, ref: str, agent: str | None) -> tuple[str, list]:
    """The session `ref` names, or the start of one named so."""
    found = find_session(store, ref)
    if found is not None:
        return found, []
    ref = Redactor().text(ref)  # its id is made of what is stored: no digest of a raw secret
    sid = stable_id(None, "reasoning", ref)
    return sid, [SessionStarted(session_id=sid, started_at=utc_now(), agent=agent, external_id=ref,
                                labels={"source": "reasoning"})]


def _write(store: StoreWriter, events: list, counters: dict[str, int] | None = None) -> None:
    """Write in one transaction through the recorder's write path, trying again with back-off while another
    process holds the database. No spill folder: the record is read back before anyone is told it is saved."""
    from ..capture.opening import store_writer

    writer = store_writer(store, spill=False)
    try:
        writer.write(events, counters, tries=TRIES)
    finally:
        writer.close()
