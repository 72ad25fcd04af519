"""The importer seam: what a format implements to be imported, and the helpers formats share.

The contract of an importer (`Importer`): `name`, `description`, `incremental` (reads appended
bytes from an offset, like JSONL; else a changed file is read again whole), `detect(path)`
(a file or folder of this format?), `sources(path)` (the files to import under it, in order) and
`read(feed)` (events and checkpoints). A format kept as a tree of files read through one of them
defines `signature(path) -> (size, mtime_ns)` of the whole tree, so a change anywhere in it counts
as a change of that file; if it is also `incremental` (a database, JSON files rewritten whole), a changed
tree is read again with the state its last checkpoint left, and the importer itself emits only what is
new (raising `ReimportFile` when what it imported changed). A format that has its own all-or-nothing import instead
(reasonlog's export) defines `import_whole(store, path, report)` and is called with that alone.
Third-party importers register under the entry-point group `reasonlog.importers`, as an object
with that shape.
"""
from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, cast

import orjson

from .. import providers
from ..model import Event, ExchangeEnded, SessionEnded, Usage, format_instant, utc_text
from ..wire.rules import RecordError
from .scanning import first_values, head, walk  # noqa: F401  (head: what formats take from here)

if TYPE_CHECKING:
    from ..store.answers import CallDetail
    from ..wire.api import SessionDetailJSON


# Lines are read through a buffer this large: with the default 8 KiB, a transcript's lines of tens of KB were read
# in pieces and joined (0.13 s of CPU for 211 MB against 0.035 s).
READ_BUFFER = 1 << 20
# A line's last byte and what its first may be when it is blank (bytes.isspace's six), told by index: `endswith` and
# `isspace` parse their arguments on every call (two of them for each line read).
NEWLINE, SPACES = ord("\n"), b" \t\n\r\x0b\x0c"


class ReimportFile(Exception):
    """Raised by an importer that finds, reading what was appended, that something it imported earlier
    has changed (a response that was still being written): the file's sessions are removed and the
    whole file is imported again."""


class ImportError_(ValueError):
    """A path or format the import cannot take (no such file, unknown format): one line for the user."""


@dataclass(frozen=True)
class Checkpoint:
    """All events yielded before it reflect the file up to byte `offset` (line `line`); `state` is what the
    importer must know to go on from there, as JSON text (taken at once, so later changes don't leak in)."""

    offset: int
    line: int
    state: bytes | None


class Line(NamedTuple):
    """One line of a JSONL file: its 1-based number, byte range, and parsed value (or why it has none). (A named
    tuple: a frozen dataclass took 1 µs to make, for each line an import parses.)"""

    number: int
    start: int
    end: int
    value: Any = None
    error: str | None = None


class Importer(Protocol):
    """A format reasonlog reads (see docs/importing.md). `detect`, `sources` and `read` are the format's own;
    the hooks have `BaseImporter`'s answers unless a format needs another:

    - `default_folders()`: where the agent writes (what `import` with no path and `watch` follow);
    - `signature(path)`: for a tree of files read through one, the tree's size and newest change (None: the
      file's own);
    - `import_whole(store, path, report)`: True when the format imported the file itself, all or nothing
      (reasonlog's export), with no offsets;
    - `sessions_from_path`: the format names sessions after the file's place, so a copy of a file imported
      before is not taken for the same sessions.
    """

    name: str
    description: str
    incremental: bool
    sessions_from_path: bool

    def detect(self, path: Path) -> bool: ...
    def sources(self, path: Path) -> Iterator[Path]: ...
    def read(self, feed: Feed) -> Iterator[Event | Checkpoint]: ...
    def default_folders(self) -> list[Path]: ...
    def signature(self, path: Path) -> tuple[int, int] | None: ...
    def import_whole(self, store: ImportStore, path: Path, report: Report) -> bool: ...


class ImportStore(Protocol):
    """What an import asks of a store: a `Store` has it all, and so does the import's batching store."""

    def write_batch(self, events: list[Event], counters: dict[str, int] | None = None, *,
                    batch_id: str | None = None) -> object: ...
    def existing_ids(self, kind: str, ids: Iterable[str]) -> set[str]: ...
    def is_store_failure(self, exc: BaseException) -> bool: ...
    def get_session(self, session_id: str, page: tuple[int, int] | None = None) -> SessionDetailJSON: ...
    def get_call(self, call_id: str) -> CallDetail: ...
    def replay_call(self, call_id: str) -> dict: ...
    def last_call_id(self, session_id: str) -> str | None: ...
    def delete_sessions(self, session_ids: Iterable[str], forget_file: str | None = None) -> int: ...
    def record_counts(self) -> dict[str, int]: ...
    def import_records(self, records: Iterable[dict]) -> dict: ...
    def status(self) -> dict: ...
    def import_file(self, path: str) -> dict | None: ...
    def import_files(self) -> list[dict]: ...


