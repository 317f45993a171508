"""scripts/bench_mine.py at a toy size: the three pair sets agree and every data set's ratio line ends with
the miner's time over its int8 floor (the timing itself is the script's, not a test's)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

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
        m = re.search(r", vs int8 floor: ([0-9.]+) x$", line)
        assert m and float(m[1]) > 0, line
    assert len(re.findall(r"int8 floor \(the same blocks' torch._int_mm alone\): [0-9.]+ s \(median of "
                          r"[0-9.]+, [0-9.]+, [0-9.]+ s", out)) == 2, out  # the floor before and after each run
    pairs = re.findall(r"vhmine find_pairs: [0-9.]+ s, ([0-9,]+) pairs", out)
    assert len(pairs) == 4 and int(pairs[0].replace(",", "")) > 0, out
