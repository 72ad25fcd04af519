"""`reasonlog serve`: the HTTP API over a database (see reasonlog.server)."""
from __future__ import annotations

import ipaddress
import os

import click

from ..store import StoreError, open_store_or_read_only
from .group import cli


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but loopback needs an API key (reasonlog keys create).")
@click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True)
@click.option("--max-body-mb", type=click.FloatRange(min=0.1, max=1024), default=8.0, show_default=True,
              help="The largest ingestion body recorders may send (advertised at GET /v1/ingest).")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Server processes; with PostgreSQL (or SQLite on one machine) they share the database.")
@click.option("--summarize", "summarizer", type=click.Choice(["offline", "anthropic", "openai"]),
              help="Summarise new sessions and exchanges in the background with this summarizer.")
@click.option("--summarize-model", metavar="M", help="The model the anthropic/openai summarizer asks ('same': the"
                                                     " session's own).")
@click.option("--summarize-base-url", metavar="U", help="The server the openai/anthropic summarizer asks.")
@click.option("--summarize-every", type=click.FloatRange(min=1), default=60.0, show_default=True, metavar="SECONDS",
              help="How often the background summaries look for new work.")
@click.option("--embed/--no-embed", default=True, show_default=True,
              help="Embed new text for search by meaning in the background (with the semantic extra installed;"
                   " one server process only).")
@click.option("--embed-every", type=click.FloatRange(min=1), default=30.0, show_default=True, metavar="SECONDS",
              help="How often the background embedding looks for new text.")
@click.option("--keep-days", type=click.IntRange(min=1), metavar="N",
              help="Retention: prune the sessions last active more than N days ago, now and every --keep-every"
                   " seconds, as `reasonlog prune --older-than Nd` does (on PostgreSQL beside live writers).")
@click.option("--keep-every", type=click.FloatRange(min=1), default=3600.0, show_default=True, metavar="SECONDS",
              help="How often --keep-days prunes.")
@click.option("--shutdown-grace", type=click.FloatRange(min=0, max=600), default=3.0, show_default=True,
              metavar="SECONDS", help="On SIGTERM or Ctrl-C, what requests under way get to finish before they"
                                      " are cancelled; the process ends at most 2 s after that.")
@click.option("--mirror", metavar="TARGET", help="A ClickHouse mirror (reasonlog mirror push TARGET) that answers"
                                                 " usage, statistics and session lists while it is caught up.")
@click.pass_obj
def serve(obj, host, port, max_body_mb, workers, summarizer, summarize_model, summarize_base_url, summarize_every,
          embed, embed_every, keep_days, keep_every, shutdown_grace, mirror):
    """Serve the database over HTTP: /reasoning, /healthz, /readyz, and the OpenAPI schema at /openapi.json.

    Once a key exists, every request but /healthz needs one: `Authorization: Bearer <key>`."""
    path = obj.path
    if workers > 1 and summarizer is not None:
        raise click.UsageError("--summarize runs in one server process: use --workers 1, or run"
                               " `reasonlog summarize` on a schedule beside the workers")
    make = None if summarizer is None else _summarizer(summarizer, str(path), summarize_model, summarize_base_url)
    if not _loopback(host) and not open_store_or_read_only(path).has_api_keys():
        # Past this machine every request must carry a key, so there must be one to carry.
        raise click.UsageError(f"--host {host}: serving beyond this machine needs an API key; create one with"
                               " `reasonlog keys create --scope read` (or bind to 127.0.0.1)")
    try:
        import uvicorn

        from ..server import ending
        from ..server.app import serve_app
    except ImportError:
        raise StoreError("reasonlog serve needs the server extra: pip install 'reasonlog[server]'") from None
    if mirror is not None:
        _check_mirror(mirror)
    port_is_free(host, port)
    click.echo(f"serving {obj.shown} on http://{host}:{port} with {workers} worker(s) (Ctrl-C stops)", err=True)
    # Recorded text is never logged: no access log (URLs carry search terms), warnings only.
    if workers == 1:
        app = serve_app(path, mirror=mirror, deployment_mode=os.environ.get("REASONLOG_DEPLOYMENT_MODE", "local"),
                        summarizer=make, summarize_every_s=summarize_every,
                        embedder=_embedder(path) if embed else None, embed_every_s=embed_every,
                        max_body_bytes=int(max_body_mb * (1 << 20)), exit_within_s=ending.EXIT_WITHIN_S,
                        keep_days=keep_days, keep_every_s=keep_every, settle_heap=True)
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False,
                    timeout_graceful_shutdown=shutdown_grace)
        return
    if embed and _embedder(path, say=False) is not None:
        click.echo("background embedding runs with --workers 1 only: run `reasonlog embed` beside the workers",
                   err=True)
    os.environ["REASONLOG_SERVE_DB"] = str(path)  # each worker process builds its app from these
    os.environ["REASONLOG_SERVE_MAX_BODY"] = str(int(max_body_mb * (1 << 20)))
    if keep_days is not None:
        os.environ["REASONLOG_SERVE_KEEP"] = f"{keep_days} {keep_every}"
    os.environ["REASONLOG_SERVE_MIRROR"] = mirror or ""
    uvicorn.run("reasonlog.server.app:app_from_environment", factory=True, host=host, port=port, workers=workers,
                log_level="warning", access_log=False, timeout_graceful_shutdown=shutdown_grace)


