"""A trading simulator's logs (AI-Trader): `agent_data/<model>/log/<date>/log.jsonl` and the day's positions in
`agent_data/<model>/position/position.jsonl`.

- **One run** per `agent_data` folder, named after the folder that holds it; **one session per model-day**,
  labelled `date=YYYY-MM-DD` and `source=trading-log`, its agent and model the model's signature.
- **Messages in file order.** Each line is `{"signature", "new_messages"}`, where `new_messages` is a list or
  one message. The files carry no times: a day's records are placed at that day's midnight UTC plus one
  second per message, so their order is the file's.
- **Calls.** Each assistant message is a call whose request is the conversation before it. The log has no
  usage, so these calls have no tokens and no cost.
- **Tool results** arrive as user messages that start `Tool results: `. They stay in the conversation and
  are also recorded as tool results (the call before them asked for them).
- **Positions** become outcomes of kind `position` on their model-day's session, in id order:
  `action_id`, `action`, `symbol`, `amount`, `price` (a share's price, from how much the cash moved;
  null for no_trade), `cash_after` (the `CASH` after the action) and `portfolio_value` (null: the file
  does not hold the other holdings' prices). The first line (id 0, no `this_action`) is the
  starting portfolio, not an action, and is not an outcome. A day with positions but no log gets a session
  of its own, so no action is lost.
- **A day with a prompt and no reply** (the run stopped) is a session with its exchange and no call,
  ended as `interrupted`.

Log files are read before position files. Both are whole documents to this importer (`incremental`
False): a changed log file is imported again, with that day's positions; a changed position file adds
the outcomes it did not give before (outcome ids are derived from the model, date and action id).
"""
from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from ... import model as ev
from ...model import Event, stable_id
from ..importer import BaseImporter, Checkpoint, Feed, first_values

NAME = "trading-log"
ROOT = "agent_data"
TOOL_PREFIX = "Tool results: "


class TradingLogImporter(BaseImporter):
    name = NAME
    description = "a trading simulator's agent_data/<model>/log/<date>/log.jsonl with position.jsonl outcomes"
    incremental = False
    sessions_from_path = True  # run, model and day are folder names: the same file elsewhere is another session

    def detect(self, path: Path) -> bool:
        roots = _roots(path)
        if not roots:
            return False
        if path.is_file():
            first = first_values(path, 1)
            return bool(first) and isinstance(first[0], dict) and ("signature" in first[0] or "positions" in first[0])
        return any(any(root.glob("*/log/*/log.jsonl")) or any(root.glob("*/position/position.jsonl"))
                   for root in roots)

    def sources(self, path: Path) -> Iterator[Path]:
        if path.is_file():
            yield path
            return
        for root in _roots(path) or [path]:
            yield from sorted(root.glob("*/log/*/log.jsonl"))
            yield from sorted(root.glob("*/position/position.jsonl"))

    def read(self, feed: Feed) -> Iterator[Event | Checkpoint]:
        path = feed.path
        if path.name == "position.jsonl":
            model = path.parent.parent.name
            for date, actions in _positions(feed, path).items():
                yield from _day_positions(feed, path.parents[2], model, date, actions, start_session=True)
        else:
            yield from _log_day(feed, path)
        yield feed.checkpoint(None, None)


importer = TradingLogImporter()


def _roots(path: Path) -> list[Path]:
    """The `agent_data` folders a path lies in or holds (their children are models with a log/ or position/).

    AI-Trader keeps one per market beside each other in `data/`: `agent_data` (NASDAQ-100), `agent_data_astock`
    (A-shares), and so on."""
    for candidate in (path, *path.parents):
        if candidate.name.startswith(ROOT):
            return [candidate]
    if not path.is_dir():
        return []
    held = sorted(p for p in path.glob(ROOT + "*") if p.is_dir())
    if held:
        return held
    return [path] if any(path.glob("*/log/*/log.jsonl")) else []


def _run(root: Path) -> str:
    """The folder holding `agent_data`, with the market of an `agent_data_<market>` folder: `data-astock`."""
    market = root.name[len(ROOT):].lstrip("_") if root.name.startswith(ROOT) else ""
    base = root.parent.name or root.name
    return f"{base}-{market}" if market else base


def _session_id(root: Path, model: str, date: str) -> str:
    return stable_id(f"{date}T00:00:00Z", NAME, _run(root), model, date)


