"""Importers and exporters, one module per format. Importers live in `io/formats/` (see io/importing.py)."""
from __future__ import annotations

TYPE_CHECKING = False  # `typing` costs more than a re-sync answered before click (cli/quick_import.py)
if TYPE_CHECKING:
    from typing import Any

# Detection asks importers in this order (the most specific first); formats not named here come after.
DETECTION_ORDER = ("reasonlog-jsonl", "exchange-jsonl", "qwen", "claude-code", "codex", "gemini", "claude-agent-sdk",
                   "trading-log", "game-log", "interactions")

# The built-in formats whose files are each read as themselves, with nothing done before the import's check of its
# row (no tree read through a file: `signature`; no `import_whole`): a file of one of these that an import read to its
# end and that did not change since is unchanged, whatever else is installed (a plug-in never replaces a built-in
# format). cli/quick_import.py answers a re-import with this alone; tests/test_quick_import.py holds it to the
# importers themselves.
FILE_FORMATS = frozenset({"aider", "amp", "claude-agent-sdk", "claude-code", "codex", "copilot", "cursor",
                          "exchange-jsonl", "gemini", "interactions", "kimi", "pi", "qwen", "trading-log"})


def builtin_importers() -> list[Any]:
    """The importers shipped in `reasonlog.io.formats`: each module there exposes `importer`."""
    import importlib
    import pkgutil

    from . import formats

    found = []
    for info in pkgutil.iter_modules(formats.__path__):
        module = importlib.import_module(f"{formats.__name__}.{info.name}")
        imp = getattr(module, "importer", None)
        if imp is not None:
            found.append(imp)
    rank = {name: i for i, name in enumerate(DETECTION_ORDER)}
    return sorted(found, key=lambda imp: (rank.get(imp.name, len(rank)), imp.name))
