"""Aider chat histories: `.aider.chat.history.md` in each repository aider ran in (`--chat-history-file`).

Markdown that aider appends as it goes: `# aider chat started at <local time>` opens a session; `#### ` lines are
what the user typed; `> ` lines are aider's own notes (the command line, `Aider v…`, `Model: … with … edit
format`, `Tokens: 2.4k sent, 306 received. Cost: …`, applied edits, commits); every other line is the model's reply.

- **Sessions**: one per `# aider chat started at` line; agent `aider`; labels `source=aider`, `cwd` (the folder of
  the file), `version`, `edit_format`. The time is the header's, read in this machine's local time zone (aider
  writes no zone).
- **Calls**: each reply is one call; its request is the conversation of the session so far in the Messages shape
  (aider's system prompt, repository map and file contents are not in the history). A reply after aider's notes
  with no `####` in between answers those notes (a reflection: aider sent the lint or edit error back), so the
  notes are that call's user message.
- **No tokens, cost or times per call**: the history has none. The `Tokens: … Cost: …` notes are aider's rounded
  estimates; they are kept verbatim as outcomes `aider:tokens` on the call before them, never as usage. Every call
  carries the session's start time.

Incremental: the file is read from where the last import stopped. Under `watch`, in a file changed in the last 30
seconds, a reply at the end of the file waits for the next line; if a one-off import took a reply that then grew,
the file is imported again whole.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from ... import model as ev
from ...model import Event, stable_id
from ..importer import Checkpoint, Feed, FormatImporter, ReimportFile, dump_state, head, instant

NAME = "aider"
FILE = ".aider.chat.history.md"
HEADER = re.compile(r"^# aider chat started at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s*$")
MODEL = re.compile(r"^(?:Main )?[Mm]odel: (\S+) with (\S+) edit format")
VERSION = re.compile(r"^Aider v(\S+)")
NO_USAGE = ("aider: its chat history has no token counts, costs or times per message; its calls are imported"
            " without usage or cost (aider's rounded `Tokens:` notes are kept as outcomes `aider:tokens`)")


class AiderImporter(FormatImporter):
    def default_folders(self) -> list[Path]:
        """Aider writes into each repository: the history named by `AIDER_CHAT_HISTORY_FILE`, else the one in
        the current folder and the one in the home folder."""
        given = os.environ.get("AIDER_CHAT_HISTORY_FILE")
        if given:
            return [Path(given).expanduser()]
        return list(dict.fromkeys([Path.cwd() / FILE, Path.home() / FILE]))


importer = AiderImporter(
    NAME, "Aider chat histories (.aider.chat.history.md in a repository; no tokens or times per message)",
    lambda feed: _History(feed).read(), files=(FILE,),
    recognises=lambda path: any(HEADER.match(line) for line in head(path).decode("utf-8", "replace").splitlines()[:8]))


class _History:
    """One history file. State between imports: the open session and exchange, its conversation, the user's
    lines, aider's notes and the reply being read (a reply at the end, while `watch` follows the file)."""

    def __init__(self, feed: Feed):
        self.feed = feed
        s = feed.state or {}
        self.session: dict | None = s.get("session")   # id, at, labels, model, started
        self.exchange: str | None = s.get("exchange")
        self.window: list = s.get("window", [])
        self.user: list[str] = s.get("user", [])
        self.notes: list[str] = s.get("notes", [])
        self.reply: list[str] = s.get("reply", [])
        self.reply_line: int = s.get("reply_line", 0)
        self.last_call: str | None = s.get("last_call")
        self.taken: bool = s.get("taken", False)       # the file ended in a reply, which was imported

    def read(self) -> Iterator[Event | Checkpoint]:
        offset, number, last = self.feed.start, self.feed.first_line, None
        with open(self.feed.path, "rb") as f:
            f.seek(offset)
            for raw in f:
                if not raw.endswith(b"\n"):
                    break  # a line still being written: the next import reads it whole
                number += 1
                offset += len(raw)
                self.feed.line = number
                try:
                    text = raw.decode("utf-8").rstrip("\r\n")
                except UnicodeDecodeError as bad:
                    self.feed.skip(number, f"not UTF-8 (byte {bad.start + 1})")
                    continue
                yield from self._line(text, number)
                last = (offset, number)
        if last is None and (not self.reply or self.feed.may_grow()):
            return  # nothing new, and no reply held back that may be imported now
        if self.reply and not self.feed.may_grow():
            yield from self._call()
            self.taken = True
        yield from self._close()
        offset, number = last or (self.feed.start, self.feed.first_line)
        yield Checkpoint(offset, number, dump_state(self._state()))

    def _state(self) -> dict:
        return {"session": self.session, "exchange": self.exchange, "window": self.window, "user": self.user,
                "notes": self.notes, "reply": self.reply, "reply_line": self.reply_line,
                "last_call": self.last_call, "taken": self.taken}

    def _line(self, text: str, number: int) -> Iterator[Event]:
        header = HEADER.match(text)
        if header:
            yield from self._end_reply()
            yield from self._close()
            self._open(header.group(1), number)
        elif self.session is None:
            if text.strip():
                self.feed.skip(number, "a line before the first `# aider chat started at` header")
        elif text.startswith("#### ") or text == "####":
            yield from self._end_reply()
            yield from self._start()
            self.user.append(text[5:].rstrip())
        elif text.startswith("> ") or text == ">":
            yield from self._end_reply()
            yield from self._note(text[2:].rstrip(), number)
        elif text.strip() or self.reply:
            if self.taken and not self.reply:
                raise ReimportFile("the reply imported last grew")
            self.reply_line = self.reply_line or number
            self.reply.append(text)
        if text.strip():
            self.taken = False

    def _open(self, local: str, number: int) -> None:
        at = instant(datetime.strptime(local, "%Y-%m-%d %H:%M:%S").astimezone().isoformat()) or ""
        where = str(self.feed.path.resolve().parent)
        self.session = {"id": stable_id(at, NAME, where, local, number), "at": at, "model": None, "started": False,
                        "labels": {"source": NAME, "cwd": where}}
        self.exchange, self.window, self.user, self.notes, self.reply, self.last_call = None, [], [], [], [], None

    def _note(self, text: str, number: int) -> Iterator[Event]:
        assert self.session is not None
        model, version = MODEL.match(text), VERSION.match(text)
        if model:
            self.session["model"] = model.group(1)
            self.session["labels"]["edit_format"] = model.group(2)
        elif version:
            self.session["labels"]["version"] = version.group(1)
        elif text.startswith("Tokens:") and self.last_call is not None:
            yield ev.OutcomeRecorded(outcome_id=stable_id(self.session["at"], NAME, self.session["id"], number),
                                     session_id=self.session["id"], at=self.session["at"], outcome_kind="aider:tokens",
                                     payload={"text": text}, call_id=self.last_call)
            return
        if self.last_call is not None or self.user:
            self.notes.append(text)  # after the first prompt: what a reflection would send back

    def _start(self) -> Iterator[Event]:
        """The session's start, once its header notes (model, version) have been read."""
        s = self.session
        assert s is not None
        if not s["started"]:
            s["started"] = True
            yield ev.SessionStarted(session_id=s["id"], started_at=s["at"], agent=NAME, model=s["model"],
                                    labels=s["labels"])

    def _end_reply(self) -> Iterator[Event]:
        if self.reply:
            yield from self._call()

    def _call(self) -> Iterator[Event]:
        s = self.session
        assert s is not None
        yield from self._start()
        prompt = "\n".join(self.user) if self.user else "\n".join(self.notes)
        if self.user:
            if self.exchange is not None:
                yield ev.ExchangeEnded(exchange_id=self.exchange, session_id=s["id"], ended_at=s["at"])
            self.exchange = stable_id(s["at"], NAME, s["id"], "exchange", self.reply_line)
            yield ev.ExchangeStarted(exchange_id=self.exchange, session_id=s["id"], started_at=s["at"], input=prompt)
        if prompt:
            self.window.append({"role": "user", "content": prompt})
        response = {"role": "assistant", "content": [{"type": "text", "text": "\n".join(self.reply).strip("\n")}]}
        call_id = stable_id(s["at"], NAME, s["id"], self.reply_line)
        if not self.feed.exists("call", call_id):
            self.feed.note(NO_USAGE)
            yield ev.CallRecorded(call_id=call_id, session_id=s["id"], exchange_id=self.exchange, started_at=s["at"],
                                  request={"model": s["model"], "messages": list(self.window)}, response=response,
                                  model=s["model"], stable_history=True)
        self.window.append(response)
        self.user, self.notes, self.reply, self.reply_line, self.last_call = [], [], [], 0, call_id

    def _close(self) -> Iterator[Event]:
        """The session as far as the file goes: its exchange and itself ended (at its start: no later time is known)."""
        s = self.session
        if s is None:
            return
        yield from self._start()
        if self.exchange is not None:
            yield ev.ExchangeEnded(exchange_id=self.exchange, session_id=s["id"], ended_at=s["at"])
        yield ev.SessionEnded(session_id=s["id"], ended_at=s["at"])
