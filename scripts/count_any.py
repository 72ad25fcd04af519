#!/usr/bin/env python3
"""Count the loose types in the signatures at reasonlog's seams (issue 21: "the count of `Any` in signatures at
the seams is reported before and after").

    python scripts/count_any.py                          # the working tree, per module
    python scripts/count_any.py --rev 082c14f --rev HEAD  # commits side by side (read through git)
    python scripts/count_any.py --list                   # every counted place, file:line

A place counts once for each parameter or return annotation that contains `Any` (`Any`, `typing.Any`,
`dict[str, Any]`, a string annotation naming it) and for each parameter with no annotation at all (but `self`
and `cls`), in every `def` and `async def` of the seam's modules (methods and nested functions included;
a missing return annotation is not counted). The seams: the store protocol and its parts, the sinks and how
one is opened, the writer, the SQL stores, the import loop and the importer seam, and providers/.
"""
from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "src/reasonlog"
SEAMS: dict[str, tuple[str, ...]] = {
    "store protocol": ("store/__init__.py",),
    "sinks": ("capture/sinks.py", "capture/http_sink.py", "capture/opening.py"),
    "writer": ("capture/writer.py",),
    "SQL store": ("store/sql.py", "store/sqlite.py", "store/postgres.py"),
    "import loop and importer seam": ("io/importing.py", "io/importer.py"),
    "providers": ("providers/",),
}
UNANNOTATED_OK = frozenset({"self", "cls"})


@dataclass
class Count:
    any: list[str] = field(default_factory=list)      # places whose annotation contains Any
    bare: list[str] = field(default_factory=list)     # parameters without an annotation

    @property
    def total(self) -> int:
        return len(self.any) + len(self.bare)


def mentions_any(node: ast.expr | None) -> bool:
    """Whether an annotation names `Any` anywhere in it (a string annotation is parsed first)."""
    if node is None:
        return False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id == "Any":
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "Any":
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            try:
                if mentions_any(ast.parse(sub.value, mode="eval").body):
                    return True
            except SyntaxError:
                continue
    return False


def count_source(source: str, name: str) -> Count:
    """The loose places in the signatures of one module's functions."""
    found = Count()
    for fn in ast.walk(ast.parse(source, filename=name)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = fn.args
        params = [*a.posonlyargs, *a.args, *([a.vararg] if a.vararg else []), *a.kwonlyargs,
                  *([a.kwarg] if a.kwarg else [])]
        for p in params:
            where = f"{name}:{fn.lineno} {fn.name}({p.arg})"
            if p.annotation is None:
                if p.arg not in UNANNOTATED_OK:
                    found.bare.append(where)
            elif mentions_any(p.annotation):
                found.any.append(f"{where}: {ast.unparse(p.annotation)}")
        if mentions_any(fn.returns):
            found.any.append(f"{name}:{fn.lineno} {fn.name} -> {ast.unparse(fn.returns)}")  # type: ignore[arg-type]
    return found


class Tree:
    """The package's files in the working tree, or at a commit (read through git, no checkout)."""

    def __init__(self, rev: str | None):
        self.rev = rev

    def files(self, entry: str) -> list[str]:
        """The modules an entry names: a file, or every .py of a folder (ending in /); none if absent."""
        path = f"{PACKAGE}/{entry}"
        if self.rev is None:
            if entry.endswith("/"):
                return sorted(str(p.relative_to(ROOT)) for p in (ROOT / path).glob("*.py"))
            return [path] if (ROOT / path).is_file() else []
        listed = _git("ls-tree", "-r", "--name-only", self.rev, "--", path).split()
        return sorted(p for p in listed if p.endswith(".py") and (entry.endswith("/") or p == path))

    def read(self, path: str) -> str:
        return (ROOT / path).read_text() if self.rev is None else _git("show", f"{self.rev}:{path}")


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout


def measure(rev: str | None) -> dict[str, dict[str, Count]]:
    """Seam -> module -> its count."""
    tree = Tree(rev)
    out: dict[str, dict[str, Count]] = {}
    for seam, entries in SEAMS.items():
        out[seam] = {}
        for entry in entries:
            for path in tree.files(entry):
                out[seam][path.removeprefix(PACKAGE + "/")] = count_source(tree.read(path), path)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", action="append", help="a commit to measure (repeat for several); default: the "
                                                       "working tree")
    parser.add_argument("--list", action="store_true", help="print every counted place")
    args = parser.parse_args(argv)
    revs: list[str | None] = list(args.rev) if args.rev else [None]
    results = [measure(rev) for rev in revs]
    names = [rev or "working tree" for rev in revs]
    modules = sorted({(seam, m) for r in results for seam in r for m in r[seam]},
                     key=lambda sm: (list(SEAMS).index(sm[0]), sm[1]))
    width = max(len(m) for _, m in modules) + 2
    print(f"{'module':<{width}}" + "".join(f"{n[:18]:>20}" for n in names))
    print(f"{'':<{width}}" + "".join(f"{'Any + bare = total':>20}" for _ in names))
    for seam in SEAMS:
        print(f"[{seam}]")
        for s, m in modules:
            if s == seam:
                cells = [r[seam].get(m) for r in results]
                print(f"  {m:<{width - 2}}" + "".join(
                    f"{'absent':>20}" if c is None else f"{f'{len(c.any)} + {len(c.bare)} = {c.total}':>20}"
                    for c in cells))
    totals = [(sum(len(c.any) for d in r.values() for c in d.values()),
               sum(len(c.bare) for d in r.values() for c in d.values())) for r in results]
    print(f"{'all seams':<{width}}" + "".join(f"{f'{a} + {b} = {a + b}':>20}" for a, b in totals))
    if len(results) > 1:  # like for like: only the modules every column has
        common = [(s, m) for s, m in modules if all(m in r[s] for r in results)]
        same = [(sum(len(r[s][m].any) for s, m in common), sum(len(r[s][m].bare) for s, m in common))
                for r in results]
        print(f"{f'in the {len(common)} modules all have':<{width}}"
              + "".join(f"{f'{a} + {b} = {a + b}':>20}" for a, b in same))
    if args.list:
        for name, r in zip(names, results, strict=True):
            print(f"\n# {name}")
            for d in r.values():
                for c in d.values():
                    for place in [*c.any, *c.bare]:
                        print(place)
    return 0


if __name__ == "__main__":
    sys.exit(main())
