"""scripts/bench_mine.py at a toy size: the three pair sets agree, the kernels' rates are printed, and every
data set's ratio line ends with the miner's time over its floor, the fastest kernel's products alone (the
timing itself is the script's, not a test's)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vhmine.mine.kernels import KERNELS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_mine_checks_the_pairs_and_prints_the_floor_ratio():
    pytest.importorskip("faiss")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_mine.py"), "--n", "3000", "--repeat", "2",
                          "--block-size", "1024", "--clip", "0.85"], capture_output=True, text=True, env=env,
                         timeout=600)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    lines = [line for line in out.splitlines() if line.startswith("ratio vs faiss")]
    assert len(lines) == 2, out  # random, then CLIP-shaped
    for line in lines:
        assert "pairs identical: True" in line, line
        m = re.search(r", vs floor \(([a-z0-9-]+)\): ([0-9.]+) x$", line)
        assert m and m[1] in KERNELS and float(m[2]) > 0, line
    rates = re.findall(r"products kernels, GMAC/s in one thread, measured now: (.*)", out)
    assert len(rates) == 2 and all("blas-f32 " in r and "torch-f32 " in r for r in rates), out
    floors = re.findall(r"floor \(the same blocks' products alone, kernel ([a-z0-9-]+)\): [0-9.]+ s \(median of "
                        r"[0-9.]+, [0-9.]+, [0-9.]+ s", out)
    assert len(floors) == 2, out  # the floor before and after each run
    # the floor's kernel is the one the miner used
    assert re.findall(r"  products kernel: ([a-z0-9-]+) \(", out) == floors, out
    pairs = re.findall(r"vhmine find_pairs: [0-9.]+ s, ([0-9,]+) pairs", out)
    assert len(pairs) == 4 and int(pairs[0].replace(",", "")) > 0, out
