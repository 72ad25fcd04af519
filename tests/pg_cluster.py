"""A throwaway PostgreSQL cluster of a test's own (initdb in a temporary folder, a free port on 127.0.0.1), for
tests that stop or restart their database: the shared test server is never restarted. Binaries come from
`pg_config --bindir` or /usr/lib/postgresql/*/bin; as root they run as the `postgres` user, as .ci/postgres does.
"""
from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def binaries() -> Path | None:
    """The folder holding initdb and pg_ctl, or None when this machine has no PostgreSQL."""
    candidates = []
    if shutil.which("pg_config"):
        found = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        candidates.append(found.stdout.strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for folder in candidates:
        if folder and (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """`start()`, `stop()`, `restart()`; `url` is the superuser's URL on 127.0.0.1."""

    def __init__(self, bindir: Path):
        # Not under pytest's tmp_path: its root is private to root (and made so again by every pytest run),
        # where the postgres user could not reach its data folder.
        self.folder = Path(tempfile.mkdtemp(prefix="reasonlog-pg-"))
        self.bindir, self.data, self.port = bindir, self.folder / "pgdata", free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._as_root = os.geteuid() == 0
        self.data.mkdir()
        if self._as_root:
            os.chmod(self.folder, 0o755)
            shutil.chown(self.data, "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--locale=C.UTF-8")

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bindir / tool), *args]
        if self._as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def _options(self) -> str:
        return f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.data} -c fsync=off"

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.data / "log"), "-w", "-o", self._options(), "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        """Stop the cluster if it runs, and delete its folder."""
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass  # stopped already
        shutil.rmtree(self.folder, ignore_errors=True)

    def restart(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.data / "log"), "-m", "fast", "-w", "-o",
                  self._options(), "restart")
