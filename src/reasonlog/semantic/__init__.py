"""Search by meaning (docs/search.md): embedders, the embedding backlog, and search in four modes.

Nothing here is imported by `import reasonlog` or by a recorder; the packages of the `semantic` extra
(sentence-transformers, numpy, sqlite-vec, sqlean.py) are imported only when something is embedded or ranked.
"""
from __future__ import annotations

from .embedders import (
    EXTRA,
    Embedder,
    EmbeddingFailed,
    HttpEmbedder,
    LocalEmbedder,
    SemanticUnavailable,
    choose_embedder,
    missing_packages,
)

__all__ = ["EXTRA", "Embedder", "EmbeddingFailed", "HttpEmbedder", "LocalEmbedder", "SemanticUnavailable",
           "choose_embedder", "missing_packages"]
