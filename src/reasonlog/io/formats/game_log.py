"""A game's per-player log tree (PyCatan AI): `session_*/<Player>/prompts|responses/…`, `tool_executions.json`.

    session_20260109_170804/
      session_metadata.json          the game: id, start time       (the file the import is keyed by)
      tool_executions.json           batches of tool calls with their results
      chat_history.json              what players said to the table
      session_summary.json           (a game that stopped) its end and per-player stats
      Alice/prompts/prompt_N.json    request N: the prompt, tools and response schema (+ prompt_N.txt, rendered)
      Alice/prompts/iterations/prompt_N_iter2.json     the follow-up with the tool results
      Alice/responses/intermediate/response_N_iter1.json   the model asked for tools
      Alice/responses/response_N.json                      the final answer, with `parsed`

- **One run per game** (the folder's name), **one session per player** (agent = the player, labels
  `source=game-log`, `game=<folder>`), **one exchange per request**, and **one call per request and
  iteration**: the first call answers `prompt_N` (with tool calls when an intermediate response
  exists, else with the final answer); the second answers the follow-up that carried the tool results.
- **Tool results** come from `tool_executions.json`: the batch that followed the intermediate response,
  matched by time and by the calls' ids and names. They are recorded as tool results and sent back in
  the follow-up call's request.
- **The move** a final response chose becomes an outcome `game_action` (`action`, `parameters` as an
  object, `request`) linked to that call. The call's response is the model's own text (`raw_content`);
  `parsed.internal_thinking` is not used, since the parser appends to it.
- **Tokens.** Each response's `tokens` are its own call's: `prompt` is input; `completion` plus
  `thinking` is output, of which `thinking` is reasoning. `total` is not used: in a final response it
  also counts the tool batch's tokens (Alice's first: 5878 + 305 + 1541 = 7724, total 8315 = 7724 + 591),
  which are neither sent nor produced by the model.
- **A game that stopped.** A prompt with no response is a failed call ("no response was recorded"), and
  its player's session ends `interrupted`. Times are the files' (ISO text, or epoch seconds in
  `session_summary.json`), taken as UTC.

The import reads the tree as one document keyed by `session_metadata.json`; a change anywhere in the
tree (its size or its newest modification) imports the game again.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ... import model as ev
from ...model import Event, Usage, stable_id
from ...wire.rules import RecordError
from ..fields import list_of
from ..importer import BaseImporter, Checkpoint, Feed, instant

NAME = "game-log"
ANCHOR = "session_metadata.json"
_PROMPT = re.compile(r"prompt_(\d+)\.json")


class GameLogImporter(BaseImporter):
    name = NAME
    description = "a game's per-player log tree (session_*/<Player>/prompts|responses, tool_executions.json)"
    incremental = False

    def detect(self, path: Path) -> bool:
        return any(True for _ in self.sources(path))

    def sources(self, path: Path) -> Iterator[Path]:
        if path.is_file():
            if path.name == ANCHOR and _players(path.parent):
                yield path
            return
        for anchor in sorted([path / ANCHOR, *path.glob(f"*/{ANCHOR}")]):
            if anchor.is_file() and _players(anchor.parent):
                yield anchor

    def signature(self, path: Path) -> tuple[int, int]:
        files = [p.stat() for p in path.parent.rglob("*") if p.is_file()]
        return sum(s.st_size for s in files), max(s.st_mtime_ns for s in files)

    def read(self, feed: Feed) -> Iterator[Event | Checkpoint]:
        yield from _Game(feed, feed.path.parent).events()
        yield feed.checkpoint(None, None)


importer = GameLogImporter()


def _players(game: Path) -> list[Path]:
    return sorted(p for p in game.iterdir() if p.is_dir() and (p / "prompts").is_dir())


class _Game:
    def __init__(self, feed: Feed, folder: Path):
        self.feed, self.folder, self.run = feed, folder, folder.name
        self.batches = list_of(self._json(folder / "tool_executions.json", missing_ok=True))
        self.summary = self._json(folder / "session_summary.json", missing_ok=True)
        self.sessions: dict[str, str] = {}  # player -> session id

    def _json(self, path: Path, missing_ok: bool = False) -> Any:
        """A file of the tree, or None (a missing or broken file is reported and left out)."""
        try:
            return orjson.loads(path.read_bytes())
        except FileNotFoundError:
            if not missing_ok:
                self.feed.skip(None, f"{path.relative_to(self.folder)}: missing")
        except (OSError, orjson.JSONDecodeError) as exc:
            self.feed.skip(None, f"{path.relative_to(self.folder)}: not readable JSON ({str(exc).split(':')[0]})")
        return None

    def events(self) -> Iterator[Event]:
        meta = self._json(self.feed.path)
        started = _at((meta or {}).get("start_time")) if isinstance(meta, dict) else None
        for player in _players(self.folder):
            yield from self._player(player, started)
        yield from self._chat()

    # ------------------------------------------------------------------------------ one player

    def _player(self, folder: Path, game_start: str | None) -> Iterator[Event]:
        requests = sorted((int(m.group(1)), p) for p in (folder / "prompts").glob("prompt_*.json")
                          if (m := _PROMPT.fullmatch(p.name)))
        prompts = [(n, self._json(p)) for n, p in requests]
        prompts = [(n, p) for n, p in prompts if isinstance(p, dict)]
        if not prompts:
            return
        first_at = _at(prompts[0][1].get("timestamp")) or game_start
        if first_at is None:
            self.feed.skip(None, f"{folder.name}: no instant in its first prompt")
            return
        sid = self.sessions[folder.name] = stable_id(first_at, NAME, self.run, folder.name)
        yield ev.SessionStarted(session_id=sid, started_at=first_at, agent=folder.name, run=self.run,
                                labels={"source": NAME, "game": self.run})
        last, missing = first_at, 0
        for n, prompt in prompts:
            ended, lacked = yield from self._request(sid, folder, n, prompt)
            last, missing = max(last, ended), missing + lacked
        end = _at((self.summary or {}).get("end_time")) if isinstance(self.summary, dict) else None
        yield ev.SessionEnded(session_id=sid, ended_at=max(last, end or last),
                              status="interrupted" if missing else "completed")

    def _request(self, sid: str, folder: Path, n: int, prompt: dict):
        """The events of request N: its exchange, one or two calls, tool results and the move. Returns (the
        last instant, how many responses are missing)."""
        at = _at(prompt.get("timestamp")) or ""
        exchange = stable_id(at, NAME, sid, "request", n)
        yield ev.ExchangeStarted(exchange_id=exchange, session_id=sid, started_at=at, input=_happened(prompt))
        user = {"role": "user", "content": self._prompt_text(folder, n, prompt)}
        params = {k: prompt[k] for k in ("response_schema", "allowed_actions") if k in prompt}
        tools = prompt.get("tools_schema") if isinstance(prompt.get("tools_schema"), list) else None
        intermediate = self._json(folder / "responses" / "intermediate" / f"response_{n}_iter1.json",
                                  missing_ok=True)
        final = self._json(folder / "responses" / f"response_{n}.json", missing_ok=True)
        history, last, missing = [user], at, 0
        if isinstance(intermediate, dict):
            asked, results = self._tool_round(sid, n, intermediate)
            yield from self._call(sid, exchange, n, 1, at, history, tools, params, intermediate, asked)
            yield from results
            history = [user, asked, self._follow_up(folder, n)]
            follow_at = _at((self._json(folder / "prompts" / "iterations" / f"prompt_{n}_iter2.json",
                                        missing_ok=True) or {}).get("timestamp")) or _at(intermediate.get("timestamp"))
            at = follow_at or at
        if isinstance(final, dict):
            reply = {"role": "assistant", "content": final.get("raw_content") or ""}
            call = yield from self._call(sid, exchange, n, 2 if intermediate else 1, at, history, tools, params,
                                         final, reply)
            yield from self._move(sid, n, final, call)
            last = _at(final.get("timestamp")) or at
        else:
            missing = 1
            yield ev.CallRecorded(call_id=stable_id(at, NAME, sid, n, "missing"), session_id=sid, exchange_id=exchange,
                                  started_at=at, request=_request(history, tools, params, None), response=None,
                                  status="error", error={"message": "no response was recorded (the game stopped)"})
        yield ev.ExchangeEnded(exchange_id=exchange, session_id=sid, ended_at=last,
                               status="interrupted" if missing else "completed")
        return last, missing

    def _call(self, sid, exchange, n, iteration, at, history, tools, params, response, reply):
        model = response.get("model") if isinstance(response.get("model"), str) else None
        call_id = stable_id(at, NAME, sid, n, iteration)
        latency = response.get("latency_seconds")
        yield ev.CallRecorded(call_id=call_id, session_id=sid, exchange_id=exchange, started_at=at,
                              request=_request(history, tools, params, model), response=reply, model=model,
                              provider="google" if model and model.startswith("gemini") else None,
                              usage=self._usage(response, n), status="ok" if response.get("success", True) else "error",
                              latency_ms=latency * 1000 if isinstance(latency, (int, float)) and latency >= 0 else None,
                              error={"message": str(response["error"])} if response.get("error") else None)
        return call_id

    def _usage(self, response: dict, n: int) -> Usage | None:
        tokens = response.get("tokens")
        if not isinstance(tokens, dict):
            return None
        try:
            thinking = tokens.get("thinking") or 0
            return Usage(input_tokens=tokens.get("prompt") or 0,
                         output_tokens=(tokens.get("completion") or 0) + thinking, reasoning_tokens=thinking)
        except (RecordError, TypeError) as exc:
            self.feed.skip(None, f"response {n}: tokens: {exc}")
            return None

    # ------------------------------------------------------------------------------ tools, moves, chat

    def _tool_round(self, sid: str, n: int, intermediate: dict) -> tuple[dict, list[Event]]:
        calls = [c for c in list_of(intermediate.get("tool_calls")) if isinstance(c, dict)]
        asked = {"role": "assistant", "content": [
            {"type": "tool_use", "id": c.get("id"), "name": c.get("name"), "input": c.get("parameters") or {}}
            for c in calls]}
        batch = self._batch(intermediate, calls)
        results: list[Event] = []
        for k, call in enumerate(calls):
            done = next((b for b in list_of((batch or {}).get("calls")) if isinstance(b, dict)
                         and (b.get("id"), b.get("name")) == (call.get("id"), call.get("name"))), None)
            at = _at((batch or {}).get("timestamp")) or _at(intermediate.get("timestamp")) or ""
            results.append(ev.ToolResultRecorded(
                tool_result_id=stable_id(at, NAME, sid, n, "tool", k), session_id=sid, at=at,
                tool_use_id=call.get("id"), name=call.get("name"), input=call.get("parameters"),
                content=None if done is None else done.get("result"),
                is_error=done is None or bool(done.get("error"))))
        return asked, results

    def _batch(self, intermediate: dict, calls: list[dict]) -> dict | None:
        """The tool batch that ran these calls: the first at or after the response with the same calls."""
        after = _at(intermediate.get("timestamp")) or ""
        want = [(c.get("id"), c.get("name")) for c in calls]
        batches = sorted((b for b in self.batches if isinstance(b, dict)), key=lambda b: _at(b.get("timestamp")) or "")
        for batch in batches:
            ran = [(c.get("id"), c.get("name")) for c in list_of(batch.get("calls")) if isinstance(c, dict)]
            if (_at(batch.get("timestamp")) or "") >= after and ran == want:
                return batch
        return None

    def _follow_up(self, folder: Path, n: int) -> dict:
        """The follow-up's new message: the tool results as the game rendered them for the model."""
        follow = self._json(folder / "prompts" / "iterations" / f"prompt_{n}_iter2.json", missing_ok=True)
        text = follow.get("tool_results") if isinstance(follow, dict) else None
        return {"role": "user", "content": text if isinstance(text, str) else ""}

    def _move(self, sid: str, n: int, final: dict, call_id: str) -> Iterator[Event]:
        parsed = final.get("parsed")
        if not isinstance(parsed, dict) or not parsed.get("action_type"):
            return
        at = _at(final.get("timestamp")) or ""
        parameters = parsed.get("parameters")
        if isinstance(parameters, str):  # as raw_content carries it: JSON in a string
            try:
                parameters = orjson.loads(parameters)
            except orjson.JSONDecodeError:
                pass
        yield ev.OutcomeRecorded(outcome_id=stable_id(at, NAME, sid, n, "move"), session_id=sid, at=at,
                                 outcome_kind="game_action", call_id=call_id,
                                 payload={"action": parsed["action_type"], "parameters": parameters, "request": n,
                                       "say_outloud": parsed.get("say_outloud") or None})

    def _chat(self) -> Iterator[Event]:
        chat = self._json(self.folder / "chat_history.json", missing_ok=True)
        messages = list_of((chat or {}).get("messages")) if isinstance(chat, dict) else []
        for k, m in enumerate(messages):
            sender = m.get("from") if isinstance(m, dict) else None
            at = _at(m.get("timestamp")) if isinstance(m, dict) else None
            if sender not in self.sessions or at is None:
                continue
            yield ev.OutcomeRecorded(outcome_id=stable_id(at, NAME, self.run, "chat", k),
                                     session_id=self.sessions[sender], at=at,
                                     outcome_kind="chat", payload={"to": m.get("to"), "message": m.get("message")})

    def _prompt_text(self, folder: Path, n: int, prompt: dict) -> str:
        try:
            return (folder / "prompts" / f"prompt_{n}.txt").read_text()
        except (OSError, UnicodeDecodeError):
            return orjson.dumps(prompt.get("prompt")).decode()


def _request(history: list, tools: list | None, params: dict, model: str | None) -> dict:
    request: dict[str, Any] = {"model": model, "messages": list(history), **params}
    if tools is not None:
        request["tools"] = tools
    return request


def _happened(prompt: dict) -> Any:
    inner = prompt.get("prompt")
    context = inner.get("task_context") if isinstance(inner, dict) else None
    happened = context.get("what_just_happened") if isinstance(context, dict) else None
    return happened or prompt.get("what_happened")


def _at(value: Any) -> str | None:
    return instant(value, numbers=True)  # ISO text in most files, epoch seconds in session_summary.json
