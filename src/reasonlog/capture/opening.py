"""Where a recorder writes, from what it was told: `open_sink(target)`, the one place a sink is put together.

A target is the URL of `reasonlog serve` (`http://`, `https://`): batches are sent there, and spill to the
user's data folder while it cannot be reached. Anything else names a database (a path, `sqlite:///`,
`postgresql://`): it is opened lazily on the writer thread, with spill files beside it for what it cannot take.
"""
from __future__ import annotations

import os

from ..pricing import PriceTable
from ..redact import Redactor
from ..store import Store, StoreOptions, StoreWriter
from .http_sink import remote_sink
from .sinks import SpillingSink, StoreSink
from .spillfiles import spill_dirs
from .writer import SyncWriter


def redactor_of(redact: bool | list | dict | None) -> Redactor | None:
    """`True`: the default patterns; a list or dict of regexes: those too; `False`/`None`: no masking."""
    if redact is False or redact is None:
        return None
    return Redactor() if redact is True else Redactor.with_extra(redact)


def is_remote(target: str) -> bool:
    return target.startswith(("http://", "https://"))


def open_sink(target: str | os.PathLike, *, redact: bool | list | dict = True, api_key: str | None = None,
              price_table: PriceTable | None = None, store_options: StoreOptions | None = None) -> SpillingSink:
    """The sink for `target`. Each part that masks gets its own redactor: a spill file's count of masked
    secrets travels in the file, apart from what the store counts."""
    target = os.fspath(target)
    if is_remote(target):
        return remote_sink(target, api_key or os.environ.get("REASONLOG_API_KEY"), redactor_of(redact))
    from ..store import open_store, safe_target

    def factory() -> Store:
        # False, not None: a store opened without a redactor masks with the default patterns.
        options: StoreOptions = {**(store_options or {}), "price_table": price_table,
                                 "redactor": redactor_of(redact) or False}
        return open_store(target, **options)

    exists = None if "://" in target else (lambda: os.path.exists(target))
    return SpillingSink(StoreSink(factory, exists, target=safe_target(target)), spill_dirs(target), redactor_of(redact))


def store_writer(store: StoreWriter, *, spill: bool = True) -> SyncWriter:
    """The writer of a caller that holds an open store and writes batches of its own (`SyncWriter.write`): a replay,
    a reasoning record (spilling beside the database while it cannot be written, as a recorder does), an import
    (`spill=False`: it stops where the database refused and resumes from its last committed file).
    Closing the writer leaves the store open: it is the caller's."""
    from ..store import safe_target

    target = store.url.removeprefix("sqlite:///")  # a SQLite database's spill folders are named after its path
    folders = spill_dirs(target) if spill else None
    sink = StoreSink(lambda: store, target=safe_target(target), owned=False)
    return SyncWriter(SpillingSink(sink, folders, redactor_of(True)))
