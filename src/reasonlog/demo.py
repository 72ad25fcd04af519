"""`reasonlog demo`: a scripted, offline trading run recorded through the real Recorder.

Two agents trade for a few simulated days. Each exchange asks for prices (a tool call),
sometimes hits a tool error, decides, and trades (an outcome). Every call resends the whole
history until a sliding window starts trimming it, and one call fails, as real runs do.
"""
from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

from .capture import Recorder
from .model import Usage

AGENTS = (("gpt-5", "openai"), ("claude-sonnet-4-5", "anthropic"))
SYMBOLS = ("NVDA", "GOOGL", "MSFT", "AAPL", "AMZN")
TOOLS = [
    {"name": "get_price", "description": "Latest price of a NASDAQ-100 symbol.",
     "input_schema": {"type": "object", "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]}},
    {"name": "buy", "description": "Buy shares at the latest price.",
     "input_schema": {"type": "object", "properties": {"symbol": {"type": "string"}, "amount": {"type": "integer"}},
                      "required": ["symbol", "amount"]}},
]
SYSTEM = ("You are a trading agent in a NASDAQ-100 simulation. Use get_price before buying. "
          "Keep at least 1000 USD in cash. Finish each day with <FINISH_SIGNAL>.")
WINDOW = 8  # messages kept once the history grows past it


def run_demo(db: str | Path, exchanges: int = 3, seed: int = 7) -> dict:
    """Record the scripted run into `db`; returns what was recorded, for the CLI to report."""
    rng = random.Random(seed)
    start = datetime.now(timezone.utc).replace(microsecond=0)
    run = f"demo-{start:%Y%m%d-%H%M%S}"
    totals = {"run": run, "sessions": 0, "calls": 0, "failed_calls": 0, "outcomes": 0, "first_session": None}
    with Recorder(db) as rec:
        for agent, provider in AGENTS:
            with rec.session(agent=agent, run=run, model=agent, provider=provider,
                             labels={"date": f"{start:%Y-%m-%d}", "market": "nasdaq-100"}) as session:
                totals["first_session"] = totals["first_session"] or session.id
                _trade(session, provider, exchanges, rng, totals, start)
            totals["sessions"] += 1
    return totals


def _trade(session, provider: str, exchanges: int, rng: random.Random, totals: dict, clock: datetime) -> None:
    history: list[dict] = []
    cash = 10_000.0
    for day in range(exchanges):
        symbol = rng.choice(SYMBOLS)
        question = f"Day {day + 1}: cash is {cash:.2f} USD. Decide today's trade."
        with session.exchange(question) as exchange:
            history.append({"role": "user", "content": question})
            tool_id = f"toolu_{session.id[-6:]}_{day}"
            ask = [{"type": "thinking", "thinking": f"{symbol} looked strong yesterday; check its price first.",
                    "signature": f"sig-{day}"},
                   {"type": "text", "text": f"Let me check {symbol}."},
                   {"type": "tool_use", "id": tool_id, "name": "get_price", "input": {"symbol": symbol}}]
            clock = _call(session, provider, history, ask, "tool_use", rng, totals, clock)
            history.append({"role": "assistant", "content": ask})
            failed = day == 1
            price = round(rng.uniform(90, 600), 2)
            result = "price feed timed out" if failed else f"{symbol} {price}"
            session.tool_result(tool_id, result, name="get_price", input={"symbol": symbol}, is_error=failed,
                                duration_ms=round(rng.uniform(5, 80), 1))
            history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id,
                                                         "content": result, "is_error": failed}]})
            if failed:
                session.call(messages=_window(history), system=SYSTEM, tools=TOOLS, params={"max_tokens": 1024},
                             provider=provider, error=TimeoutError("upstream model timed out after 60 s"),
                             latency_ms=60_000.0, started_at=clock)
                totals["calls"] += 1
                totals["failed_calls"] += 1
                clock += timedelta(seconds=61)
                price = round(rng.uniform(90, 600), 2)
            amount = max(1, int((cash - 1000) / price / 3))
            decide = [{"type": "text", "text": f"Buying {amount} {symbol} at {price}. <FINISH_SIGNAL>"}]
            clock = _call(session, provider, history, decide, "end_turn", rng, totals, clock)
            history.append({"role": "assistant", "content": decide})
            cash -= amount * price
            session.outcome("trade", {"action": "buy", "symbol": symbol, "amount": amount, "price": price,
                                      "cash_after": round(cash, 2)})
            totals["outcomes"] += 1
            exchange.end(decide[0]["text"])


def _window(history: list[dict]) -> list[dict]:
    """A sliding window: past WINDOW messages, the oldest are dropped (keeping a user turn first)."""
    kept = history[-WINDOW:]
    while kept and kept[0]["role"] != "user":
        kept = kept[1:]
    return kept


def _call(session, provider, history, content, stop, rng, totals, clock) -> datetime:
    window = _window(history)
    latency = round(rng.uniform(400, 2500), 1)
    size = sum(len(str(m["content"])) for m in window) // 4 + 300
    cached = size - 300 if len(window) > 1 else 0
    usage = Usage(input_tokens=size - cached, output_tokens=40 + len(str(content)) // 4,
                  cache_read_tokens=cached, cache_write_tokens=120, reasoning_tokens=0)
    facts = {"context_limit": WINDOW, "turns_in_context": len(window), "turns_removed": len(history) - len(window)}
    session.call(messages=window, system=SYSTEM, tools=TOOLS, params={"max_tokens": 1024, "temperature": 0.2},
                 provider=provider, response={"role": "assistant", "content": content}, stop_reason=stop,
                 usage=usage, latency_ms=latency, started_at=clock, raw={"content": content, "stop_reason": stop},
                 provider_message_id=f"msg_{rng.getrandbits(48):012x}", context_facts=facts)
    totals["calls"] += 1
    return clock + timedelta(milliseconds=latency + rng.uniform(200, 900))