def _check_mirror(target: str) -> None:
    """Reach the mirror before serving, so a wrong TARGET is said at once rather than on the first request."""
    try:
        from ..mirror import engine
    except ImportError:  # pragma: no cover
        raise StoreError("serve --mirror needs the mirror extra: pip install 'reasonlog[mirror]'") from None
    try:
        engine.connect(target)
    except engine.MirrorError as exc:
        raise StoreError(f"--mirror: {exc}") from None


def port_is_free(host: str, port: int) -> None:
    """Bind the address as the server will (address reuse on, as uvicorn does), so a port in use is said before
    anything says it is served; a StoreError naming the port otherwise."""
    listening(host, port).close()


def listening(host: str, port: int):
    """A socket bound to the address (address reuse on, as uvicorn does) and listening (port 0: a free one); a
    StoreError naming the port when it cannot be had."""
    import socket

    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))
        s.listen(128)
    except OSError as exc:
        s.close()
        raise StoreError(f"cannot serve on {host}:{port}: {exc.strerror or exc} (another server is on it? choose"
                         " another --port)") from None
    return s


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _embedder(path, say: bool = True):
    """A maker of the embedder for background embedding, when search by meaning is installed here; else None
    (said once, so a server without the extra starts as before)."""
    from ..semantic import SemanticUnavailable, choose_embedder, missing_packages

    try:
        embedder = choose_embedder()
    except SemanticUnavailable as exc:
        if say:
            click.echo(f"no background embedding: {exc}", err=True)
        return None
    missing = missing_packages(local=not hasattr(embedder, "url"), sqlite="://" not in str(path))
    if missing:
        return None
    if say:
        click.echo(f"embedding new text in the background with {embedder.model} (--no-embed turns it off)",
                   err=True)
    return lambda: embedder


def _summarizer(name: str, db: str, model: str | None, base_url: str | None):
    """A maker of the chosen summarizer, tried once now so a missing key or SDK is a usage error at start."""
    from ..summaries import make_summarizer

    if name == "offline" and (model or base_url):
        raise click.UsageError("--summarize-model and --summarize-base-url are for --summarize anthropic or openai")
    try:
        make_summarizer(name, db=db, model=model, base_url=base_url)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    return lambda: make_summarizer(name, db=db, model=model, base_url=base_url)


@cli.command()
@click.option("--port", type=click.IntRange(0, 65535), default=0, help="Port on 127.0.0.1 (default: a free one).")
@click.option("--no-browser", is_flag=True, help="Print the sign-in address (it works once) instead of opening a"
              " browser.")
@click.pass_obj
def ui(obj, port, no_browser):
    """Open the dashboard on this machine's database in the browser (serves on 127.0.0.1 until Ctrl-C).

    The browser is signed in by a one-time token in the address, so no API key is asked of you."""
    import threading
    import webbrowser

    try:
        import uvicorn

        from ..server.app import create_app
        from ..server.dashboard.owner import new_token
    except ImportError:
        raise StoreError("reasonlog ui needs the server extra: pip install 'reasonlog[server]'") from None
    path = obj.path
    obj.store.schema_version()  # a missing database is said now (with how to start one), not on the first page
    # The socket listens before the browser is opened: its first request waits in the queue while the app starts,
    # instead of being refused (a browser that came up first showed "connection refused").
    sock = listening("127.0.0.1", port)
    port = sock.getsockname()[1]
    token = new_token()  # signs the browser it opens in once, keys or not (see server/dashboard/owner.py)
    url = f"http://127.0.0.1:{port}/"
    sign_in = f"{url}login?token={token}"
    click.echo(f"reasonlog dashboard on {url} ({obj.shown}; Ctrl-C stops)", err=True)

    def open_browser() -> None:
        if not webbrowser.open(sign_in):  # no browser here: the person opens the address (it works once)
            click.echo(f"open {sign_in} (it signs you in once)", err=True)
    if no_browser:
        click.echo(f"open {sign_in} (it signs you in once)", err=True)
    else:
        threading.Thread(target=open_browser, daemon=True).start()
    config = uvicorn.Config(create_app(lambda: open_store_or_read_only(path), login_token=token, settle_heap=True),
                            log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])
