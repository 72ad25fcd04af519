"""Value types of reasonlog and their JSON form. No I/O, no storage ids.

The recorder turns what an agent does into *events* (a session started, a call was made, a
tool returned, an outcome happened, ...). Events travel to a writer, to a spill file or over
HTTP as their `to_dict()` form, and a store turns them into rows.
"""
from __future__ import annotations

import hashlib
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, ClassVar, cast, get_args

from .wire import EVENTS, decode_line, encode_line, rules

# Where callers found them before the wire contract held them.
from .wire import jsonable as jsonable  # noqa: E402
from .wire import usage as usage_wire
from .wire.rules import EVENT, ID, INSTANT, UTC_TEXT, FieldCheck, RecordError, Rule, checks_of, first_wrong
from .wire.rules import is_amount as is_amount  # noqa: E402
from .wire.shapes import CALL_STATUS, STATUS

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]  # 10 bits -> two digits, in one lookup
_id_lock = threading.Lock()
_last_id: list[Any] = [0, 0, ""]  # last millisecond, last random part, the millisecond's 10 digits
_random = random.Random(os.urandom(16))


def _new_random_in_child() -> None:
    """A forked child draws from its own generator: with the parent's state, children started in the same
    millisecond made the same ids (issue 30 item 1). Its lock is new too, as another thread may have held it."""
    global _id_lock
    _id_lock = threading.Lock()
    _last_id[:] = [0, 0, ""]
    _random.seed(os.urandom(16))


os.register_at_fork(after_in_child=_new_random_in_child)


def new_id() -> str:
    """A 26-character, time-sortable id (ULID layout: 48-bit milliseconds, 80 random bits)."""
    ms = time.time_ns() // 1_000_000
    with _id_lock:
        if ms <= _last_id[0]:  # same millisecond (or the clock stepped back): count up, stay sorted
            rand = _last_id[1] = _last_id[1] + 1
        else:
            rand = _random.getrandbits(79)
            stamp = "".join(_PAIRS[(ms >> s) & 1023] for s in (40, 30, 20, 10, 0))
            _last_id[:] = [ms, rand, stamp]
        stamp = _last_id[2]
    p = _PAIRS
    return (stamp + p[(rand >> 70) & 1023] + p[(rand >> 60) & 1023] + p[(rand >> 50) & 1023] + p[(rand >> 40) & 1023]
            + p[(rand >> 30) & 1023] + p[(rand >> 20) & 1023] + p[(rand >> 10) & 1023] + p[rand & 1023])


_BLAKE2B_80 = hashlib.blake2b(digest_size=10)  # copied for each id: parsing the keyword cost as much as hashing
_NO_INSTANT = _PAIRS[0] * 5


