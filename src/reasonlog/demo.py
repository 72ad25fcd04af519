"""`reasonlog demo`: a scripted, offline trading run recorded through the real Recorder.

Two agents trade for a few simulated days, each in its provider's own request shape: `gpt-5`
sends OpenAI Chat Completions requests, `claude-sonnet-4-5` Anthropic Messages requests. Each day
asks for a price (a tool call), sometimes hits a tool error and a failed call, decides, and trades
(an outcome). Every call resends the history until a sliding window trims it; the window always
starts at a user's question, so no tool result is ever sent without the call that asked for it.
The run happened over the last hour: every instant is given, so calls sit inside their exchanges.
"""
from __future__ import annotations

import random
import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from .capture import Recorder
from .model import Usage

SYMBOLS = ("NVDA", "GOOGL", "MSFT", "AAPL", "AMZN")
SYSTEM = ("You are a trading agent in a NASDAQ-100 simulation. Use get_price before buying. "
          "Keep at least 1000 USD in cash. Finish each day with <FINISH_SIGNAL>.")
WINDOW = 8  # messages kept once the history grows past it
TOOLS = [("get_price", "Latest price of a NASDAQ-100 symbol.",
          {"type": "object", "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]}),
         ("buy", "Buy shares at the latest price.",
          {"type": "object", "properties": {"symbol": {"type": "string"}, "amount": {"type": "integer"}},
           "required": ["symbol", "amount"]})]


class Anthropic:
    """Anthropic Messages: system beside the messages, content blocks, tool_result in a user turn."""

    provider, model = "anthropic", "claude-sonnet-4-5"

    def request(self, window: list[dict]) -> dict:
        tools = [{"name": n, "description": d, "input_schema": s} for n, d, s in TOOLS]
        return {"model": self.model, "max_tokens": 1024, "temperature": 0.2, "system": SYSTEM, "tools": tools,
                "messages": window}

    def ask(self, day: int, symbol: str, tool_id: str) -> dict:
        return {"role": "assistant", "content": [
            {"type": "thinking", "thinking": f"{symbol} looked strong yesterday; check its price first.",
             "signature": f"sig-{day}"},
            {"type": "text", "text": f"Let me check {symbol}."},
            {"type": "tool_use", "id": tool_id, "name": "get_price", "input": {"symbol": symbol}}]}

    def result(self, tool_id: str, text: str, failed: bool) -> dict:
        return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": text,
                                             "is_error": failed}]}

    def answer(self, text: str) -> dict:
        return {"role": "assistant", "content": [{"type": "text", "text": text}]}

    def stop(self, asked_tool: bool) -> str:
        return "tool_use" if asked_tool else "end_turn"

    def usage(self, prompt: int, cached: int, output: int) -> Usage:
        return Usage.from_anthropic({"input_tokens": prompt - cached, "cache_read_input_tokens": cached,
                                     "cache_creation_input_tokens": 120, "output_tokens": output})


class OpenAI(Anthropic):
    """OpenAI Chat Completions: the system prompt is the first message, tool calls and `tool` messages."""

    provider, model = "openai", "gpt-5"

    def request(self, window: list[dict]) -> dict:
        tools = [{"type": "function", "function": {"name": n, "description": d, "parameters": s}} for n, d, s in TOOLS]
        return {"model": self.model, "max_completion_tokens": 1024, "reasoning_effort": "low", "tools": tools,
                "messages": [{"role": "system", "content": SYSTEM}, *window]}

    def ask(self, day: int, symbol: str, tool_id: str) -> dict:
        return {"role": "assistant", "content": f"Let me check {symbol}.", "tool_calls": [
            {"id": tool_id, "type": "function",
             "function": {"name": "get_price", "arguments": f'{{"symbol": "{symbol}"}}'}}]}

    def result(self, tool_id: str, text: str, failed: bool) -> dict:
        return {"role": "tool", "tool_call_id": tool_id, "content": text}

    def answer(self, text: str) -> dict:
        return {"role": "assistant", "content": text}

    def stop(self, asked_tool: bool) -> str:
        return "tool_calls" if asked_tool else "stop"

    def usage(self, prompt: int, cached: int, output: int) -> Usage:
        return Usage.from_openai({"prompt_tokens": prompt, "completion_tokens": output + 64,
                                  "prompt_tokens_details": {"cached_tokens": cached},
                                  "completion_tokens_details": {"reasoning_tokens": 64}})


AGENTS = (OpenAI(), Anthropic())