class BaseImporter:
    """The hooks of `Importer`, answered as by a format of plain files with no folder of its own."""

    sessions_from_path = False

    def default_folders(self) -> list[Path]:
        return []

    def signature(self, path: Path) -> tuple[int, int] | None:
        return None

    def import_whole(self, store: ImportStore, path: Path, report: Report) -> bool:
        return False


class PluginImporter(Protocol):
    """The least a plug-in registered under `reasonlog.importers` has; `name`, `description`, `incremental` and
    the hooks are taken when it has them."""

    def detect(self, path: Path) -> bool: ...
    def sources(self, path: Path) -> Iterator[Path]: ...
    def read(self, feed: Feed) -> Iterator[Event | Checkpoint]: ...


def as_importer(given: PluginImporter, name: str = "plugin") -> Importer:
    """`given` as an `Importer`: a `BaseImporter` as it is; any other object with `name`, `description`,
    `incremental`, `detect`, `sources` and `read` (a plug-in) with the hooks it has, else `BaseImporter`'s."""
    return cast(Importer, given) if isinstance(given, BaseImporter) else _Plugin(given, name)


class _Plugin(BaseImporter):
    """An importer registered under `reasonlog.importers` that may leave hooks out: those it has, else
    `BaseImporter`'s."""

    def __init__(self, given: PluginImporter, name: str):
        self.given, self.name = given, getattr(given, "name", name)
        self.description = getattr(given, "description", "")
        self.incremental = bool(getattr(given, "incremental", False))
        self.sessions_from_path = bool(getattr(given, "sessions_from_path", False))
        for hook in ("default_folders", "signature", "import_whole"):
            if callable(getattr(given, hook, None)):
                setattr(self, hook, getattr(given, hook))

    def detect(self, path: Path) -> bool:
        return self.given.detect(path)

    def sources(self, path: Path) -> Iterator[Path]:
        return self.given.sources(path)

    def read(self, feed: Feed) -> Iterator[Event | Checkpoint]:
        return self.given.read(feed)


@dataclass
class Report:
    """What an import did: counts of what it added, and every skip with its place and reason."""

    files: int = 0
    unchanged: int = 0
    appended: int = 0
    rewritten: int = 0
    added: dict[str, int] = field(default_factory=dict)   # sessions, calls, messages, tool_results, outcomes
    rejected: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file:line, reason)
    failed: list[tuple[str, str]] = field(default_factory=list)   # (file, reason): files not imported at all
    copies: list[tuple[str, str]] = field(default_factory=list)   # (file, the path it was imported from)
    notes: list[str] = field(default_factory=list)  # what a format cannot give (tokens, times), said once each
    empty: list[str] = field(default_factory=list)  # files read from their start that held no session

    def read_nothing(self) -> bool:
        """Whether every file was read from its start and none held a session (what the user named is not what
        the format's files hold, or not of a version the importer knows): `reasonlog import` says so, and fails."""
        return bool(self.files) and len(self.empty) == self.files and not self.failed

    def to_dict(self) -> dict:
        return {"files": self.files, "unchanged": self.unchanged, "appended": self.appended,
                "rewritten": self.rewritten, "added": self.added, "rejected": self.rejected,
                "copies": [{"file": f, "imported_from": o} for f, o in self.copies], "notes": self.notes,
                "empty": self.empty,
                "skipped": [{"where": w, "reason": r} for w, r in self.skipped],
                "failed": [{"file": f, "reason": r} for f, r in self.failed]}


