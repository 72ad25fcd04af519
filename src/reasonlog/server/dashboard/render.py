"""Turning recorded text into HTML safely, and the template environment every page (and the HTML export) uses.

Every recorded text is untrusted: templates autoescape, and Markdown is rendered by markdown-it with raw HTML
off and links kept only when they are http, https or mailto (a `javascript:` link stays text)."""
from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

HERE = Path(__file__).parent
SAFE_SCHEMES = ("http:", "https:", "mailto:")


@lru_cache(maxsize=1)
def _markdown():
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.validateLink = lambda url: url.strip().lower().startswith(SAFE_SCHEMES)  # type: ignore[method-assign]
    md.disable("image")  # a recorded text never makes the page load anything
    return md


class RenderedTexts:
    """HTML already made from Markdown, by its text, within `budget` bytes (the least recently shown leaves first).

    A session page shows hundreds of assistant messages and markdown-it takes about half of its time; a page seen
    again (paging, reloading, another reader) then renders none of them. Recorded texts never change, so an entry
    is never stale. Texts longer than `largest` are rendered each time: a few of them would fill the budget."""

    def __init__(self, budget: int = 16 << 20, largest: int = 256 << 10) -> None:
        self.budget, self.largest, self.bytes_held = budget, largest, 0
        self._html: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()  # the server renders pages on several threads

    def get(self, text: str) -> str | None:
        with self._lock:
            html = self._html.get(text)
            if html is not None:
                self._html.move_to_end(text)
            return html

    def put(self, text: str, html: str) -> None:
        if len(text) > self.largest:
            return
        with self._lock:
            if text not in self._html:
                self._html[text] = html
                self.bytes_held += _size(text, html)
            while self.bytes_held > self.budget:
                old, old_html = self._html.popitem(last=False)
                self.bytes_held -= _size(old, old_html)


def _size(text: str, html: str) -> int:
    return sys.getsizeof(text) + sys.getsizeof(html) + 100  # 100: the dictionary's slot and links


RENDERED = RenderedTexts()


def markdown(text: Any) -> Markup:
    """Sanitised HTML of Markdown text: no raw HTML, only http(s)/mailto links, no images."""
    text = str(text or "")
    html = RENDERED.get(text)
    if html is None:
        html = _markdown().render(text).replace("<a href=", '<a rel="noopener noreferrer nofollow" href=')
        RENDERED.put(text, html)
    return Markup(html)


def pretty(value: Any) -> str:
    """JSON for reading: indented, keys in order; text stays as it is."""
    if isinstance(value, str):
        return value
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS,
                        default=str).decode()


def number(value: Any) -> str:
    return "-" if value is None else f"{value:,}"


def usd(value: Any) -> str:
    if value is None:
        return "—"
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def ms(value: Any) -> str:
    """A duration in milliseconds as the CLI writes it: `10,733 ms`; "" when it was not recorded."""
    return "" if value is None else f"{value:,.0f} ms"


def window_change(w: dict) -> str:
    """How a call's context changed since the previous call: `1 new in context · 2 trimmed · tools changed`."""
    said = [f"{w.get('added') or 0:,} new in context"]
    said += [f"{w[k]:,} {name}" for k, name in (("trimmed", "trimmed"), ("edited", "edited"),
                                                  ("held", "held by the server")) if w.get(k)]
    said += [name for k, name in (("system_changed", "system prompt changed"), ("tools_changed", "tools changed"))
             if w.get(k)]
    return " · ".join(said)


def file_name(path: Any) -> str:
    """A file by its folder and name (`orch-42/DEL-INIT_approach.md`), not the whole path of the machine it is on."""
    return "/".join(Path(str(path)).parts[-2:])


def when(value: Any) -> str:
    return str(value or "")[:19].replace("T", " ")


def duration(start: Any, end: Any) -> str:
    try:
        seconds = (datetime.fromisoformat(str(end).replace("Z", "+00:00"))
                   - datetime.fromisoformat(str(start).replace("Z", "+00:00"))).total_seconds()
    except ValueError:
        return "-"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


_DICT_NAMES = frozenset(dir(dict))


class PageEnvironment(Environment):
    """Jinja's environment, reading `item.kind` of a dict as its key at once.

    Jinja tries the attribute first, and a dict has none: each of a long page's ~90,000 lookups raised and caught
    an AttributeError (a third of its rendering). A name that is a dict method (`items`, `get`) and a missing key
    still go Jinja's way, so every lookup answers as before."""

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is dict and attribute not in _DICT_NAMES:
            try:
                return obj[attribute]
            except KeyError:
                pass
        return super().getattr(obj, attribute)


@lru_cache(maxsize=1)
def environment() -> Environment:
    env = PageEnvironment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True),
                          trim_blocks=True, lstrip_blocks=True, auto_reload=False)  # no stat() per include
    env.filters.update(markdown=markdown, pretty=pretty, number=number, usd=usd, when=when, duration=duration, ms=ms,
                       window_change=window_change, file_name=file_name)
    return env


def page(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def stylesheet() -> Markup:
    """The dashboard's own stylesheet, for a page that inlines it: marked safe, since autoescaping would turn its
    quotes into entities, which a <style> element does not decode (the export rendered in the browser's default
    font). It is reasonlog's file, never recorded text, and cannot close the element."""
    css = (HERE / "static" / "app.css").read_text(encoding="utf-8")
    if "</" in css:
        raise ValueError("app.css: a stylesheet inlined in <style> must not contain '</'")
    return Markup(css)
