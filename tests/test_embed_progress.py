"""Issue 34: `reasonlog embed` and the server's background pass say how the embedding goes (texts done of the total,
the rate, the time left), and the backlog is embedded shortest text first within each window read.

Vectors come from a local OpenAI-shaped server (tests/embeddings_server.py)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

from embeddings_server import EmbeddingsServer
from hypothesis import given
from hypothesis import strategies as st
from test_hybrid_phrase import record_texts

import reasonlog
from reasonlog.semantic import HttpEmbedder
from reasonlog.semantic.backlog import Ticker, embed_backlog, progress_line
from reasonlog.server.embedding import BackgroundEmbedding

LINE = re.compile(r"^embedding: (?P<done>[\d,]+) / (?P<total>[\d,]+) texts \((?P<share>\d+) %\), [\d,]+\.\d a second"
                  r"(, about \d+ (s|min \d\d s|h \d\d min) left)?$")


def test_embed_without_a_terminal_prints_a_progress_line_after_each_batch(tmp_path):
    db = tmp_path / "p.db"
    record_texts(db, [f"question {n}: what does file {n} hold?" for n in range(130)])
    with EmbeddingsServer() as server:
        env = {**os.environ, "REASONLOG_EMBEDDINGS_URL": server.url, "REASONLOG_EMBEDDINGS_MODEL": "bow"}
        done = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "embed", "--progress-every", "0",
                               "--workers", "1"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == f"embedding with bow@{server.url}"
    progress = [LINE.match(line) for line in lines[1:]]
    assert all(progress), lines
    assert [(m["done"], m["total"], m["share"]) for m in progress if m] == [("64", "130", "49"), ("128", "130", "98"),
                                                                            ("130", "130", "100")]
    assert "left" in lines[1] and "left" not in lines[-1]
    assert done.stdout.startswith("130 new units; 130 texts embedded in ")


def test_embed_as_json_prints_no_progress_lines(tmp_path):
    db = tmp_path / "j.db"
    record_texts(db, [f"note {n}" for n in range(70)])
    with EmbeddingsServer() as server:
        env = {**os.environ, "REASONLOG_EMBEDDINGS_URL": server.url, "REASONLOG_EMBEDDINGS_MODEL": "bow"}
        done = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "embed", "--json",
                               "--progress-every", "0"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == f"embedding with bow@{server.url}\n"


def test_a_ticker_says_a_line_at_most_every_period_and_one_at_the_end():
    now = [100.0]
    said: list[str] = []
    ticker = Ticker(said.append, every_s=10.0, clock=lambda: now[0])
    ticker("cut", 5, 5)
    for done, at in ((64, 104.0), (128, 110.5), (192, 115.0), (256, 121.0), (300, 122.0)):
        now[0] = at
        ticker("embed", done, 300)
    assert said == ["embedding: 128 / 300 texts (42 %), 12.2 a second, about 14 s left",
                    "embedding: 256 / 300 texts (85 %), 12.2 a second, about 4 s left",
                    "embedding: 300 / 300 texts (100 %), 13.6 a second"]


def test_a_short_pass_says_nothing():
    said: list[str] = []
    ticker = Ticker(said.append, every_s=30.0)
    ticker("embed", 3, 3)
    assert said == []


@given(done=st.integers(0, 10**6), more=st.integers(0, 10**6), seconds=st.floats(0.001, 10**6))
def test_every_progress_line_names_done_total_share_and_rate(done, more, seconds):
    total = done + more
    line = progress_line(done, total, seconds)
    match = LINE.match(line) if total else re.match(r"^embedding: 0 / 0 texts, 0\.0 a second$", line)
    assert match, line
    if total:
        assert int(match["done"].replace(",", "")) == done and int(match["total"].replace(",", "")) == total
        assert int(match["share"]) == 100 * done // total
        assert ("left" in line) == (done < total and done > 0)


def test_the_server_background_pass_says_how_it_goes(tmp_path):
    db = tmp_path / "s.db"
    record_texts(db, [f"log line {n} of the deploy" for n in range(100)])
    said: list[str] = []
    with EmbeddingsServer() as server:
        store = reasonlog.open_store(db)
        try:
            background = BackgroundEmbedding(lambda: store, lambda: HttpEmbedder(server.url, "bow"), every_s=60,
                                             progress_every_s=0, say=said.append)
            background.run_once()
        finally:
            store.close()
    assert [line.split(" texts")[0] for line in said] == ["reasonlog background embedding: 64 / 100",
                                                          "reasonlog background embedding: 100 / 100"]


def test_each_window_of_the_backlog_is_embedded_shortest_text_first(tmp_path):
    db = tmp_path / "w.db"
    texts = [("word " * n).strip() + f" {n}" for n in (9, 2, 7, 1, 5, 3, 8, 4, 6, 10)]
    record_texts(db, texts)
    with EmbeddingsServer() as server:
        store = reasonlog.open_store(db)
        try:
            embed_backlog(store, HttpEmbedder(server.url, "bow"), batch=4)
        finally:
            store.close()
        asked = server.requests
    assert [len(r) for r in asked] == [4, 4, 2]
    assert [t for r in asked for t in r] == sorted(texts, key=len)