def run_demo(db: str | Path, exchanges: int = 3, seed: int = 7, start: datetime | None = None) -> dict:
    """Record the scripted run into `db`; returns what was recorded, for the CLI to report."""
    rng = random.Random(seed)
    start = start or datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    run = f"demo-{start:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"  # two demos in one second are two runs
    totals: dict[str, Any] = {"run": run, "sessions": 0, "calls": 0, "failed_calls": 0, "outcomes": 0,
                              "first_session": None}
    with Recorder(db) as rec:
        for agent in AGENTS:
            session = rec.session(agent=agent.model, run=run, model=agent.model, provider=agent.provider,
                                  labels={"date": f"{start:%Y-%m-%d}", "market": "nasdaq-100"}, started_at=start)
            totals["first_session"] = totals["first_session"] or session.id
            clock = Day(session, agent, rng, totals, start + timedelta(seconds=1)).trade(exchanges)
            session.end(at=clock)
            totals["sessions"] += 1
    return totals


class Day:
    """One agent's trading days, on a simulated clock that every record takes its instant from."""

    def __init__(self, session, agent: Anthropic, rng: random.Random, totals: dict, clock: datetime):
        self.session, self.agent, self.rng, self.totals, self.clock = session, agent, rng, totals, clock
        self.history: list[dict] = []
        self.cash = 10_000.0

    def trade(self, days: int) -> datetime:
        for day in range(days):
            self._day(day)
        return self._tick(1)

    def _day(self, day: int) -> None:
        symbol = self.rng.choice(SYMBOLS)
        question = f"Day {day + 1}: cash is {self.cash:.2f} USD. Decide today's trade."
        exchange = self.session.exchange(question, at=self._tick(1))
        self.history.append({"role": "user", "content": question})
        tool_id = f"call_{self.session.id[-6:]}_{day}"
        self._call(self.agent.ask(day, symbol, tool_id), asked_tool=True)
        failed, price = day == 1, round(self.rng.uniform(90, 600), 2)
        text = "price feed timed out" if failed else f"{symbol} {price}"
        self.session.tool_result(tool_id, text, name="get_price", input={"symbol": symbol}, is_error=failed,
                                 duration_ms=round(self.rng.uniform(5, 80), 1), at=self._tick(0.1))
        self.history.append(self.agent.result(tool_id, text, failed))
        if failed:
            self._failed_call()
            price = round(self.rng.uniform(90, 600), 2)
        amount = max(1, int((self.cash - 1000) / price / 3))
        decision = f"Buying {amount} {symbol} at {price}. <FINISH_SIGNAL>"
        call = self._call(self.agent.answer(decision), asked_tool=False)
        self.cash -= amount * price
        self.session.outcome("trade", {"action": "buy", "symbol": symbol, "amount": amount, "price": price,
                                       "cash_after": round(self.cash, 2)}, call_id=call, at=self._tick(0.1))
        self.totals["outcomes"] += 1
        exchange.end(decision, at=self._tick(0.2))

    def _call(self, reply: dict, asked_tool: bool) -> str | None:
        window = _window(self.history)
        latency = round(self.rng.uniform(400, 2500), 1)
        prompt = sum(len(str(m.get("content"))) for m in window) // 4 + 300
        cached = prompt - 300 if len(window) > 1 else 0
        facts = {"context_limit": WINDOW, "turns_in_context": len(window),
                 "turns_removed": len(self.history) - len(window)}
        call = self.session.call(request=self.agent.request(window), response=reply, provider=self.agent.provider,
                                 stop_reason=self.agent.stop(asked_tool),
                                 usage=self.agent.usage(prompt, cached, 40 + len(str(reply)) // 4),
                                 latency_ms=latency, started_at=self._tick(0.2), context_facts=facts,
                                 provider_message_id=f"msg_{self.rng.getrandbits(48):012x}",
                                 raw={"message": reply, "stop_reason": self.agent.stop(asked_tool)})
        self.history.append(reply)
        self.totals["calls"] += 1
        self._tick(latency / 1000)
        return call

    def _failed_call(self) -> None:
        self.session.call(request=self.agent.request(_window(self.history)), provider=self.agent.provider,
                          error=TimeoutError("upstream model timed out after 60 s"), latency_ms=60_000.0,
                          started_at=self._tick(0.2))
        self.totals["calls"] += 1
        self.totals["failed_calls"] += 1
        self._tick(60)

    def _tick(self, seconds: float) -> datetime:
        self.clock += timedelta(seconds=seconds)
        return self.clock


def _window(history: list[dict]) -> list[dict]:
    """A sliding window: past WINDOW messages, the oldest go, and it starts at a user's question,
    never at a tool result whose call was trimmed."""
    kept = history[-WINDOW:]
    while kept and not _is_question(kept[0]):
        kept = kept[1:]
    return kept


def _is_question(message: dict) -> bool:
    return message.get("role") == "user" and isinstance(message.get("content"), str)
