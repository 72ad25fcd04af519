"""`reasonlog serve`: the HTTP API over a database (see reasonlog.server)."""
from __future__ import annotations

import ipaddress
import os

import click

from ..store import StoreError, open_store
from .main import cli


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback only, for now).")
@click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True)
@click.pass_obj
def serve(obj, host, port):
    """Serve the database over HTTP: /reasoning, /healthz, /readyz, and the OpenAPI schema at /openapi.json."""
    if not _loopback(host):
        # Anything past this machine must carry API keys, and this reasonlog cannot check any yet.
        raise click.UsageError(f"--host {host}: reasonlog serves only on loopback (127.0.0.1, ::1, localhost)"
                               " until API keys exist; nothing else may reach recorded data unauthenticated")
    try:
        import uvicorn

        from ..server.app import create_app
    except ImportError:
        raise StoreError("reasonlog serve needs the server extra: pip install 'reasonlog[server]'") from None
    path = obj.path
    app = create_app(lambda: open_store(path), os.environ.get("REASONLOG_DEPLOYMENT_MODE", "local"))
    click.echo(f"serving {path} on http://{host}:{port} (Ctrl-C stops)", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)  # recorded text never logged


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
