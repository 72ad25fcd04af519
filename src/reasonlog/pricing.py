"""What a model call cost, from the bundled, versioned price table (prices.json).

The table is made by scripts/gen_prices.py from LiteLLM's price data; its `version` is stamped
on every computed cost, so a stored cost can always be traced to the prices that made it.
Nothing is read at import time: the bundled table loads on first use and is cached.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from types import MappingProxyType
from typing import Any

import orjson

__all__ = ["Cost", "FIRST_PARTY", "ModelPrice", "PriceTable", "load_price_table", "REPORTED", "UNKNOWN_MODEL"]

REPORTED = "reported"  # the provider said what the call cost
UNKNOWN_MODEL = "unknown_model"  # no price for the model: usd is None, not 0, so totals can show it

_BASE = ("input", "output", "cache_read", "cache_write_5m", "cache_write_1h")
_VERTEX_PIN = re.compile(r"@[^/]*$")  # claude-sonnet-4-5@20250929; not cloudflare/@cf/...
_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")
_CLAUDE_DOT = re.compile(r"(?<=\d)\.(?=\d)")
_CLAUDE_ALIAS = re.compile(r"-(latest|0)$")
# LiteLLM's `litellm_provider` of the makers that sell their own models (and Google's and Anthropic's models on
# Vertex): a bare model name takes their price before any reseller's. scripts/gen_prices.py ranks the same way.
FIRST_PARTY = frozenset({"anthropic", "openai", "gemini", "deepseek", "mistral", "xai", "dashscope", "minimax",
                         "moonshot", "zai", "cohere_chat", "ai21", "amazon_nova", "perplexity", "meta",
                         "vertex_ai-language-models", "vertex_ai-anthropic_models"})
_SECOND_PARTY = frozenset({"vertex_ai-language-models", "vertex_ai-anthropic_models"})


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per token for one model; the `*_above` tier applies past `threshold_tokens` of prompt."""

    input: float
    output: float
    cache_read: float
    cache_write_5m: float
    cache_write_1h: float
    threshold_tokens: int | None = None
    input_above: float | None = None
    output_above: float | None = None
    cache_read_above: float | None = None
    cache_write_5m_above: float | None = None
    cache_write_1h_above: float | None = None

    def tier(self, prompt_tokens: int) -> ModelPrice:
        """The prices in force for a request whose prompt has `prompt_tokens` tokens."""
        # Anthropic's rule, which Google and OpenAI share: past the threshold, the whole request
        # (output included) is billed at the long-context prices, not just the excess.
        if self.threshold_tokens is None or prompt_tokens <= self.threshold_tokens:
            return self
        above = {f: getattr(self, f + "_above") for f in _BASE}
        return replace(self, **{f: v for f, v in above.items() if v is not None}, threshold_tokens=None)

    def usd(self, usage: Any) -> float:
        """The cost of `usage`, each token priced exactly once."""
        # The counters read one by one, not through an object of them: a recorder prices every call it writes.
        input_ = int(getattr(usage, "input_tokens", 0) or 0)  # absent or None counts as 0 (older records lack some)
        output = int(getattr(usage, "output_tokens", 0) or 0)  # reasoning tokens are already inside output_tokens
        read = int(getattr(usage, "cache_read_tokens", 0) or 0)
        write = int(getattr(usage, "cache_write_tokens", 0) or 0)
        write_1h = min(int(getattr(usage, "cache_write_1h_tokens", 0) or 0), write)
        p = self if self.threshold_tokens is None else self.tier(input_ + read + write)
        return (input_ * p.input + read * p.cache_read + output * p.output
                + (write - write_1h) * p.cache_write_5m + write_1h * p.cache_write_1h)


@dataclass(frozen=True, slots=True)
class Cost:
    """A call's cost in USD and where it came from.

    `source` is `reported` (the provider's figure), `computed@<table version>`, or
    `unknown_model`; for an unknown model `usd` is None rather than 0.0, so a sum over calls
    can tell "free" from "not priced" and say how many calls it left out.
    """

    usd: float | None
    source: str


