"""`reasonlog search` from the command line at 500,000 messages: what a person waits for, by mode.

    python benchmarks/bench_cli_search.py                    # the database bench_server.py built (benchmarks/out)
    python benchmarks/bench_cli_search.py --runs 5 --db PATH
    python benchmarks/bench_cli_search.py --parts-only       # only where a search's time goes, in one process
    python benchmarks/bench_cli_search.py --baseline ../wt-base/src --runs 5   # CPU against another checkout
    python benchmarks/bench_cli_search.py --baseline ../wt-base/src --runs 3 --mb 211

Each run is a new `python -m reasonlog search QUERY --mode M --limit 10` process on the database bench_server.py
keeps (10,000 sessions, 500,000 messages, 500,000 units with synthetic vectors of the local model's name), timed
from start to exit. `text` needs neither the model nor the vectors: it is the baseline of the same run, and each
mode's median is printed with its ratio to it. `semantic` and `hybrid` load the local model (PyTorch) and read the
500,000 vector codes into memory: a server does both once, a command each time.

Then where that time goes, each part against its baseline of the same run: loading the model to embed one query
(numpy's form, semantic/minilm.py) against importing sentence-transformers (each in a new process); reading the codes
into memory (`store.warm_vectors`); choosing the nearest codes by counting (`vector_index.nearest_of`) against numpy's
`argpartition`, on the distances of one real query; and, for bench_server's 10 queries, the keyword half of a hybrid
search (`store.keyword_search`, 60 hits), the vector half (`store.vector_search`, 60 hits) and the query's embedding.

With `--baseline SRC` (issue 34's figure: a CLI search under 0.3 s of CPU) it measures instead the CPU seconds (user +
system of the child, from wait4) of `reasonlog search Q --json --limit 10`, one process a query, on the spotter
transcripts imported by each tree (nothing embedded: the default mode is `text`), for compare_agentsview.py's
six queries, run by the code in SRC and by this tree in turn, interleaved, `--runs` times (each on its own import, so
that each reads its own schema); it prints the mean CPU of each tree, their ratio,
and whether both printed the same hits. `--mb 211` imports the samples copied to 211 MB (compare_agentsview.py's
set) instead. Both trees are compiled to bytecode first, as `pip install` does (with PYTHONDONTWRITEBYTECODE set, as
on this machine, each search would compile every module it imports again).
"""
from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
QUERY = "cash left after the portfolio decision"


def timed(db: Path, mode: str) -> float:
    env = {**os.environ, "REASONLOG_DB": str(db)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "reasonlog", "search", QUERY, "--mode", mode, "--limit", "10"],
                          env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"reasonlog search --mode {mode} failed: {done.stderr.strip()}")
    return seconds


