"""What the trigram index is given for a text (`index_form`): lowercased, plus the bigrams of its CJK runs. A text
that is not ASCII is first scanned for one character of a CJK run, and only a text that holds one is searched for
runs (issue 34: Claude Code's tool output holds `→` on every line, and the run regex read all of it)."""
from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlog.store.search import SENTINEL, index_form

_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]{2,}")


def _every_text_searched(text: str) -> str:
    """The general path: the run regex over every text that is not ASCII."""
    low = text.lower()
    runs = [] if low.isascii() else _RUN.findall(low)
    if not runs:
        return low
    return low + "\n" + "".join(run[i:i + 2] + SENTINEL for run in runs for i in range(len(run) - 1))


# Each CJK range's first and last characters and their neighbours outside it, beside ASCII, `→`, accents, capitals
# whose lowercase is not ASCII, and the sentinel itself.
EDGES = "\u303f\u3040\u30ff\u3100\u33ff\u3400\u4dbf\u4dc0\u4dff\u4e00\u9fff\ua000\uabff\uac00\ud7af\ud7b0\uf8ff" \
        "\uf900\ufaff\ufb00"
ALPHABET = st.one_of(st.sampled_from(list(EDGES + "→éÄẞİΣ\ue000日本語한국어カタカナ aZ\n")), st.characters())


@settings(max_examples=500, deadline=None)
@given(text=st.text(ALPHABET, max_size=40))
def test_a_text_is_indexed_as_when_every_text_was_searched_for_runs(text):
    assert index_form(text) == _every_text_searched(text)


def test_a_run_of_each_range_alone_is_indexed_with_its_bigram():
    for first, last in re.findall(r"(\\u....)-(\\u....)", _RUN.pattern):
        for a, b in ((first, first), (last, last), (first, last)):
            pair = (a + b).encode().decode("unicode_escape")
            assert index_form("→ " + pair) == "→ " + pair + "\n" + pair + SENTINEL, pair


def test_named_cases():
    assert index_form("Read →  1→import os") == "read →  1→import os"  # no CJK: the text lowercased alone
    assert index_form("→ 日") == "→ 日"  # one CJK character is no run
    assert index_form("Tokyo 東京都 → ok") == "tokyo 東京都 → ok\n東京" + SENTINEL + "京都" + SENTINEL
