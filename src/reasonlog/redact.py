"""Redaction: secrets are masked before anything reaches a database, a spill file, a server or a log line.

A secret becomes `[REDACTED:<kind>:<digest>]`, the digest keyed by the installation's key (redact_key.py), so
two different secrets stay two different ids and the same secret masks the same in every process. Masking
works on the strings of decoded values, never across their structure (a string, an object's key and value,
each alone), so masked JSON is still the same JSON with some strings changed. Masking is idempotent: what is
masked masks to itself, so a server may mask again what a recorder sent. What a key looks like, and how it is
told from base64 data, is in redact_patterns.py.
"""
from __future__ import annotations

import builtins
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import orjson

from . import redact_key
from .redact_patterns import (
    ANY_CASE,
    ANY_CASE_WORDS,
    AWS_SECRET_NAME,
    AWS_SECRET_VALUE,
    DATA_SHAPED,
    DEFAULT_PATTERNS,
    FIRST,
    LITERALS,
    PATTERNS_OF,
    STARTS,
    URL_KIND,
    URL_PASSWORD,
    in_base64_data,
    spellings,
)

__all__ = ["DEFAULT_PATTERNS", "Redactor"]
_SECRET = "(?P<SECRET>"
CLEAN_CHARS = 128        # strings this short that hold no secret are remembered (`Redactor._clean`)
CLEAN_ENTRIES = 16_384   # at most this many (about 2 MB with the strings)


