"""`_serve(tmp_path, db)`: `vhmine curate` (streamlit run) serving a store on a free port of 127.0.0.1 for the
browser tests (the browser itself: the `chromium` fixture of tests/conftest.py)."""

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request

from helpers import free_port


@contextlib.contextmanager
def _serve(tmp_path, db: str):
    """(url, log path) of `vhmine curate` serving the store at `db` until the block ends."""
    port = free_port()
    log = open(tmp_path / "streamlit.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "vhmine.cli", "curate", "--db", db, "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("the app did not start:\n" + (tmp_path / "streamlit.log").read_text()[-3000:])
            time.sleep(0.5)
        yield url, tmp_path / "streamlit.log"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # our own process group: vhmine and its streamlit child
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
