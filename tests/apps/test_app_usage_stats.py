"""`streamlit run apps/curate.py`, the documented way to serve the app from a checkout, sends no usage statistics, as
`vhmine curate` does (issue 33): a real `streamlit run` on 127.0.0.1, from the top of the checkout and from another
folder, opened in Chromium; the config Streamlit sends the page (its NewSession message, read off the websocket)
says gather_usage_stats false. A home folder of the test's own, so no ~/.streamlit of this machine counts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import free_port

REPO = Path(__file__).resolve().parents[2]


def _gather_usage_stats(page, url: str) -> bool:
    """The gather_usage_stats the server sends a page that opens `url` (its NewSession message's config)."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    said: list[bool] = []

    def frame(payload):
        if isinstance(payload, bytes):
            msg = ForwardMsg()
            try:
                msg.ParseFromString(payload)
            except Exception:  # noqa: BLE001 - a frame of another kind
                return
            if msg.WhichOneof("type") == "new_session":
                said.append(msg.new_session.config.gather_usage_stats)

    page.on("websocket", lambda ws: ws.on("framereceived", frame))
    page.goto(url, timeout=60_000)
    deadline = time.monotonic() + 60
    while not said and time.monotonic() < deadline:
        page.wait_for_timeout(200)
    assert said, "no NewSession message came"
    return said[0]


def _serve(cwd: Path, home: Path, log: Path):
    port = free_port()
    env = dict(os.environ, HOME=str(home), VHMINE_DB=f"sqlite:///{home / 'none.db'}")
    env.pop("STREAMLIT_BROWSER_GATHER_USAGE_STATS", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(os.path.relpath(REPO / "apps" / "curate.py", cwd))]
        + ["--server.port", str(port), "--server.address", "127.0.0.1", "--server.headless", "true"],
        cwd=cwd,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read() == b"ok":
                return proc, url
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL) if proc.poll() is None else None
            raise AssertionError("streamlit did not start:\n" + log.read_text()[-3000:])
        time.sleep(0.3)


@pytest.mark.slow
def test_streamlit_run_apps_curate_sends_no_usage_statistics(tmp_path, chromium):
    pytest.importorskip("streamlit")
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    said = {}
    with chromium.new_context() as browser:
        try:
            for name, cwd in (("the checkout", REPO), ("another folder", elsewhere)):
                proc, url = _serve(cwd, home, tmp_path / f"{cwd.name}.log")
                try:
                    page = browser.new_page()
                    said[name] = _gather_usage_stats(page, url)
                    page.close()
                finally:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(timeout=20)
        finally:
            browser.close()
    assert said == {"the checkout": False, "another folder": False}
