"""scripts/bench_fused_kernel.py: the miner's fused AVX512-VNNI products-and-threshold kernel is exact against
torch._int_mm (every product and every pair at or above the threshold), and its ratio line is printed; on a machine
without AVX512-VNNI or a C compiler it says so in one line."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_bench_fused_kernel_is_exact_and_prints_its_ratio():
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench_fused_kernel.py"),
            "--rows",
            "192",
            "--dim",
            "104",
            "--reps",
            "1",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    if "not available here" in out:
        pytest.skip(out.strip().splitlines()[-1])
    # a width that is not a multiple of the kernel's blocks (384) and three panels of rows: their edges covered
    m = re.search(r"^exact: True \(every product and the (\d+) pairs at or above -?\d+", out, re.M)
    assert m and int(m[1]) > 0, out
    line = re.search(
        r"^fused VNNI kernel vs torch\._int_mm \(one thread\): ([0-9.]+) x \(fused (\d+) GMAC/s.* (\d+) with the "
        r"segment maxima",
        out,
        re.M,
    )
    assert line and float(line[1]) > 0 and int(line[2]) > 0, out
    assert re.search(r"^CPU: .*, \d+ cores, flags .*; load average", out, re.M), out
