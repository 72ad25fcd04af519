"""An LLM judge (docs/review.md, "Checks"): asks a model, through the summarizers' model access (their SDK
clients, keys, `--base-url` and the recording of their own calls), for a score between 0 and 1 of each session.
Its calls are recorded in the summaries' run, so what judging cost shows in `reasonlog stats --by run`."""
from __future__ import annotations

import re
from collections.abc import Iterable

from ..model import Usage
from ..pricing import load_price_table
from ..store import StoreReader
from ..summaries import SummaryError
from ..summaries.llm import LLMSummarizer
from ..summaries.targets import targets_of
from . import CheckError

JUDGE_PROMPT = """You are judging the work of an AI agent. Read what it was asked and what it did, then rate how
well it completed its task, from 0 (not at all, or it failed) to 1 (fully and correctly).
Reply with the number alone.

{transcript}"""
_NUMBER = re.compile(r"(?<![\w.])(0(?:\.\d+)?|1(?:\.0+)?)(?!\w|\.\d)")  # a sentence's full stop may follow


def number_of(reply: str) -> float:
    """The first number between 0 and 1 in the judge's reply; CheckError quoting the reply otherwise."""
    found = _NUMBER.search(reply)
    if found is None:
        raise CheckError(f"the judge's reply has no number between 0 and 1: {reply[:200]!r}")
    return float(found.group(1))


class Judge:
    """A check (a function of a session) that asks a model; `estimate` says what judging sessions would cost."""

    def __init__(self, provider: str, *, db: str, model: str | None = None, base_url: str | None = None,
                 prompt: str | None = None) -> None:
        self.llm = LLMSummarizer(provider, db=db, model=model, base_url=base_url, prompt=prompt or JUDGE_PROMPT)

    def __call__(self, session: dict) -> float:
        target = targets_of(session, ("session",))[0]
        try:
            return number_of(self.llm.summarize(target))
        except SummaryError as exc:
            raise CheckError(str(exc)) from None

    def estimate(self, store: StoreReader, session_ids: Iterable[str]) -> dict:
        """Calls, tokens (the prompt about four characters a token, the reply at its limit) and USD (None when
        the model has no price)."""
        prices = load_price_table()
        calls = tokens_in = tokens_out = 0
        usd: float | None = 0.0
        for sid in session_ids:
            target = targets_of(store.get_session(sid), ("session",))[0]
            spent = self.llm.estimate(target)
            if spent is None:
                continue
            calls, tokens_in, tokens_out = calls + 1, tokens_in + spent[0], tokens_out + spent[1]
            model = self.llm.provenance(target).model or "?"
            cost = prices.cost(model, Usage(input_tokens=spent[0], output_tokens=spent[1])).usd
            usd = None if cost is None or usd is None else usd + cost
        return {"calls": calls, "input_tokens": tokens_in, "output_tokens": tokens_out,
                "usd": usd, "model": self.llm.model}

    def close(self) -> None:
        self.llm.close()