class Feed:
    """What an importer reads one file through: its bytes from where the last import stopped, the state it
    left, deterministic ids, and questions to the store."""

    def __init__(self, path: Path, importer: Importer, store: ImportStore, start: int, line: int, state: dict | None,
                 report: Report, emitted: dict[str, set[str]]):
        self.path, self.importer, self.store = path, importer, store
        self.start, self.first_line, self.state = start, line, state
        self.report, self._emitted = report, emitted
        self.where = str(path)
        self.line = line  # the number of the line `lines()` gave last: what the events yielded now come from
        # True under `reasonlog watch`: the file may still be being written, so an importer may leave a
        # record that looks unfinished for the next pass instead of importing half of it.
        self.live = False
        # The record the importer is working on (a line number from `lines()`, or what `record()` names): the
        # one the import loop passes over if the importer fails now. `passed` holds the records an earlier read
        # of this file failed on: `lines()` does not give those again (io/import_file.py).
        self.current: int | str | None = None
        self.passed: dict[int | str, str] = {}
        self.read_to: Line | None = None  # the last line `values()` read, of any shape: where a checkpoint goes
        # True while the import loop holds a batch's worth of events that no checkpoint covers yet: the next checkpoint
        # is written. Only such a checkpoint's state is read (or the last one's, after a record failed), so an
        # importer that could checkpoint after every record may build its state only then (io/import_file.py).
        self.batch_due = False

    # ---------------------------------------------------------------- reading

    def lines(self, ignore: Callable[[bytes], bool] | None = None) -> Iterator[Line]:
        """The file's lines from the start offset, parsed as JSON, streaming (never the whole file in memory).

        A blank line is passed over, and so is one for which `ignore(raw bytes)` is true (a cheap test
        for records the importer has no use for: they are not even parsed). A line that is not JSON or
        not UTF-8 comes with `error` set and no value. A last line without its newline that does not
        parse is not yielded: a writer may be halfway through it, and the next import reads it whole."""
        number, offset = self.first_line, self.start
        passed, loads, make = self.passed, orjson.loads, tuple.__new__
        with open(self.path, "rb", buffering=READ_BUFFER) as f:
            f.seek(offset)
            for raw in f:
                number += 1
                start, offset = offset, offset + len(raw)
                if ignore is not None and ignore(raw) and raw[-1] == NEWLINE:
                    continue  # (most lines of some formats: nothing else is done for them)
                if (raw[0] in SPACES and not raw.strip()) or number in passed:
                    self.line, self.current = number, None
                    continue  # (JSON may have white space around it: the line is parsed as it is, not copied)
                try:
                    value = loads(raw)
                except orjson.JSONDecodeError as exc:
                    if raw[-1] != NEWLINE:
                        self.line, self.current = number, None
                        return  # a partial last line: left for the next import
                    self.line = self.current = number
                    yield Line(number, start, offset, error=_json_error(raw, exc))
                    continue
                self.line = self.current = number
                yield make(Line, (number, start, offset, value, None))  # (Line(...) through its __new__: 0.2 µs more)
        self.line, self.current = number, None

    def readable(self, line: Line) -> bool:
        """Whether `line` holds a value: one that is not JSON (or not UTF-8) is skipped and reported here."""
        if line.error is None:
            return True
        self.skip(line, line.error)
        return False

    def values(self, valid: Callable[[object], bool], expected: str) -> Iterator[Line]:
        """The lines of `lines()` whose value is `valid`: one that is not JSON, or not of that shape (`expected` says
        what was expected), is skipped and reported. `read_to` is the last line read, whatever it held."""
        self.read_to = None
        for line in self.lines():
            self.read_to = line
            if not self.readable(line):
                continue
            if not valid(line.value):
                self.skip(line, expected)
            else:
                yield line

    def document(self, valid: Callable[[dict], bool], expected: str, writer: str) -> dict | None:
        """The file as one JSON object, or None when it is skipped and reported: not JSON (`writer`, such as
        "a thread Amp", may be halfway through it: it is read on the next pass), or not an object that is `valid`
        (`expected` says what was expected)."""
        try:
            value = orjson.loads(self.read_bytes())
        except orjson.JSONDecodeError as exc:
            self.skip(None, f"not JSON ({str(exc).split(':', 1)[0]}); {writer} is writing is read on the next pass")
            return None
        if not isinstance(value, dict) or not valid(value):
            self.skip(None, expected)
            return None
        return value

    def usage(self, number: int, field: str, counts: dict, keys: Iterable[str],
              build: Callable[[dict[str, int]], Usage]) -> Usage | None:
        """A call's usage, `build` from `counts` under `keys` (0 where missing); a count that is not a non-negative
        integer, or counts `Usage` refuses, is reported at line `number` (`field` names where the counts stand) and
        the call is kept without usage (None)."""
        values = {k: counts.get(k) or 0 for k in keys}
        bad = next((k for k, v in values.items() if type(v) is not int or v < 0), None)
        if bad is not None:
            self.skip(number, f"{field}.{bad}: expected a non-negative integer, got {values[bad]!r}; the call is kept"
                              " without usage")
            return None
        try:
            return build(values)
        except RecordError as exc:
            self.skip(number, f"{field}: {exc}")
            return None

    @contextmanager
    def record(self, key: int | str) -> Iterator[None]:
        """Name the record the importer works on inside the block (a line it read earlier, by number; a row or
        an entry of a document, by a text such as `message msg_01`): if it fails there, that record alone is
        passed over. A record passed over is in `passed` when the file is read again: leave it out."""
        before, self.current = self.current, key
        yield  # not in a `finally`: a failure leaves the blame where it happened
        self.current = before

    def may_grow(self, settle_s: float = 30.0) -> bool:
        """Under `reasonlog watch`, whether the file changed in the last `settle_s` seconds: a record at its end may
        still be being written, so an importer holds it for the next pass (a file at rest is read to its end)."""
        return self.live and time.time() - self.path.stat().st_mtime < settle_s

    def read_bytes(self) -> bytes:
        """The whole file (for formats that are one JSON document)."""
        return self.path.read_bytes()

    def checkpoint(self, line: Line | None, state: dict | None) -> Checkpoint:
        """Everything yielded so far reflects the file up to the end of `line` (None: the whole file)."""
        if line is None:
            return Checkpoint(self.path.stat().st_size, self.first_line, dump_state(state))
        return Checkpoint(line.end, line.number, dump_state(state))

    def checkpoint_read(self, state: dict | None) -> Checkpoint:
        """Everything yielded reflects the file up to the last line `values()` read (none: up to where it started)."""
        return self.checkpoint(self.read_to, state) if self.read_to is not None else self.checkpoint_at_start(state)

    def checkpoint_at_start(self, state: dict | None) -> Checkpoint:
        """No new line was read, but the state changed (a record held back is imported now that the file rests)."""
        return Checkpoint(self.start, self.first_line, dump_state(state))

    def skip(self, line: Line | int | None, reason: str, record: str | None = None) -> None:
        """Report a line (or the whole file, with None) that the import passed over, and why; `record` names
        it where a file has no lines (a database's row, an entry of a JSON array)."""
        number = line.number if isinstance(line, Line) else line
        where = f"{self.where}:{number}" if number else self.where
        self.report.skipped.append((f"{where} ({record})" if record else where, reason))

    def note(self, text: str) -> None:
        """Tell the user, once per import, what this format's files cannot give (tokens, cost, times)."""
        if text not in self.report.notes:
            self.report.notes.append(text)

    # ---------------------------------------------------------------- ids and the store

    def exists(self, kind: str, ident: str) -> bool:
        """Whether a session, call, tool_result or outcome with this id was written (by any import) already."""
        if ident in self._emitted[kind]:
            return True
        return bool(self.store.existing_ids(kind, [ident]))

    def history(self, session_id: str) -> list:
        """The conversation as the session's last stored call left it: its request's messages and its response
        (to go on from when a file grew)."""
        last_id = self.store.last_call_id(session_id)
        if last_id is None:
            return []
        last = self.store.get_call(last_id)
        messages = list(providers.messages_of(last["request"]))
        if last.get("response") is not None:
            messages.append(last["response"])
        return messages