def stable_id(at: str | None, *key: Any) -> str:
    """A time-sortable id that is the same every time for the same key (ULID layout: the milliseconds of `at`,
    then 80 bits of a BLAKE2b hash of the key). Importers name what they import with it, so importing a file
    again finds what the first import wrote instead of adding it twice."""
    ms = 0
    if at:
        try:
            ms = int(datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            ms = 0
        ms = min(max(ms, 0), 2**48 - 1)
    if len(key) == 2 and type(key[0]) is str and type(key[1]) is str:  # (an importer's name and its own key)
        text = key[0] + "\x1f" + key[1]
    else:
        text = "\x1f".join(map(str, key))
    try:
        data = text.encode()
    except UnicodeEncodeError:  # a lone surrogate, kept as it is
        data = text.encode("utf-8", "surrogatepass")
    digest = _BLAKE2B_80.copy()
    digest.update(data)
    x = int.from_bytes(digest.digest())
    hi, lo, p = x >> 40, x & 0xFFFFFFFFFF, _PAIRS  # two digits a lookup; an import names every call with one
    return "".join((
        p[ms >> 40] + p[(ms >> 30) & 1023] + p[(ms >> 20) & 1023] + p[(ms >> 10) & 1023] + p[ms & 1023] if ms
        else _NO_INSTANT, p[hi >> 30], p[(hi >> 20) & 1023], p[(hi >> 10) & 1023], p[hi & 1023],
        p[lo >> 30], p[(lo >> 20) & 1023], p[(lo >> 10) & 1023], p[lo & 1023]))


def utc_now() -> str:
    """Now, as the ISO-8601 UTC text every `*_at` column holds."""
    return _iso(datetime.now(UTC))


def _iso(value: datetime) -> str:
    # isoformat() is C and fast; it drops the fraction when it is zero, which the columns keep.
    text = value.isoformat(timespec="microseconds")
    return text[:-6] + "Z" if text.endswith("+00:00") else text





_PADS = {n: "0" * (27 - n) + "Z" for n in range(22, 28)}  # a fraction of 1 to 6 digits (22 to 27 characters) to 6


# ASCII text is UTC text when its digits, each read as "d" (and a "d" as "x"), make one of these shapes: what
# `UTC_TEXT` matches (whose `\d` is any Unicode digit: text with other than ASCII goes to it), in half its time.
_DIGITS_AS_D = bytes(ord("d") if 48 <= b <= 57 else ord("x") if b == ord("d") else b for b in range(256))
_UTC_SHAPES = frozenset([b"dddd-dd-ddTdd:dd:ddZ"] + [b"dddd-dd-ddTdd:dd:dd." + b"d" * k + b"Z" for k in range(1, 7)])


def is_utc_text(value: str) -> bool:
    """Whether `value` is `YYYY-MM-DDTHH:MM:SS[.f{1,6}]Z` (`UTC_TEXT`): a store checks every instant it writes, and a
    reader of a transcript formats the instant of every line."""
    if str.isascii(value):  # (str's own methods: a subclass's may say otherwise)
        return str.encode(value).translate(_DIGITS_AS_D) in _UTC_SHAPES
    return UTC_TEXT.fullmatch(value) is not None


def utc_text(value: str) -> str | None:
    """`value` as `YYYY-MM-DDTHH:MM:SS.ffffffZ` when it is UTC text already (only the fraction padded), else None:
    what `format_instant` does first, for a reader that meets an instant on every line."""
    if not is_utc_text(value):
        return None
    n = len(value)
    if n == 27:  # (what every `*_at` column holds: the store formats what an importer formatted)
        return value
    return value[:19] + ".000000Z" if n == 20 else value[:-1] + _PADS[n]


def format_instant(value: datetime | str | float | None) -> str | None:
    """Normalise a datetime, an epoch-seconds float or an ISO string to `YYYY-MM-DDTHH:MM:SS.ffffffZ`."""
    if value is None:
        return None
    if isinstance(value, str):
        text = utc_text(value)
        if text is not None:
            return text
    try:  # out of range epochs and dates fail in three ways; all are bad input, never a store failure
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = datetime.fromtimestamp(value, UTC)
        elif isinstance(value, str):
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if not isinstance(value, datetime):
            raise RecordError(f"expected a datetime, epoch seconds or ISO-8601 text, got {type(value).__name__}")
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return _iso(value.astimezone(UTC))
    except (ValueError, OverflowError, OSError) as exc:
        raise RecordError(str(exc) if isinstance(exc, RecordError) else f"not an instant: {exc}") from None


# No real call comes near this; the bound keeps per-session sums far from SQLite's 64-bit limit.
MAX_TOKENS = 10**12


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one call, as disjoint counters: each token is priced exactly once.

    `input_tokens` is uncached input only; cache reads and writes stand beside it.
    `cache_write_1h_tokens` is the part of `cache_write_tokens` written for one hour.
    `reasoning_tokens` is the part of `output_tokens` spent on reasoning.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    reasoning_tokens: int = 0

    def __post_init__(self) -> None:
        i, o, r, w, w1, t = values = (self.input_tokens, self.output_tokens, self.cache_read_tokens,
                                      self.cache_write_tokens, self.cache_write_1h_tokens, self.reasoning_tokens)
        # One chained test for the common case: it runs on the agent's thread for every call.
        if (type(i) is int and type(o) is int and type(r) is int and type(w) is int and type(w1) is int
                and type(t) is int and i >= 0 and o >= 0 and r >= 0 and w >= 0 and w1 >= 0 and t >= 0
                and w1 <= w and t <= o and i + o + r + w <= MAX_TOKENS):
            return
        for f, value in zip(fields(self), values, strict=True):
            if type(value) is not int or not 0 <= value <= MAX_TOKENS:
                raise RecordError(f"usage.{f.name}: expected an int from 0 to {MAX_TOKENS:,}, got {value!r}")
        if i + o + r + w > MAX_TOKENS:
            raise RecordError(f"usage: more than {MAX_TOKENS:,} tokens in one call")
        if self.cache_write_1h_tokens > self.cache_write_tokens:
            raise RecordError("usage.cache_write_1h_tokens: larger than cache_write_tokens, of which it is a part")
        if self.reasoning_tokens > self.output_tokens:
            raise RecordError("usage.reasoning_tokens: larger than output_tokens, of which it is a part")

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict) -> "Usage":
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise RecordError(f"usage: unknown field(s) {sorted(unknown)}; "
                              "for provider usage use Usage.from_anthropic / Usage.from_openai")
        return cls(**data)

    @classmethod
    def from_anthropic(cls, usage: Any) -> "Usage":
        """From an Anthropic Messages `usage` (a dict or the SDK's object; input excludes cache reads and writes)."""
        return cls(**usage_wire.anthropic(usage))

    @classmethod
    def from_openai(cls, usage: Any) -> "Usage":
        """From OpenAI Chat (`prompt_tokens`) or Responses (`input_tokens`) usage, a dict or the SDK's object:
        cached tokens split off from input, reasoning counted inside output exactly once."""
        return cls(**usage_wire.openai(usage))

    @classmethod
    def from_langchain(cls, usage: Mapping[str, Any]) -> "Usage":
        """From LangChain's `UsageMetadata`, whose input tokens include cache reads and writes."""
        return cls(**usage_wire.langchain(usage))


