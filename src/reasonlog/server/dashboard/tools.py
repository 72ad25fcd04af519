"""What a tool call's line says before anyone opens it: the one argument a person needs (the command, the file,
the pattern, the URL, the query), the first lines of the result, how long it ran and whether it failed."""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

import orjson

# The argument that says what a tool did, by tool name (lower case): Claude Code's tools, Codex's and Gemini CLI's
# shells and file tools. A tool not named here (an OpenAI function, an MCP tool) gets the first of GENERIC it has.
ARGUMENT = {
    "bash": "command", "shell": "command", "local_shell": "command", "exec_command": "cmd",
    "run_shell_command": "command", "read": "file_path", "edit": "file_path", "multiedit": "file_path",
    "write": "file_path", "notebookedit": "notebook_path", "read_file": "path", "write_file": "file_path",
    "replace": "file_path", "grep": "pattern", "glob": "pattern", "search_file_content": "pattern",
    "webfetch": "url", "web_fetch": "url", "websearch": "query", "web_search": "query",
    "google_web_search": "query", "task": "description", "agent": "description", "ls": "path",
    "list_directory": "path", "apply_patch": "input", "skill": "skill", "todowrite": "todos",
}
GENERIC = ("command", "cmd", "file_path", "path", "filename", "url", "query", "q", "pattern", "description",
           "prompt", "text", "input", "name", "id")
SHOWN = 200         # characters of the argument on the line (the rest in its tooltip and the opened call)
HEAD_LINES = 3      # lines of the result on the line
HEAD_WIDTH = 240    # characters of each of those lines
EXIT = re.compile(r"(?:Exit code:? |exit status )(-?\d+)")


@dataclass(frozen=True)
class ToolLine:
    """A tool call as its line shows it."""

    argument: str       # one line, shortened to SHOWN characters
    full: str           # the whole argument, for the tooltip
    head: str           # the result's first HEAD_LINES lines ("" without a result)
    more: bool          # the result goes on past `head`
    failed: bool        # the result says is_error, or an exit code other than 0
    took: str           # how long it ran ("" when not recorded)


def tool_line(name: str | None, given: Any, result: dict | None) -> ToolLine:
    """The line of the tool `name` called with `given`, whose result (if any) is `result`
    (`{"content", "is_error", "duration_ms"}`, as `query.timeline` pairs them)."""
    full = argument_of(name, given)
    one = " ".join(full.split())
    content = str((result or {}).get("content") or "")
    shell = _shell_output(content)  # Codex's shell: {"output": …, "metadata": {"exit_code", "duration_seconds"}}
    lines = (shell[0] if shell else content).strip("\n").splitlines()
    duration = (result or {}).get("duration_ms")
    if duration is None and shell and isinstance(shell[2], (int, float)):
        duration = shell[2] * 1000
    return ToolLine(argument=_cut(one, SHOWN), full=full,
                    head="\n".join(_cut(line, HEAD_WIDTH) for line in lines[:HEAD_LINES]),
                    more=len(lines) > HEAD_LINES or any(len(line) > HEAD_WIDTH for line in lines[:HEAD_LINES]),
                    failed=bool((result or {}).get("is_error")) or _nonzero_exit(content, shell),
                    took=milliseconds(duration))


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def argument_of(name: str | None, given: Any) -> str:
    """The argument a person needs to know what the call did, as text."""
    if not isinstance(given, dict):
        return "" if given is None else str(given)
    key = ARGUMENT.get((name or "").lower())
    if key is None or key not in given:
        key = next((k for k in GENERIC if _is_shown(given.get(k))), None)
    if key is None:
        key = next((k for k, v in given.items() if isinstance(v, str) and v.strip()), None)
    if key is None:
        return _json(given) if given else ""
    value = given[key]
    if name and name.lower() in ("grep", "search_file_content") and isinstance(given.get("path"), str):
        return f"{_as_text(value)} in {given['path']}"
    return _as_text(value)


def _is_shown(value: Any) -> bool:
    return (isinstance(value, str) and bool(value.strip())) or (isinstance(value, list) and bool(value))


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return shlex.join(value)  # a command given as its argv (Codex's shell)
    return _json(value)


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str).decode()
    except TypeError:  # an integer past 64 bits, which a recorded input may hold
        import json

        return json.dumps(value, default=str, separators=(",", ":"))


def _shell_output(content: str) -> tuple[str, Any, Any] | None:
    """A shell result given as JSON with its output and metadata: (output, exit code, seconds), else None."""
    if not (content.startswith("{") and '"metadata"' in content):
        return None
    try:
        value = orjson.loads(content)
    except orjson.JSONDecodeError:
        return None
    meta = value.get("metadata") if isinstance(value, dict) else None
    if not isinstance(meta, dict) or not isinstance(value.get("output"), str):
        return None
    return value["output"], meta.get("exit_code"), meta.get("duration_seconds")


def _nonzero_exit(content: str, shell: tuple[str, Any, Any] | None) -> bool:
    """A shell's result that says its exit code (first, or in its metadata), and it is not 0."""
    if shell is not None:
        return isinstance(shell[1], int) and shell[1] != 0
    found = EXIT.match(content.lstrip()[:40])
    return found is not None and found.group(1) != "0"


def milliseconds(value: float | None) -> str:
    """A duration as a person reads it: 840 ms, 3.2 s, 2.5 min."""
    if value is None:
        return ""
    if value < 1000:
        return f"{value:.0f} ms"
    return f"{value / 1000:.1f} s" if value < 120_000 else f"{value / 60_000:.1f} min"
