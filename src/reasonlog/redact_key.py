"""The key of the digests that tell masked secrets apart: `[REDACTED:openai_key:3f9a1c2b4d5e]`.

Two different secrets must stay two different ids once masked, and the same secret the same id in every
process that masks it: the recorder (before its spill files and before the HTTP sink), the store, the server
and `reasonlog import`. All of them mask before they know which database a value will reach, so the key
belongs to the installation, not to a database:
- `$REASONLOG_REDACTION_KEY` (any text), when set: give recorders on several machines and their server the
  same one and a secret in an id masks alike everywhere;
- else `<user data folder>/reasonlog/redaction.key`, 32 random bytes made on first use (mode 0600);
- else (a data folder that cannot be written) a fixed key, so ids still agree between processes; the digest
  then only proves that two masked values were one secret to someone who already holds that secret.
The digest is BLAKE2b keyed with it, 48 bits: without the key it reveals nothing of the secret, and 10,000
different secrets collide with a chance of about 2 in 10 million.
"""
from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

ENV = "REASONLOG_REDACTION_KEY"
FILE = "redaction.key"
DIGEST_BYTES = 6
_FALLBACK = b"reasonlog redaction: no key file could be read or written"
_lock = threading.Lock()
_cached: dict[str, bytes] = {}


def digest(secret: str, key: bytes) -> str:
    """The keyed digest that stands for `secret` in its mask."""
    data = secret.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, key=key, digest_size=DIGEST_BYTES).hexdigest()


def installation_key() -> bytes:
    """The key of this installation (see the module's docstring), read once per process and setting."""
    setting = os.environ.get(ENV) or ""
    with _lock:
        key = _cached.get(setting)
        if key is None:
            key = _cached[setting] = _derive(setting.encode() if setting else _file_key())
        return key


def key_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("reasonlog", appauthor=False)) / FILE


def _derive(material: bytes) -> bytes:
    return hashlib.blake2b(material, digest_size=32, person=b"reasonlog-mask").digest()


def _file_key() -> bytes:
    """The key file's bytes, made first if there is none; the fixed key if neither works."""
    path = key_path()
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    except OSError:
        return _FALLBACK
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{FILE}.{os.getpid()}.{threading.get_ident()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(32).hex().encode() + b"\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # fails if another process made it first: then its key is the key
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
        return path.read_bytes()
    except OSError:
        return _FALLBACK
