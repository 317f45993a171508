"""vhmine.curate.app: `vhmine curate` launching the app; a port already in use is named, with --port."""

from __future__ import annotations

import socket
import subprocess
import sys


def test_a_port_in_use_is_named_with_the_option_to_change_it(tmp_path):
    from vhmine.store import open_store

    open_store(tmp_path / "s.db").close()
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "vhmine.cli", "curate", "--db", str(tmp_path / "s.db"), "--port",
                            str(port)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    said = " ".join(r.stderr.split())
    assert f"error: port {port} on 127.0.0.1 is in use (another `vhmine curate`, or another server): pass --port N, " \
           "e.g. --port " in said, said
    suggested = int(said.split("e.g. --port ")[1].split(",")[0])
    assert suggested > port
    with socket.socket() as probe:  # the port it suggests is free
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", suggested))
    assert "Traceback" not in r.stderr
