"""How near the local model's dense products run to what this machine's BLAS can do at all (issue 34's embed floor).

    .venv/bin/python benchmarks/bench_embed_floor.py [--rows 2048] [--seconds 2]

On one thread, as `reasonlog embed` runs each worker (semantic/embedders.py `_one_thread`), it times numpy's float32
matrix product on the four shapes of all-MiniLM-L6-v2's dense layers (a batch of `--rows` word pieces, 384 wide: the
fused query/key/value, the attention's output, the feed-forward layer's two halves; four fifths of the model's work)
and, in the same run, a 2,048-square product: the baseline, what the BLAS reaches on a shape made for it. It prints
each shape's GFLOPS and its ratio to that baseline. A ratio near 1 means a product cannot be made much cheaper without
doing less arithmetic or arithmetic of lower precision.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

SHAPES = {"query, key, value": (384, 1152), "attention output": (384, 384), "feed-forward in": (384, 1536),
          "feed-forward out": (1536, 384)}


def gflops(m: int, k: int, n: int, seconds: float) -> float:
    """Billions of floating-point operations a second of `m×k @ k×n` in float32, CPU time over at least `seconds`."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    out = np.empty((m, n), dtype=np.float32)
    np.matmul(a, b, out=out)
    runs, started = 0, time.process_time()
    while (spent := time.process_time() - started) < seconds or runs < 3:
        np.matmul(a, b, out=out)
        runs += 1
    return 2 * m * k * n * runs / spent / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2048, help="word pieces in a batch (8 texts of 256: 2048)")
    parser.add_argument("--seconds", type=float, default=2.0, help="CPU seconds each figure is timed over")
    args = parser.parse_args()
    with threadpool_limits(limits=1, user_api="blas"):
        peak = gflops(2048, 2048, 2048, args.seconds)
        print(f"baseline, 2048 x 2048 x 2048 on one thread: {peak:.1f} GFLOPS")
        for name, (k, n) in SHAPES.items():
            figure = gflops(args.rows, k, n, args.seconds)
            print(f"{name:18} {args.rows} x {k} x {n}: {figure:.1f} GFLOPS, {figure / peak:.2f} of the baseline")


if __name__ == "__main__":
    main()