def _json_error(raw: bytes, exc: Exception) -> str:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as bad:
        return f"not UTF-8 (byte {bad.start + 1})"
    return f"not JSON ({str(exc).split(':', 1)[0]})"


class Resumed:
    """A reader of one file, going on where the last import left it: the session, the exchange open in it and the
    last instant read come back from the state of its last checkpoint (`saved`, which holds the reader's rest)."""

    def __init__(self, feed: Feed):
        self.feed = feed
        self.saved: dict = feed.state or {}
        self.sid: str | None = self.saved.get("sid")
        self.exchange: str | None = self.saved.get("exchange")
        self.last_at: str | None = self.saved.get("last_at")


def dump_state(state: dict | None) -> bytes | None:
    return None if state is None else orjson.dumps(state)


# -------------------------------------------------------------------------------------- helpers for formats


def json_kind(value: object) -> str:
    """What a JSON value is, as a skip reason says it: `got an object`, `got null`, `got a text`."""
    return "null" if value is None else {dict: "an object", list: "a list", str: "a text", bool: "a boolean"}.get(
        type(value), f"a {type(value).__name__}")


def ends(session_id: str, exchange_id: str | None, at: str, children: Iterable[str] = ()) -> Iterator[Event]:
    """What a file read as far as it goes closes, at `at`: its open exchange, its session and its sub-agents'."""
    if exchange_id is not None:
        yield ExchangeEnded(exchange_id=exchange_id, session_id=session_id, ended_at=at)
    for sid in (session_id, *children):
        yield SessionEnded(session_id=sid, ended_at=at)


