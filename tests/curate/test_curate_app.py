"""curate.app: `vhmine curate` serves the packaged Streamlit app and leaves no server behind when it is stopped."""

from __future__ import annotations

import os
import signal
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


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT])
def test_stopping_vhmine_curate_stops_its_streamlit_server(tmp_path, how):
    pytest.importorskip("streamlit")
    store, _ = seed_store(tmp_path / "app.db", tmp_path, per_mode=1)
    store.close()
    port = free_port()
    # its own session, so that the signal reaches vhmine alone, as `kill PID` or a supervisor sends it
    proc = subprocess.Popen([sys.executable, "-m", "vhmine.cli", "curate", "--db", f"sqlite:///{tmp_path / 'app.db'}",
                             "--port", str(port)], cwd=tmp_path, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
