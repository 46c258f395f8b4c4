"""A private PgBouncer in transaction pooling mode in front of the local PostgreSQL: on its own port, stopped by
the PID we started it with (docs/fleet.md's "More than ~90 Macs" as the tests and benchmarks/fleet_scale.py run it).
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

from harness.fleet import free_port, wait_for

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def config(port: int, folder: Path, users: list[str], *, pool_size: int = 20, max_db_connections: int = 40) -> str:
    """The ini docs/fleet.md shows, for the local PostgreSQL (trust on 127.0.0.1, so no passwords here)."""
    (folder / "userlist.txt").write_text("".join(f'"{u}" ""\n' for u in users))
    return f"""[databases]
* = host=127.0.0.1 port=5432

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {folder / "userlist.txt"}
pool_mode = transaction
max_client_conn = 5000
default_pool_size = {pool_size}
max_db_connections = {max_db_connections}
server_reset_query =
ignore_startup_parameters = extra_float_digits,options
logfile = {folder / "pgbouncer.log"}
"""


class PgBouncer:
    def __init__(self, users: list[str], **pool):
        if not Path(PGBOUNCER).exists():
            raise RuntimeError("pgbouncer is not installed: apt-get install pgbouncer (scripts/test_deps.sh)")
        # A folder of its own under /tmp: run as the postgres user (below), it cannot enter pytest's root-only ones.
        self.folder, self.port = Path(tempfile.mkdtemp(prefix="sb-pgbouncer-")), free_port()
        os.chmod(self.folder, 0o755)
        folder = self.folder
        self.ini = folder / "pgbouncer.ini"
        self.ini.write_text(config(self.port, folder, users, **pool))
        self.proc: subprocess.Popen | None = None

    def url(self, database: str, user: str = "postgres") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def start(self) -> PgBouncer:
        as_user: list[str] = []
        if os.geteuid() == 0:  # PgBouncer refuses to run as root: as the postgres user (setpriv execs, one PID)
            pw = pwd.getpwnam("postgres")
            for path in (self.folder, *self.folder.iterdir()):
                os.chown(path, pw.pw_uid, pw.pw_gid)
            as_user = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups", "--"]
        self.proc = subprocess.Popen(
            [*as_user, PGBOUNCER, str(self.ini)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for(self._up, 15, what=f"pgbouncer on {self.port}")
        return self

    def _up(self) -> bool:
        log = self.folder / "pgbouncer.log"
        assert self.proc is not None and self.proc.poll() is None, log.read_text()[-2000:] if log.exists() else "no log"
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            return True
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # by the PID we started; SIGINT: a safe shutdown
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.folder, ignore_errors=True)
