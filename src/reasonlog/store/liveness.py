"""Liveness by lock: a session is open while the process that records it holds a lock.

A pid alone cannot say whether a recorder is alive: pids are reused, and a recorder running as
pid 1 in a container's pid namespace looks alive to the host forever (its pid 1 is init). So
each recording process holds an exclusive `flock` on `<db>.live/<token>.lock`, where the token
is a random id per process (a forked child gets its own), and stores the token with each
session it starts. The kernel releases the lock when the process dies, whatever its pid, and
also when it execs another program (the descriptor is close-on-exec). A lock file that can be
locked therefore belongs to a recorder that is gone.

A PostgreSQL database has no folder beside it: there the token is one per process (`process_token`), and the
lock is an advisory lock named after it, held by the connection of each store that process writes through
(store/postgres.py). The server releases it when that connection ends: the process died, or exec'd.
"""
from __future__ import annotations

import fcntl
import os
import secrets
import threading
from pathlib import Path

_held: dict[Path, tuple[str, int]] = {}  # live folder -> (token, locked descriptor), for this process
_lock = threading.Lock()
_process_token: str | None = None


def live_dir(db_path: Path) -> Path:
    """Where the lock files of the processes recording into `db_path` live."""
    return db_path.with_name(db_path.name + ".live")


def hold(db_path: Path) -> str | None:
    """This process's token for `db_path`, locking its file on first use; None if no lock can be made."""
    folder = live_dir(Path(db_path))
    with _lock:
        if folder in _held:
            return _held[folder][0]
        try:
            folder.mkdir(parents=True, exist_ok=True)
            token = secrets.token_hex(12)
            _held[folder] = (token, _locked(folder / f"{token}.lock"))
        except OSError:  # a read-only folder: sessions fall back to host and pid
            return None
        return token


def _locked(path: Path) -> int:
    """An exclusively locked descriptor of `path`, re-created if a cleaner unlinked it meanwhile."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def process_token() -> str:
    """This process's token where no lock file can be made beside the database (PostgreSQL); a forked child
    gets its own."""
    global _process_token
    if _process_token is None:
        _process_token = secrets.token_hex(12)
    return _process_token


def is_held(db_path: Path, token: str, clean: bool = True) -> bool:
    """Whether a live process holds `token`'s lock; a free lock file is removed on the way (unless not `clean`:
    a reader looks without changing anything)."""
    path = live_dir(Path(db_path)) / f"{token}.lock"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    except OSError:  # cannot tell (permissions): assume alive rather than end someone's session
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        if clean:
            _unlink_quietly(path)  # while we hold it, so no holder can be relying on this inode
        return False
    finally:
        os.close(fd)


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _after_fork_in_child() -> None:
    # The child shares the parent's locks through inherited descriptors: let go of them, so the
    # parent's death releases its lock, and take a token of the child's own on first use.
    global _lock, _process_token
    _lock = threading.Lock()  # another thread may have held it at the fork
    _process_token = None
    for _token, fd in _held.values():
        try:
            os.close(fd)
        except OSError:
            pass
    _held.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid runs on this host (one we may not signal counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
