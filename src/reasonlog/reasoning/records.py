"""One reasoning record from what an agent gives: checked, its long form redacted, counted and written to its
artifact, as the event the store applies (`model.ReasoningRecorded`), with the receipt an agent reads."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model import ReasoningRecorded, new_id, utc_now
from ..redact import Redactor
from . import PHASES, ReasonError, artifacts, compact, tokens
from .policy import Policy


@dataclass(frozen=True)
class Prepared:
    event: ReasoningRecorded | None  # None: the policy says not to save this phase
    receipt: str
    masked: int = 0  # secrets masked in what the agent gave: `db status` counts them as redacted


def prepare(policy: Policy, session_id: str, phase: str, compact_record: Any, *, agent: str | None = None,
            group: str | None = None, details: str | None = None, confidence: str | None = None,
            references: list | None = None, artifacts_root: Path | None = None,
            session_name: str | None = None) -> Prepared:
    """The event to write for this record, or None with the reason in the receipt."""
    if phase not in PHASES:
        raise ReasonError(f"phase: expected one of {', '.join(PHASES)}, got {phase!r}")
    if references is not None and not isinstance(references, list):
        raise ReasonError("references: expected a list")
    if details is not None and not isinstance(details, str):
        raise ReasonError("details: expected text")
    when = policy.when(phase)
    if policy.mode == "disabled" or when == "disabled":
        return Prepared(None, f"skipped {phase}: disabled by {policy.source}")
    kept, moved = compact.check(compact_record, policy.budget_tokens, policy.overflow,
                                policy.schema_for(phase, agent))
    # Masked before anything is written: the artifact's folder, section and index entry as much as the row.
    redactor = Redactor()
    kept, moved, agent, group, confidence, references, session_name = redactor.value(
        (kept, moved, agent, group, confidence, references, session_name or session_id))
    if moved and policy.mode != "full":
        raise ReasonError("compact: over its limits, and mode is compact: no artifact to move the overflow to")
    record_id, at = new_id(), utc_now()
    record: dict[str, Any] = {"record_id": record_id, "at": at, "phase": phase, "agent": agent, "group": group,
              "confidence": confidence, "references": references, "compact": kept}
    long_form = redactor.text(details) if policy.mode == "full" and details else None
    redacted = redactor.masked > 0
    held = when == "on_failure"
    path = None
    if (long_form or moved) and not held:  # a held record's long form waits in the database for its outcome
        root = (artifacts_root or policy.artifacts or artifacts.default_root()).expanduser().absolute()
        entry = {"record_id": record["record_id"], "session": session_name, "agent": agent,
                 "group": group, "phase": phase, "at": record["at"], "redacted": redacted,
                 "tokens": tokens.count(long_form)[0] if long_form else 0}
        try:
            path = artifacts.write(root, session_name, entry,
                                   artifacts.section(record, long_form, moved))
        except OSError as exc:
            raise ReasonError(f"{root}: cannot write the artifact ({exc.strerror or exc})") from None
        if moved:
            kept["overflow"] = str(path)
    compact_tokens, tokenizer = tokens.count(_json(kept))
    details_tokens = tokens.count(long_form)[0] if long_form else None
    event = ReasoningRecorded(
        record_id=record_id, session_id=session_id, at=at, phase=phase, compact=kept,
        agent=agent, group=group, details=long_form, artifact_path=str(path) if path else None,
        details_tokens=details_tokens, compact_tokens=compact_tokens, tokenizer=tokenizer, redacted=redacted,
        confidence=confidence, references=references, state="held" if held else "kept")
    verb = "held" if held else "saved"
    return Prepared(event, f"{verb} {phase} {record_id[-6:]} {compact_tokens}t", redactor.masked)


def _json(value: Any) -> str:
    import orjson

    return orjson.dumps(value).decode()
