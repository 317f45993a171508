"""scripts/bench_mine.py at a toy size: the three pair sets agree, the kernels' rates are printed, and every
data set's ratio line, in CPU time with the wall time's beside, ends with the miner's over its floor, the
fastest kernel's products alone (the timing itself is the script's, not a test's)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vhmine.mine.join.kernels import KERNELS

ROOT = Path(__file__).resolve().parents[3]


def run_bench(*args: str, timeout: int = 600) -> str:
    """What scripts/bench_mine.py printed with these arguments (stdout, then stderr), in its own process; it
    must exit 0."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, str(ROOT / "scripts" / "bench_mine.py"), *args]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    return out


@pytest.mark.slow
def test_bench_mine_checks_the_pairs_and_prints_the_floor_ratio():
    pytest.importorskip("faiss")
    out = run_bench("--n", "3000", "--repeat", "2", "--block-size", "1024", "--clip", "0.85", "--workers", "1")
    lines = [line for line in out.splitlines() if line.startswith("ratio vs faiss")]
    assert len(lines) == 2, out  # random, then CLIP-shaped
    for line in lines:
        assert "pairs identical: True" in line, line
        m = re.search(r", vs floor \(([a-z0-9-]+)\): ([0-9.]+) x$", line)
        assert m and m[1] in KERNELS and float(m[2]) > 0, line
    rates = re.findall(r"products kernels, GMAC/s in one thread, measured now: (.*)", out)
    assert len(rates) == 2 and all("blas-f32 " in r and "torch-f32 " in r for r in rates), out
    floors = re.findall(
        r"floor \(the same blocks' products alone, kernel ([a-z0-9-]+)\): [0-9.]+ CPU-s \(median of "
        r"[0-9.]+, [0-9.]+, [0-9.]+ CPU-s; wall [0-9.]+ s",
        out,
    )
    assert len(floors) == 2, out  # the floor before and after each run
    # the floor's kernel is the one the miner used
    assert re.findall(r"  products kernel: ([a-z0-9-]+) \(", out) == floors, out
    pairs = re.findall(r"vhmine find_pairs: [0-9.]+ s \(([0-9.]+) CPU-s\), ([0-9,]+) pairs", out)
    assert len(pairs) == 4 and int(pairs[0][1].replace(",", "")) > 0, out
    # the miner's median CPU time over the unique pairs' products at the instruction peak measured here
    unique = re.findall(
        r"^vs unique-pair floor \(([a-z0-9-]+), CPU time\): ([0-9.]+) x \(vhmine ([0-9.]+) CPU-s in 1 thread, "
        r"median of 2; ([0-9,]+) GMAC at ([0-9]+) GMAC/s a core, the (int8|bf16|fp32) peak \(.+, measured here\): "
        r"([0-9.]+) CPU-s; wall time ([0-9.]+) x against it on 1 core; load",
        out,
        re.M,
    )
    assert [u[0] for u in unique] == floors, out
    for k, (_, ratio, used, _, rate, _, _, _) in enumerate(unique):  # used: the median of that data set's two runs
        runs = [float(c) for c, _ in pairs[2 * k : 2 * k + 2]]
        assert float(ratio) > 0 and float(rate) > 0 and abs(float(used) - sum(runs) / 2) <= 0.011, out
    # every ratio is CPU time over CPU time, the wall time's beside it
    for line in lines:
        m = re.search(
            r"^ratio vs faiss: ([0-9.]+)x, vs blocked float32: ([0-9.]+)x \(CPU time: vhmine [0-9.]+ s, ([0-9.]+) "
            r"CPU-s; float32 [0-9.]+ s, ([0-9.]+) CPU-s; faiss [0-9.]+ s, ([0-9.]+) CPU-s; floor [0-9.]+ s, [0-9.]+ "
            r"CPU-s; wall time: vs faiss [0-9.]+x, vs blocked float32 [0-9.]+x, vs floor [0-9.]+ x\)",
            line,
        )
        assert m, line
        # to the printed CPU seconds' rounding: the miner's median against the baselines' runs
        lo, hi = (float(m[5]) - 0.005) / (float(m[3]) + 0.005), (float(m[5]) + 0.005) / max(float(m[3]) - 0.005, 1e-9)
        assert lo <= float(m[1]) * 1.01 and float(m[1]) <= hi * 1.01, line
    assert re.search(r"^CPU: .*, \d+ cores, flags .*; load average [0-9.]+ [0-9.]+ [0-9.]+$", out, re.M), out


def ratio_of(a: str, b: str, r: str) -> bool:
    """Whether r is a / b for the times a and b as printed (to 0.005 s)."""
    a, b, r = float(a), float(b), float(r)
    return r > 0 and (a - 0.005) / (b + 0.005) <= r * 1.001 and r <= (a + 0.005) / max(b - 0.005, 1e-9) * 1.001