# ---------------------------------------------------------------------------------- events


@dataclass(slots=True)
class Event:
    """Something that happened in a session; the unit that writers batch and stores apply."""

    kind: ClassVar[str] = "event"

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"event": self.kind}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.to_dict() if isinstance(value, Usage) else value
        return out


@dataclass(slots=True)
class SessionStarted(Event):
    """A session began: who records it (agent, run, model, provider, labels), where from (host, pid, liveness
    lock) and under which parent."""

    kind: ClassVar[str] = "session_started"
    session_id: str
    started_at: str
    agent: str | None = None
    run: str | None = None
    model: str | None = None
    provider: str | None = None
    labels: dict = field(default_factory=dict)
    parent_session_id: str | None = None
    parent_call_id: str | None = None
    external_id: str | None = None
    host: str | None = None
    pid: int | None = None
    xml_tool_tags: list | None = None
    live_token: str | None = None  # the recording process's liveness lock (store/liveness.py)


@dataclass(slots=True)
class SessionEnded(Event):
    """A session ended, with its status and, when it failed, its error."""

    kind: ClassVar[str] = "session_ended"
    session_id: str
    ended_at: str
    status: str = "completed"
    summary: str | None = None
    error: dict | None = None


@dataclass(slots=True)
class SessionTitled(Event):
    """A title given to a session after it started (a rename read by `watch`): its label `title` becomes it."""

    kind: ClassVar[str] = "session_titled"
    session_id: str
    title: str


@dataclass(slots=True)
class ExchangeStarted(Event):
    """An exchange (one user turn and the calls that answer it) began, with its input."""

    kind: ClassVar[str] = "exchange_started"
    exchange_id: str
    session_id: str
    started_at: str
    input: Any = None


@dataclass(slots=True)
class ExchangeEnded(Event):
    """An exchange ended, with its result, status and the figures an SDK reported for it."""

    kind: ClassVar[str] = "exchange_ended"
    exchange_id: str
    session_id: str
    ended_at: str
    result: Any = None
    status: str = "completed"
    stats: dict | None = None


