"""What to save of reasoning: `reasonlog.toml` (or $REASONLOG_CONFIG), then environment variables over it.

    [reasoning]
    mode = "full"               # full | compact | disabled
    budget_tokens = 150         # the compact record's whole budget
    overflow = "error"          # error | artifact: move what is over a limit to the artifact, keep a pointer
    artifacts = "~/agents/artifacts"   # default: <the user's data folder>/artifacts
    [reasoning.phases]          # always (default) | on_failure | disabled
    risks = "on_failure"
    [reasoning.schemas]         # a JSON Schema for the compact record, by phase or by agent
    "phase:completion" = "schemas/handoff_developer_response.schema.json"
    "agent:qa_expert" = "schemas/handoff_qa_response.schema.json"

Environment: REASONLOG_REASONING_MODE, REASONLOG_REASONING_BUDGET, REASONLOG_REASONING_OVERFLOW,
REASONLOG_ARTIFACTS, and REASONLOG_REASONING_PHASES ("risks=on_failure,pivot=disabled").
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from . import PHASES, ReasonError

MODES = ("full", "compact", "disabled")
WHEN = ("always", "on_failure", "disabled")
OVERFLOW = ("error", "artifact")


@dataclass(frozen=True)
class Policy:
    mode: str = "full"
    budget_tokens: int = 150
    overflow: str = "error"
    artifacts: Path | None = None
    phases: dict[str, str] = field(default_factory=dict)
    schemas: dict[str, Path] = field(default_factory=dict)
    source: str = "defaults"

    def when(self, phase: str) -> str:
        return self.phases.get(phase, "always")

    def schema_for(self, phase: str, agent: str | None) -> Path | None:
        return self.schemas.get(f"agent:{agent}") if agent and f"agent:{agent}" in self.schemas \
            else self.schemas.get(f"phase:{phase}")


def load(config: str | os.PathLike | None = None) -> Policy:
    """The policy from `config`, else $REASONLOG_CONFIG, else ./reasonlog.toml when present; env over it."""
    path = Path(config or os.environ.get("REASONLOG_CONFIG") or "reasonlog.toml").expanduser()
    table: dict = {}
    source = "defaults"
    if path.is_file():
        import tomllib

        try:
            table = tomllib.loads(path.read_text(encoding="utf-8")).get("reasoning", {})
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ReasonError(f"{path}: not TOML ({exc})") from None
        source = str(path)
    elif config is not None or os.environ.get("REASONLOG_CONFIG"):
        raise ReasonError(f"{path}: no such config file")
    env = os.environ
    phases = {**_table(table, "phases", path), **_phases_env(env.get("REASONLOG_REASONING_PHASES", ""))}
    base = path.parent if path.is_file() else Path.cwd()
    policy = Policy(
        mode=_choice(env.get("REASONLOG_REASONING_MODE") or table.get("mode", "full"), MODES, "mode"),
        budget_tokens=_int(env.get("REASONLOG_REASONING_BUDGET") or table.get("budget_tokens", 150), "budget_tokens"),
        overflow=_choice(env.get("REASONLOG_REASONING_OVERFLOW") or table.get("overflow", "error"), OVERFLOW,
                         "overflow"),
        artifacts=_path(env.get("REASONLOG_ARTIFACTS") or table.get("artifacts"), base),
        phases={_phase(k): _choice(v, WHEN, f"phases.{k}") for k, v in phases.items()},
        schemas={k: _path(v, base) for k, v in _table(table, "schemas", path).items()},  # type: ignore[misc]
        source=source)
    return policy


def _table(table: dict, name: str, path: Path) -> dict:
    value = table.get(name, {})
    if not isinstance(value, dict):
        raise ReasonError(f"{path}: reasoning.{name} must be a table")
    return value


def _phases_env(text: str) -> dict[str, str]:
    out = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        phase, sep, when = item.partition("=")
        if not sep:
            raise ReasonError(f"REASONLOG_REASONING_PHASES: expected phase=when, got {item!r}")
        out[phase.strip()] = when.strip()
    return out


def _choice(value: object, choices: tuple[str, ...], name: str) -> str:
    if value not in choices:
        raise ReasonError(f"{name}: expected {' | '.join(choices)}, got {value!r}")
    return str(value)


def _phase(name: str) -> str:
    if name not in PHASES:
        raise ReasonError(f"phases.{name}: not a phase; expected one of {', '.join(PHASES)}")
    return name


def _int(value: object, name: str) -> int:
    try:
        number = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise ReasonError(f"{name}: expected a whole number of tokens, got {value!r}") from None
    if number < 1:
        raise ReasonError(f"{name}: expected at least 1, got {number}")
    return number


def _path(value: object, base: Path) -> Path | None:
    if value is None:
        return None
    path = Path(str(value)).expanduser()
    return path if path.is_absolute() else base / path
