"""Which importer reads which file of a folder: every file as itself, and every file passed over named with why.

A folder may hold several agents' data (a backup of a home folder, a folder of logs gathered from several
machines). The importers that recognise the folder take their files first, in detection order; then every JSONL,
JSON or SQLite file left over that no tree already read (a Cline task folder, an OpenCode storage) is detected as
itself, as it would be if it were named alone. A JSONL file that no importer reads is named in the report with why,
once (an agent's own, such as `~/.codex/history.jsonl`, too); a JSON file is not (agents keep settings and metadata
as JSON beside their logs). With `--format`, a folder is read as that format alone, and each of its candidate files
that is not of that format is named.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..model import Event
from .importer import BaseImporter, Checkpoint, Feed, FileImporter, Importer
from .scanning import first_values, walk
from .unchanged import unchanged

Planned = list[tuple[Path, Importer]]


@dataclass
class PassedOver(BaseImporter):
    """A file a folder's import does not read: the import names it, once (its row remembers it), with why."""

    reason: str
    name: str = "passed-over"
    description: str = "a file of the folder that no importer reads"
    incremental: bool = False

    def detect(self, path: Path) -> bool:
        return False

    def sources(self, path: Path) -> Iterator[Path]:
        yield path

    def read(self, feed: Feed) -> Iterator[Event | Checkpoint]:
        feed.skip(None, self.reason)
        yield feed.checkpoint(None, None)


def plan_as(path: Path, imp: Importer) -> Planned:
    """`path` read as `imp`'s format: its sources, and (a folder) each candidate file that is not of it, named."""
    out: Planned = [(f, imp) for f in imp.sources(path)]
    if path.is_dir() and isinstance(imp, FileImporter):
        taken = {f for f, _ in out}
        out += [(p, PassedOver(f"not read as {imp.name}: {_why(p, imp.name)}"))
                for p in imp.candidates(path) if p not in taken and p.is_file()]
    return out


def plan_folder(folder: Path, known: dict[str, Importer], choose) -> Planned:
    """Every file under `folder` with the importer that reads it (see the module's docstring); `choose(file)` is
    the importer that recognises a file named alone (None: none does)."""
    out: Planned = []
    taken: set[Path] = set()
    trees: list[Path] = []  # folders a tree format read whole
    for imp in known.values():
        try:
            if not imp.detect(folder):
                continue
            files = [f for f in imp.sources(folder) if f not in taken]
        except (OSError, LookupError, TypeError, ValueError, AttributeError):
            continue  # (a format's guess that failed on what it sniffed: not its folder)
        for f in files:  # a plain file goes to the importer that recognises it alone (Qwen's chats look like
            tree = _is_tree(imp, f)  # Claude Code's transcripts to Claude Code's folder sniffing, not to Qwen's)
            out.append((f, imp if tree else choose(f) or imp))
            trees += [_tree_root(imp, f)] if tree else []
        taken.update(files)
    for p in walk(folder, "*"):
        if p in taken or p.suffix not in (".jsonl", ".json", ".db"):
            continue
        if any(t in p.parents for t in trees) or any((p.parent / name) in taken for name in _BESIDE):
            continue  # read with the tree, or a file another one is read with
        imp = choose(p)
        if imp is not None:
            files = [f for f in imp.sources(p) if f not in taken]  # (a file of a tree: the tree's anchor)
            roots = [_tree_root(imp, f) for f in files if _is_tree(imp, f)]
            files += [f for root in roots for f in _sources(imp, root) if f not in taken and f not in files]
            out += [(f, imp) for f in files]
            taken.update([p, *files])
            trees += roots
        elif p.suffix == ".jsonl":
            out.append((p, PassedOver(f"no importer recognises it: {_why(p, None)}")))
    return out


def plan_unchanged(folder: Path, known: dict[str, Importer], rows: dict[str, dict]) -> Planned:
    """`folder`'s files with the importers that read them, when an import read every one to its end as it is now
    (its `import_files` row, by resolved path, has its size and change time): what `plan_folder` would give, but
    with nothing sniffed. Empty (plan the folder) when one is new, changed, read short of its end, read by a
    format not known now or as a tree, or reached through a link: every such file is planned as usual."""
    found = unchanged(str(folder), rows, lambda fmt, path: _file_importer(known.get(fmt), Path(path)))
    return sorted(((Path(p), imp) for p, imp in found or ()), key=lambda planned: planned[0].parts)


def _file_importer(imp: Importer | None, path: Path) -> Importer | None:
    """`imp` when it reads `path` as a file of its own (not a tree read through it)."""
    return None if imp is None or _is_tree(imp, path) else imp


# Files whose companions are read with them, not alone (Kimi's `wire.jsonl` with `context.jsonl` beside it).
_BESIDE = ("wire.jsonl",)


def _is_tree(imp: Importer, source: Path) -> bool:
    try:
        return imp.signature(source) is not None
    except OSError:
        return False


def _sources(imp: Importer, folder: Path) -> list[Path]:
    """The sources of a tree format's folder (the other sessions of a storage one session file was found in)."""
    try:
        return list(imp.sources(folder)) if folder.is_dir() else []
    except (OSError, LookupError, TypeError, ValueError, AttributeError):
        return []


def _tree_root(imp: Importer, source: Path) -> Path:
    """The folder a tree format reads through `source` (its files are not sniffed one by one): the importer's
    `tree_root(source)` where it has one (OpenCode's storage), else the source's folder."""
    root = getattr(imp, "tree_root", None)
    return root(source) if callable(root) else source.parent


def _why(path: Path, fmt: str | None) -> str:
    """What the start of a file that was not recognised holds, in a few words."""
    first = first_values(path, 1)
    if not first:
        return "its first line is not a JSON record" if path.stat().st_size else "it is empty"
    value = first[0]
    if not isinstance(value, dict):
        return "its first record is not a JSON object"
    keys = ", ".join(sorted(map(str, value))[:6])
    expected = f"one that {fmt} writes" if fmt else "of a format reasonlog reads (reasonlog import --list-formats)"
    return f"its first record (keys {keys}) is not {expected}"
