"""The usage page's bar charts (issue 25 item 5): every label is drawn whole inside its chart, or shortened in its
middle with its bar's tooltip naming it whole; values are written as text."""
from __future__ import annotations

from html.parser import HTMLParser

from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlog.server.dashboard.charts import CHAR_PX, LONGEST, bars


class Chart(HTMLParser):
    def __init__(self, html: str) -> None:
        super().__init__()
        self.labels: list[tuple[float, str]] = []  # (x of the label's right end, its text)
        self.tooltips: list[str] = []
        self._in: tuple[str, float] | None = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "text" and a.get("class") == "label":
            self._in = ("label", float(a["x"] or 0))
        elif tag == "title":
            self._in = ("title", 0.0)

    def handle_data(self, data):
        if self._in and self._in[0] == "label":
            self.labels.append((self._in[1], data))
        elif self._in:
            self.tooltips.append(data)
        self._in = None


def test_a_long_model_name_is_drawn_whole_and_a_longer_one_shortened_in_its_middle():
    chart = Chart(str(bars([("claude-haiku-4-5-20251001", 3.0),
                            ("openrouter/anthropic/claude-3.5-sonnet-20240620:beta", 1.0)], "$")))
    assert [text for _, text in chart.labels] == ["claude-haiku-4-5-20251001", "openrouter/anthr…net-20240620:beta"]
    assert chart.tooltips == ["claude-haiku-4-5-20251001: $3.00",
                              "openrouter/anthropic/claude-3.5-sonnet-20240620:beta: $1.00"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=80), st.floats(0, 1e9)), min_size=1, max_size=12))
def test_every_label_fits_left_of_its_bars(rows):
    chart = Chart(str(bars(rows)))
    assert len(chart.labels) == len(rows)
    for (right, text), (label, _) in zip(chart.labels, rows, strict=True):
        assert len(text) <= LONGEST and right - len(text) * CHAR_PX >= 0  # starts inside the chart
        assert text == label if len(label) <= LONGEST else text.count("…") >= 1


def test_an_unpriced_cost_is_a_dash_with_no_bar_never_a_zero():
    html = str(bars([("gpt-5", 0.5), ("local-llama", None), ("claude-opus-4-5", 2.0)], "$"))
    chart = Chart(html)
    assert [text for _, text in chart.labels] == ["gpt-5", "local-llama", "claude-opus-4-5"]
    assert chart.tooltips == ["gpt-5: $0.5000", "local-llama: not priced", "claude-opus-4-5: $2.00"]
    assert html.count("<rect") == 2 and "$0.0000" not in html and html.count("—</text>") == 1
