"""`reasonlog proxy` (record any client pointed at it; `--replay` answers from a recording) and `reasonlog run`
(a command run with its model calls going through a proxy of its own). See docs/proxy.md."""
from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import click

from ..store import StoreError
from .group import cli

UPSTREAM_HELP = ("Where calls go: a URL for every provider, or NAME=URL (anthropic, openai, google); repeatable."
                 " Default: each provider's public API.")


def client_environment(url: str) -> dict[str, str]:
    """The variables each client reads for its base URL, pointing at the proxy at `url`."""
    return {"ANTHROPIC_BASE_URL": url,  # Claude Code, the Anthropic SDKs
            "OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_BASE": f"{url}/v1",  # Codex, the OpenAI SDKs, older tools
            "GOOGLE_GEMINI_BASE_URL": url}  # Gemini CLI, google-genai


# Clients that read their base URL from their own configuration rather than the environment: the arguments that
# point them at the proxy. Codex (0.1xx) reads `openai_base_url` from config.toml or `-c`, not OPENAI_BASE_URL.
CLIENT_ARGUMENTS = {"codex": lambda url: ["-c", f'openai_base_url="{url}/v1"']}


def client_arguments(argv: list[str], url: str) -> list[str]:
    """`argv` with the arguments its client needs to reach the proxy at `url` put after the program."""
    extra = CLIENT_ARGUMENTS.get(Path(argv[0]).name)
    return argv if extra is None else [argv[0], *extra(url), *argv[1:]]


def _modules():
    """The proxy's modules, or a one-line error naming the extra it needs."""
    try:
        import aiohttp  # noqa: F401

        from ..capture import proxy, proxy_record, proxy_routes, proxy_sessions
    except ImportError:
        raise StoreError("the proxy needs its extra: pip install 'reasonlog[proxy]'") from None
    return proxy, proxy_record, proxy_routes, proxy_sessions


def _upstreams(given: tuple[str, ...]) -> dict[str, str]:
    _, _, routes, _ = _modules()
    try:
        return routes.parse_upstreams(given)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def _recording(path, **session_args):
    from ..capture.recorder import Recorder

    _, record, _, sessions = _modules()
    recorder = Recorder(path)
    return recorder, record.Recording(sessions.Sessions(recorder, **session_args))


def _port_taken(host: str, port: int, exc: OSError) -> click.ClickException:
    return click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc} (choose another --port)")


