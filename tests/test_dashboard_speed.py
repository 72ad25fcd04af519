"""What keeps the dashboard's long pages fast (issue 20): Markdown rendered once per text, within a byte budget."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2 import Environment
from markdown_it import MarkdownIt

import reasonlog
from reasonlog.server.app import create_app
from reasonlog.server.dashboard import render
from reasonlog.store import open_store


def record_answers(db, answers: int) -> str:
    rec = reasonlog.Recorder(db, writer="sync")
    history: list = []
    with rec.session(agent="long") as s:
        for i in range(answers):
            history.append({"role": "user", "content": f"question {i}"})
            reply = {"role": "assistant", "content": [{"type": "text", "text": f"**answer {i}**\n\n- `run` {i}"}]}
            s.call(messages=list(history), response=reply, model="gpt-5")
            history.append(reply)
    rec.close()
    return s.id


def test_a_session_page_shown_again_renders_none_of_its_markdown_again(tmp_path, monkeypatch):
    session_id = record_answers(tmp_path / "t.db", 40)
    rendered: list[str] = []
    original = MarkdownIt.render

    def counting(self, text, env=None):
        rendered.append(text)
        return original(self, text, env)

    monkeypatch.setattr(MarkdownIt, "render", counting)
    client = TestClient(create_app(lambda: open_store(tmp_path / "t.db")))
    first = client.get(f"/sessions/{session_id}").text
    assert sorted(t for t in rendered if t.startswith("**answer")) == sorted(
        f"**answer {i}**\n\n- `run` {i}" for i in range(40))
    rendered.clear()
    again = client.get(f"/sessions/{session_id}").text
    assert rendered == []
    assert again == first
    assert "<strong>answer 39</strong>" in again and "<code>run</code> 39" in again


@pytest.mark.slow
def test_the_rendered_texts_stay_within_their_byte_budget_and_the_most_recent_stay():
    texts = render.RenderedTexts(budget=64 << 10, largest=4 << 10)
    for i in range(2000):
        texts.put(f"text {i} " + "x" * 200, f"<p>text {i}</p>")
    assert texts.bytes_held <= 64 << 10
    assert texts.get("text 1999 " + "x" * 200) == "<p>text 1999</p>"
    assert texts.get("text 0 " + "x" * 200) is None
    texts.put("y" * (5 << 10), "<p>long</p>")  # over `largest`: rendered each time, never held
    assert texts.get("y" * (5 << 10)) is None


MARKDOWNISH = st.lists(st.sampled_from([*"ab 1.-*_`[]()<>&\"'\n#>!:/\\", "javascript:", "http://x"]),
                       max_size=40).map("".join)


@pytest.mark.slow
@given(MARKDOWNISH)
@settings(max_examples=300, deadline=None)
def test_markdown_from_the_cache_is_what_markdown_it_made(text):
    render.RENDERED = render.RenderedTexts()  # empty: the first call renders
    fresh = str(render.markdown(text))
    assert str(render.markdown(text)) == fresh
    assert render.RENDERED.get(text) == fresh


@pytest.mark.slow
def test_templates_read_keys_dict_methods_and_missing_keys_as_plain_jinja_does():
    data = {"kind": "call", "items": "a key named like a method", "n": 0}
    source = ("{{ d.kind }}|{{ d.items is callable }}|{{ d.nothing is defined }}|{{ d.get('kind') }}|{{ d.n }}"
              "|{{ o.real }}|{% for k, v in d.items() %}{{ k }}{% endfor %}")
    plain = Environment(autoescape=True).from_string(source).render(d=data, o=3)
    ours = render.environment().from_string(source).render(d=data, o=3)
    assert ours == plain == "call|True|False|call|0|3|kinditemsn"
