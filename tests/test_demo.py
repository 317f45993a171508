"""vhmine.demo: the offline demo runs end to end, says how many pairs its box holds, and prints an embed line for
one's own folder that works as printed. The tests share one run of the demo (it embeds and mines: the costly part)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pandas as pd
import pytest
from helpers import run_vhmine

pytestmark = pytest.mark.xdist_group("demo")  # one worker runs the shared demo, once


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """(the folder it ran in, its CompletedProcess, seconds): `vhmine demo --offline --workdir W`, run in W."""
    work = tmp_path_factory.mktemp("demo")
    t0 = time.time()
    r = run_vhmine("demo", "--offline", "--workdir", str(work), cwd=work)
    assert r.returncode == 0, r.stderr
    return work, r, time.time() - t0


@pytest.mark.slow
def test_offline_demo_end_to_end(demo):
    work, r, seconds = demo
    assert "Pairs from untrained encoders mean nothing" in r.stdout
    assert seconds < 240
    run = work / "runs" / "demo-offline"
    pairs = pd.read_parquet(run / "pairs.parquet")
    assert len(pairs) >= 5  # the demo's box holds at least the 5 pairs it was drawn around
    meta = json.loads((run / "run.json").read_text())
    assert meta["counts"]["in_box"] == len(pairs) and meta["index"] == "demo-skimage"
    assert (work / "indexes" / "demo-skimage" / "manifest.json").is_file()
    assert "motorcycle_left.png" in set(pd.read_parquet(work / "indexes" / "demo-skimage" / "images.parquet")["path"])
    assert str(run / "gallery.html") in r.stdout


@pytest.mark.slow
def test_offline_demo_says_how_many_pairs_its_box_holds(demo):
    """The demo drew its box around 5 pairs and said "the box holds the 5 pairs", then wrote 31; each
    note was printed twice (logged, then in the summary)."""
    work, r, _ = demo
    run = work / "runs" / "demo-offline"
    written = len(pd.read_parquet(run / "pairs.parquet"))
    in_box = json.loads((run / "run.json").read_text())["counts"]["in_box"]
    note = re.search(
        r"the smallest box that holds the 5 pairs CLIP ranks highest relative to DINOv2 .*; "
        r"(\d+) pairs fall inside it, those 5 among them, and (\d+) are written\.",
        r.stdout,
    )
    assert note, r.stdout
    assert (int(note[1]), int(note[2])) == (in_box, written) and written >= 5
    assert re.search(rf"^{written} pairs written to ", r.stdout, re.M)
    said = r.stdout + r.stderr
    for line in ("Pairs from untrained encoders mean nothing", "offline: --offline given", "the smallest box"):
        assert said.count(line) == 1, line
    # it says which stages it ran, and those are the ones it ran: an index and a run, no store, no export
    assert "this run only shows that embed and mine work" in said and "every stage" not in said
    assert {"data", "indexes", "runs"} <= {p.name for p in work.iterdir()}
    assert not {"vhmine.db", "benchmarks"} & {p.name for p in work.iterdir()} and not (work / "data/vhmine.db").exists()


@pytest.mark.slow
def test_offline_demo_names_its_encoders_and_the_embed_line_for_ones_own_folder(demo):
    """The printed `vhmine embed` line is run as printed, on another folder: it embeds with the demo's encoders."""
    import shlex

    from helpers import write_photos

    work, r, _ = demo
    lines = r.stdout.splitlines()
    assert (
        f"encoders of this demo (random weights, built here): CLIP {work / 'data/demo-models/tiny-clip'}, "
        f"DINOv2 {work / 'data/demo-models/tiny-dinov2'}" in lines
    )
    line = next(ln for ln in lines if ln.startswith("your own images, offline: "))
    cmd = line.removeprefix("your own images, offline: ")
    assert cmd == (
        "vhmine embed FOLDER --name NAME --clip-model local-dir:data/demo-models/tiny-clip "
        "--dino-model data/demo-models/tiny-dinov2"
    )
    assert "next: vhmine seed --pairs runs/demo-offline/pairs.parquet" in lines
    write_photos(work / "mine", ("coffee", "rocket", "horse"))
    words = shlex.split(cmd.replace("FOLDER", "mine").replace("NAME", "own"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "vhmine.cli", *words[1:]], env=env, cwd=work, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    man = json.loads((work / "indexes" / "own" / "manifest.json").read_text())
    assert man["counts"]["images"] == 3 and "tiny-clip" in json.dumps(man["encoders"]["clip"])


def test_what_the_docs_say_the_demo_runs_is_what_it_runs():
    """README said the offline demo "runs every stage"; it embeds and mines (issue 33). Every paragraph of the
    README and the docs that speaks of `vhmine demo` running stages names the demo's, and claims no more."""
    import re
    from pathlib import Path

    from vhmine.demo import STAGES

    root = Path(__file__).resolve().parents[1]
    said = []
    for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        for para in re.split(r"\n\s*\n", page.read_text(encoding="utf-8")):
            if "vhmine demo" in para and re.search(r"\bruns?\b", para):
                flat = " ".join(para.split())
                assert "every stage" not in flat and "all stages" not in flat, (page.name, flat)
                said.append((page.name, flat))
    assert {"README.md", "install.md"} <= {name for name, _ in said}
    for name, flat in said:
        if "without network" in flat.lower() or "offline" in flat.lower():
            assert all(re.search(rf"\b{s}\b", flat) for s in STAGES), (name, flat)
