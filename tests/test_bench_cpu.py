"""The benches' clocks and floors (issue 45): a ratio is CPU time over CPU time (scripts/bench_timing.py), a
floor the instruction peak measured here by a hand loop (scripts/bench_peak.py), named by the CPU's flags."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import bench_peak  # noqa: E402
import bench_timing  # noqa: E402


def _busy(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_clock_counts_cpu_time_not_waiting_and_counts_children():
    with bench_timing.clock() as asleep:
        time.sleep(0.2)
    assert asleep.wall_s >= 0.19 and asleep.cpu_s < 0.1
    with bench_timing.clock() as child:  # a child's CPU time counts once it has been waited for
        subprocess.run(
            [sys.executable, "-c", "import time\nt = time.process_time() + 0.3\nwhile time.process_time() < t: pass"]
        )
    assert child.cpu_s >= 0.25


def test_a_ratio_is_cpu_over_cpu_whatever_the_waits():
    """The same work, once with a sleep beside it (a loaded machine's waits, as wall time sees them): the wall
    ratio grows, the CPU ratio stays near 1."""
    _, c_a, w_a = bench_timing.measure(_busy, 0.1)
    _, c_b, w_b = bench_timing.measure(lambda: (_busy(0.1), time.sleep(0.3)))
    assert w_b >= 0.4 > 2 * c_b  # (busy 0.1 CPU-s, then asleep 0.3 s)
    assert 0.6 < c_b / c_a < 1.6
    text = bench_timing.ratio_text(c_b, c_a, w_b, w_a)
    assert text.startswith(f"{c_b / c_a:.2f} x (CPU time; wall time ") and f"{w_b / w_a:.2f} x)" in text


def test_bench_mine_unique_pair_floor_is_cpu_time_at_the_peak(monkeypatch):
    """bench_mine's unique-pair floor: the miner's CPU seconds over MACs / the peak of a core; the miner's wall
    time (here 5x its CPU time, as a busy machine gives) changes only the figure printed beside it."""
    import bench_mine

    monkeypatch.setattr(bench_mine, "floor_peak", lambda: (100.0, "int8", "avx512_vnni VPDPBUSD zmm, a C hand loop"))
    kernel = type("K", (), {"name": "int-mm"})()
    n, d = 10_001, 200  # 10^10 MACs: 0.1 CPU-s at 100 GMAC/s
    quiet, r_quiet = bench_mine.unique_floor_line(kernel, "cpu", n, d, [], [0.2, 0.3, 0.25], [0.25] * 3, workers=1)
    busy, r_busy = bench_mine.unique_floor_line(kernel, "cpu", n, d, [], [0.2, 0.3, 0.25], [1.25] * 3, workers=1)
    assert r_quiet == r_busy == pytest.approx(2.5, rel=1e-3)
    assert quiet.startswith("vs unique-pair floor (int-mm, CPU time): 2.50 x (vhmine 0.25 CPU-s in 1 thread")
    assert "at 100 GMAC/s a core, the int8 peak (avx512_vnni VPDPBUSD zmm, a C hand loop, measured here)" in quiet
    assert "wall time 2.50 x against it" in quiet and "wall time 12.50 x against it" in busy


def test_instruction_family_follows_the_flags():
    assert bench_peak.family("int8", {"avx2", "fma"}) == "avx2"
    assert bench_peak.family("int8", {"avx2", "avx512f", "avx512bw", "avx512_vnni"}) == "avx512_vnni"
    assert bench_peak.family("int8", {"avx2", "avx_vnni"}) == "avx_vnni"
    assert bench_peak.family("int8", {"avx512_vnni", "amx_tile", "amx_int8"}) == "amx_int8"
    assert bench_peak.family("bf16", {"avx512f", "avx512_bf16"}) == "avx512_bf16"
    assert bench_peak.family("fp32", {"avx2", "fma", "avx512f"}) == "avx512f"
    assert bench_peak.family("fp32", set()) == "scalar"


@pytest.mark.parametrize("precision", bench_peak.PRECISIONS)
def test_peak_is_a_positive_rate_named_by_this_cpus_flags(precision, tmp_path, monkeypatch):
    """Measured here (a C hand loop where a compiler is, torch otherwise), cached, and named after an
    instruction family this CPU has."""
    monkeypatch.setenv(bench_peak.CACHE_ENV, str(tmp_path / "peak.json"))
    rate, name = bench_peak.peak(precision)
    flags = bench_peak.cpu_flags()
    assert rate > 0
    assert name.split()[0] in flags | {"avx2+fma", "scalar"}, name
    if "a C hand loop" not in name:  # the torch fallback names the widest family the flags give
        assert name.startswith(bench_peak.family(precision, flags)), name
    if precision == "int8" and "avx512_vnni" in flags and "amx_int8" not in flags:
        assert name.startswith("avx512_vnni"), name
    assert (tmp_path / "peak.json").exists()
    assert bench_peak.peak(precision) == (rate, name)  # the second from the cache


def test_peak_falls_back_to_torch_without_a_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv(bench_peak.CACHE_ENV, str(tmp_path / "peak.json"))
    monkeypatch.setenv("CC", "no-such-compiler-here")
    rate, name = bench_peak.measure("int8")
    assert rate > 0 and "torch _int_mm in cache" in name, name
    assert not list(tmp_path.glob("*.so"))
