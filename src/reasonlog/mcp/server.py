"""The MCP server over the archive: the tools of `tools.py` and `session://` / `call://` resources, on the
official SDK's `MCPServer` (the `mcp` extra), over stdio (`reasonlog mcp`) or streamable HTTP (`/mcp` in
`reasonlog serve`).

The SDK runs sync tools in worker threads; the store's reads are made under its own lock, so one store serves them
all. An argument a tool cannot use comes back as a tool error naming it (`ToolError`), never as a crash.
"""
# No `from __future__ import annotations`: the SDK reads the tools' annotations at run time.
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import Field

from . import shapes, tools
from .tools import Archive, ToolInputError

INSTRUCTIONS = (
    "The archive of earlier agents' sessions recorded by reasonlog: every conversation, tool call and result, "
    "outcome, reasoning record, token and cost. Search it before redoing work, and cite what you use: each fact "
    "comes with a citation (SESSION#N@fingerprint) that get_call or get_session opens again.")


Start = Annotated[int, Field(ge=0, description="the first item to show: 0, or an earlier answer's next_start")]
Since = Annotated[str | None, Field(description="from this day on, YYYY-MM-DD")]
Until = Annotated[str | None, Field(description="up to this day, YYYY-MM-DD")]
Agent = Annotated[str | None, Field(description="only sessions of this agent (claude, codex, ...)")]
Project = Annotated[str | None, Field(description="only sessions run in this folder (their cwd)")]
Model = Annotated[str | None, Field(description="only sessions that used this model")]
SessionRef = Annotated[str, Field(description="a session id, a unique start of one, or a citation")]


def build(archive: Archive) -> Any:
    """An `MCPServer` whose tools and resources read `archive`."""
    from mcp.server import MCPServer

    server = MCPServer("reasonlog", instructions=INSTRUCTIONS)

    @server.tool(description=_doc(tools.search_history))
    def search_history(query: Annotated[str, Field(description="what to find: words, a phrase, a question")],
                       mode: Literal["auto", "text", "keywords", "semantic", "hybrid"] = "auto",
                       agent: Agent = None, project: Project = None, model: Model = None, since: Since = None,
                       until: Until = None,
                       outcome: Literal["completed", "failed", "interrupted", "error", "running"] | None = None,
                       start: Start = 0) -> shapes.SearchAnswer:
        return _answer(tools.search_history, archive, query, mode, agent, project, model, since, until, outcome,
                       start)

    @server.tool(description=_doc(tools.get_session))
    def get_session(session: SessionRef, start: Start = 0) -> shapes.SessionAnswer:
        return _answer(tools.get_session, archive, session, start)

    @server.tool(description=_doc(tools.get_call))
    def get_call(call: Annotated[str, Field(description="a call id, SESSION#N, or a citation SESSION#N@fingerprint")]
                 ) -> shapes.CallAnswer:
        return _answer(tools.get_call, archive, call)

    @server.tool(description=_doc(tools.tool_history))
    def tool_history(subject: Annotated[str, Field(description="a file path, a command or an error text")],
                     agent: Agent = None, project: Project = None, start: Start = 0) -> shapes.ToolHistoryAnswer:
        return _answer(tools.tool_history, archive, subject, agent, project, start)

    @server.tool(description=_doc(tools.usage))
    def usage(by: Literal["day", "model", "agent", "run", "source"] = "day", agent: Agent = None,
              model: Model = None, run: Annotated[str | None, Field(description="only this run")] = None,
              since: Since = None, until: Until = None) -> shapes.UsageAnswer:
        return _answer(tools.usage, archive, by, agent, model, run, since, until)

    @server.tool(description=_doc(tools.reasoning))
    def reasoning(session: Annotated[str | None, Field(description="a session id or the start of one")] = None,
                  group: Annotated[str | None, Field(description="an orchestration's group")] = None,
                  start: Start = 0,
                  missing: Annotated[list[str] | None, Field(description="phases every agent must have saved: "
                                                                         "answers who did not")] = None
                  ) -> shapes.ReasoningAnswer:
        return _answer(tools.reasoning, archive, session, group, start, missing)

    @server.resource("session://{session_id}", mime_type="application/json",
                     description="A recorded session, as get_session answers it")
    def session_resource(session_id: str) -> dict[str, Any]:
        return _answer(tools.get_session, archive, session_id, 0)

    @server.resource("call://{call_id}", mime_type="application/json",
                     description="A recorded call's request and reply, as get_call answers it")
    def call_resource(call_id: str) -> dict[str, Any]:
        return _answer(tools.get_call, archive, call_id)

    return server


def _doc(function: Callable) -> str:
    return " ".join((function.__doc__ or "").split())


def _answer(function: Callable, *args: Any) -> Any:
    from mcp.server.mcpserver.exceptions import ToolError

    from ..store import NotFound

    try:
        return function(*args)
    except (ToolInputError, NotFound) as exc:
        raise ToolError(str(exc)) from None
