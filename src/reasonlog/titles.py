"""A session's title, as lists show it: the agent's own (Claude Code's `custom-title`, else its `ai-title`, kept
as the label `title`), else the first prompt the user gave, shortened to one line."""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .parts import parts_of

LENGTH = 80  # characters of a title made from a prompt
# What Claude Code wraps around a prompt that the person did not type: reminders, caveats, a command's output.
_WRAPPERS = re.compile(r"<(system-reminder|local-command-caveat|local-command-stdout|command-message)>.*?</\1>",
                       re.S)
_COMMAND = re.compile(r"<command-name>(.*?)</command-name>", re.S)
_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)
_TAG = re.compile(r"</?[a-z][a-z0-9-]*>")


def title_of(session: Mapping[str, Any], first_prompt: Any = None) -> str:
    """The title the agent gave the session, else its first prompt shortened; "" when it has neither."""
    given = (session.get("labels") or {}).get("title")
    if isinstance(given, str) and given.strip():
        return " ".join(given.split())
    return shorten(prompt_text(first_prompt)) if first_prompt is not None else ""


def prompt_text(message: Any) -> str:
    """What the person typed in a stored user message: its text parts, without the wrappers an agent adds (a slash
    command reads as `/name args`)."""
    if not isinstance(message, dict):
        message = {"role": "user", "content": message}
    text = "\n".join(p.text for p in parts_of(message) if p.kind == "text" and p.text)
    command = _COMMAND.search(text)
    if command is not None:
        given = _ARGS.search(text)
        text = f"{command.group(1).strip()} {given.group(1).strip() if given else ''}".strip()
    return _TAG.sub("", _WRAPPERS.sub("", text))


def shorten(text: str, length: int = LENGTH) -> str:
    """`text` on one line, cut at a word before `length` characters with an ellipsis."""
    one = " ".join(text.split())
    if len(one) <= length:
        return one
    cut = one[:length - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > length // 2 else cut).rstrip(" ,.;:") + "…"
