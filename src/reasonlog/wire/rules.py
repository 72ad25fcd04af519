"""Field rules: what a shape's annotations mean when a value arrives, compiled once into checks.

A shape is a TypedDict. Its annotations are the check: `str`, `int`, `float`, `bool`, `dict[...]`,
`list[...]`, a `Literal` of choices, a nested TypedDict, `Any`, each `| None` when null is allowed.
A constraint the type cannot say (a non-empty id, UTC text, a content hash, a non-negative amount)
rides in `Annotated[T, Rule(...)]`; `Defaulted()` marks a field the database fills in when a record
leaves it out. `checks_of` turns a shape into a tuple of `FieldCheck`s, cheap to run per record.

The same shape is read in two vocabularies: events say what Python value was expected (`a str`),
export records what JSON value (`text`). Each vocabulary also says how an integer is bounded.
"""
from __future__ import annotations

import re
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired, Union, get_args, get_origin, get_type_hints

INT64 = (-(2 ** 63), 2 ** 63 - 1)


class RecordError(ValueError):
    """A value handed to the recorder is not what reasonlog expects; the message names the field."""


MAX_AMOUNT = INT64[1]  # SQLite's largest INTEGER; also bounds floats (and excludes inf; NaN fails any comparison)
UTC_TEXT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.(\d{1,6}))?Z")
_HASH = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True, slots=True)
class Rule:
    """A test of a value that is not null, and what an error says was expected."""

    test: Callable[[Any], bool]
    expected: str


@dataclass(frozen=True, slots=True)
class Defaulted:
    """The field may be left out of a record (the database has a default); null is still refused."""


@dataclass(frozen=True, slots=True)
class FieldCheck:
    """How one field of a record is checked: its test, what it must be, and whether it may be null or left out."""

    name: str
    test: Callable[[Any], bool]  # of a value that is not null
    expected: str
    nullable: bool
    required: bool               # a record must carry it (export records; events carry every field)
    defaulted: bool


def is_int64(v: Any) -> bool:
    return type(v) is int and INT64[0] <= v <= INT64[1]  # bool is an int to Python, not to us


def is_amount(value: Any) -> bool:
    """A measurement or price: a finite, non-negative int or float (not a bool), or None."""
    return value is None or (type(value) in (int, float) and 0 <= value <= MAX_AMOUNT)


def is_hash(v: Any) -> bool:
    return isinstance(v, str) and _HASH.fullmatch(v) is not None


ID = Rule(lambda v: isinstance(v, str) and v != "", "a non-empty str")
INSTANT = Rule(lambda v: isinstance(v, str) and UTC_TEXT.fullmatch(v) is not None, "UTC text YYYY-MM-DDTHH:MM:SSZ")
AMOUNT = Rule(is_amount, "a non-negative number")
COUNT = Rule(lambda v: type(v) is int and 0 <= v <= MAX_AMOUNT, "an int")
AS_GIVEN = Rule(lambda v: True, "ISO-8601 text or epoch seconds")  # the store normalises it, or says why not
TAGS = Rule(lambda v: isinstance(v, list) and all(isinstance(t, str) and t for t in v), "a list of tag names")
HASH = Rule(is_hash, "a content hash (32 hex digits)")
CONTEXT = Rule(lambda v: isinstance(v, list) and all(
    is_hash(i) or (isinstance(i, list) and len(i) == 2 and all(is_int64(n) and n >= 0 for n in i)) for i in v),
    "a list of content hashes and [start, end] runs")
HASHES = Rule(lambda v: isinstance(v, list) and all(is_hash(i) for i in v), "a list of content hashes")
COUNTERS = Rule(lambda v: isinstance(v, dict) and all(is_int64(n) for n in v.values()), "an object of integers")
FLAG = Rule(lambda v: type(v) is int and v in (0, 1), "0 or 1")


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """How a reader of one kind is told what was expected of each plain type."""

    text: str
    integer: Rule
    number: Rule
    boolean: str
    object: str
    array: str
    anything: str
    null: str