def test_bench_mine_growth_lines_say_the_pairs_are_identical_and_give_their_ratios():
    """--incremental and --against at a toy size: each line says its pairs equal the full mine's, with its ratios."""
    args = [
        "--only-growth",
        "--incremental",
        "3000",
        "--against",
        "1500",
        "--dim",
        "256",
        "--dino-dim",
        "32",
        "--block-size",
        "256",
        "--clip",
        "0.9",
        "--pruning",
        "--n",
        "3000",
    ]
    out = run_bench(*args, timeout=300)
    assert "ratio vs faiss" not in out  # --only-growth: the data sets' runs are left out
    inc = re.findall(
        r"^incremental: \+1% rows at N=3000: ([0-9.]+) s \(([0-9.]+) CPU-s\) against a full mine ([0-9.]+) s "
        r"\(([0-9.]+) CPU-s\) \(CPU time ratio ([0-9.]+), wall time ([0-9.]+)\), pairs identical$",
        out,
        re.M,
    )
    assert len(inc) == 1, out
    wall, cpu, full_wall, full_cpu, cpu_ratio, ratio = inc[0]
    assert ratio_of(wall, full_wall, ratio) and ratio_of(cpu, full_cpu, cpu_ratio), out
    runs = re.findall(
        r"^  the growth's median of 10 runs \(5 before the full mine, 5 after it\); their CPU time ratios ([0-9.]+) "
        r"to ([0-9.]+)$",
        out,
        re.M,
    )
    assert len(runs) == 1 and float(runs[0][0]) <= float(cpu_ratio) <= float(runs[0][1]), out
    digests = re.findall(
        r"^  digests: 0 rows hashed, 3,000 read from the kept file, 0 rows' bytes checked .*identical$", out, re.M
    )
    assert len(digests) == 1, out  # the vector files as the embed recorded them: nothing hashed or read
    products = re.findall(r"^  products ratio ([0-9.]+) \(([0-9,]+) of ([0-9,]+) row pairs", out, re.M)
    # 30 new rows of 3000: 30 x 29 / 2 + 30 x 2970 of 3000 x 2999 / 2
    assert products == [("0.0199", "89,535", "4,498,500")], out
    ac = re.findall(
        r"^against: 1,500 x 1,500 in ([0-9.]+) s \(([0-9.]+) CPU-s\) against the same 3,000 rows as one triangle in "
        r"([0-9.]+) s \(([0-9.]+) CPU-s\) \(products ratio ([0-9.]+), CPU time ratio ([0-9.]+), wall time ([0-9.]+)\), "
        r"pairs identical$",
        out,
        re.M,
    )
    assert len(ac) == 1 and ac[0][4] == "0.5002", out  # 1500^2 / (3000 x 2999 / 2)
    assert ratio_of(ac[0][1], ac[0][3], ac[0][5]) and ratio_of(ac[0][0], ac[0][2], ac[0][6]), out
    prunes = re.findall(
        r"^pruning at --clip (0.9|0.95) \((CLIP-shaped|families)\): pruning: (on|off) \((.*)\), [0-9.]+ CPU-s; forced "
        r"on: ([0-9.]+)% of the products skipped \(an oracle: ([0-9.]+)%\), [0-9.]+ CPU-s against [0-9.]+ off "
        r"\([0-9.]+ x\), pairs identical; load average",
        out,
        re.M,
    )
    assert [p[:2] for p in prunes] == [(c, d) for d in ("CLIP-shaped", "families") for c in ("0.9", "0.95")], out
    assert all(float(p[4]) == 0 for p in prunes[:2]) and all(float(p[4]) > 10 for p in prunes[2:]), out
    assert all(p[3].startswith("a sample says ") for p in prunes), out
    pairs = re.findall(r"([0-9,]+) pairs across of ([0-9,]+)", out)
    assert len(pairs) == 1 and 0 < int(pairs[0][0].replace(",", "")) < int(pairs[0][1].replace(",", "")), out


@pytest.mark.slow
def test_bench_mine_end_to_end_times_the_command_against_its_join_alone():
    """--end-to-end at a toy size: an index on disk, `vhmine mine` and the join alone each in their own process,
    the ratio of their CPU times as printed."""
    out = run_bench("--end-to-end", "--n", "1500", "--dim", "64", "--dino-dim", "32", "--clip", "0.8", "--repeat", "1")
    assert "ratio vs faiss" not in out and re.search(r"^  [0-9]+ pairs written to ", out, re.M), out
    line = re.findall(
        r"^mine end to end at N=1500: ([0-9.]+) CPU-s against the join alone ([0-9.]+) CPU-s \(([0-9.]+) x\); "
        r"wall [0-9.]+ s against [0-9.]+ s \(medians of 1; ",
        out,
        re.M,
    )
    assert len(line) == 1 and ratio_of(*line[0]), out


def test_the_end_to_end_baseline_takes_memory_as_the_command_line_does():
    """The join alone runs with the command line's own memory settings (vhmine.cli.small_pages), written out in
    the bench so that its baseline need not import the command line; both keep a value the user set."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import bench_mine_e2e

    import vhmine.cli

    assert bench_mine_e2e.SMALL_PAGES == vhmine.cli.SMALL_PAGES
    show = f"\nimport os\nprint(sorted((k, os.environ.get(k)) for k in {list(vhmine.cli.SMALL_PAGES)!r}))"
    bench = bench_mine_e2e.JOIN.split("from vhmine.index")[0].format(pages=bench_mine_e2e.SMALL_PAGES, exit="")
    cli = "import vhmine.cli\nvhmine.cli.small_pages()"
    env = {k: v for k, v in os.environ.items() if k not in vhmine.cli.SMALL_PAGES}
    for user in ({}, {"ARROW_DEFAULT_MEMORY_POOL": "mimalloc"}):
        want = sorted({**vhmine.cli.SMALL_PAGES, **user}.items())
        for setup in (bench, cli):
            out = subprocess.run(
                [sys.executable, "-c", setup + show], env={**env, **user}, capture_output=True, text=True, check=True
            )
            assert out.stdout.strip() == str(want), (setup, out.stdout)
