"""The layers of docs/architecture.md hold in the code: a module imports only its own layer and layers to its left
(issue 21 item 9), and the server and the CLI hold no SQL.

Every import counts, those inside functions too (a lazy import is still a dependency)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import reasonlog

ROOT = Path(reasonlog.__file__).parent
LAYERS = (
    {"wire"},  # the shapes that leave the process, their rules and codecs: nothing of reasonlog
    {"model", "pricing", "redact_key", "redact_patterns", "accounting"},
    {"providers", "parts", "redact", "conversation", "titles"},  # parts reads what the protocols name
    {"store"},
    {"capture", "query", "reasoning"},
    {"io", "summaries", "demo", "langchain", "claude_agent", "replay", "semantic", "mcp", "evaluation", "mirror"},
    {"server", "cli", "__main__"},
)
LAYER = {name: n for n, names in enumerate(LAYERS) for name in names}


def _imported(path: Path) -> set[str]:
    """The top-level parts of reasonlog that a module imports."""
    return _imports_of(path.read_text(), list(path.relative_to(ROOT).parent.parts))


def _imports_of(source: str, package: list[str]) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[:len(package) - node.level + 1]
            parts = base + (node.module.split(".") if node.module else [])
            found |= {parts[0]} if parts else {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("reasonlog."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("reasonlog.")}
    return found


def test_every_module_imports_only_layers_to_its_left():
    modules = [p for p in ROOT.rglob("*.py") if p != ROOT / "__init__.py"]
    tops = {p.relative_to(ROOT).parts[0].removesuffix(".py") for p in modules}
    assert tops <= set(LAYER), f"a part with no layer: {sorted(tops - set(LAYER))}"
    wrong = sorted((str(p.relative_to(ROOT)), imported) for p in modules for imported in _imported(p)
                   if imported in LAYER and LAYER[imported] > LAYER[p.relative_to(ROOT).parts[0].removesuffix(".py")])
    assert wrong == []


def test_the_model_imports_nothing_of_reasonlog_but_the_wire_shapes():
    """The events and `Usage` are the bottom every layer builds on: providers read usage into `Usage`, so `model`
    reading providers would close a circle (issue 33)."""
    assert _imported(ROOT / "model.py") == {"wire"}
    assert {imported for p in (ROOT / "wire").rglob("*.py") for imported in _imported(p)} == {"wire"}


def test_the_check_sees_an_import_that_runs_upward():
    assert _imports_of("def f():\n    from ..cli import main\n", ["store"]) == {"cli"}
    assert _imports_of("from ... import providers, query\n", ["server", "dashboard"]) == {"providers", "query"}
    assert _imports_of("import reasonlog.server.app\n", ["store"]) == {"server"}


# Inside store/ (issue 33): its terms (errors, SessionFilter, targets) and the rows and columns both sides share,
# then reading and writing, then what is read or kept through them (usage, search, vectors, export), then the
# backends and their migrations. The package's `__init__` (the protocols, and the opening of a backend) is above
# them all: no module of store/ imports it.
STORE_LAYERS = (
    {"terms", "targets", "content", "contents", "dbapi", "ids", "keys", "liveness", "usage_sql", "rollups", "kept",
     "imported_sizes", "rows", "annotation", "timeline", "transfer_checks", "twins", "answers", "resent"},
    {"reading", "session_calls", "writing", "records", "replays", "summaries", "imported"},
    {"usage", "search", "text_blocks", "search_pending", "keywords", "pg_search", "units", "vectors", "vector_index",
     "semantic", "overview", "mirrored", "reviews", "transfer", "pg_vectors"},
    {"maintenance", "pg_prune", "schema", "schema_pg", "sql", "sqlite", "postgres", "opening"},
)
STORE_LAYER = {name: n for n, names in enumerate(STORE_LAYERS) for name in names}


def _store_imports(source: str) -> set[str]:
    """The modules of store/ that a module of store/ imports (relative imports, those inside functions too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
    return found & set(STORE_LAYER)


def _store_graph() -> dict[str, set[str]]:
    return {p.stem: _store_imports(p.read_text()) for p in (ROOT / "store").glob("*.py") if p.stem != "__init__"}


def test_no_module_of_the_store_imports_the_package_itself():
    """`from . import NotFound` in store/ would run through the package's `__init__`, which opens the backends: the
    circle issue 33 counted (27 modules). Modules take their terms from `terms` and `targets`."""
    wrong = []
    for p in sorted((ROOT / "store").glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module is None:
                wrong += [f"{p.stem}: {a.name}" for a in node.names if a.name not in STORE_LAYER]
    assert wrong == []


def test_every_module_of_the_store_imports_only_its_inner_layer_and_those_to_its_left():
    graph = _store_graph()
    assert set(graph) == set(STORE_LAYER), "a store module with no inner layer, or a layer naming no module"
    wrong = sorted((name, imported) for name, imports in graph.items() for imported in imports
                   if STORE_LAYER[imported] > STORE_LAYER[name])
    assert wrong == []


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each module that a chain of imports leads back to, with the chain."""
    found = []
    for start in sorted(graph):
        stack, seen = [(start, [start])], set()
        while stack:
            name, path = stack.pop()
            for imported in sorted(graph.get(name, ())):
                if imported == start:
                    found.append([*path, start])
                elif imported not in seen:
                    seen.add(imported)
                    stack.append((imported, [*path, imported]))
    return found


def test_no_module_of_the_store_imports_itself_through_others():
    assert _circles(_store_graph()) == []


def test_the_store_checks_see_a_lazy_import_and_a_circle():
    assert _store_imports("def f():\n    from .reading import x\n    from . import usage, SessionFilter\n") == {
        "reading", "usage"}
    assert _circles({"reading": {"writing"}, "writing": {"rows", "reading"}, "rows": set()}) == [
        ["reading", "writing", "reading"], ["writing", "reading", "writing"]]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p) for p in ROOT.rglob("*.py")}


def _module_imports(source: str, module: str, package: bool, known: set[str]) -> set[str]:
    """The modules of reasonlog that `module` imports, lazily or not: `from . import X` names the submodule X when
    there is one, else the package itself (whose `__init__` then runs)."""
    here = module.split(".") if package else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = ".".join(here[:len(here) - node.level + 1]) if node.level else ""
            target = ".".join(x for x in (base, node.module or "") if x)
            found |= {f"{target}.{a.name}" if f"{target}.{a.name}" in known else target for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return (found & known) - {module}


def test_no_module_of_reasonlog_imports_itself_through_others():
    """No import circle anywhere (issue 33 counted the summarizers and their package, which picks them by name:
    their shared terms live in summaries/terms.py)."""
    graph = {_module_name(p): _module_imports(p.read_text(), _module_name(p), p.name == "__init__.py", MODULES)
             for p in ROOT.rglob("*.py")}
    assert _circles(graph) == []


def test_the_module_check_sees_a_package_and_its_submodules():
    known = {"reasonlog.summaries", "reasonlog.summaries.llm", "reasonlog.summaries.terms", "reasonlog.store"}
    assert _module_imports("from . import RUN, terms\nfrom .. import store\n", "reasonlog.summaries.llm", False,
                           known) == {"reasonlog.summaries", "reasonlog.summaries.terms", "reasonlog.store"}
    assert _module_imports("def f():\n    from .llm import LLMSummarizer\n", "reasonlog.summaries", True,
                           known) == {"reasonlog.summaries.llm"}
    assert _module_imports("import reasonlog.store\nfrom reasonlog.summaries.terms import RUN\n",
                           "reasonlog.summaries.llm", False, known) == {"reasonlog.store", "reasonlog.summaries.terms"}


SQL = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|PRAGMA|BEGIN|WITH)\s")


def _sql_in(source: str) -> list[str]:
    """Statements a module runs or spells: calls of `.execute`/`.executemany`, and strings that open like SQL."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("execute", "executemany", "executescript"):
            found.append(f"line {node.lineno}: .{node.func.attr}(")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.match(node.value):
            found.append(f"line {node.lineno}: {node.value[:40]!r}")
    return sorted(found)


def test_the_server_and_the_cli_hold_no_sql():
    wrong = [(str(p.relative_to(ROOT)), hit) for layer in ("server", "cli") for p in (ROOT / layer).rglob("*.py")
             for hit in _sql_in(p.read_text())]
    assert wrong == []


def test_the_sql_check_sees_a_statement_and_a_cursor():
    assert _sql_in('cur.execute("SELECT 1")\nq = "DELETE FROM calls"\nok = "Select a session"\n') == [
        "line 1: 'SELECT 1'", "line 1: .execute(", "line 2: 'DELETE FROM calls'"]
