"""A throw-away PostgreSQL server on loopback for scripts (the same recipe as tests/conftest.py's `pg_server`).

Writes a temporary folder (the cluster, its socket and log), runs initdb and pg_ctl from Debian's
postgresql package (as the `postgres` user when run as root: initdb refuses root), and removes
everything on `stop()`. The server runs in its own session, so a Ctrl-C meant for the script does not
shut it down under the workers; the script's `finally` stops it.

    with ThrowawayPostgres() as pg:
        url = pg.new_database()      # postgresql+psycopg://postgres@127.0.0.1:PORT/b_<hex>

`database_on(server_url)` does the same on a server someone else runs (bench_store.py's --pg-url):
it creates a database there and returns a function that drops it.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid


def _bindir() -> str | None:
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True):
        if os.path.exists(os.path.join(d, "initdb")):
            return d
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ThrowawayPostgres:
    """Start with `start()` (or `with`), make empty databases with `new_database()`, `stop()` removes it all."""

    def __init__(self, max_connections: int = 200):
        self.max_connections = max_connections
        self.root: str | None = None
        self.port: int | None = None
        self._prefix: list[str] = []
        self._bindir: str | None = None

    def start(self) -> ThrowawayPostgres:
        self._bindir = _bindir()
        if self._bindir is None:
            raise SystemExit(
                "PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's postgresql "
                "(scripts/ci_services.sh), or pass --pg-url of a server you run"
            )
        self.root = tempfile.mkdtemp(prefix="vhmine-bench-pg-")
        if os.geteuid() == 0:  # initdb refuses to run as root
            import pwd

            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                self.stop()
                raise SystemExit(
                    "running as root and there is no `postgres` user to run the server as: "
                    "install Debian's postgresql, or pass --pg-url"
                ) from None
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
            self._prefix = ["runuser", "-u", "postgres", "--"]
        data, self.port = os.path.join(self.root, "data"), _free_port()
        try:
            self._run(f"{self._bindir}/initdb", "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
            self._run(
                f"{self._bindir}/pg_ctl",
                "-D",
                data,
                "-l",
                os.path.join(self.root, "log"),
                "-w",
                "-t",
                "60",
                "-o",
                f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                f"-c full_page_writes=off -c max_connections={self.max_connections}",
                "start",
            )
        except BaseException:
            self.stop()
            raise
        return self

    def _run(self, *cmd: str) -> None:
        # start_new_session: a Ctrl-C in the terminal reaches the script, not the server
        res = subprocess.run(
            self._prefix + list(cmd), capture_output=True, text=True, timeout=120, start_new_session=True
        )
        if res.returncode != 0:
            raise SystemExit(f"{os.path.basename(cmd[0])} failed (exit {res.returncode}): {res.stderr.strip()[-800:]}")

    def new_database(self) -> str:
        """A fresh, empty database; its SQLAlchemy URL."""
        import psycopg

        name = "b_" + uuid.uuid4().hex[:12]
        with psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", dbname="postgres", autocommit=True
        ) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        if self.root is None:
            return
        data = os.path.join(self.root, "data")
        if self._bindir and os.path.exists(os.path.join(data, "postmaster.pid")):
            subprocess.run(
                self._prefix + [f"{self._bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"],
                capture_output=True,
                timeout=60,
                start_new_session=True,
            )
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None

    def __enter__(self) -> ThrowawayPostgres:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def database_on(server_url: str):
    """A fresh database on the server of `server_url` (a SQLAlchemy URL); (its URL, a function that drops it)."""
    import psycopg
    from sqlalchemy.engine import make_url

    u = make_url(server_url)
    kw = dict(
        host=u.host or "127.0.0.1",
        port=u.port or 5432,
        user=u.username,
        password=u.password,
        dbname=u.database or "postgres",
        autocommit=True,
    )
    name = "vhmine_bench_" + uuid.uuid4().hex[:12]
    try:
        with psycopg.connect(**kw) as c:
            c.execute(f'CREATE DATABASE "{name}"')
    except psycopg.Error as err:
        raise SystemExit(
            f"cannot create a database on {u.render_as_string(hide_password=True)}: {err}; "
            "--pg-url needs a role that may CREATE DATABASE"
        ) from None

    def drop() -> None:
        with psycopg.connect(**kw) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return u.set(drivername="postgresql+psycopg", database=name).render_as_string(hide_password=False), drop