@dataclass
class Redactor:
    """Masks every match of its patterns with `[REDACTED:<name>:<digest>]` and counts what it masked.

    `key`: the digests' key; None takes the installation's (read on the first secret masked, not before).
    """

    patterns: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_PATTERNS))
    masked: int = 0
    literals: tuple[bytes, ...] | None = LITERALS  # None: the user's patterns need the regex on everything
    key: bytes | None = None
    # Short strings found to hold no secret (ids, names, models: each is masked wherever it is written, a dozen
    # times a call): found here again without a regex. Cleared past CLEAN_ENTRIES.
    _clean: set[str] = field(default_factory=set, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name, pattern in self.patterns.items():
            if DEFAULT_PATTERNS.get(name) == pattern:
                continue  # reasonlog's own: they compile (tests/test_redaction.py uses every one)
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"redaction pattern {name!r}: {exc}") from None

    # Compiled on first use, not when made: a store opened to read (`reasonlog stats`) masks nothing, and
    # compiling the patterns was 25-60 ms of its start.
    @cached_property
    def _text(self) -> re.Pattern:
        return _compiled(tuple(self.patterns.items()))[0]

    @cached_property
    def _names(self) -> dict[str, str]:
        return _compiled(tuple(self.patterns.items()))[1]

    @cached_property
    def _secret_groups(self) -> dict[str, str]:
        return _compiled(tuple(self.patterns.items()))[2]

    @cached_property
    def _text_literals(self) -> Callable[[str], object] | None:
        return None if self.literals is None else _text_holds_any(self.literals)

    @cached_property
    def _may_hold(self) -> Callable[[builtins.bytes], bool]:
        return (lambda data: True) if self.literals is None else _bytes_may_hold(self.literals)

    @cached_property
    def _scan(self) -> Callable[[builtins.bytes], tuple[bool, bool]]:
        if self.literals is None:
            return lambda data: (True, b"null" in data)
        return _bytes_scan(self.literals)

    @classmethod
    def with_extra(cls, extra: Iterable[str] | dict[str, str] = ()) -> "Redactor":
        """The default patterns plus the user's own (a list of regexes or a name -> regex dict)."""
        patterns = dict(DEFAULT_PATTERNS)
        items = extra.items() if isinstance(extra, dict) else ((f"custom_{i}", p) for i, p in enumerate(extra))
        patterns.update(items)
        return cls(patterns, literals=None)

    # ------------------------------------------------------------ the ways in

    def text(self, text: str) -> str:
        """Mask secrets in a string (an identifier, a message's text, a log line)."""
        if text in self._clean:
            return text
        counted, masked = self.masked, text
        if self._text_literals is None:
            masked = self._text.sub(self._mask, text)
        elif self._text_literals(text):
            masked = self._patterns_in(text).sub(self._mask, text)
        if "://" in masked and "@" in masked:  # two substring tests, in C, before any regex
            masked = URL_PASSWORD.sub(self._mask_url, masked)
        if masked == text:
            if len(text) <= CLEAN_CHARS and self.masked == counted:  # (nothing masked to itself either)
                if len(self._clean) >= CLEAN_ENTRIES:
                    self._clean.clear()
                self._clean.add(text)
            return text  # the same object: callers test identity for "unchanged"
        return masked

    def bytes(self, data: builtins.bytes) -> builtins.bytes:
        """Mask secrets in opaque bytes (a raw payload): as Latin-1 text, so every other byte stays as it was."""
        if not self.may_hold(data):
            return data
        text = data.decode("latin-1")
        masked = self.text(text)
        return data if masked is text else masked.encode("latin-1")

    def value(self, value: Any) -> Any:
        """Mask every string in a decoded value (keys of objects too); the same object when nothing changed."""
        kind = type(value)
        if kind is str:
            return self.text(value)
        if kind is dict:
            return self._dict(value)
        if kind is list or kind is tuple:
            items = [self.value(v) for v in value]
            return value if all(map(_same, items, value)) else items
        if kind is builtins.bytes or kind is bytearray:
            return self.bytes(builtins.bytes(value))
        return value

    def json(self, data: builtins.bytes, dumps: Callable[[Any], builtins.bytes]) -> builtins.bytes:
        """Mask the strings of serialised JSON: decoded, masked by `value`, encoded again by `dumps` when
        something changed. Bytes without any of the patterns' literals cost one substring scan."""
        return self.held_json(data, dumps) if self.may_hold(data) else data

    def scan(self, data: builtins.bytes) -> tuple[bool, bool]:
        """`(may_hold(data), b"null" in data)`, in one pass of the literals' automaton where there is one: a content's
        JSON is asked both (`null` is what NaN serialises to), and the substring test was 3 % of the instructions of
        turning the contents of a 42 MB import into ids."""
        return self._scan(data)

    def held_json(self, data: builtins.bytes, dumps: Callable[[Any], builtins.bytes]) -> builtins.bytes:
        """`json` of JSON that `may_hold` said yes to."""
        decoded = orjson.loads(data)
        masked = self.value(decoded)
        return data if masked is decoded else dumps(masked)

    def may_hold(self, data: builtins.bytes) -> bool:
        """False when no default pattern can match in `data`: none of their literals is in it, and no `://` with an
        `@` (a URL that may hold a password: URL_PASSWORD)."""
        return self._may_hold(data)

    def _patterns_in(self, text: str) -> re.Pattern:
        """The regex of the patterns whose literals `text` holds (see PATTERNS_OF), when they are the defaults."""
        if self.patterns != DEFAULT_PATTERNS or self.literals is not LITERALS:
            return self._text
        names = frozenset(n for literal, of in PATTERNS_OF.items() if literal.decode() in text for n in of)
        found = _SUBSETS.get(names)
        if found is None:
            chosen = [n for n in DEFAULT_PATTERNS if n in names or n in ANY_CASE]
            found = _SUBSETS[names] = re.compile(f"(?=[{''.join(FIRST[n] for n in chosen)}])(?:"
                                                 + "|".join(_part(n, DEFAULT_PATTERNS[n]) for n in chosen) + ")")
        return found

    # ------------------------------------------------------------ masking

    def _dict(self, value: dict) -> dict:
        out, changed = {}, False
        for k, v in value.items():
            mk = self.text(k) if type(k) is str else k
            mv = self._aws_secret(v) if type(k) is str and type(v) is str and AWS_SECRET_NAME.fullmatch(k) \
                else self.value(v)
            changed = changed or mk is not k or mv is not v
            out[mk] = mv
        return out if changed else value

    def _aws_secret(self, text: str) -> str:
        """The value of a field named as an AWS secret access key: masked whole when it has that key's shape."""
        if AWS_SECRET_VALUE.fullmatch(text):
            return self._masked("aws_secret_key", text)
        return self.text(text)

    def _mask(self, match: re.Match) -> str:
        group = match.lastgroup or ""
        name = self._names[group]
        if name in DATA_SHAPED and in_base64_data(match.string, match.start(), match.end()):
            return match.group()
        secret_group = self._secret_groups.get(group)
        if secret_group is not None and match.group(secret_group) is not None:
            lo, hi = match.span(secret_group)
            whole = match.group()
            at = lo - match.start()
            return whole[:at] + self._masked(name, match.group(secret_group)) + whole[at + hi - lo:]
        return self._masked(name, match.group())

    def _mask_url(self, match: re.Match) -> str:
        """A URL's userinfo and `@` with its password masked; the user name stays."""
        lo, hi = match.span("SECRET")
        text = match.string
        return text[match.start():lo] + self._masked(URL_KIND, text[lo:hi]) + text[hi:match.end()]

    def _masked(self, name: str, secret: str) -> str:
        self.masked += 1
        if self.key is None:
            self.key = redact_key.installation_key()
        return f"[REDACTED:{name}:{redact_key.digest(secret, self.key)}]"


