"""`reasonlog embed`: work off the search-by-meaning backlog (see reasonlog.semantic and docs/search.md)."""
from __future__ import annotations

import gc
import os
import sys

import click
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from .group import cli, emit_json, own_process

STAGES = {"cut": "cutting sessions into units", "embed": "embedding"}
MOST_WORKERS = 8  # each holds the intermediate arrays of its own batch: tens of MB with the local model


# A container's CPU quota (Linux cgroups): v2's `cpu.max` ("QUOTA PERIOD" or "max PERIOD"), else v1's pair of files.
CGROUP_V2 = "/sys/fs/cgroup/cpu.max"
CGROUP_V1 = ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us")


def default_workers() -> int:
    """The CPUs this process may run on: its affinity where the system has one, within its container's CPU quota
    (`docker run --cpus 2` shows every CPU of the host to the affinity), at most MOST_WORKERS."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = cpu_quota(_read(CGROUP_V2)) or cpu_quota(" ".join(_read(p) or "" for p in CGROUP_V1))
    return max(1, min(MOST_WORKERS, cpus, quota or cpus))


def cpu_quota(text: str | None) -> int | None:
    """The CPUs a cgroup quota allows, rounded up ("150000 100000": 2); None for none ("max 100000", "-1 100000")
    or for anything else."""
    fields = (text or "").split()
    try:
        quota, period = (int(f) for f in fields) if len(fields) == 2 else (0, 0)
    except ValueError:
        return None
    return -(-quota // period) if quota > 0 and period > 0 else None


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except (OSError, ValueError):
        return None


@cli.command()
@click.option("--limit", type=click.IntRange(min=0), default=0, show_default=True,
              help="Embed at most this many texts, then stop (0: all of them).")
@click.option("--workers", type=click.IntRange(min=1), default=default_workers, show_default="the CPUs, at most 8",
              help="Batches embedded at once: each worker embeds one batch at a time on one core. At most 8 by"
                   " default, as each worker holds its own batch's arrays in memory.")
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@click.option("--progress-every", type=click.FloatRange(min=0), default=10.0, show_default=True, metavar="SECONDS",
              help="When standard error is not a terminal: a progress line this often (0: after every batch).")
@click.pass_obj
def embed(obj, limit, workers, as_json, progress_every):
    """Embed what was recorded or imported since the last run, for `reasonlog search --mode semantic|hybrid`.

    The model is the local all-MiniLM-L6-v2 (the `semantic` extra), or the OpenAI-compatible server that
    REASONLOG_EMBEDDINGS_URL and REASONLOG_EMBEDDINGS_MODEL name. --workers batches are embedded at once, one a
    core (a server's background pass embeds one at a time, leaving the other cores to its requests). Each batch is
    committed with its vectors, in order, so a run stopped at any point (Ctrl-C, a kill) goes on from there the
    next time. On a terminal a bar shows the texts done of the total, the rate and the time left; otherwise a line
    says the same every --progress-every seconds."""
    from ..semantic.backlog import Ticker, embed_backlog
    from ..semantic.search import embedder_for

    store = obj.writable
    embedder = embedder_for(store)
    click.echo(f"embedding with {embedder.model}", err=True)
    show = not as_json and sys.stderr.isatty()
    if show:
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), RateColumn(),
                   TimeRemainingColumn())
        with Progress(*columns, transient=True, console=_stderr()) as bar:
            tasks: dict[str, TaskID] = {}

            def progress(stage: str, done: int, total: int) -> None:
                if stage not in tasks:
                    tasks[stage] = bar.add_task(STAGES[stage], total=total)
                bar.update(tasks[stage], completed=done, total=total)
            done = embed_backlog(store, embedder, limit or None, progress=progress, workers=workers)
    elif not as_json:
        done = embed_backlog(store, embedder, limit or None, workers=workers,
                             progress=Ticker(lambda line: click.echo(line, err=True), progress_every))
    else:
        done = embed_backlog(store, embedder, limit or None, workers=workers)
    if own_process():
        # What the process holds (PyTorch's modules among it) is freed at exit without the collector walking it
        # again, which took 0.4 s of CPU once PyTorch was imported (docs/search.md). Not in a caller's
        # process (a script, a test): what it holds would never be collected.
        gc.freeze()
    report = {"model": embedder.model, "units_cut": done.units_cut, "embedded": done.embedded,
              "sessions": done.sessions, "left": done.left, "seconds": round(done.seconds, 3), "workers": workers}
    if as_json:
        return emit_json(report)
    rate = f" ({done.embedded / done.seconds:,.1f} a second)" if done.embedded and done.seconds else ""
    left = f"; {done.left} left (run it again)" if done.left else ""
    click.echo(f"{done.units_cut} new units; {done.embedded} texts embedded in {done.seconds:.1f} s{rate}{left}")


class RateColumn(ProgressColumn):
    """Texts a second, as rich measures them over the last half minute."""

    def render(self, task) -> Text:
        return Text(f"{task.speed:,.1f}/s" if task.speed else "", style="progress.data.speed")


def _stderr():
    from rich.console import Console

    return Console(stderr=True)
