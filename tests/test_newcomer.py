"""What a newcomer trips over: help texts that show their defaults, `vhmine curate` that leaves no
Streamlit server behind when it is stopped, and messages that say what happened (mine's threshold
warning once, the demo's box and the scatter legend with the numbers written, seed pointing from the
CSV to the parquet file beside it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from helpers import free_port, seed_store


def _help(*words: str) -> str:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "vhmine.cli", *words, "--help"], capture_output=True, text=True,
                          env=env, check=True, timeout=120).stdout


def test_help_shows_bracketed_defaults_and_env_names():
    text = " ".join(_help("embed").split())
    assert "Collection name [default: the folder's name]." in text  # rich markup used to eat the brackets
    assert "[env VHMINE_INDEXES; default ./indexes]" in text
    assert "[default: 64" in text


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


# --- messages say what happened ----------------------------------------------------------------------

def _vhmine(*words: str, cwd) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200", HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "vhmine.cli", *words], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=600)


def test_mine_warns_once_about_reversed_thresholds(tmp_path):
    import numpy as np

    from test_mine import _unit, make_index

    rng = np.random.default_rng(0)
    make_index(tmp_path / "idx", "syn", _unit(rng.normal(size=(8, 6))), _unit(rng.normal(size=(8, 5))), root=tmp_path / "imgs")
    r = _vhmine("mine", "--index", "syn", "--indexes", str(tmp_path / "idx"), "--clip", "0.5", "--dino", "0.7",
                "--out", "runs/x", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    said = r.stdout + r.stderr
    assert said.count("--dino 0.7 >= --clip 0.5") == 1, said  # it was logged, then repeated in the summary


def test_offline_demo_says_how_many_pairs_its_box_holds(tmp_path):
    """The demo drew its box around 5 pairs and said "the box holds the 5 pairs", then wrote 31; each
    note was printed twice (logged, then in the summary)."""
    import json
    import re

    import pandas as pd

    r = _vhmine("demo", "--offline", "--workdir", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    run = tmp_path / "runs" / "demo-offline"
    written = len(pd.read_parquet(run / "pairs.parquet"))
    in_box = json.loads((run / "run.json").read_text())["counts"]["in_box"]
    note = re.search(r"the smallest box that holds the 5 pairs CLIP ranks highest relative to DINOv2 .*; "
                     r"(\d+) pairs fall inside it, those 5 among them, and (\d+) are written\.", r.stdout)
    assert note, r.stdout
    assert (int(note[1]), int(note[2])) == (in_box, written) and written >= 5
    assert re.search(rf"^{written} pairs written to ", r.stdout, re.M)
    said = r.stdout + r.stderr
    for line in ("Pairs from untrained encoders mean nothing", "offline: --offline given", "the smallest box"):
        assert said.count(line) == 1, line


def test_scatter_legend_says_how_many_of_the_box_were_written(tmp_path):
    import numpy as np

    from vhmine.mine.gallery import write_scatter

    clip, dino = np.array([0.95, 0.94, 0.93, 0.92, 0.91]), np.array([0.1, 0.2, 0.3, 0.9, 0.95])
    background = (np.array([0.1, 0.2]), np.array([0.1, 0.3]))
    labels = write_scatter(tmp_path / "a.png", clip, dino, background, 0.9, 0.5, title="t", written=2)  # --max-pairs 2
    assert labels[1:] == ["CLIP-alike, DINOv2-alike (2)", "in the box (3); 2 of them written (--max-pairs / --max-per-image)"]
    labels = write_scatter(tmp_path / "b.png", clip, dino, background, 0.9, 0.5, title="t", written=3)
    assert labels[2] == "in the box: mined and written (3)"
    assert (tmp_path / "a.png").stat().st_size > 1000


def test_seed_given_the_csv_names_the_parquet_file_beside_it(tmp_path):
    import pandas as pd

    from helpers import write_pairs, write_photos

    pairs = write_pairs(tmp_path / "runs" / "t", write_photos(tmp_path / "photos", ("coffee", "rocket", "horse")))
    pd.read_parquet(pairs).to_csv(pairs.with_name("pairs.csv"), index=False)  # as `vhmine mine` writes both
    r = _vhmine("seed", "--db", "sqlite:///store.db", "--pairs", "runs/t/pairs.csv", cwd=tmp_path)
    assert r.returncode == 2
    said = " ".join((r.stdout + r.stderr).split())
    run = (tmp_path / "runs" / "t").resolve()
    assert (f"cannot read {run / 'pairs.csv'} as parquet: pass --pairs {run / 'pairs.parquet'}, the parquet file "
            "`vhmine mine` wrote beside it") in said
    assert "re-run" not in said
    r = _vhmine("seed", "--db", "sqlite:///store.db", "--pairs", "runs/t/pairs.parquet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
