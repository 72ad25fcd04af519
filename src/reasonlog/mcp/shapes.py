"""The JSON each MCP tool answers, as TypedDicts: the SDK declares them as the tools' output schemas, so a client
that reads structured output knows every field (docs/mcp.md)."""
from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict  # pydantic reads these on Python < 3.12 only from typing_extensions


class Cited(TypedDict, total=False):
    cite: str  # SESSION#N@fingerprint for a call, SESSION for a session
    url: str  # the dashboard's page, when a dashboard is known


class Hit(Cited, total=False):
    kind: str  # message, tool_result, outcome, ...
    role: str | None
    tool: str | None
    at: str | None
    text: str


class SearchAnswer(TypedDict, total=False):
    query: str
    mode: str
    hits: list[Hit]
    next_start: int  # pass back as `start` for the next page


class Use(Cited, total=False):
    kind: str  # "tool call" or "tool result"
    tool: str | None
    at: str | None
    text: str


class ToolHistoryAnswer(TypedDict, total=False):
    subject: str
    uses: list[Use]
    next_start: int


class SessionInfo(TypedDict, total=False):
    id: str
    title: str
    agent: str | None
    model: str | None
    run: str | None
    status: str | None
    started_at: str | None
    ended_at: str | None
    labels: dict[str, str] | None
    external_id: str | None
    totals: dict[str, Any]


class Step(Cited, total=False):
    role: str | None
    text: str
    tools: list[dict[str, Any]]  # {tool, input, result, is_error}
    outcome: str | None
    payload: Any
    failed_call: Any
    at: str | None


class SessionAnswer(Cited, total=False):
    session: SessionInfo
    steps: list[Step]
    next_start: int
    changed_since_cited: str


class CallAnswer(Cited, total=False):
    model: str | None
    status: str | None
    stop_reason: str | None
    tokens: dict[str, int | None]
    cost_usd: float | None
    latency_ms: float | None
    error: Any
    request: Any  # the request as stored, or its JSON text cut to the budget
    reply: Any
    cut: str
    changed_since_cited: str


class UsageAnswer(TypedDict, total=False):
    by: str
    rows: list[dict[str, Any]]  # as `reasonlog stats --json`
    next_start: int


class ReasoningAnswer(TypedDict, total=False):
    session: str | None
    group: str | None
    records: list[dict[str, Any]]  # the records; with `missing`, {agent, missing, cite} of who skipped a phase
    phases: list[str]
    sessions_with_records: int
    next_start: int