def _same(a: Any, b: Any) -> bool:
    return a is b


_COMPILED: dict[tuple, tuple[re.Pattern, dict[str, str], dict[str, str]]] = {}
_SUBSETS: dict[frozenset[str], re.Pattern] = {}  # the default patterns' regex for a set of them (`_patterns_in`)


def _compiled(patterns: tuple[tuple[str, str], ...]) -> tuple[re.Pattern, dict[str, str], dict[str, str]]:
    """One regex of named groups (the default patterns first, behind their STARTS test), the pattern name of
    each group, and the group of each pattern's `SECRET` part (the part masked when a label is kept).
    Compiled once per process and pattern set: stores and recorders make redactors freely."""
    found = _COMPILED.get(patterns)
    if found is None:
        names = {_group(n): n for n, _ in patterns}
        secrets = {_group(n): _group(n) + "__secret" for n, p in patterns if _SECRET in p}
        parts = [(n, _part(n, p)) for n, p in patterns]
        known = [text for n, text in parts if DEFAULT_PATTERNS.get(n) == dict(patterns)[n]]
        other = [text for n, text in parts if DEFAULT_PATTERNS.get(n) != dict(patterns)[n]]
        combined = "|".join(([f"{STARTS}(?:{'|'.join(known)})"] if known else []) + other)
        found = _COMPILED[patterns] = (re.compile(combined), names, secrets)
    return found


def _part(name: str, pattern: str) -> str:
    """A pattern as a named group of the combined regex, its `SECRET` part a group of its own."""
    return f"(?P<{_group(name)}>{pattern.replace(_SECRET, '(?P<' + _group(name) + '__secret>')})"


# Both automata report the leftmost match (`MATCHKIND_LEFTMOST_FIRST`), which lets the library search with its SIMD
# prefilter: over the 8.2 MB of new contents of a 42 MB Claude Code import, 2.5 ms of CPU against 17.8 for the
# standard kind. Either kind finds a match when any literal occurs, which is all that is asked of them.


def _bytes_automaton(patterns: list[builtins.bytes]) -> Callable[[builtins.bytes], list] | None:
    """The matches of `patterns` in bytes, by the `fast` extra's automaton (None without it)."""
    try:
        from ahocorasick_rs import MATCHKIND_LEFTMOST_FIRST, BytesAhoCorasick
    except ImportError:
        return None
    return BytesAhoCorasick(patterns, matchkind=MATCHKIND_LEFTMOST_FIRST).find_matches_as_indexes


def _bytes_may_hold(literals: tuple[builtins.bytes, ...]) -> Callable[[builtins.bytes], bool]:
    """`Redactor.may_hold`: whether bytes hold any of `literals`, or `://` and `@`. With the `fast` extra, one pass of
    an Aho-Corasick automaton (ahocorasick-rs) that holds `://` beside the literals: over the 44 MB of new contents
    of a 211 MB Claude Code import it took 0.09 s of CPU where one regex of the literals took 0.49 (Python's engine
    tries the alternatives at every position whose byte starts one, and `e` and `s` start many) and a substring test
    per literal 0.82; and `://` in it costs nothing, where its own substring test was a third of the prefilter (8 of
    25 ms over the 8.2 MB of new contents of a 42 MB import). Without the extra, that regex and the test."""
    if not literals:
        return lambda data: True  # (as the empty regex: it matches anywhere)
    fold = literals == LITERALS  # another set's literal could overlap a `://` and be hidden by it
    find, url = _bytes_automaton([*literals, b"://"] if fold else list(literals)), len(literals)
    if find is None:
        holds = _literals_regex(literals, builtins.bytes)
        return lambda data: holds(data) or (b"://" in data and b"@" in data)
    if not fold:
        return lambda data: bool(find(data)) or (b"://" in data and b"@" in data)

    def may_hold(data: builtins.bytes) -> bool:
        found = find(data)  # no default literal holds `:` or `/`, so a `://` never hides one of them
        return bool(found) and (b"@" in data or any(i != url for i, _, _ in found))
    return may_hold