def epoch_ms(value: object) -> str | None:
    """Epoch milliseconds as UTC text; None when the value is not a positive number."""
    return instant(value / 1000, numbers=True) if isinstance(value, (int, float)) and value > 0 else None


def instant(value: object, numbers: bool = False) -> str | None:
    """A file's timestamp as UTC text, or None when it is missing or not an instant (ISO text; with `numbers`,
    epoch seconds too). Importers report or work around a missing time; they never fail on one."""
    if type(value) is str:  # (a line's own timestamp, read for every line: UTC text already, mostly)
        text = utc_text(value)
        if text is not None:
            return text
    if isinstance(value, bool) or not isinstance(value, (str, int, float) if numbers else str):
        return None
    try:
        return format_instant(value)
    except RecordError:
        return None


class FileImporter(BaseImporter):
    """The shape most importers share: a file of the format is told by sniffing it (`mine`), and the files
    under a folder worth sniffing are its `candidates`. `detect` sniffs a file, or a folder's first five."""

    def candidates(self, folder: Path) -> Iterable[Path]:
        raise NotImplementedError

    def mine(self, path: Path) -> bool:
        raise NotImplementedError

    def detect(self, path: Path) -> bool:
        if path.is_dir():
            return any(self.sniff(p) for p in itertools.islice(self.candidates(path), 5))
        return self.sniff(path)

    def sources(self, path: Path) -> Iterator[Path]:
        if path.is_file():
            yield path
            return
        yield from (p for p in self.candidates(path) if self.sniff(p))

    def sniff(self, path: Path) -> bool:
        """`mine`, with a file whose start it cannot make sense of (a value of a type it did not expect) not this
        format's: sniffing is a guess, and a bad guess never stops an import."""
        try:
            return self.mine(path)
        except (OSError, LookupError, TypeError, ValueError, AttributeError):
            return False


@dataclass(frozen=True)
class Home:
    """Where an agent writes: the folder named by the first of `env` that is set (`VAR`, or `VAR/sub` for a folder
    under the one it names), else `default` under the home folder; then each of `folders` under that."""

    default: str
    folders: tuple[str, ...] = ("",)
    env: tuple[str, ...] = ()

    def paths(self) -> list[Path]:
        return [self.root() / folder for folder in self.folders]

    def root(self) -> Path:
        for name in self.env:
            variable, _, under = name.partition("/")
            if os.environ.get(variable):
                return Path(os.environ[variable]).expanduser() / under
        return Path.home() / self.default


@dataclass(frozen=True, eq=False)
class FormatImporter(FileImporter):
    """An importer declared by what sets its format apart, so that a format's module holds its parsing alone:

    - `name`, `description`, `incremental` (see `Importer`);
    - `reader(feed)`: the events and checkpoints of one file: the format's parsing;
    - `home`: where the agent writes (what `import` with no path and `watch` follow; None: nowhere of its own);
    - `files`: the patterns of the files under a folder that are worth sniffing;
    - `opens(value)`: whether a JSON object among the file's first `sniffed` ones (first values) is this format's;
    - `recognises(path)`: a test of the file itself (its name, its first bytes), alone or before `opens`.
    """

    name: str
    description: str
    reader: Callable[[Feed], Iterable[Event | Checkpoint]]
    incremental: bool = True
    home: Home | None = None
    files: tuple[str, ...] = ("*.jsonl",)
    opens: Callable[[dict], bool] | None = None
    sniffed: int = 1
    recognises: Callable[[Path], bool] | None = None

    def default_folders(self) -> list[Path]:
        return self.home.paths() if self.home else []

    def candidates(self, folder: Path) -> list[Path]:
        return sorted({p for pattern in self.files for p in walk(folder, pattern)}, key=lambda p: p.parts)

    def mine(self, path: Path) -> bool:
        if self.recognises is not None and not self.recognises(path):
            return False
        opens = self.opens
        return opens is None or any(opens(cast(dict, v)) for v in first_values(path, self.sniffed))

    def read(self, feed: Feed) -> Iterator[Event | Checkpoint]:
        yield from self.reader(feed)
