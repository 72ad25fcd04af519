"""Peak memory of the recorder, and of `reasonlog serve` ingesting, by message size (issue 19 item 9, issue 20 item 4).

    python benchmarks/bench_memory.py                      # all sizes, recorder and server (~10 min)
    python benchmarks/bench_memory.py --sizes small --calls 200000 --targets recorder

Each run records `calls` calls flat out in sessions of 50 calls; every call sends the last 20
messages of its session (a sliding window, as agents resend history) plus a new user message of the
size named, and gets an answer of that size back. Every message is distinct, so every one is a new
content for the writer to hash, compress, index and remember.

- `recorder`: `Recorder(path)` in a process of its own; printed: its peak resident set (VmHWM)
  minus its resident set after imports, while recording and until everything is durable.
- `server`: `reasonlog serve` on a fresh SQLite file, fed by a `Recorder("http://127.0.0.1:…")` in
  another process; printed: the server's peak resident set and its resident set once idle (both
  read from /proc, VmHWM and VmRSS).

Sizes: small 100 characters, medium 4,000, large 64,000 (default calls 200,000 / 20,000 / 2,000).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SIZES = {"small": (100, 200_000), "medium": (4_000, 20_000), "large": (64_000, 2_000)}
WINDOW, PER_SESSION = 20, 50


def status_kib(pid: int | str, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def record(target: str, chars: int, calls: int) -> dict:
    """Run in a child: record the workload into `target`; the recorder's own figures."""
    import reasonlog

    base = status_kib("self", "VmRSS")
    rec = reasonlog.Recorder(target)
    t0 = time.perf_counter()
    s, history = None, []
    for i in range(calls):
        if i % PER_SESSION == 0:
            if s is not None:
                s.end()
            s, history = rec.session(agent=f"memory-{i // PER_SESSION}", model="claude-sonnet-4-5"), []
        history.append({"role": "user", "content": f"{i} ".ljust(chars, "q")})
        s.call(messages=history[-WINDOW:], response=f"{i} ".ljust(chars, "a"),
               usage={"input_tokens": chars // 4, "output_tokens": chars // 4})
        history.append({"role": "assistant", "content": f"{i} ".ljust(chars, "a")})
    s.end()
    rec.close()
    stats = rec.stats()
    peak_mb = round((status_kib("self", "VmHWM") - base) / 1024)
    return {"seconds": round(time.perf_counter() - t0, 1), "peak_mb": peak_mb,
            "written": stats["written"], "spilled": stats["spilled_events"], "dropped": stats["dropped"]}


def child(target: str, chars: int, calls: int, env: dict | None = None) -> dict:
    code = (f"import sys, json; sys.path.insert(0, {str(REPO / 'benchmarks')!r}); import bench_memory as b;"
            f" print(json.dumps(b.record({target!r}, {chars}, {calls})))")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), **(env or {})}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(db: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "REASONLOG_DB": str(db)}
    proc = subprocess.Popen([sys.executable, "-m", "reasonlog", "serve", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if urllib.request.urlopen(base + "/readyz", timeout=5).status == 200:
                return proc, base
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("reasonlog serve did not become ready")


def run(target: str, size: str, calls: int) -> dict:
    chars = SIZES[size][0]
    with tempfile.TemporaryDirectory(prefix="reasonlog-mem-") as tmp:
        env = {"XDG_DATA_HOME": str(Path(tmp) / "data")}  # spill files, if any, stay in here
        if target == "recorder":
            return {"target": target, "size": size, "calls": calls, **child(str(Path(tmp) / "m.db"), chars, calls, env)}
        proc, base = serve(Path(tmp) / "server.db")
        try:
            base_kib = status_kib(proc.pid, "VmRSS")
            figures = child(base, chars, calls, env)
            time.sleep(2.0)
            return {"target": target, "size": size, "calls": calls, "client_peak_mb": figures["peak_mb"],
                    "server_peak_mb": round((status_kib(proc.pid, "VmHWM") - base_kib) / 1024),
                    "server_idle_mb": round(status_kib(proc.pid, "VmRSS") / 1024), "seconds": figures["seconds"],
                    "spilled": figures["spilled"], "dropped": figures["dropped"]}
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="small,medium,large")
    p.add_argument("--targets", default="recorder,server")
    p.add_argument("--calls", type=int, default=None, help="calls per run (default: by size)")
    a = p.parse_args()
    for size in a.sizes.split(","):
        for target in a.targets.split(","):
            print(json.dumps(run(target, size, a.calls or SIZES[size][1])), flush=True)


if __name__ == "__main__":
    main()
