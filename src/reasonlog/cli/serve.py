"""`reasonlog serve`: the HTTP API over a database (see reasonlog.server)."""
from __future__ import annotations

import ipaddress
import os

import click

from ..store import StoreError, open_store
from .main import cli


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but loopback needs an API key (reasonlog keys create).")
@click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True)
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Server processes; with PostgreSQL (or SQLite on one machine) they share the database.")
@click.pass_obj
def serve(obj, host, port, workers):
    """Serve the database over HTTP: /reasoning, /healthz, /readyz, and the OpenAPI schema at /openapi.json.

    Once a key exists, every request but /healthz needs one: `Authorization: Bearer <key>`."""
    path = obj.path
    if not _loopback(host) and not open_store(path).has_api_keys():
        # Past this machine every request must carry a key, so there must be one to carry.
        raise click.UsageError(f"--host {host}: serving beyond this machine needs an API key; create one with"
                               " `reasonlog keys create --scope read` (or bind to 127.0.0.1)")
    try:
        import uvicorn

        from ..server.app import create_app
    except ImportError:
        raise StoreError("reasonlog serve needs the server extra: pip install 'reasonlog[server]'") from None
    click.echo(f"serving {obj.shown} on http://{host}:{port} with {workers} worker(s) (Ctrl-C stops)", err=True)
    # Recorded text is never logged: no access log (URLs carry search terms), warnings only.
    if workers == 1:
        app = create_app(lambda: open_store(path), os.environ.get("REASONLOG_DEPLOYMENT_MODE", "local"))
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
        return
    os.environ["REASONLOG_SERVE_DB"] = str(path)  # each worker process builds its app from it
    uvicorn.run("reasonlog.server.app:app_from_environment", factory=True, host=host, port=port, workers=workers,
                log_level="warning", access_log=False)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
