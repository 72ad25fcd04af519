"""What a reader calls the same message, and how one call's context follows from the one before.

Every view of a session (show, the dashboard, the API, the exports, the summarizers) reads one timeline:
the messages of the conversation in the order they first appeared, each once. The store builds it as calls
are written (`store/writing.py`), by aligning each call's context with the previous call's context plus its
reply, as *sequences* of reader keys: a message sent twice is two messages, a window that slid is a trim at
the front, a run replaced by fewer new messages ahead of kept ones is a compaction, and a message changed in
place is an edit.

A reader key says what a message *means*, not how its bytes were spelt: a string and one text block, a block
with and without null fields, an SDK object and its dump, an OpenAI message with `refusal: null` and
`annotations: []`, a Responses output item resent as an input item all have one key. Replay never uses
keys: it gives back the bytes each call sent. No I/O here.
"""
from __future__ import annotations

import difflib
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from . import providers
from .providers import openai_responses

RESPONSES_ITEM_TYPES = openai_responses.ITEM_TYPES
# Block types that are all "text" to a reader (Anthropic and Chat `text`, Responses `output_text`/`input_text`).
_TEXT_TYPES = frozenset({"text", "output_text", "input_text"})
# Keys that change how a message is billed or cached, or annotate it, not what it says: Anthropic moves
# `cache_control` from message to message as a conversation grows; citations, annotations and logprobs come
# with a reply and are left out when an agent sends back its text.
_NOISE_KEYS = frozenset({"cache_control", "citations", "annotations", "logprobs"})
# Blocks a provider lets an agent leave out when it sends a reply back (thinking is dropped from earlier
# turns by Anthropic's API itself).
_THINKING_TYPES = frozenset({"thinking", "redacted_thinking", "reasoning"})

Slot = int | tuple[int, int]   # a timeline entry, or (entry, item) for one item of a reply made of items


def reader_form(value: Any) -> Any:
    """A message (plain JSON data) as a reader sees it: what its protocol's clients add or respell when they send
    a reply back taken out (`providers.reader_message`), nulls, empty lists and empty text gone, text blocks
    spelt one way."""
    if isinstance(value, list):
        return [reader_form(v) for v in value]
    return _form(providers.reader_message(value))


def reader_role(message: Any) -> Any:
    """The role of a message's reader form, without making the form: a string role is the same there (Gemini's
    `model` named `assistant`), and a role of any other value is no string there either."""
    form = providers.reader_message(message)
    return form.get("role") if isinstance(form, dict) else None


def _form(value: Any) -> Any:
    if isinstance(value, list):
        return [v if type(v) is str else _form(v) for v in value]
    if not isinstance(value, dict):
        return value
    kind = value.get("type")
    item = isinstance(kind, str) and kind in RESPONSES_ITEM_TYPES  # a `type` of another shape is no item (nor text)
    left_out = _ITEM_LEFT_OUT if item else _NOISE_KEYS
    out = {}
    for key, v in value.items():
        if key in left_out:
            continue
        kind = type(v)
        if kind is str:  # most values, settled without a call (`tests/test_timeline_fast_paths.py` holds it to the
            if key not in _RESPELT:  # general rule below)
                out[key] = v
            elif key == "content":
                if v:
                    out[key] = [{"type": "text", "text": v}]
            else:
                out[key] = "text" if v in _TEXT_TYPES else v
            continue
        if v is None:
            continue
        if kind in _SCALARS:
            out[key] = v
            continue
        if key == "content" and isinstance(v, str):
            v = [{"type": "text", "text": v}] if v else None
        v = _form(v)
        if v is None or v == [] or v == {}:
            continue
        out[key] = "text" if key == "type" and isinstance(v, str) and v in _TEXT_TYPES else v
    if item and out.get("type") == "message":
        del out["type"]  # a Responses message item and a chat-style message with the same role and content
    return out


_ITEM_LEFT_OUT = _NOISE_KEYS | {"id", "status"}  # a Responses item's id and status say nothing a reader reads
_RESPELT = frozenset({"content", "type"})  # keys whose string values a reader form may spell another way
_SCALARS = frozenset({int, float, bool})  # values a reader form keeps as they are


def key_of(form: Any) -> bytes:
    """A short digest of a reader form."""
    return _blake2b(_dumps(form, option=_SORT_KEYS), digest_size=16).digest()


_blake2b, _dumps, _SORT_KEYS = hashlib.blake2b, orjson.dumps, orjson.OPT_SORT_KEYS  # (one lookup a key, not three)


