"""A throw-away PostgreSQL + PostGIS server for the peer benchmark.

The same recipe as the workbench's ``pg_cluster.rs``: ``initdb`` into a
temporary directory, ``pg_ctl start`` on a free loopback port, trust
authentication; as root the server runs as the ``postgres`` account through
``runuser`` (``initdb`` refuses root). Unlike the test cluster, this one
keeps ``fsync`` on: it is measured, so it must be as durable as the others.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from typing import List, Optional


def find_bindir() -> Optional[str]:
    """Directory of ``initdb``/``pg_ctl``: ``$GEOFLASH_PG_BIN``, PATH, Debian's."""
    env = os.environ.get("GEOFLASH_PG_BIN")
    if env:
        return env
    on_path = shutil.which("initdb")
    if on_path:
        return os.path.dirname(on_path)
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(d.split("/")[-2]))
    return dirs[-1] if dirs else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ClusterRef:
    """How to reach a running server and count what its processes write."""

    def __init__(self, port: int, data: str):
        self.port = port
        self.data = data

    def url(self, db: str) -> str:
        """Connection URL of database ``db``."""
        return f"postgresql://geoflash@127.0.0.1:{self.port}/{db}"

    def server_pids(self) -> List[int]:
        """The postmaster and its children (backends, checkpointer, WAL writer)."""
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            root = int(f.readline())
        pids = [root]
        try:
            out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(root)], capture_output=True, text=True)
            pids += [int(p) for p in out.stdout.split()]
        except (OSError, ValueError):
            pass
        return pids

    def written_bytes(self) -> int:
        """Sum of ``write_bytes`` of the server's live processes."""
        total = 0
        for pid in self.server_pids():
            try:
                with open(f"/proc/{pid}/io") as f:
                    for line in f:
                        if line.startswith("write_bytes:"):
                            total += int(line.split()[1])
            except OSError:
                continue
        return total


class TempCluster(ClusterRef):
    """A running server; ``stop()`` (or the context manager) removes it."""

    def __init__(self, bindir: str, shared_buffers_kib: Optional[int] = None):
        """Starts a server from ``bindir``, with ``shared_buffers`` of
        ``shared_buffers_kib`` (PostgreSQL's default, 128 MB, without it)."""
        self.bindir = bindir
        self.dir = tempfile.mkdtemp(prefix="geoflash-peers-pg-")
        self.port = _free_port()
        self.run_as = "postgres" if os.geteuid() == 0 else None
        if self.run_as:
            shutil.chown(self.dir, self.run_as)
        data = os.path.join(self.dir, "data")
        self._run(["initdb", "-D", data, "-U", "geoflash", "--auth=trust", "-E", "UTF8"])
        opts = f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.dir}"
        if shared_buffers_kib:
            opts += f" -c shared_buffers={int(shared_buffers_kib)}kB"
        self._run(["pg_ctl", "-D", data, "-w", "-l", os.path.join(self.dir, "log"), "-o", opts, "start"])
        super().__init__(self.port, data)

    def _run(self, cmd: List[str]) -> None:
        cmd = [os.path.join(self.bindir, cmd[0])] + cmd[1:]
        if self.run_as:
            cmd = ["runuser", "-u", self.run_as, "--"] + cmd
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr.strip() or r.stdout.strip()}")

    def stop(self) -> None:
        try:
            self._run(["pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop"])
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
