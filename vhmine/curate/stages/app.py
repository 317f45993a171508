"""Launching the curation app: `vhmine curate` serves the app that ships in the package
(vhmine/apps/curate.py) with Streamlit, VHMINE_DB set.

Opens (and migrates) the store first, so that a bad URL or a newer schema fails in the terminal rather
than in the browser, and a port already in use is named with --port; then runs Streamlit in a subprocess until it is
interrupted, and stops that subprocess whenever vhmine itself is stopped (Ctrl-C, SIGTERM, SIGHUP). Writes nothing
itself.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

from vhmine.errors import InputError, StoreError
from vhmine.store import display_url, open_store, resolve_url

log = logging.getLogger("vhmine.curate")  # the name these log lines had before curate was split into modules


def default_app_path() -> Path:
    return Path(__file__).resolve().parents[2] / "apps" / "curate.py"  # vhmine/curate/stages/app.py -> vhmine/apps/


def streamlit_command(app_path: Path, host: str, port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(app_path),
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
        "--server.runOnSave",
        "false",
        "--client.toolbarMode",
        "minimal",
        # no full garbage collection after every page run: half the server's time per click (issue 32)
        "--runner.postScriptGC",
        "false",
    ]


def run_app(db: str | None = None, host: str = "127.0.0.1", port: int = 8501, app_path: Path | None = None) -> int:
    """Open (and migrate) the store, then serve the Streamlit app on it until interrupted."""
    if importlib.util.find_spec("streamlit") is None:
        raise StoreError("the curation app needs streamlit: pip install 'vhmine[app]'")
    app_path = Path(app_path) if app_path else default_app_path()
    if not app_path.is_file():
        raise InputError(
            f"the curation app {app_path} is missing: pass --app PATH to a Streamlit script, "
            "or reinstall vhmine (the app ships inside the package as vhmine/apps/curate.py)"
        )
    url = resolve_url(db)
    open_store(url, create=False).close()  # errors (no such store, newer schema, bad URL) show here, not in the browser
    check_port(host, port)
    env = dict(os.environ, VHMINE_DB=url)
    log.info("curation app on http://%s:%d (store %s)", host, port, display_url(url))
    return serve(streamlit_command(app_path, host, port), env)


def _bindable(host: str, port: int) -> bool:
    import socket

    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Streamlit's server binds
            sock.bind((host, port))
        return True
    except OSError:
        return False


def check_port(host: str, port: int) -> None:
    """InputError naming --port (and a free one) when something already listens on host:port."""
    if _bindable(host, port):
        return
    free = next((p for p in range(port + 1, min(port + 50, 65536)) if _bindable(host, p)), None)
    raise InputError(
        f"port {port} on {host} is in use (another `vhmine curate`, or another server): pass --port N"
        + (f", e.g. --port {free}" if free else "")
        + ", or stop what holds it"
    )


def serve(command: list[str], env: dict) -> int:
    """Run the server until it ends or vhmine is stopped; SIGTERM, SIGHUP and Ctrl-C stop the server too,
    so that no orphan keeps the port. 0 when stopped by a signal, else the server's own exit status."""
    proc = subprocess.Popen(command, env=env)
    stopped = []

    def forward(signum, _frame):
        stopped.append(signum)
        proc.send_signal(signal.SIGTERM)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        rc = proc.wait()
        return 0 if stopped else rc
    except KeyboardInterrupt:  # the server got Ctrl-C too when it shares the terminal; make sure it stops
        return 0
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
