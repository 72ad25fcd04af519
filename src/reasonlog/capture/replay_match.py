"""Whether a re-run's request is the recorded one: the same up to what a real agent makes fresh every run.

A real agent CLI never sends its recorded requests again byte for byte. Each run it makes new ids (tool-call ids it
generates, thread, turn and item ids, device and session ids), stamps times, and its tools print process ids and
temporary paths into their results. Read from the real CLIs' requests (issue 32):

- Claude Code: `metadata.user_id` holds a device id made per HOME and the session's UUID;
- Codex: `prompt_cache_key` and `client_metadata` name the thread (a UUIDv7); items carry fresh ids and times;
- Gemini CLI: a `functionCall.id` it makes is `<tool>_<epoch ms>_<n>`; its shell tool ends its output with
  `Process Group PGID: <pid>`;
- Qwen Code: the same PGID line in the shell tool's result.

And an agent runs parallel tool calls at once, so their results come back in the order they finished: Claude Code
sends its `tool_result` blocks in that order (and marks the last one with `cache_control`, a caching hint), as
OpenCode and Qwen Code send their `tool` messages. A run of results side by side is compared in any order, and
`cache_control` is left out.

And an agent lists what it finds on disk in the order a directory walk gives it, which changes run to run. Gemini
CLI 0.61 names its skills in three places: a block of lines each in its system prompt, a list inside a sentence of
its `activate_skill` tool's description, and that tool's `enum` (two replays in CI got them the other way round). A
request that matches no recorded call exactly is compared again in any order (`in_any_order`): each text as the
multiset of its words, spaces and marks, each list of plain values sorted, and each volatile value
named by its kind alone (numbered by order of appearance, a reordered text would number them otherwise). The replay
then says what it let pass: the order of lines, of words, or of items.

So a request is compared in a *matching form*: its canonical JSON with each volatile value replaced by its kind and
the order it first appeared in (`<uuid#1>`, `<time#2>`, ...), so that an id used twice (a tool call and its result)
must still be used twice, and the values of the keys a protocol fills per run (`VOLATILE_KEYS`) replaced whole. Two
requests match when their matching forms are equal; `tolerated` lists, path by path, what differed in the raw
values, so a replay can say what it let pass. Everything else (a prompt, a tool result's text, a parameter) must be
equal, as before.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

# Per protocol, the keys whose whole value a client fills anew each run (a dotted path; `*` is any list item).
VOLATILE_KEYS: dict[str, frozenset[str]] = {
    "anthropic": frozenset({"metadata.user_id"}),
    "openai_responses": frozenset({"prompt_cache_key", "client_metadata", "metadata", "user", "safety_identifier"}),
    "openai_chat": frozenset({"user", "prompt_cache_key", "metadata", "safety_identifier"}),
    "gemini": frozenset({"labels", "sessionId", "session_id"}),
}

# The kinds of value that are fresh each run wherever they stand, in the order they are looked for.
_KINDS = [
    ("uuid", r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"),
    ("time", r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?"),
    ("hex", r"(?<![0-9A-Za-z])[0-9a-f]{24,}(?![0-9A-Za-z])"),
    ("epoch", r"(?<!\d)1[5-9]\d{8}(?:\d{3}(?:\d{3})?)?(?!\d)"),  # seconds, ms or µs from 2017 to 2033
    ("pid", r"(?<=PGID: )\d+|(?<=PID: )\d+|(?<=\bpid )\d+|(?<=\bpid=)\d+"),
    ("tmp", r"/tmp/[A-Za-z0-9._-]+"),
]
_TOKENS = re.compile("|".join(f"(?P<{kind}>{pattern})" for kind, pattern in _KINDS))
# Inside a tool's result only: how long the tool took, as the agent's harness prints it (Codex's "Wall time 0.3
# seconds", "succeeded in 12ms"). A prompt's "wait 5 seconds" stays compared.
_DURATION = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?(?:ms|µs|us|s|secs?|seconds?|mins?|minutes?)\b")
_NUMBER_KEYS = frozenset({"create_time", "created_at", "timestamp", "created"})  # numbers that are instants


@dataclass(frozen=True)
class Tolerated:
    """One place where the re-run's request differed from the recording in a volatile value."""

    path: str
    kind: str
    recorded: str
    sent: str

    def __str__(self) -> str:
        return f"{self.path} ({self.kind}): {_short(self.recorded)} → {_short(self.sent)}"


def matching_form(request: Any, protocol: str | None = None, *, in_any_order: bool = False) -> Any:
    """`request` with its volatile values replaced by their kind and order of first appearance; with
    `in_any_order`, by their kind alone, each text made the sorted list of its words (`_WORDS`) and each list of
    plain values sorted."""
    keys = VOLATILE_KEYS.get(protocol or "", frozenset())
    return _Namer(keys, in_any_order=in_any_order).form(request, "")


def tolerated(recorded: Any, sent: Any, protocol: str | None = None) -> list[Tolerated]:
    """What differs between two requests whose matching forms are equal, path by path."""
    keys = VOLATILE_KEYS.get(protocol or "", frozenset())
    return list(_differences(recorded, sent, "", keys))


