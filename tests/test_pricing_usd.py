"""A cost as the writer computes it for every call it stores (`PriceTable.priced`, `ModelPrice.usd` reading the
counters one by one) is the cost the general rule gives, to the last bit (issue 34)."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlog.model import Usage
from reasonlog.pricing import UNKNOWN_MODEL, Cost, ModelPrice, PriceTable, load_price_table

_BASE = ("input", "output", "cache_read", "cache_write_5m", "cache_write_1h")
_COUNTERS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cache_write_1h_tokens")


def reference_usd(price: ModelPrice, usage) -> float:
    """The rule as it was written before: every counter (absent or None is 0), the tier by the whole prompt, each
    token priced once."""
    n = [int(getattr(usage, name, 0) or 0) for name in _COUNTERS]
    prompt = n[0] + n[2] + n[3]
    p = price
    if price.threshold_tokens is not None and prompt > price.threshold_tokens:
        above = {f: getattr(price, f + "_above") for f in _BASE}
        p = replace(price, **{f: v for f, v in above.items() if v is not None}, threshold_tokens=None)
    write_1h = min(n[4], n[3])
    return (n[0] * p.input + n[2] * p.cache_read + n[1] * p.output
            + (n[3] - write_1h) * p.cache_write_5m + write_1h * p.cache_write_1h)


FIGURES = st.floats(0, 1e-3, allow_nan=False, allow_infinity=False)
COUNTS = st.one_of(st.none(), st.integers(0, 2_000_000))


@st.composite
def prices(draw) -> ModelPrice:
    tiered = draw(st.booleans())
    return ModelPrice(*(draw(FIGURES) for _ in _BASE), threshold_tokens=draw(st.integers(0, 300_000)) if tiered
                      else None, **{f + "_above": draw(st.one_of(st.none(), FIGURES)) if tiered else None
                                    for f in _BASE})


@settings(max_examples=300, deadline=None)
@given(prices(), st.lists(COUNTS, min_size=5, max_size=5), st.sets(st.sampled_from(_COUNTERS)))
def test_usd_equals_the_general_rule(price, counts, absent):
    usage = SimpleNamespace(**{name: n for name, n in zip(_COUNTERS, counts, strict=True) if name not in absent})
    assert price.usd(usage) == reference_usd(price, usage)
    table = PriceTable("v9", {"m": price})
    assert table.priced("m", usage) == (reference_usd(price, usage), "computed@v9")
    assert table.cost("m", usage) == Cost(reference_usd(price, usage), "computed@v9")


def test_a_priced_call_and_an_unknown_model():
    table = load_price_table()
    usage = Usage(input_tokens=1_000, output_tokens=200, cache_read_tokens=5_000, cache_write_tokens=300)
    usd, source = table.priced("claude-sonnet-4-5", usage)
    assert (usd, source) == (table.cost("claude-sonnet-4-5", usage).usd, f"computed@{table.version}")
    # 1,000 × $3/M + 5,000 × $0.30/M + 200 × $15/M + 300 × $3.75/M
    assert round(usd, 10) == round(0.003 + 0.0015 + 0.003 + 0.001125, 10)
    assert table.priced("no-such-model-anywhere", usage) == (None, UNKNOWN_MODEL)


_NAMES = ["claude-haiku-4-5", "claude-haiku-4-5-20251001", "CLAUDE-3.7-SONNET", "openrouter/anthropic/claude-3-haiku",
          "gpt-5-mini", "claude-sonnet-4-5@20250929", "no-such-model", "", "mistral-large"]


@settings(max_examples=200, deadline=None)
@given(asked=st.lists(st.tuples(st.sampled_from(_NAMES), st.integers(0, 10**6), st.integers(0, 10**6)), max_size=8),
       overridden=st.booleans())
def test_a_table_prices_each_model_as_its_lookup_says_however_often_it_is_asked(asked, overridden):
    """`priced` keeps each model's price once found: every answer is the one `get` gives, asked first or again."""
    table = load_price_table()
    if overridden:
        table = table.with_overrides({"claude-haiku-4-5": {"input": 1e-6, "output": 2e-6}})
    for model, input_tokens, output_tokens in asked:
        usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
        price = table.get(model)
        expected = (None, UNKNOWN_MODEL) if price is None else (price.usd(usage), f"computed@{table.version}")
        assert table.priced(model, usage) == expected
