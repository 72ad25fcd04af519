"""`reasonlog summarize`: summaries of sessions, exchanges and (asked) assistant messages, off the recording path.

It says what it would spend before an LLM summarizer spends anything, and asks (`--yes` skips the question).
Failures are stored as failed with their error and retried on the next run; the exit code is 1 when any failed.
"""
from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ..summaries import make_summarizer, runner
from .group import cli, emit_json, json_option
from .read import filter_options, make_filter

SUMMARIZERS = ("offline", "anthropic", "openai")


@cli.command()
@filter_options(limit=0, model_flag="--session-model")
@click.option("--summarizer", "name", type=click.Choice(SUMMARIZERS), default="offline", show_default=True,
              help="offline needs no network; anthropic and openai call a model through their SDKs.")
@click.option("--model", "summary_model", metavar="M",
              help="The model that writes the summaries; 'same' uses the model that produced each session.")
@click.option("--base-url", metavar="U", help="Another server: a local vLLM or Ollama (OpenAI protocol), or a proxy.")
@click.option("--prompt-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Your own prompt: a UTF-8 template with {transcript} and optionally {kind}.")
@click.option("--messages", is_flag=True, help="Also summarise each assistant message (one model call each).")
@click.option("--stale", is_flag=True,
              help="Recompute only summaries made by another summarizer, model, prompt or version, or outdated ones.")
@click.option("--yes", is_flag=True, help="Do not ask before spending money.")
@click.option("--dry-run", is_flag=True, help="Say what would be summarised and what it would cost; change nothing.")
@json_option
@click.pass_obj
def summarize(obj, name, summary_model, base_url, prompt_file, messages, stale, yes, dry_run, as_json, **filters):
    """Summarise the sessions the filters select (all by default) and their exchanges.

    Only what has no summary, failed before, or changed since is summarised (with --stale: only what another
    summarizer, model, prompt or version made). The LLM summarizers record their own calls in the run
    `reasonlog-summaries`, so what summaries cost is visible there."""
    summarizer = _summarizer(obj, name, summary_model, base_url, prompt_file)
    kinds = ("session", "exchange", "message") if messages else ("session", "exchange")
    store = obj.writable
    work = runner.plan(store, make_filter(**filters), summarizer, kinds, stale)
    cost = runner.estimate(work, summarizer)
    if as_json and (dry_run or not work):
        emit_json({"planned": len(work), "estimate": cost, "ok": 0, "failed": 0, "errors": []})
        return
    if not work:
        click.echo("nothing to summarise", err=True)
        return
    click.echo(_plan_line(work, cost, summarizer), err=True)
    if dry_run:
        return
    if cost["calls"] and not yes:
        click.confirm("Go on?", abort=True, err=True)
    report = _run(store, work, summarizer, quiet=as_json)
    if as_json:
        emit_json({"planned": len(work), "estimate": cost, "ok": report.ok, "failed": report.failed,
                   "errors": [{"kind": k, "target": t, "error": e} for k, t, e in report.errors]})
    else:
        _report(report)
    if report.failed:
        sys.exit(1)


def _summarizer(obj, name, model, base_url, prompt_file):
    prompt = None
    if prompt_file is not None:
        try:
            prompt = prompt_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise click.BadParameter(f"{prompt_file}: {exc}", param_hint="--prompt-file") from None
    if name == "offline" and (model or base_url or prompt):
        raise click.UsageError("--model, --base-url and --prompt-file are for --summarizer anthropic or openai")
    try:
        return make_summarizer(name, db=obj.db or str(obj.path), model=model, base_url=base_url, prompt=prompt)
    except ValueError as exc:
        where = f"{prompt_file}: " if prompt_file is not None and "template" in str(exc) else ""
        raise click.UsageError(f"{where}{exc}") from None


def _plan_line(work: list[runner.Work], cost: dict, summarizer) -> str:
    kinds = {k: sum(w.target.kind == k for w in work) for k in ("session", "exchange", "message")}
    what = ", ".join(f"{n} {k}{'s' if n != 1 else ''}" for k, n in kinds.items() if n)
    line = f"to summarise: {what} with {summarizer.name}"
    if not cost["calls"]:
        return line + " (no network, no cost)"
    models = sorted({summarizer.provenance(w.target).model or "?" for w in work})
    money = (f"about ${cost['usd']:.4f}" if cost["usd"] is not None
             else f"cost unknown (no price for {', '.join(cost['unpriced'])})")
    return (f"{line} ({', '.join(models)}): {cost['calls']} calls, about {cost['input_tokens']:,} input tokens and"
            f" at most {cost['output_tokens']:,} output tokens, {money}")


def _run(store, work: list[runner.Work], summarizer, quiet: bool) -> runner.Report:
    console = Console(stderr=True, highlight=False)
    columns = (TextColumn("summarising"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, disable=quiet or not console.is_terminal, transient=True) as bar:
        task = bar.add_task("summaries", total=len(work))
        return runner.run(store, work, summarizer, progress=lambda item, row: bar.advance(task))


def _report(report: runner.Report) -> None:
    click.echo(f"summarised {report.ok}; failed {report.failed}", err=True)
    for kind, target, error in report.errors[:10]:
        click.echo(f"  failed: {kind} {target}: {error}", err=True)
    if len(report.errors) > 10:
        click.echo(f"  … and {len(report.errors) - 10} more failed (they are retried on the next run)", err=True)
