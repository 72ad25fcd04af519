"""A model name resolves to its maker's price before any reseller's, and a maker's undated alias (`mistral-large`)
to its `-latest` price, over every name in the bundled table."""
from __future__ import annotations

import json
import runpy
from importlib import resources
from pathlib import Path

import pytest

from reasonlog.pricing import FIRST_PARTY, load_price_table

ROOT = Path(__file__).resolve().parents[1]
DOC = json.loads(resources.files("reasonlog").joinpath("prices.json").read_bytes())
PROVIDER = {name: entry["provider"] for name, entry in DOC["models"].items()}


def _prices(entry: dict) -> tuple:
    return tuple(entry.get(f) for f in ("input", "output", "cache_read", "cache_write_5m", "cache_write_1h"))


def _price_of(table, name: str) -> tuple:
    p = table.get(name)
    return None if p is None else (p.input, p.output, p.cache_read, p.cache_write_5m, p.cache_write_1h)


def test_claude_3_7_sonnet_latest_is_priced_at_anthropic_s_rate():
    table = load_price_table()
    # deepinfra lists claude-3-7-sonnet-latest at 3.3 / 16.5 $ per million; Anthropic's price is 3 / 15
    assert (table.get("claude-3-7-sonnet-latest").input, table.get("claude-3-7-sonnet-latest").output) == (
        3e-06, 1.5e-05)
    assert table.provider_of("claude-3-7-sonnet-latest") == "anthropic"


def test_mistral_large_is_mistral_s_own_latest():
    table = load_price_table()
    assert table.get("mistral-large") == table.get("mistral-large-latest") == table.get("mistral/mistral-large-latest")
    assert table.provider_of("mistral-large") == "mistral"
    assert table.get("openrouter/mistralai/mistral-large") is not None  # a reseller named in full keeps its price


def test_the_first_party_providers_are_the_generator_s():
    gen = runpy.run_path(str(ROOT / "scripts" / "gen_prices.py"))
    assert FIRST_PARTY == gen["FIRST_PARTY"] | gen["SECOND_PARTY"]
    assert {"anthropic", "openai", "gemini", "vertex_ai-language-models", "mistral", "deepseek", "xai"} <= FIRST_PARTY


def test_every_first_party_model_resolves_to_its_own_price():
    table = load_price_table()
    first = [n for n, p in PROVIDER.items() if p in FIRST_PARTY]
    assert len(first) > 500
    wrong = [n for n in first if _price_of(table, n) != _prices(DOC["models"][n])]
    assert wrong == []


def test_no_bare_name_resolves_to_a_reseller_when_its_maker_lists_it():
    """For every name without a provider path: when some spelling of it (dated, undated, dotted, -latest, pinned)
    is listed by its maker, the name is priced by the maker."""
    table = load_price_table()
    resold = []
    for name in DOC["models"]:
        if "/" in name:
            continue
        makers = [n for n in table.spellings(name) if PROVIDER.get(n) in FIRST_PARTY]
        if makers and table.provider_of(name) not in FIRST_PARTY:
            resold.append((name, table.provider_of(name), makers[0]))
    assert resold == []


@pytest.mark.parametrize(("name", "provider"), [
    ("claude-3-7-sonnet-latest", "anthropic"), ("claude-3.7-sonnet", "anthropic"), ("gpt-4o", "openai"),
    ("deepseek-chat", "deepseek"), ("gemini-2.5-flash", "gemini"), ("grok-4", "xai"),
    ("codestral", "mistral"), ("mistral-small", "mistral")])
def test_everyday_names_are_the_maker_s(name, provider):
    assert load_price_table().provider_of(name) == provider
