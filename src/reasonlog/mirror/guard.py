"""One push of a source into a mirror at a time on this machine: a second `reasonlog mirror push` says that one is
running instead of doing the same work beside it.

The guard is an exclusive `flock` on a file in the user's data folder named by the source and the mirror's database,
held for the push (a `--watch` holds it until it stops); the kernel lets it go when the process ends however it
ends, so a push killed by a signal leaves nothing to clean. Two pushes of one source from two machines (a team's
PostgreSQL pushed from both) are not stopped by it; they are still safe, only wasteful: every row carries its push's
version and the newer push's rows win (mirror/push.py).
"""
from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import platformdirs

from .engine import MirrorError


def lock_path(src: str, target: str) -> Path:
    """The lock file of pushes of `src` into the mirror `target` (its password left out of the name)."""
    name = hashlib.blake2b(f"{src}\x1f{target}".encode(), digest_size=12).hexdigest()
    return Path(platformdirs.user_data_dir("reasonlog", appauthor=False)) / "mirror-pushes" / f"{name}.lock"


@contextmanager
def one_push(src: str, target: str) -> Iterator[None]:
    """Hold the guard of `src` into `target` for the block; MirrorError naming the running push when it is held."""
    path = lock_path(src, target)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            raise MirrorError(f"a push of {src} into {target} is already running (pid {holder}); wait for it to end"
                              " or stop it, then push again") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)
