"""Costs a user would check by hand against the bundled price table."""

from __future__ import annotations

import json
import runpy
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reasonlog.model import Usage
from reasonlog.pricing import Cost, ModelPrice, PriceTable, load_price_table

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class U:
    """Token counts shaped like reasonlog.model.Usage, without its validation."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    reasoning_tokens: int = 0


@pytest.fixture(scope="module")
def table() -> PriceTable:
    return load_price_table()


def by_hand(p: ModelPrice, u: U) -> float:
    return (u.input_tokens * p.input + u.output_tokens * p.output + u.cache_read_tokens * p.cache_read
            + (u.cache_write_tokens - u.cache_write_1h_tokens) * p.cache_write_5m
            + u.cache_write_1h_tokens * p.cache_write_1h)


def test_real_anthropic_call_matches_hand_arithmetic(table):
    u = U(input_tokens=1657, output_tokens=1818, cache_write_tokens=71658, cache_read_tokens=622375)
    p = table.get("claude-haiku-4-5")
    expected = 1657 * p.input + 1818 * p.output + 71658 * p.cache_write_5m + 622375 * p.cache_read
    assert table.cost("claude-haiku-4-5", u).usd == pytest.approx(expected, rel=1e-12)
    # Anthropic's published Haiku 4.5 prices, $ per million: 1 in, 5 out, 1.25 write, 0.10 read.
    assert expected == pytest.approx(0.162557, rel=1e-9)


def test_one_hour_cache_writes_use_the_one_hour_rate(table):
    p = table.get("claude-sonnet-4-5")
    assert p.cache_write_1h == pytest.approx(2 * p.input)
    assert p.cache_write_5m == pytest.approx(1.25 * p.input)
    u = U(input_tokens=10, output_tokens=20, cache_write_tokens=5000, cache_write_1h_tokens=3000)
    expected = 10 * p.input + 20 * p.output + 2000 * p.cache_write_5m + 3000 * p.cache_write_1h
    assert table.cost("claude-sonnet-4-5", u).usd == pytest.approx(expected, rel=1e-12)


def test_reasoning_tokens_are_not_priced_twice(table):
    plain = table.cost("gpt-5", U(input_tokens=100, output_tokens=1000)).usd
    reasoning = table.cost("gpt-5", U(input_tokens=100, output_tokens=1000, reasoning_tokens=900)).usd
    assert plain == reasoning


def test_long_context_tier_prices_the_whole_request(table):
    model = "gemini-2.5-pro"
    p = table.get(model)
    assert p.threshold_tokens == 200_000 and p.input_above > p.input
    at = U(input_tokens=150_000, cache_read_tokens=50_000, output_tokens=1000)  # exactly 200k: base
    assert table.cost(model, at).usd == pytest.approx(by_hand(p, at))
    above = U(input_tokens=150_000, cache_read_tokens=50_001, output_tokens=1000)
    expected = 150_000 * p.input_above + 50_001 * p.cache_read_above + 1000 * p.output_above
    assert table.cost(model, above).usd == pytest.approx(expected, rel=1e-12)


def test_cache_writes_count_toward_the_long_context_threshold(table):
    p = table.get("claude-sonnet-4")
    assert p.threshold_tokens == 200_000
    u = U(input_tokens=10, cache_write_tokens=200_000, cache_write_1h_tokens=200_000, output_tokens=5)
    expected = 10 * p.input_above + 200_000 * p.cache_write_1h_above + 5 * p.output_above
    assert table.cost("claude-sonnet-4", u).usd == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("name", [
    "claude-sonnet-4-5-20250929", "anthropic/claude-sonnet-4-5", "anthropic/claude-sonnet-4-5-20250929",
    "claude-sonnet-4-5@20250929", "Claude-Sonnet-4-5", "claude-sonnet-4.5",
])
def test_dated_and_prefixed_ids_resolve(table, name):
    assert table.get(name) == table.get("claude-sonnet-4-5")


@pytest.mark.parametrize("name, canonical", [
    ("claude-3.7-sonnet", "claude-3-7-sonnet"), ("claude-3-7-sonnet-20250219", "claude-3-7-sonnet"),
    ("openai/gpt-5-2025-08-07", "gpt-5"), ("models/gemini-2.5-flash", "gemini-2.5-flash"),
    ("gemini/gemini-2.5-flash", "gemini-2.5-flash"),
])
def test_spelling_variants_resolve(table, name, canonical):
    assert table.get(name) is not None and table.get(name) == table.get(canonical)


@pytest.mark.parametrize("name", ["no-such-model", "claude", "gpt", "sonnet-4-5", "my-claude-sonnet-4-5", ""])
def test_no_fuzzy_matching(table, name):
    assert table.get(name) is None


def test_unknown_model_costs_none_not_zero(table):
    cost = table.cost("acme-llm-9000", U(input_tokens=1000, output_tokens=1000))
    assert cost == Cost(None, "unknown_model")


def test_computed_source_names_the_table_version(table):
    assert table.version.startswith("20") and "-litellm-" in table.version
    assert table.cost("gpt-5-mini", U(input_tokens=1)).source == f"computed@{table.version}"


def test_overrides_change_price_and_version(table):
    custom = table.with_overrides({"claude-haiku-4-5": {"input": 2e-6}, "acme-llm": {"input": 1e-6, "output": 3e-6}})
    assert custom.version == f"{table.version}+overrides"
    u = U(input_tokens=1000, output_tokens=100)
    haiku_out = table.get("claude-haiku-4-5").output
    assert custom.cost("claude-haiku-4-5", u).usd == pytest.approx(1000 * 2e-6 + 100 * haiku_out)
    expected = Cost(pytest.approx(1000 * 1e-6 + 100 * 3e-6), f"computed@{table.version}+overrides")
    assert custom.cost("acme-llm", u) == expected
    assert custom.cost("anthropic/claude-haiku-4-5", u).usd == custom.cost("claude-haiku-4-5", u).usd
    assert table.get("claude-haiku-4-5").input == pytest.approx(1e-6)  # the original is untouched


def test_override_of_an_alias_covers_its_dated_ids(table):
    custom = table.with_overrides({"claude-haiku-4-5": {"output": 1e-3}})
    assert custom.get("claude-haiku-4-5-20251001").output == 1e-3


def test_bad_overrides_are_refused(table):
    with pytest.raises(ValueError):
        table.with_overrides({"gpt-5": {"inptu": 1e-6}})
    with pytest.raises(ValueError):
        table.with_overrides({"gpt-5": {"input": -1.0}})
    with pytest.raises(ValueError):
        table.with_overrides({"brand-new": {"input": 1e-6}})


def test_openai_cached_tokens_priced_at_cache_read_only(table):
    p = table.get("gpt-5")
    assert p.cache_read < p.input
    # OpenAI reports 10k prompt tokens, 8k of them cached: input_tokens holds the uncached 2k.
    u = U(input_tokens=2000, cache_read_tokens=8000, output_tokens=500)
    expected = 2000 * p.input + 8000 * p.cache_read + 500 * p.output
    assert table.cost("gpt-5", u).usd == pytest.approx(expected, rel=1e-12)
    assert table.cost("gpt-5", u).usd < table.cost("gpt-5", U(input_tokens=10_000, output_tokens=500)).usd


@pytest.mark.parametrize("name", [
    "claude-sonnet-4-5", "claude-sonnet-4-5-20250929", "claude-haiku-4-5", "claude-opus-4-6",
    "claude-3-7-sonnet", "gpt-5", "gpt-5-mini", "gpt-4.1-nano", "gemini-2.5-flash",
])
def test_promised_models_are_in_the_table(table, name):
    assert name in table.models


def test_every_bundled_price_is_what_parsing_its_entry_gives(tmp_path):
    """The bundled table parses each model's price when first asked for it (a recorder prices a few): every one of
    them is the entry's figures, each a finite non-negative number, as the same file read from a path (each price
    parsed and checked at load) gives too."""
    data = resources.files("reasonlog").joinpath("prices.json").read_bytes()
    entries = json.loads(data)["models"]
    (tmp_path / "prices.json").write_bytes(data)
    lazy, eager = load_price_table(), load_price_table(str(tmp_path / "prices.json"))
    fields = set(ModelPrice.__dataclass_fields__)
    assert list(lazy.models) == list(eager.models) == list(entries)
    for name, entry in entries.items():
        price = ModelPrice(**{k: v for k, v in entry.items() if k in fields})
        assert lazy.models[name] == eager.models[name] == price, name
        assert all(v is None or (type(v) in (int, float) and 0 <= v < float("inf"))
                   for v in (getattr(price, f) for f in fields)), name


def test_bundled_file_is_sorted_and_sane():
    text = resources.files("reasonlog").joinpath("prices.json").read_text(encoding="utf-8")
    doc = json.loads(text)
    assert list(doc) == sorted(doc) and list(doc["models"]) == sorted(doc["models"])
    assert text == json.dumps(doc, indent=1, sort_keys=True) + "\n"  # the generator's exact layout
    for name, entry in doc["models"].items():
        assert list(entry) == sorted(entry), name
        prices = {k: v for k, v in entry.items() if isinstance(v, (int, float)) and k != "threshold_tokens"}
        assert {"input", "output", "cache_read", "cache_write_5m", "cache_write_1h"} <= set(prices), name
        assert all(v >= 0 for v in prices.values()), name


def test_load_price_table_is_cached_and_reads_a_path(tmp_path):
    assert load_price_table() is load_price_table()
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"version": "test-1", "models": {"m": {
        "input": 1.0, "output": 2.0, "cache_read": 0.5, "cache_write_5m": 1.5, "cache_write_1h": 3.0}}}))
    custom = load_price_table(str(path))
    assert custom.version == "test-1" and custom.cost("m", U(input_tokens=1, output_tokens=1)).usd == 3.0


# ------------------------------------------------------------------ issue 8: every chat model, one rule

# LiteLLM v1.109.1 entries, copied by hand: (input, output, cache read, cache write) in $ per token.
LITELLM = {
    "deepseek-reasoner": (2.8e-07, 4.2e-07, 2.8e-08, None),
    "mistral/mistral-large-latest": (5e-07, 1.5e-06, 5e-08, None),
    "xai/grok-4.3": (1.25e-06, 2.5e-06, 2e-07, None),
    "groq/openai/gpt-oss-120b": (1.5e-07, 6e-07, 7.5e-08, None),
    "minimax/MiniMax-M2": (3e-07, 1.2e-06, 3e-08, 3.75e-07),
    "dashscope/qwen-max": (1.6e-06, 6.4e-06, None, None),
    "us.anthropic.claude-sonnet-4-5-20250929-v1:0": (3.3e-06, 1.65e-05, 3.3e-07, 4.125e-06),
}


@pytest.mark.parametrize("name, listed", [
    ("deepseek-reasoner", "deepseek-reasoner"), ("deepseek/deepseek-reasoner", "deepseek-reasoner"),
    ("DeepSeek-Reasoner", "deepseek-reasoner"), ("mistral-large-latest", "mistral/mistral-large-latest"),
    ("mistral/mistral-large-latest", "mistral/mistral-large-latest"), ("grok-4.3", "xai/grok-4.3"),
    ("xai/grok-4.3", "xai/grok-4.3"), ("groq/openai/gpt-oss-120b", "groq/openai/gpt-oss-120b"),
    ("MiniMax-M2", "minimax/MiniMax-M2"), ("qwen-max", "dashscope/qwen-max"),
    ("bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
])
def test_other_providers_are_priced_with_and_without_prefix(table, name, listed):
    inp, out, read, write = LITELLM[listed]
    u = U(input_tokens=1000, output_tokens=100, cache_read_tokens=4000, cache_write_tokens=2000)
    # No listed cache price: cached tokens cost what input does (no invented discount).
    expected = 1000 * inp + 100 * out + 4000 * (read if read is not None else inp) + 2000 * (write or inp)
    assert table.cost(name, u).usd == pytest.approx(expected, rel=1e-12)


def test_deepseek_call_costs_what_deepseek_bills(table):
    usage = Usage.from_openai({"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500,
                               "prompt_cache_hit_tokens": 800, "prompt_cache_miss_tokens": 200})
    # 200 uncached at $0.28/M, 800 cached at $0.028/M, 500 out at $0.42/M.
    assert table.cost("deepseek-reasoner", usage).usd == pytest.approx(0.0000560 + 0.0000224 + 0.00021, rel=1e-12)


@pytest.mark.parametrize("name", ["acme/no-such-model", "deepseek/no-such-model", "gpt-oss-120b-but-not"])
def test_models_the_table_does_not_know_stay_unpriced(table, name):
    assert table.cost(name, U(input_tokens=1000, output_tokens=10)) == Cost(None, "unknown_model")


def test_deepseek_cache_hit_tokens_are_split_off_input():
    usage = Usage.from_openai({"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050,
                               "prompt_cache_hit_tokens": 800, "prompt_cache_miss_tokens": 200})
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (200, 800, 50)


def test_openai_cache_write_tokens_are_kept_and_priced_as_writes(table):
    usage = Usage.from_openai({"input_tokens": 10_000, "output_tokens": 100, "total_tokens": 10_100,
                               "input_tokens_details": {"cached_tokens": 3000, "cache_write_tokens": 5000}})
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (2000, 3000, 5000)
    # MiniMax lists a write price ($0.375/M); 2000 in at $0.30/M, 3000 read at $0.03/M, 100 out at $1.20/M.
    assert table.cost("MiniMax-M2", usage).usd == pytest.approx(0.0006 + 0.00009 + 0.001875 + 0.00012, rel=1e-12)
    # gpt-5 lists none: the written tokens cost what input does, as OpenAI bills them ($1.25/M).
    assert table.cost("gpt-5", usage).usd == pytest.approx(7000 * 1.25e-06 + 3000 * 1.25e-07 + 100 * 1e-05, rel=1e-12)


def test_generator_takes_the_makers_price_and_never_guesses_between_resellers(tmp_path):
    gen = runpy.run_path(str(ROOT / "scripts" / "gen_prices.py"))
    chat = {"mode": "chat", "input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06}
    source = tmp_path / "litellm.json"
    source.write_text(json.dumps({
        "deepseek/deepseek-chat": {**chat, "litellm_provider": "deepseek"},
        "together_ai/deepseek-ai/deepseek-chat": {**chat, "litellm_provider": "together_ai",
                                                  "input_cost_per_token": 9e-06},
        "hostA/llama-x": {**chat, "litellm_provider": "hostA"},
        "hostB/llama-x": {**chat, "litellm_provider": "hostB", "output_cost_per_token": 3e-06},
        "hostA/only-here": {**chat, "litellm_provider": "hostA"},
        "ollama/free-looking": {**chat, "litellm_provider": "ollama", "input_cost_per_token": 0,
                                "output_cost_per_token": 0},
    }))
    doc = gen["generate"](source, "test", "2026-01-01", [])
    models = doc["models"]
    assert models["deepseek-chat"]["input"] == 1e-06
    assert models["together_ai/deepseek-ai/deepseek-chat"]["input"] == 9e-06
    assert "llama-x" not in models and models["hostb/llama-x"]["output"] == 3e-06  # they disagree: no bare name
    assert models["only-here"]["input"] == 1e-06
    assert "free-looking" not in models and "ollama/free-looking" not in models  # 0 means unknown to LiteLLM


_FIGURES = ("input", "output", "cache_read", "cache_write_5m", "cache_write_1h")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(_FIGURES + ("input_above", "threshold_tokens")),
       good=st.one_of(st.integers(0, 10**6), st.floats(0, 1e6, allow_nan=False, allow_infinity=False)),
       bad=st.sampled_from([-1, -0.5, True, False, "1", [1]]),  # NaN and infinities: see the overrides' test
       is_bad=st.booleans())
def test_a_price_table_with_a_figure_that_is_not_a_finite_non_negative_number_is_refused(
        tmp_path, field, good, bad, is_bad):
    entry: dict = {name: 1e-6 for name in _FIGURES}
    entry[field] = bad if is_bad else good
    path = tmp_path / f"prices-{field}-{is_bad}-{abs(hash(repr(entry[field])))}.json"
    path.write_text(json.dumps({"version": "t", "models": {"m-1": entry}}))
    if is_bad:
        with pytest.raises(ValueError, match=rf"price for 'm-1': {field} must be a non-negative number"):
            load_price_table(str(path))
    else:
        assert load_price_table(str(path)).get("m-1") == ModelPrice(**entry)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), -2e-6, True])
def test_a_price_override_that_is_not_a_finite_non_negative_number_is_refused(bad):
    with pytest.raises(ValueError, match=r"price for 'claude-sonnet-4-5': input must be a non-negative number"):
        load_price_table().with_overrides({"claude-sonnet-4-5": {"input": bad}})
    assert load_price_table().with_overrides({"claude-sonnet-4-5": {"input": 2e-6}}).get(
        "claude-sonnet-4-5").input == 2e-6