@dataclass(slots=True)
class CallRecorded(Event):
    """One model call: the request it sent (kept whole), the response message and its accounting."""

    kind: ClassVar[str] = "call"
    call_id: str
    session_id: str
    exchange_id: str | None
    started_at: Any  # as given (epoch seconds, datetime, ISO text); the store normalises it
    request: dict  # the request body; its `messages`, `system` and `tools` are stored by reference
    response: dict | None  # the assistant message as the agent appends it to its history
    model: str | None = None
    provider: str | None = None
    stop_reason: str | None = None
    usage: Usage | None = None
    cost_usd: float | None = None  # only when the provider reported it
    latency_ms: float | None = None
    ttft_ms: float | None = None
    provider_message_id: str | None = None
    request_id: str | None = None
    raw: Any = None
    error: dict | None = None
    status: str = "ok"  # ok | error | partial
    context_facts: dict | None = None
    # The caller promises that the message objects it sends are never changed afterwards (importers build
    # each request from the last one's objects): the store then reuses what it knows of the resent prefix.
    stable_history: bool = False
    replay_of: str | None = None  # the recorded call this one re-sent (`reasonlog replay --send`)


@dataclass(slots=True)
class ToolResultRecorded(Event):
    """What a tool returned to the agent for one tool use."""

    kind: ClassVar[str] = "tool_result"
    tool_result_id: str
    session_id: str
    at: str
    tool_use_id: str | None
    content: Any
    name: str | None = None
    input: Any = None
    is_error: bool = False
    duration_ms: float | None = None


@dataclass(slots=True)
class OutcomeRecorded(Event):
    """Something a session produced or decided (its kind and payload), after a call or on its own."""

    kind: ClassVar[str] = "outcome"
    outcome_id: str
    session_id: str
    at: str
    outcome_kind: str
    payload: Any = None
    call_id: str | None = None


@dataclass(slots=True)
class ReasoningRecorded(Event):
    """A tiered reasoning record (see reasonlog/reasoning): the compact form, and where its long form is.

    `state` is `kept`, or `held` for an on_failure record: kept if its session fails, dropped if it completes."""

    kind: ClassVar[str] = "reasoning"
    record_id: str
    session_id: str
    at: str
    phase: str
    compact: dict
    agent: str | None = None
    group: str | None = None
    details: str | None = None
    artifact_path: str | None = None
    details_tokens: int | None = None
    compact_tokens: int | None = None
    tokenizer: str | None = None
    redacted: bool = False
    confidence: str | None = None
    references: list | None = None
    state: str = "kept"