def reply_units(reply: Any) -> list[Any]:
    """The messages a reply becomes when an agent sends it back: the reply itself, or, for a Responses reply
    (a list of output items), each item."""
    content = reply.get("content") if isinstance(reply, dict) else None
    if isinstance(content, list) and openai_responses.is_output(content):
        return list(content)
    return [reply]


def reply_variants(form: Any) -> list[Any]:
    """Other forms in which an agent sends a reply back and a reader calls it the same: without its thinking
    (thinking blocks, or the reasoning a protocol keeps beside its content: `providers.without_thinking`), and
    (when only text is left) as one text block."""
    if not isinstance(form, dict):
        return []
    variants = providers.without_thinking(form)
    form = variants[0] if variants else form
    if not isinstance(form.get("content"), list):
        return variants
    kept = [b for b in form["content"] if not (isinstance(b, dict) and b.get("type") in _THINKING_TYPES)]
    if kept and len(kept) < len(form["content"]):
        variants.append({**form, "content": kept})
    texts = [b["text"] for b in kept
             if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)]
    if len(kept) > 1 and len(texts) == len(kept):
        variants.append({**form, "content": [{"type": "text", "text": "".join(texts)}]})
    return variants


Op = tuple[str, int, int, int, int]


@dataclass
class Window:
    """How a call's context follows from the previous call's context and reply (`before`).

    `ops`: difflib-style opcodes from `before` to this context. Counts: `added` new messages (a compaction's
    summary included), `trimmed` messages of the previous context left out, `edited` messages changed in
    place (`edits`: pairs of positions in before and after), `compacted` when a run was replaced by fewer new
    messages ahead of kept ones, `unsent` units of the previous reply not sent back, `held` positions the
    server held (a chained request sends only what follows them).
    """

    ops: list[Op] = field(default_factory=list)
    added: int = 0
    trimmed: int = 0
    edited: int = 0
    compacted: bool = False
    unsent: int = 0
    held: int = 0
    edits: list[tuple[int, int]] = field(default_factory=list)

    def stored(self, runs: list, reply: list | None) -> dict:
        """The window as a call keeps it (`calls.window_json`): its map (`runs`), its reply's entry and item count,
        the facts, and the edits when there are any."""
        out = {"map": runs, "reply": reply, "added": self.added, "trimmed": self.trimmed, "edited": self.edited,
               "compacted": self.compacted, "unsent": self.unsent, "held": self.held}
        if self.edits:
            out["edits"] = self.edits
        return out


def align(before: Sequence[bytes], after: Sequence[bytes], context_len: int, held: int = 0) -> Window:
    """Align the previous context plus its reply (`before`, whose first `context_len` keys are the context)
    with this call's context (`after`) as sequences, and say what changed."""
    w = Window(ops=_opcodes(before, after), held=held)
    kept_after = _kept_after(w.ops)
    for n, (tag, i1, i2, j1, j2) in enumerate(w.ops):
        if tag == "equal":
            continue
        ctx_gone = max(0, min(i2, context_len) - i1)
        w.unsent += (i2 - i1) - ctx_gone
        if tag == "replace" and kept_after[n] and ctx_gone == j2 - j1:  # changed in place
            w.edited += ctx_gone
            w.edits += zip(range(i1, i1 + ctx_gone), range(j1, j2), strict=True)
            continue
        if tag == "replace" and kept_after[n] and 0 < j2 - j1 < ctx_gone:
            w.compacted = True
        w.trimmed += ctx_gone
        w.added += j2 - j1
    return w


def _opcodes(before: Sequence[bytes], after: Sequence[bytes]) -> list[Op]:
    n = len(before)
    if len(after) >= n and after[:n] == before:  # the common case: history resent, then new messages
        ops: list[Op] = [("equal", 0, n, 0, n)] if n else []
        return ops + ([("insert", n, n, n, len(after))] if len(after) > n else [])
    return list(difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes())  # type: ignore[arg-type]


def _kept_after(ops: list[Op]) -> list[bool]:
    """For each opcode: does a kept (equal) run follow it?"""
    out, seen = [False] * len(ops), False
    for n in range(len(ops) - 1, -1, -1):
        out[n] = seen
        seen = seen or ops[n][0] == "equal"
    return out


def decode_map(encoded: list, before: list[Slot]) -> list[Slot]:
    """A call's slots from its stored map: runs `[i, j]` into the previous call's slots plus its reply's
    (`before`), and new timeline entries as themselves."""
    out: list[Slot] = []
    for x in encoded:
        if isinstance(x, list):
            out += before[x[0]:x[1]]
        else:
            out.append(x)
    return out


def reply_slots(entry: int, items: int) -> list[Slot]:
    """The slots of a reply stored as timeline entry `entry`: itself, or each of its `items`."""
    return [(entry, j) for j in range(items)] if items else [entry]
