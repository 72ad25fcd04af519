"""`reasonlog evaluate`: run a check over sessions (or their calls) and store its scores (docs/review.md)."""
from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ..evaluation import CheckError, Report, load_check, run
from ..store import SessionFilter
from ..summaries import RUN as SUMMARIES_RUN
from .group import cli, emit_json, json_option
from .read import make_filter

FILTER_KEYS = ("run", "agent", "model", "status", "since", "until", "date", "score", "has-note", "label", "limit")


def parse_sessions(text: str) -> SessionFilter:
    """`all`, or comma-separated KEY=VALUE of FILTER_KEYS (`agent=coder,status=failed,score=task_done<0.5`)."""
    given: dict = {"labels": [], "scores": []}
    for term in ([] if text.strip() == "all" else text.split(",")):
        key, sep, value = term.strip().partition("=")
        if not sep or key not in FILTER_KEYS or not value:
            raise click.BadParameter(f"{term!r}: expected KEY=VALUE with KEY one of {', '.join(FILTER_KEYS)}"
                                     " (or all)", param_hint="--sessions")
        if key in ("score", "label"):
            given[key + "s"].append(value.replace(":", "=", 1) if key == "label" else value)
        else:
            given[key.replace("-", "_")] = value
    limit = given.pop("limit", "0")
    if not limit.isdigit():
        raise click.BadParameter(f"limit={limit}: expected a whole number", param_hint="--sessions")
    return make_filter(given.get("run"), given.get("agent"), given.get("model"), given.get("status"),
                       tuple(given["labels"]), given.get("date"), given.get("since"), given.get("until"), int(limit),
                       tuple(given["scores"]), given.get("has_note") in ("1", "yes", "true"))


@cli.command()
@click.argument("check", required=False, metavar="CHECK")
@click.option("--sessions", "which", default="all", show_default=True, metavar="FILTER",
              help="Which sessions: all, or KEY=VALUE,… of run, agent, model, status, since, until, date,"
                   " score (a test: task_done<0.5), has-note=1, label (K:V), limit.")
@click.option("--calls", is_flag=True, help="Run the check on each call of the sessions instead.")
@click.option("--name", help="The score's name (default: the check function's name, or judge).")
@click.option("--judge", type=click.Choice(["anthropic", "openai"]),
              help="An LLM judge, through the summarizers' model access, instead of CHECK.")
@click.option("--model", "judge_model", metavar="M", help="The judge's model (default: the summarizers').")
@click.option("--base-url", metavar="U", help="The judge's server: a local vLLM or Ollama, or a proxy.")
@click.option("--prompt-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The judge's prompt: a template with {transcript}; the reply's first number 0..1 is the score.")
@click.option("--yes", is_flag=True, help="Do not ask before the judge spends money.")
@json_option
@click.pass_obj
def evaluate(obj, check, which, calls, name, judge, judge_model, base_url, prompt_file, yes, as_json):
    """Run CHECK (FILE.py, FILE.py:FUNCTION or MODULE:FUNCTION) or an LLM --judge over sessions, storing its
    scores as annotations; run again, it replaces the scores it gave before."""
    flt = parse_sessions(which)
    store = obj.writable
    ids = [s["id"] for s in store.list_sessions(flt) if s.get("run") != SUMMARIES_RUN]  # never the judge's own
    if judge:
        fn, label, by, source = _judge(obj, store, ids, judge, judge_model, base_url, prompt_file, calls, yes)
    else:
        fn, label, by, source = _code_check(check)
    try:
        report = _run(store, ids, fn, name or label, by, source, calls, quiet=as_json)
    finally:
        getattr(fn, "close", lambda: None)()
    if as_json:
        emit_json({"sessions": len(ids), "scored": report.scored, "skipped": report.skipped,
                   "failed": [{"target": t, "error": e} for t, e in report.failed]})
    else:
        _report(report, len(ids), calls)
    if report.failed:
        sys.exit(1)


def _code_check(check: str | None):
    if not check:
        raise click.UsageError("give a CHECK (FILE.py, FILE.py:FUNCTION or MODULE:FUNCTION) or --judge")
    try:
        fn, function = load_check(check)
    except CheckError as exc:
        raise click.BadParameter(str(exc), param_hint="CHECK") from None
    return fn, function, check, "code"


def _judge(obj, store, ids, provider, model, base_url, prompt_file, calls, yes):
    from ..evaluation.judge import Judge

    if calls:
        raise click.UsageError("--judge scores sessions; --calls is for a CHECK")
    prompt = prompt_file.read_text(encoding="utf-8") if prompt_file is not None else None
    try:
        judge = Judge(provider, db=obj.db or str(obj.path), model=model, base_url=base_url, prompt=prompt)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    cost = judge.estimate(store, ids)
    money = f"about ${cost['usd']:.4f}" if cost["usd"] is not None else f"cost unknown (no price for {cost['model']})"
    click.echo(f"to judge: {len(ids)} sessions with {provider} {cost['model']}: {cost['calls']} calls, about"
               f" {cost['input_tokens']:,} input tokens and at most {cost['output_tokens']:,} output tokens, {money}",
               err=True)
    if ids and not yes:
        click.confirm("Go on?", abort=True, err=True)
    return judge, "judge", f"judge:{cost['model']}", "llm"


def _run(store, ids, fn, name, by, source, calls, quiet) -> Report:
    console = Console(stderr=True, highlight=False)
    columns = (TextColumn("evaluating"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, disable=quiet or not console.is_terminal, transient=True) as bar:
        task = bar.add_task("sessions", total=len(ids))
        return run(store, ids, fn, name, by, source, calls, progress=lambda n: bar.advance(task, n))


def _report(report: Report, sessions: int, calls: bool) -> None:
    what = "calls" if calls else "sessions"
    click.echo(f"{sessions} sessions: scored {report.scored} {what}; the check said nothing of {report.skipped};"
               f" failed {len(report.failed)}", err=True)
    for target, error in report.failed[:10]:
        click.echo(f"  failed: {target}: {error}", err=True)
    if len(report.failed) > 10:
        click.echo(f"  … and {len(report.failed) - 10} more failed", err=True)