class _Namer:
    def __init__(self, keys: frozenset[str], in_any_order: bool = False):
        self.keys, self.in_any_order = keys, in_any_order
        self.names: dict[tuple[str, str], str] = {}

    def form(self, value: Any, path: str, in_result: bool = False) -> Any:
        if isinstance(value, dict):
            in_result = in_result or _is_result(value)
            return {k: self._member(k, v, f"{path}.{k}" if path else k, in_result) for k, v in sorted(value.items())
                    if k != "cache_control"}
        if isinstance(value, list):
            formed = _results_sorted([self.form(v, f"{path}.*", in_result) for v in value], value)
            return sorted(formed, key=_sort_key) if self.in_any_order and _plain(value) else formed
        if isinstance(value, str):
            if self.in_any_order:
                named = _by_kind(value)
                return sorted(_WORDS.findall(_DURATION.sub("<duration>", named) if in_result else named))
            named = _TOKENS.sub(self._name, value)
            return _DURATION.sub("<duration>", named) if in_result else named
        return value

    def _member(self, key: str, value: Any, path: str, in_result: bool) -> Any:
        if path in self.keys:
            return "<volatile>"
        if key in _NUMBER_KEYS and isinstance(value, int | float) and not isinstance(value, bool):
            return "<time>"
        return self.form(value, path, in_result)

    def _name(self, match: re.Match) -> str:
        kind = match.lastgroup or "value"
        key = (kind, match.group())
        if key not in self.names:
            self.names[key] = f"<{kind}#{sum(1 for k in self.names if k[0] == kind) + 1}>"
        return self.names[key]


# A text compared in any order is the multiset of these: words, and each space, line break and mark alone (so that a
# space added or a line joined still differs, and "'a', 'b')" and "'b', 'a')" hold the same ones).
_WORDS = re.compile(r"\w+|\s|[^\w\s]")


def _plain(items: list) -> bool:
    """Whether a list holds plain values only (names, numbers), which an agent may list in any order."""
    return all(not isinstance(item, dict | list) for item in items)


def _sort_key(item: Any) -> bytes:
    return orjson.dumps(item, option=orjson.OPT_SORT_KEYS)


def _is_result(item: Any) -> bool:
    """A tool's result, in any protocol's shape: Anthropic's block, a Chat `tool` message, a Gemini
    `functionResponse` part, a Responses output item."""
    return isinstance(item, dict) and (item.get("type") in ("tool_result", "function_call_output",
                                                            "custom_tool_call_output")
                                       or item.get("role") == "tool" or "functionResponse" in item)


def _results_sorted(formed: list, raw: list) -> list:
    """`formed` with each run of side-by-side tool results (by `raw`) in one order, whatever order they came in."""
    out, i = [], 0
    while i < len(formed):
        j = i
        while j < len(raw) and _is_result(raw[j]):
            j += 1
        if j - i > 1:
            out += sorted(formed[i:j], key=_sort_key)
            i = j
        else:
            out.append(formed[i])
            i += 1
    return out


def _differences(recorded: Any, sent: Any, path: str, keys: frozenset[str]) -> Iterator[Tolerated]:
    if recorded == sent:
        return
    if isinstance(recorded, list) and isinstance(sent, list) and not _pairwise(recorded, sent, keys) \
            and not _pairwise(recorded, sent, keys, in_any_order=True):
        what = "order of items" if _plain(recorded) else "order of parallel tool results"
        yield Tolerated(path, what, f"{len(recorded)} items", "the same, reordered")
        return
    if path in keys or (path.rsplit(".", 1)[-1] in _NUMBER_KEYS and not isinstance(recorded, dict | list | str)):
        yield Tolerated(path, "fresh each run" if path in keys else "time", _text(recorded), _text(sent))
    elif isinstance(recorded, dict) and isinstance(sent, dict):
        for k in sorted(recorded.keys() & sent.keys()):
            yield from _differences(recorded[k], sent[k], f"{path}.{k}" if path else k, keys)
    elif isinstance(recorded, list) and isinstance(sent, list):
        for i, (a, b) in enumerate(zip(recorded, sent, strict=False)):
            yield from _differences(a, b, f"{path}.{i}", keys)
    elif isinstance(recorded, str) and isinstance(sent, str) and _Namer(keys).form(recorded, path) != \
            _Namer(keys).form(sent, path):
        if _lines(recorded) == _lines(sent):
            yield Tolerated(path or "(the body)", "order of lines", f"{recorded.count(chr(10)) + 1} lines",
                            "the same, reordered")
        else:
            yield Tolerated(path or "(the body)", "order of words", f"{len(_WORDS.findall(recorded))} words",
                            "the same, reordered")
    elif isinstance(recorded, str) and isinstance(sent, str):
        kinds = sorted({m.lastgroup or "value" for m in _TOKENS.finditer(recorded)})
        yield Tolerated(path or "(the body)", "/".join(kinds) or "value", recorded, sent)


def _pairwise(recorded: list, sent: list, keys: frozenset[str], in_any_order: bool = False) -> bool:
    """Whether the two lists match item by item in their places (else they match only once their tool results,
    or their plain values, are put in one order)."""
    def form(value: Any) -> Any:
        return _Namer(keys, in_any_order=in_any_order).form(value, "")
    return len(recorded) == len(sent) and all(form(a) == form(b) for a, b in zip(recorded, sent, strict=True))


def _lines(text: str) -> list[str]:
    """A text's lines in one order, each volatile value named by its kind."""
    return sorted(_by_kind(text).split("\n"))


def _by_kind(text: str) -> str:
    """`text` with each volatile value named by its kind alone (`<uuid>`, `<time>`, ...)."""
    return _TOKENS.sub(lambda m: f"<{m.lastgroup}>", text)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