def _bytes_scan(literals: tuple[builtins.bytes, ...]) -> Callable[[builtins.bytes], tuple[bool, bool]]:
    """`Redactor.scan`: `_bytes_may_hold`'s answer, and whether the bytes hold `null`, from one automaton that holds
    `null` too. No default literal starts or ends with `n`, `u` or `l`, so a `null` never overlaps one and is always
    found."""
    may_hold, find = _bytes_may_hold(literals), _bytes_automaton([*literals, b"://", b"null"])
    if find is None or literals != LITERALS:  # (the default literals are the ones this holds for)
        return lambda data: (may_hold(data), b"null" in data)
    url, null = len(literals), len(literals) + 1

    def scan(data: builtins.bytes) -> tuple[bool, bool]:
        found = find(data)
        if not found:
            return False, False
        kinds = {i for i, _, _ in found}
        nulls = null in kinds
        kinds.discard(null)
        return bool(kinds) and (b"@" in data or bool(kinds - {url})), nulls
    return scan


def _text_holds_any(literals: tuple[builtins.bytes, ...]) -> Callable[[str], object]:
    """Whether a string holds any of `literals` (truthy when it does). With the `fast` extra, the automaton for
    strings: 1.9 ms against 7.7 for one regex of the literals, over the 1,750 strings of the contents of a 42 MB Claude
    Code import that pass `may_hold` (0.26 against 0.34 ms for the 1,538 of them up to 200 characters). A string
    that is not UTF-8 (a lone surrogate) takes the regex."""
    regex = _literals_regex(literals, str)
    if not literals:
        return regex
    try:
        from ahocorasick_rs import MATCHKIND_LEFTMOST_FIRST, AhoCorasick
    except ImportError:
        return regex  # strings are mostly short identifiers: one regex call beats a test per literal there
    find = AhoCorasick([lit.decode() for lit in literals], matchkind=MATCHKIND_LEFTMOST_FIRST).find_matches_as_indexes

    def holds_any(text: str) -> object:
        try:
            return find(text)
        except UnicodeEncodeError:
            return regex(text)
    return holds_any


def _literals_regex(literals: tuple[builtins.bytes, ...], kind: type) -> Callable[[Any], bool]:
    """Whether a text (`kind`: bytes or str) holds any of `literals`, by one regex; a word every spelling of which is
    among them (ANY_CASE_WORDS) is looked for in the text lowered instead: its 32 spellings in the regex made it
    three times slower (129 against 43 ms over 3 MB of a Claude Code import's text); this way 36.6 against 34.6 ms
    for the two-spelling set in another run."""
    words = [w for w in ANY_CASE_WORDS if set(spellings(w)) <= set(literals)]
    spelt = {spelling for w in words for spelling in spellings(w)}
    rest = [lit for lit in literals if lit not in spelt]
    found: list[Any] = [w.decode() for w in words] if kind is str else words
    others: list[Any] = [lit.decode() for lit in rest] if kind is str else rest
    bar: Any = "|" if kind is str else b"|"
    regex = re.compile(bar.join(re.escape(lit) for lit in others)) if others else None
    if regex is None and not found:
        return lambda text: True  # (as the empty regex: it matches anywhere)

    def holds(text: Any) -> bool:
        if regex is not None and regex.search(text) is not None:
            return True
        low = text.lower() if found else text
        return any(w in low for w in found)
    return holds


def _group(name: str) -> str:
    return "p_" + re.sub(r"\W", "_", name)