class PriceTable:
    """A versioned set of model prices, looked up by exact or normalised model name.

    A name with a provider path that the table lists (`openrouter/mistralai/mistral-large`) takes that
    listing. Otherwise, of the spellings of the name that the table lists, the maker's wins over a
    reseller's (`claude-3-7-sonnet-latest` is Anthropic's price, not deepinfra's), the most exact first.
    """

    __slots__ = ("version", "_models", "_overrides", "_providers", "_windows", "_resolved", "_computed", "_priced")

    def __init__(self, version: str, models: Mapping[str, ModelPrice],
                 overrides: Mapping[str, ModelPrice] | None = None,
                 providers: Mapping[str, str] | None = None, windows: Mapping[str, int] | None = None) -> None:
        self.version = version
        self._models = models if isinstance(models, _Listed) else MappingProxyType(dict(models))
        self._overrides = MappingProxyType(dict(overrides or {}))
        self._providers = MappingProxyType(dict(providers or {}))  # model name -> LiteLLM's provider
        self._windows = MappingProxyType(dict(windows or {}))  # model name -> its maker's max input tokens
        self._resolved: dict[str, str | None] = {}  # model name -> the table's name it resolved to
        self._computed = f"computed@{version}"  # the source of every cost this table computes
        self._priced: dict[str, Any] = {}  # model name -> its price (`get`), or None

    def __repr__(self) -> str:
        return f"PriceTable(version={self.version!r}, models={len(self._models)})"

    @property
    def models(self) -> Mapping[str, ModelPrice]:
        """The bundled prices by model name (overrides not included)."""
        return self._models

    def get(self, model: str) -> ModelPrice | None:
        """The price of `model`, or None; any override that matches wins over the table."""
        if self._overrides:  # spelling the name's candidates took a quarter of pricing a recorded call
            # Overrides first, so overriding claude-haiku-4-5 also reprices claude-haiku-4-5-20251001.
            found = next((self._overrides[n] for n in _candidates(model) if n in self._overrides), None)
            if found is not None:
                return found
        name = self._name_of(model)
        return None if name is None else self._models[name]

    def provider_of(self, model: str) -> str | None:
        """Whose listing prices `model` (LiteLLM's provider name), or None when the table has no price."""
        name = self._name_of(model)
        return None if name is None else self._providers.get(name)

    def context_window(self, model: str) -> int | None:
        """How many input tokens `model` takes (the listing that prices it says), or None when unknown."""
        name = self._name_of(model)
        return None if name is None else self._windows.get(name)

    def spellings(self, model: str) -> list[str]:
        """The names `model` is looked up under, most exact first (no fuzzy or substring match)."""
        return _candidates(model) + _latest(model)

    def _name_of(self, model: str) -> str | None:
        if model in self._resolved:  # a recorder prices the same few models all day long
            return self._resolved[model]
        listed = [n for n in self.spellings(model) if n in self._models]
        if listed and "/" in listed[0]:
            found: str | None = listed[0]  # a reseller named with its path: its own listing
        else:
            found = min(listed, key=lambda n: (self._level(n), listed.index(n)), default=None)
            if found is not None and found in _latest(model) and self._level(found) == 2:
                found = None  # the `-latest` alias is the maker's rule, never a reseller's
        self._resolved[model] = found
        return found

    def _level(self, name: str) -> int:
        provider = self._providers.get(name)
        return 0 if provider in FIRST_PARTY - _SECOND_PARTY else 1 if provider in _SECOND_PARTY else 2

    def cost(self, model: str, usage: Any) -> Cost:
        """What a call of `model` with token counts `usage` cost, by this table."""
        return Cost(*self.priced(model, usage))

    def priced(self, model: str, usage: Any) -> tuple[float | None, str]:
        """`cost` as (usd, source), without a `Cost` (the writer prices every call it stores)."""
        price = self._priced.get(model, _UNSEEN)  # `get` of a model, which this table always answers alike
        if price is _UNSEEN:
            price = self._priced[model] = self.get(model)
        if price is None:
            return None, UNKNOWN_MODEL
        return price.usd(usage), self._computed

    def with_overrides(self, mapping: Mapping[str, Mapping[str, Any]]) -> PriceTable:
        """A copy whose prices for the named models are replaced field by field."""
        overrides = dict(self._overrides)
        for name, changes in mapping.items():
            overrides[name] = _overridden(self.get(name), name, changes)
        version = self.version if self.version.endswith("+overrides") else f"{self.version}+overrides"
        return PriceTable(version, self._models, overrides, self._providers)


def _candidates(model: str) -> list[str]:
    """Names to try for `model`, most exact first; never a fuzzy or substring match.

    Provider prefixes are dropped one path segment at a time (`openrouter/deepseek/deepseek-r1`,
    then `deepseek/deepseek-r1`, then `deepseek-r1`), so the most specific price listed wins.
    """
    names = [model]
    tail = model.strip().lower()
    while True:
        names += [tail, pinless := _VERTEX_PIN.sub("", tail), claude := _claude(pinless), _DATE_SUFFIX.sub("", claude)]
        if "/" not in tail:
            return list(dict.fromkeys(names))
        tail = tail.split("/", 1)[1]