def _at(date: str, n: int) -> str:
    return (datetime.fromisoformat(f"{date}T00:00:00+00:00") + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _start(root: Path, model: str, date: str) -> ev.SessionStarted:
    return ev.SessionStarted(session_id=_session_id(root, model, date), started_at=_at(date, 0), agent=model,
                             run=_run(root), model=model, labels={"date": date, "source": NAME})


# ------------------------------------------------------------------------------------------ a day's log


def _log_day(feed: Feed, path: Path) -> Iterator[Event]:
    date, model, root = path.parent.name, path.parents[2].name, path.parents[3]
    try:
        datetime.fromisoformat(date)
    except ValueError:
        feed.skip(None, f"the folder {date!r} is not a date (expected agent_data/<model>/log/<YYYY-MM-DD>/)")
        return
    messages = list(_messages(feed, model))
    sid = _session_id(root, model, date)
    if feed.exists("session", sid):
        return  # imported already (a changed file is removed first by the import loop)
    yield _start(root, model, date)
    history: list[dict] = []
    exchange = stable_id(_at(date, 0), NAME, sid, "exchange")
    calls, last_call = 0, None
    for n, message in enumerate(messages, 1):
        at = _at(date, n)
        if n == 1:
            yield ev.ExchangeStarted(exchange_id=exchange, session_id=sid, started_at=at, input=message.get("content"))
        if message.get("role") == "assistant":
            calls, last_call = calls + 1, stable_id(at, NAME, sid, n)
            yield ev.CallRecorded(call_id=last_call, session_id=sid, exchange_id=exchange, started_at=at,
                                  request={"model": model, "messages": list(history)}, response=message, model=model)
        elif isinstance(message.get("content"), str) and message["content"].startswith(TOOL_PREFIX):
            yield ev.ToolResultRecorded(tool_result_id=stable_id(at, NAME, sid, "tool", n), session_id=sid, at=at,
                                        tool_use_id=None, content=message["content"][len(TOOL_PREFIX):])
        history.append(message)
    end = _at(date, len(messages))
    status = "completed" if calls else "interrupted"
    if messages:
        yield ev.ExchangeEnded(exchange_id=exchange, session_id=sid, ended_at=end,
                               result=messages[-1].get("content") if calls else None, status=status)
    actions = _positions(feed, path.parents[2] / "position" / "position.jsonl", quiet=True).get(date, [])
    yield from _day_positions(feed, root, model, date, actions, start_session=False, call_id=last_call)
    yield ev.SessionEnded(session_id=sid, ended_at=end, status=status)


def _messages(feed: Feed, model: str) -> Iterator[dict]:
    for line in feed.lines():
        if not feed.readable(line):
            continue
        record = line.value
        new = record.get("new_messages") if isinstance(record, dict) else None
        if new is None:
            feed.skip(line, "expected an object with `new_messages`")
            continue
        for message in new if isinstance(new, list) else [new]:
            if not isinstance(message, dict) or message.get("role") not in ("user", "assistant", "system", "tool"):
                feed.skip(line, "a message must be an object with a role")
                continue
            yield message


# ------------------------------------------------------------------------------------------ positions


def _positions(feed: Feed, path: Path, quiet: bool = False) -> dict[str, list[dict]]:
    """The actions of a position file by date, in id order, each with the cash after it and the price the
    cash moved by (what a buy paid or a sell got for each share)."""
    records = []
    try:
        data = path.read_bytes()
    except OSError:
        return {}
    for number, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            if not quiet:
                feed.skip(number, "not JSON")
            continue
        if isinstance(record, dict) and isinstance(record.get("id"), int):
            records.append(record)
        elif not quiet:
            feed.skip(number, "expected an object with an integer `id`")
    by_date: dict[str, list[dict]] = {}
    cash = None
    for record in sorted(records, key=lambda r: r["id"]):
        positions = record.get("positions")
        action, after = record.get("this_action"), positions.get("CASH") if isinstance(positions, dict) else None
        if isinstance(action, dict) and isinstance(record.get("date"), str):
            by_date.setdefault(record["date"], []).append({
                "action_id": record["id"], "action": action.get("action"), "symbol": action.get("symbol"),
                "amount": action.get("amount"), "price": action.get("price", _price(action, cash, after)),
                "cash_after": after, "portfolio_value": record.get("portfolio_value")})
        cash = after if isinstance(after, (int, float)) else cash
    return by_date


def _price(action: dict, before: Any, after: Any) -> float | None:
    """A share's price from the cash an action moved: what a buy paid, what a sell got."""
    amount = action.get("amount")
    if (action.get("action") not in ("buy", "sell") or not isinstance(amount, (int, float)) or amount <= 0
            or not isinstance(before, (int, float)) or not isinstance(after, (int, float))):
        return None
    return round(abs(before - after) / amount, 6)


def _day_positions(feed: Feed, root: Path, model: str, date: str, actions: list[dict],
                   start_session: bool, call_id: str | None = None) -> Iterator[Event]:
    """The day's actions not stored yet, after the day's conversation (an hour past midnight, in id order),
    linked to the day's last call: the reasoning that made them."""
    sid = _session_id(root, model, date)
    new = [(k, a) for k, a in enumerate(actions) if not feed.exists("outcome", _outcome_id(sid, date, a))]
    if not new:
        return
    if start_session and not feed.exists("session", sid):
        yield _start(root, model, date)  # positions without a log for that day: kept all the same
        yield ev.SessionEnded(session_id=sid, ended_at=_at(date, 0))
    for k, action in new:
        yield ev.OutcomeRecorded(outcome_id=_outcome_id(sid, date, action), session_id=sid, at=_at(date, 3600 + k),
                                 outcome_kind="position", payload=action, call_id=call_id)


def _outcome_id(sid: str, date: str, action: dict) -> str:
    return stable_id(f"{date}T00:00:00Z", NAME, sid, "position", _key(action["action_id"]))


def _key(value: Any) -> str:
    return orjson.dumps(value).decode()