def in_new_process(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - start


def ms(fn, repeat: int = 5) -> float:
    """The best of `repeat` timings of fn(), in ms."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1000


def parts(db: Path, runs: int) -> None:
    import numpy as np

    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_server import QUERIES

    import reasonlog
    from reasonlog.semantic import LocalEmbedder
    from reasonlog.store import SessionFilter, vector_index

    numpy_form = statistics.median(in_new_process(
        "from reasonlog.semantic import LocalEmbedder; LocalEmbedder().embed_query('x')") for _ in range(runs))
    torch_form = statistics.median(in_new_process("import sentence_transformers") for _ in range(runs))
    print(f"  the model loaded and one query embedded, numpy's form: {numpy_form:.2f} s (a new process, median);"
          f" importing sentence-transformers alone: {torch_form:.2f} s; ratio {numpy_form / torch_form:.2f}")
    store = reasonlog.open_store(db, read_only=True)
    embedder = LocalEmbedder()
    start = time.perf_counter()
    store.warm_vectors(embedder.model, 384)
    read = time.perf_counter() - start
    print(f"  the vector codes read into memory (store.warm_vectors, once a process): {read:.2f} s")
    index = vector_index.VectorIndex(embedder.model, 384)  # the same codes, held here to time choosing the nearest
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        index.refresh(conn.cursor())
    dist = index.distances(embedder.embed_query(QUERY)).copy()
    counting, partition = ms(lambda: vector_index.nearest_of(dist, 480)), ms(lambda: np.argpartition(dist, 479))
    print(f"  the 480 nearest of {len(dist):,} codes: by counting {counting:.1f} ms, numpy's argpartition"
          f" {partition:.1f} ms; ratio {counting / partition:.2f}")
    every = SessionFilter(limit=None)
    for q in QUERIES:
        vector = embedder.embed_query(q)
        print(f"  {q[:44]:<44} keyword half {ms(lambda q=q: store.keyword_search(q, every, 60), 3):5.1f} ms,"
              f" vector half {ms(lambda v=vector: store.vector_search(v, embedder.model, every, 60), 3):5.1f} ms,"
              f" query embedded {ms(lambda q=q: embedder.embed_query(q), 3):5.1f} ms (best of 3)")
    store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", type=Path, default=REPO / "benchmarks" / "out" / "server-10000.db")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--parts-only", action="store_true", help="skip the commands; only the parts in one process")
    ap.add_argument("--baseline", type=Path, help="the src folder of a checkout: CPU of a text search against it")
    ap.add_argument("--mb", type=int, help="with --baseline: the spotter transcripts copied to this many MB"
                    " (compare_agentsview.py's set at 211; default: the samples once, 9.3 MB)")
    args = ap.parse_args()
    if args.baseline is not None:
        return cpu_against(args.baseline.resolve(), args.runs, args.mb)
    if not args.db.exists():
        raise SystemExit(f"{args.db}: no such database; build it with `python benchmarks/bench_server.py`")
    if not args.parts_only:
        commands(args.db, args.runs)
    print("where the time goes:")
    parts(args.db, args.runs)


def commands(db: Path, runs: int) -> None:
    print(f"reasonlog search {QUERY!r} --limit 10 on {db.name}, {runs} runs a mode (a new process each)")
    medians: dict[str, float] = {}
    for mode in ("text", "keywords", "semantic", "hybrid"):
        times = [timed(db, mode) for _ in range(runs)]
        medians[mode] = statistics.median(times)
        print(f"  --mode {mode:<9} median {medians[mode]:6.2f} s  (min {min(times):.2f}, max {max(times):.2f})"
              f"  {medians[mode] / medians['text']:5.2f} x text")


CPU_QUERIES = ("phoenix", "xterm.js", "mix phx.server", "OTEL instrumentation", "migration", "LiveView")
SPOTTER = REPO.parent / "shared" / "fixtures" / "real" / "claude-code-transcripts" / "spotter"


def cpu_of_search(src: Path, db: Path, query: str) -> tuple[float, bytes]:
    """CPU seconds (user + system) of one `reasonlog search QUERY --json --limit 10` run by the code in `src`, and
    what it printed."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    env.pop("REASONLOG_EMBEDDINGS_URL", None)
    child = subprocess.Popen([sys.executable, "-m", "reasonlog", "--db", str(db), "search", query, "--json",
                              "--limit", "10"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = child.stdout.read() if child.stdout else b""
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"reasonlog search {query!r} with {src} failed")
    return usage.ru_utime + usage.ru_stime, out


def cpu_against(baseline: Path, runs: int, mb: int | None) -> None:
    import compileall
    import tempfile

    trees = {"baseline": baseline, "this tree": REPO / "src"}
    for src in trees.values():  # as pip install does: with PYTHONDONTWRITEBYTECODE set, each search compiled them
        compileall.compile_dir(str(src), quiet=1)
    with tempfile.TemporaryDirectory() as folder:
        transcripts = SPOTTER
        if mb:
            from bench_import import replicate

            replicate(transcripts := Path(folder) / "projects", mb)
        dbs = {name: Path(folder) / f"spotter-{n}.db" for n, name in enumerate(trees)}  # each tree's own schema
        for name, src in trees.items():
            subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(dbs[name]), "import", str(transcripts)],
                           check=True, env={**os.environ, "PYTHONPATH": str(src)}, capture_output=True)
        cpu: dict[str, list[float]] = {name: [] for name in trees}
        same = True
        for _ in range(runs):
            for q in CPU_QUERIES:
                printed = {}
                for name, src in trees.items():
                    seconds, printed[name] = cpu_of_search(src, dbs[name], q)
                    cpu[name].append(seconds)
                same &= printed["baseline"] == printed["this tree"]
    mean = {name: statistics.mean(xs) for name, xs in cpu.items()}
    print(f"reasonlog search Q --json --limit 10, {len(CPU_QUERIES)} queries x {runs} runs a tree, interleaved:")
    for name, xs in cpu.items():
        print(f"  {name:<9} CPU mean {mean[name]:.3f} s (median {statistics.median(xs):.3f}, min {min(xs):.3f},"
              f" max {max(xs):.3f})")
    print(f"  baseline / this tree: {mean['baseline'] / mean['this tree']:.2f}; the same hits printed: "
          f"{'yes' if same else 'NO'}; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
