"""Redaction benchmark: base64 data replays exactly, and what masking costs.

    python benchmarks/bench_redaction.py                 # 240 random 1 MB blobs, every base64 form
    python benchmarks/bench_redaction.py --blobs 24      # a quicker run

1. Exactness: `--blobs` random blobs of 1 MB (seeded), spread over eight base64 forms (standard and URL-safe;
   padded and not; wrapped at 64 and at 76 columns), one image per call through a `Recorder` into a temporary
   SQLite database; every call is replayed and compared with what was sent, byte for byte. The figure printed:
   how many replay exactly, and the database's count of masked secrets (0 expected: nothing in them is a key).
2. Cost: the redactor over the workload's messages (`../shared/bench/workload.py`), as the store calls it for
   each new content: `Redactor.json` on the canonical bytes. Printed: MB/s, and the share of contents that take
   the slow path (decoded and walked because a key's literal occurs in them).
Exit status 0 only if every blob replays exactly and nothing was masked.
"""
from __future__ import annotations

import argparse
import base64
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import reasonlog  # noqa: E402
from reasonlog.redact import Redactor  # noqa: E402
from reasonlog.wire.codec import canonical  # noqa: E402

FORMS = ["std", "urlsafe", "std-unpadded", "urlsafe-unpadded", "std-wrap64", "urlsafe-wrap64", "std-wrap76",
         "urlsafe-wrap76"]


def encode(data: bytes, form: str) -> str:
    text = (base64.urlsafe_b64encode if form.startswith("urlsafe") else base64.b64encode)(data).decode()
    if form.endswith("unpadded"):
        return text.rstrip("=")
    if "wrap" in form:
        width = int(form[-2:])
        return "\n".join(text[i:i + width] for i in range(0, len(text), width))
    return text


def exactness(blobs: int, size: int) -> tuple[int, int, float]:
    """(blobs replayed exactly, secrets the store masked, seconds) for `blobs` random blobs of `size` bytes."""
    rng = random.Random(20250619)
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "images.db"
        rec = reasonlog.Recorder(db, writer="sync")
        sent: list[tuple[str, list]] = []
        start = time.perf_counter()
        with rec.session(agent="painter") as s:
            for i in range(blobs):
                data = encode(rng.randbytes(size), FORMS[i % len(FORMS)])
                messages = [{"role": "user", "content": [{"type": "image", "source": {
                    "type": "base64", "media_type": "image/png", "data": data}}]}]
                sent.append((s.call(messages=messages, response="seen", model="m"), messages))
        rec.close()
        store = reasonlog.open_store(db)
        exact = sum(store.replay_call(call_id)["messages"] == messages for call_id, messages in sent)
        masked = store.status()["redacted_secrets"]
        store.close()
        return exact, masked, time.perf_counter() - start


def cost() -> tuple[float, float, int]:
    """(MB/s, share of contents on the slow path, contents) of `Redactor.json` over the workload's messages."""
    sys.path.insert(0, str(ROOT.parent / "shared" / "bench"))
    import workload

    contents = {canonical(m) for call in _calls(workload) for m in call}
    redactor = Redactor()
    slow = sum(redactor.may_hold(c) for c in contents)
    start = time.perf_counter()
    for data in contents:
        redactor.json(data, canonical)
    seconds = time.perf_counter() - start
    return sum(map(len, contents)) / seconds / 1e6, slow / len(contents), len(contents)


def _calls(workload):
    for call in workload.generate("medium"):
        yield [call["request"]["system"], *call["request"]["messages"], call.get("response")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blobs", type=int, default=240)
    ap.add_argument("--size", type=int, default=1 << 20)
    args = ap.parse_args()
    exact, masked, seconds = exactness(args.blobs, args.size)
    print(f"base64 blobs replayed exactly: {exact}/{args.blobs} ({args.size >> 10} KiB each, {len(FORMS)} forms);"
          f" secrets masked: {masked}; {seconds:.1f} s")
    try:
        rate, slow, n = cost()
        print(f"masking the workload's {n} contents: {rate:.0f} MB/s; slow path (a key's literal in it): {slow:.1%}")
    except (ImportError, AttributeError, KeyError, TypeError) as exc:
        print(f"workload cost not measured ({type(exc).__name__}: {exc})")
    return 0 if exact == args.blobs and masked == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
