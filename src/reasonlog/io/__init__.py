"""Importers and exporters, one module per format. Importers live in `io/formats/` (see io/importing.py)."""
from __future__ import annotations

import importlib
import pkgutil
from typing import Any

# Detection asks importers in this order (the most specific first); formats not named here come after.
DETECTION_ORDER = ("reasonlog-jsonl", "exchange-jsonl", "qwen", "claude-code", "codex", "gemini", "claude-agent-sdk",
                   "trading-log", "game-log", "interactions")


def builtin_importers() -> list[Any]:
    """The importers shipped in `reasonlog.io.formats`: each module there exposes `importer`."""
    from . import formats

    found = []
    for info in pkgutil.iter_modules(formats.__path__):
        module = importlib.import_module(f"{formats.__name__}.{info.name}")
        imp = getattr(module, "importer", None)
        if imp is not None:
            found.append(imp)
    rank = {name: i for i, name in enumerate(DETECTION_ORDER)}
    return sorted(found, key=lambda imp: (rank.get(imp.name, len(rank)), imp.name))