EVENT = Vocabulary(text="a str", integer=Rule(lambda v: type(v) is int, "an int"),
                   number=Rule(lambda v: type(v) in (int, float), "a number"), boolean="a bool", object="a dict",
                   array="a list", anything="anything", null="None")
RECORD = Vocabulary(text="text", integer=Rule(is_int64, "an integer (64-bit)"),
                    number=Rule(lambda v: is_int64(v) or type(v) is float, "a number"), boolean="true or false",
                    object="an object", array="a list", anything="any JSON value", null="null")


def checks_of(shape: type, vocabulary: Vocabulary, skip: tuple[str, ...] = (),
              in_process: dict[str, Rule] | None = None) -> tuple[FieldCheck, ...]:
    """The checks of every field of `shape` (a TypedDict), in declaration order. `in_process`: rules for
    fields that hold, before they are written, an object whose wire form the shape gives (a `Usage`)."""
    hints = get_type_hints(shape, include_extras=True)
    required = getattr(shape, "__required_keys__", frozenset(hints))
    out = []
    for name, hint in hints.items():
        if name in skip:
            continue
        # NotRequired read here too: a TypedDict whose annotations are strings may miss it in __required_keys__.
        optional = get_origin(hint) is NotRequired
        rule, nullable, defaulted = _rule_of(hint, vocabulary)
        rule = (in_process or {}).get(name, rule)
        out.append(FieldCheck(name, rule.test, rule.expected, nullable, name in required and not optional, defaulted))
    return tuple(out)


def _rule_of(hint: Any, vocabulary: Vocabulary) -> tuple[Rule, bool, bool]:
    """(rule, nullable, defaulted) of one annotation."""
    defaulted = False
    rule: Rule | None = None
    if get_origin(hint) is NotRequired:
        hint = get_args(hint)[0]
    if get_origin(hint) is Annotated:
        hint, *extras = get_args(hint)
        rule = next((e for e in extras if isinstance(e, Rule)), None)
        defaulted = any(isinstance(e, Defaulted) for e in extras)
    options = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
    nullable = type(None) in options or (hint is Any and rule is None)
    options = tuple(o for o in options if o is not type(None))
    if rule is None:
        rule = _plain(options, vocabulary)
    return rule, nullable, defaulted


def _plain(options: tuple[Any, ...], vocabulary: Vocabulary) -> Rule:
    rules = [_one(o, vocabulary) for o in options]
    if len(rules) == 1:
        return rules[0]
    return Rule(lambda v: any(r.test(v) for r in rules), " or ".join(r.expected for r in rules))


def _one(hint: Any, vocabulary: Vocabulary) -> Rule:
    origin = get_origin(hint) or hint
    if hint is Any:
        return Rule(lambda v: True, vocabulary.anything)
    if origin is Literal:
        choices = get_args(hint)
        return Rule(lambda v: isinstance(v, str) and v in choices, " or ".join(choices))
    if origin is str:
        return Rule(lambda v: isinstance(v, str), vocabulary.text)
    if origin is bool:
        return Rule(lambda v: type(v) is bool, vocabulary.boolean)
    if origin is int:
        return vocabulary.integer
    if origin is float:
        return vocabulary.number
    if origin is dict or hasattr(hint, "__required_keys__"):  # a nested TypedDict
        return Rule(lambda v: isinstance(v, dict), vocabulary.object)
    if origin is list:
        return Rule(lambda v: isinstance(v, list), vocabulary.array)
    raise TypeError(f"no rule for the annotation {hint!r}: give it one with Annotated[..., Rule(...)]")


def first_wrong(checks: tuple[FieldCheck, ...], get: Callable[[str], Any], vocabulary: Vocabulary
                ) -> tuple[str, str, Any] | None:
    """The first field whose value is wrong, as (name, what was expected, the value); None when all are right."""
    for check in checks:
        value = get(check.name)
        if value is None:
            if not check.nullable:
                return check.name, check.expected, value
        elif not check.test(value):
            return check.name, check.expected + (f" or {vocabulary.null}" if check.nullable else ""), value
    return None