@dataclass(slots=True)
class FileImported(Event):
    """What an import consumed of one file (its `import_files` row: how far, the hash of the 4 KiB before that point,
    the importer's state, the sessions it made), travelling in the batch of the events made of it, so that the two
    commit together: a killed import resumes where its last batch ended (io/importing.py)."""

    kind: ClassVar[str] = "file_imported"
    path: str
    format: str
    size: int
    mtime_ns: int
    consumed: int
    tail_hash: str | None
    state: dict | None
    sessions: list
    skipped: int
    imported_at: str

    def row(self) -> dict:
        """The file's `import_files` row (the store's `import_file(path)` answers it back)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls for cls in (SessionStarted, SessionEnded, SessionTitled, ExchangeStarted, ExchangeEnded,
                              CallRecorded, ToolResultRecorded, OutcomeRecorded, ReasoningRecorded, FileImported)
}


def event_from_dict(data: dict) -> Event:
    """Rebuild an event from its `to_dict()` form (spill files, HTTP ingestion)."""
    data = dict(data)
    cls = EVENT_TYPES.get(data.pop("event", None))
    if cls is None:
        raise RecordError(f"event: expected one of {sorted(EVENT_TYPES)}")
    if cls is CallRecorded and data.get("usage") is not None:
        data["usage"] = Usage.from_dict(data["usage"])
    return cls(**data)


# ---------------------------------------------------------------------------------- validation
# The recorder checks its arguments at the call site; the store checks every event again, since
# events also come from spill files (and, later, HTTP). A wrongly typed field must fail as a
# data error that rejects its event alone: reaching SQLite, it would fail as a store error, and
# the batch, its replay and every later batch would spill behind it.

STATUSES: tuple[str, ...] = get_args(STATUS)
CALL_STATUSES: tuple[str, ...] = get_args(CALL_STATUS)


# In process, a call holds a `Usage` and may hold the SDK's own reply object; their wire forms are the shapes'.
_IN_PROCESS = {"usage": Rule(lambda v: type(v) is Usage, "a Usage"),
               "response": Rule(lambda v: isinstance(v, dict) or hasattr(v, "model_dump"), "a message dict")}
_CHECKS: dict[type, tuple[FieldCheck, ...]] = {
    cls: checks_of(EVENTS[kind], EVENT, skip=("event",), in_process=_IN_PROCESS) for kind, cls in EVENT_TYPES.items()}
_ANYTHING = (lambda v: True).__code__


def _takes_anything(test: Callable[[Any], bool]) -> bool:
    """Whether `test` is `lambda v: True` (the rule of a field that takes any value), told by its code."""
    code = getattr(test, "__code__", None)
    return code is not None and (code.co_code, code.co_consts, code.co_names) == (
        _ANYTHING.co_code, _ANYTHING.co_consts, _ANYTHING.co_names)


# Tests written out in the checks, told by their code (every rule `_one` makes of one type shares one code object)
_INLINE: dict[object, str] = {rules._one(str, EVENT).test.__code__: "isinstance(v, str)",
                             rules._one(dict, EVENT).test.__code__: "isinstance(v, dict)",
                             rules._one(list, EVENT).test.__code__: "isinstance(v, list)",
                             rules._one(bool, EVENT).test.__code__: "(type(v) is bool)",
                             ID.test.__code__: "(isinstance(v, str) and v != '')",
                             INSTANT.test.__code__: "(isinstance(v, str) and is_utc_text(v))"}


def _all_right(cls: type, checks: tuple[FieldCheck, ...]) -> Callable[[Any], bool]:
    """Whether every checked field of an event of `cls` is right: `first_wrong`'s tests in its order, written out as
    one function (as `dataclasses` writes `__init__`), with no loop over the checks and no test of a nullable field
    that takes anything. The store checks every event it writes, and an import each event before that: the loop
    over the checks took 2 to 4 µs an event."""
    tests: dict[str, Any] = {"is_utc_text": is_utc_text}
    lines = ["def all_right(event):"]
    for i, check in enumerate(checks):
        anything = _takes_anything(check.test)
        if check.nullable and anything:
            continue
        tests[f"t{i}"] = check.test
        right = _INLINE.get(getattr(check.test, "__code__", None), f"t{i}(v)")
        wrong = (f"v is not None and not {right}" if check.nullable
                 else "v is None" if anything else f"v is None or not {right}")
        lines += [f"    v = event.{check.name}", f"    if {wrong}:", "        return False"]
    lines.append("    return True")
    exec(compile("\n".join(lines), f"<the checks of {cls.__name__}>", "exec"), tests)  # our own text, as above
    return cast(Callable[[Any], bool], tests["all_right"])


_ALL_RIGHT: dict[type, Callable[[Any], bool]] = {}  # made at a type's first check (each takes about 0.6 ms)


def check_event(event: Any) -> None:
    """Raise `RecordError` naming the first field of `event` whose type the store cannot hold."""
    all_right = _ALL_RIGHT.get(type(event))
    if all_right is None:
        if type(event) not in _CHECKS:
            raise RecordError(f"event: expected one of {sorted(EVENT_TYPES)}, got {type(event).__name__}")
        all_right = _ALL_RIGHT[type(event)] = _all_right(type(event), _CHECKS[type(event)])
    if all_right(event):
        return
    checks = _CHECKS[type(event)]
    wrong = first_wrong(checks, lambda name: getattr(event, name), EVENT)  # what was wrong, said as it says it
    if wrong is not None:
        name, expected, value = wrong
        raise RecordError(f"{name}: expected {expected}, got {type(value).__name__}")


def dump_event(event: Event) -> bytes:
    """One event as a line of the wire encoding (spill files, `POST /v1/ingest`)."""
    return encode_line(event.to_dict())


def load_event(line: bytes) -> Event:
    return event_from_dict(decode_line(line))