@cli.command()
@click.option("--port", type=click.IntRange(0, 65535), default=8788, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--upstream", multiple=True, metavar="URL|NAME=URL", help=UPSTREAM_HELP)
@click.option("--replay", "replay_session", metavar="SESSION",
              help="Answer from this recorded session, byte for byte, with no network.")
@click.option("--until", type=click.IntRange(min=0), metavar="N",
              help="With --replay: serve calls #0..#N-1 from the recording, forward #N on (recorded as a fork).")
@click.option("--from", "fork_point", metavar="SESSION#N",
              help="The same as --replay SESSION --until N: serve the recording up to call #N, forward from there.")
@click.option("--model", metavar="M", help="With --until: the model forwarded calls ask for.")
@click.option("--strict", is_flag=True, help="With --replay: match requests exactly (canonical JSON), not up to the"
              " ids, times and process ids a re-run makes fresh.")
@click.pass_obj
def proxy(obj, port, host, upstream, replay_session, until, fork_point, model, strict):
    """Forward model calls to their provider, recording each one (Anthropic Messages, OpenAI Chat Completions and
    Responses, Gemini generateContent; streams pass through as they arrive). Point a client at it with
    ANTHROPIC_BASE_URL, OPENAI_BASE_URL or GOOGLE_GEMINI_BASE_URL; Ctrl-C stops."""
    if fork_point:
        if replay_session or until is not None:
            raise click.UsageError("--from SESSION#N stands for --replay SESSION --until N: give one or the other")
        replay_session, until = _fork_point(fork_point)
    if (until is not None or model) and not replay_session:
        raise click.UsageError("--until and --model go with --replay SESSION")
    if model and until is None:
        raise click.UsageError("--model needs --until N (the calls before #N are served from the recording)")
    module, _, _, _ = _modules()
    upstreams = _upstreams(upstream)
    recorder, recording, replayer = None, None, None
    if replay_session:
        replayer, recorder, recording = _replay_setup(obj, replay_session, until, model, strict)
    else:
        recorder, recording = _recording(obj.path)
    url = f"http://{host}:{port}"
    try:
        sock = module.bind(host, port)
    except OSError as exc:
        raise _port_taken(host, port, exc) from None
    said = "answering from the recording" if replay_session and until is None else f"recording into {obj.shown}"
    click.echo(f"reasonlog proxy on {url}, {said} (Ctrl-C stops). Point clients at it:\n"
               + "".join(f"  export {k}={v}\n" for k, v in client_environment(url).items()), err=True)
    try:
        module.serve_forever(module.Proxy(upstreams, recording, replayer), sock)
    finally:
        _finish(recorder, recording)
        _report(replayer)


def _fork_point(text: str) -> tuple[str, int]:
    session, _, call = text.rpartition("#")
    if not session or not call.isdigit():
        raise click.UsageError(f"--from {text}: expected SESSION#N, a session id and a call number (e.g. 01J9X#3)")
    return session, int(call)


def _replay_setup(obj, session: str, until: int | None, model: str | None, strict: bool = False):
    """The replayer of a recorded run (the session and the calls its run made beside it), and for a fork the
    recorder of what is forwarded."""
    from ..capture import proxy_replay

    _modules()
    store = obj.store
    sid = _recorded_session(store, session)
    script = proxy_replay.load_script(store, sid)
    own = [c for c in script.calls if c.session_id == sid]
    if not own:
        raise click.UsageError(f"--replay {session}: session {sid} recorded no calls")
    if until is not None and until > len(own):
        raise click.UsageError(f"call #{until}: session {sid} has {len(own)} calls (#0 to #{len(own) - 1})")
    if until is None:
        return proxy_replay.Replayer(script, None, model, strict=strict), None, None
    fork_at = own[min(until, len(own) - 1)].call_id
    obj.close()
    recorder, recording = _recording(obj.path, run=f"fork of {sid} at #{until}", parent=sid, parent_call=fork_at,
                                     labels={"fork_of": sid, "fork_at": str(until)})
    return proxy_replay.Replayer(script, until, model, strict=strict), recorder, recording


def _recorded_session(store, given: str) -> str:
    """The session a replay starts from: a session (id, a start of one, the agent's own id), or a run's name, whose
    newest loop session it is (its side sessions, title or router calls, come with it)."""
    from ..store import NotFound, SessionFilter

    try:
        return store.resolve_id("session", given)
    except NotFound:
        loops = [s for s in store.list_sessions(SessionFilter(run=given, limit=50))
                 if not (s.get("labels") or {}).get("role")]
        if not loops:
            raise click.UsageError(f"--replay {given}: no session has this id, nor a run this name"
                                   " (see reasonlog sessions)") from None
        return loops[0]["id"]


def _report(replayer) -> None:
    """What a replay served from the recording, and what each match tolerated."""
    if replayer is None or not (replayer.served or replayer.forwarded):
        return
    click.echo(f"reasonlog replay: {len(replayer.served)} request(s) answered from the recording"
               f" {replayer.script.session_id}:", err=True)
    for line in replayer.report():
        click.echo(line, err=True)


def _finish(recorder, recording) -> None:
    if recording is not None:
        recording.close()
    if recorder is not None:
        recorder.close(timeout=30)


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--port", type=click.IntRange(0, 65535), default=0, help="The proxy's port (default: a free one).")
@click.option("--upstream", multiple=True, metavar="URL|NAME=URL", help=UPSTREAM_HELP)
@click.option("--replay", "replay_session", metavar="RUN|SESSION",
              help="Answer the command's model calls from this recorded run (a session, or a run's name: its newest"
                   " session, with the calls the run made beside it), with no network.")
@click.option("--from", "fork_point", metavar="SESSION#N",
              help="Answer from the recording up to call #N of SESSION, then forward (recorded as a fork).")
@click.option("--model", metavar="M", help="With --from: the model the forwarded calls ask for.")
@click.option("--strict", is_flag=True, help="With --replay or --from: match requests exactly (canonical JSON).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_obj
def run(obj, port, upstream, replay_session, fork_point, model, strict, command):
    """Run COMMAND with its model calls recorded: a proxy on a free port, the client variables pointing at it
    (ANTHROPIC_BASE_URL, OPENAI_BASE_URL, GOOGLE_GEMINI_BASE_URL); exits with the command's code.

    Example: reasonlog run -- claude -p "fix the failing test". With --replay SESSION the command is answered
    from that recording instead; with --from SESSION#N --model M it is forked there onto M."""
    module, _, _, _ = _modules()
    upstreams = _upstreams(upstream)
    program = shutil.which(command[0])
    if program is None:
        click.echo(f"error: {command[0]}: command not found", err=True)
        sys.exit(127)
    cwd, name = os.getcwd(), Path(command[0]).name
    replayer = None
    if model and not fork_point:
        raise click.UsageError("--model goes with --from SESSION#N (the calls before #N come from the recording)")
    if replay_session or fork_point:
        replayer, recorder, recording = _replay_setup(obj, *_replay_choice(replay_session, fork_point, model),
                                                      strict)
    else:
        recorder, recording = _recording(obj.path, agent=name, run=f"{name} in {cwd}",
                                         labels={"command": shlex.join(command), "cwd": cwd})
    sys.setswitchinterval(module.SWITCH_INTERVAL_S)  # this process forwards the child's calls (see capture/proxy.py)
    try:
        running = module.Running(module.Proxy(upstreams, recording, replayer), port=port)
    except OSError as exc:
        _finish(recorder, recording)
        raise _port_taken("127.0.0.1", port, exc) from None
    try:
        argv = client_arguments([program, *command[1:]], running.url)
        code = _run_child(argv, {**os.environ, **client_environment(running.url)})
    finally:
        running.stop()
        _finish(recorder, recording)
    _report(replayer)
    if recording is not None:
        _say_where(obj, recording, recording.sessions.run or f"{name} in {cwd}")
    sys.exit(code)


def _replay_choice(replay_session: str | None, fork_point: str | None,
                   model: str | None) -> tuple[str, int | None, str | None]:
    """`run`'s --replay / --from / --model as (session, until, model)."""
    if replay_session and fork_point:
        raise click.UsageError("--from SESSION#N already names the recording: give --replay or --from, not both")
    if model and not fork_point:
        raise click.UsageError("--model goes with --from SESSION#N (the calls before #N come from the recording)")
    if fork_point:
        session, until = _fork_point(fork_point)
        return session, until, model
    return replay_session or "", None, None


def _run_child(argv: list[str], env: dict[str, str]) -> int:
    """Run the child with this terminal; Ctrl-C reaches it (same process group) and we wait for it to end.
    SIGTERM or SIGHUP sent to `run` alone is passed on to the child, and `run` still finishes recording what the
    child sent (Python's default would end `run` at once, with the calls not yet written). A child ended by a
    signal exits 128 + the signal, as a shell says."""
    child = subprocess.Popen(argv, env=env)

    def pass_on(signum: int, _frame) -> None:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    previous = {sig: signal.signal(sig, pass_on) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        while True:
            try:
                code = child.wait()
                break
            except KeyboardInterrupt:
                continue  # the child got the same SIGINT; its exit decides ours
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 128 - code if code < 0 else code


def _say_where(obj, recording, run_name: str) -> None:
    sessions = recording.sessions.started
    calls = recording.count
    if not sessions:
        click.echo("reasonlog: no model calls went through the proxy", err=True)
        return
    db = "" if obj.db is None else f" --db {shlex.quote(str(obj.db))}"
    roles = sorted({role for _, role in recording.sessions.sides})
    beside = f" and {len(recording.sessions.sides)} side session(s) ({', '.join(roles)})" if roles else ""
    click.echo(f"reasonlog: recorded {calls} call(s) in {len(sessions)} session(s){beside}. Look at them with:",
               err=True)
    for session in sessions[:5]:
        click.echo(f"  reasonlog{db} show {session.id}", err=True)
    click.echo(f"  reasonlog{db} sessions --run {shlex.quote(run_name)}", err=True)