def _latest(model: str) -> list[str]:
    """A maker's undated alias: Mistral calls `mistral-large-latest` what resellers call `mistral-large`."""
    bare = model.strip().lower().rsplit("/", 1)[-1]
    if bare.endswith("-latest") or _DATE_SUFFIX.search(bare) or not bare:
        return []
    return [bare + "-latest"]


def _claude(name: str) -> str:
    """Anthropic's spelling variants: claude-3.7-sonnet is claude-3-7-sonnet; -latest and -0 are aliases."""
    if not name.startswith("claude-"):
        return name
    return _CLAUDE_ALIAS.sub("", _CLAUDE_DOT.sub("-", name))


_UNSEEN = object()
_FIELD_NAMES = tuple(f.name for f in fields(ModelPrice))
_FIELDS = set(_FIELD_NAMES)


def _overridden(base: ModelPrice | None, name: str, changes: Mapping[str, Any]) -> ModelPrice:
    """`base` with `changes` applied; a model new to the table needs at least input and output."""
    unknown = set(changes) - _FIELDS
    if unknown:
        raise ValueError(f"price override for {name!r}: unknown fields {sorted(unknown)}")
    if base is None:
        if "input" not in changes or "output" not in changes:
            raise ValueError(f"price override for {name!r}: a new model needs input and output")
        # Without better knowledge, cached tokens cost what uncached ones do.
        base = ModelPrice(**{f: changes["input"] for f in _BASE[2:]}, input=0.0, output=0.0)
    return _checked(replace(base, **changes), name)


def _checked(price: ModelPrice, name: str) -> ModelPrice:
    """`price`, if every figure in it is a finite, non-negative number."""
    for f in _FIELD_NAMES:  # (`dataclasses.fields` for each of the table's 4,654 models was most of its load)
        value = getattr(price, f)
        if value is None or (type(value) in _NUMBER and 0 <= value < math.inf):  # NaN fails both comparisons
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(f"price for {name!r}: {f} must be a non-negative number, got {value!r}")
    return price


_NUMBER = (int, float)


class _Listed(Mapping[str, ModelPrice]):
    """A price table's prices by model name, each parsed and checked when first asked for: a recorder prices a few
    models, and parsing all of the bundled table's models was half of its first use, in every process."""

    __slots__ = ("_entries", "_parsed")

    def __init__(self, entries: dict[str, dict[str, Any]]) -> None:
        self._entries = entries  # the prices.json document's, never changed
        self._parsed: dict[str, ModelPrice] = {}

    def __getitem__(self, name: str) -> ModelPrice:
        price = self._parsed.get(name)
        if price is None:  # (two threads may both parse it: the same price)
            entry = self._entries[name]
            price = self._parsed[name] = _checked(ModelPrice(**{k: v for k, v in entry.items() if k in _FIELDS}),
                                                  name)
        return price

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


def _parse(doc: Mapping[str, Any], check: bool = True) -> PriceTable:
    """A PriceTable from the prices.json document; `check`: each price parsed and checked now, not when first
    used (a table of the user's is refused at load; the bundled one is checked by tests/test_pricing.py)."""
    models = _Listed(doc["models"])
    if check:
        for name in models:
            models[name]
    providers = {name: entry["provider"] for name, entry in doc["models"].items()
                 if isinstance(entry.get("provider"), str)}
    windows = {name: entry["max_input_tokens"] for name, entry in doc["models"].items()
               if type(entry.get("max_input_tokens")) is int}
    return PriceTable(str(doc["version"]), models, providers=providers, windows=windows)


def _bundled() -> bytes:
    """prices.json beside this module, read by the loader that read the module (a file's or a zip's, as
    `pkgutil.get_data` does): `importlib.resources` would import zipfile and tempfile at every recorder's start."""
    loader: Any = __spec__.loader  # a ResourceLoader: a file's SourceFileLoader, a zip's zipimporter
    return loader.get_data(os.path.join(os.path.dirname(__file__), "prices.json"))


@lru_cache(maxsize=8)
def load_price_table(path: str | None = None) -> PriceTable:
    """The price table at `path`, or the bundled one; loaded once and cached."""
    if path is None:
        data = _bundled()
    else:
        with open(path, "rb") as fh:
            data = fh.read()
    return _parse(orjson.loads(data), check=path is not None)  # every import and priced call waits: orjson, not json
