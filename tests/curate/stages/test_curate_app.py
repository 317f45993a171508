"""curate.app: `vhmine curate` serves the packaged Streamlit app, leaves no server behind when it is stopped, and names
a port already in use with --port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from helpers import free_port, seed_store


def _health(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
            return r.read().decode()
    except OSError:
        return None


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT])
def test_stopping_vhmine_curate_stops_its_streamlit_server(tmp_path, how):
    pytest.importorskip("streamlit")
    store, _ = seed_store(tmp_path / "app.db", tmp_path, per_mode=1)
    store.close()
    port = free_port()
    # its own session, so that the signal reaches vhmine alone, as `kill PID` or a supervisor sends it
    proc = subprocess.Popen(
        [sys.executable, "-m", "vhmine.cli", "curate", "--db", f"sqlite:///{tmp_path / 'app.db'}", "--port", str(port)],
        cwd=tmp_path,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 90
        while _health(port) != "ok" and time.time() < deadline and proc.poll() is None:
            time.sleep(0.5)
        assert _health(port) == "ok"
        proc.send_signal(how)
        assert proc.wait(timeout=30) == 0
        deadline = time.time() + 20
        while _health(port) is not None and time.time() < deadline:
            time.sleep(0.5)
        assert _health(port) is None, "the Streamlit server outlived vhmine curate"
    finally:
        os.killpg(proc.pid, signal.SIGKILL) if proc.poll() is None else None


def test_a_port_in_use_is_named_with_the_option_to_change_it(tmp_path):
    from vhmine.store import open_store

    open_store(tmp_path / "s.db").close()
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        r = subprocess.run(
            [sys.executable, "-m", "vhmine.cli", "curate", "--db", str(tmp_path / "s.db"), "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert r.returncode == 2, r.stderr
    said = " ".join(r.stderr.split())
    assert (
        f"error: port {port} on 127.0.0.1 is in use (another `vhmine curate`, or another server): pass --port N, "
        "e.g. --port " in said
    ), said
    suggested = int(said.split("e.g. --port ")[1].split(",")[0])
    assert suggested > port
    with socket.socket() as probe:  # the port it suggests is free
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", suggested))
    assert "Traceback" not in r.stderr
