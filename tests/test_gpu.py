"""The CUDA paths against the CPU ones: find_pairs, `vhmine embed` (and its measured precision) and `vhmine mine
--engine local`.

Tests marked `gpu` run only where torch sees a CUDA device and are skipped elsewhere with the reason
"no CUDA device" (CI has no GPU: they must skip there, never fail). scripts/gpu_check.sh runs them as
`pytest -m gpu tests/test_gpu.py`. The unmarked tests below check that script's plumbing on any machine.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vhmine.embed import precision as P

ROOT = Path(__file__).resolve().parents[1]


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _clustered(n: int, d: int, seed: int) -> np.ndarray:
    """Unit rows, a third of them in clusters of 6 tight enough to give pairs at cosine 0.85-0.95."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    k = n // 3 // 6 * 6
    x[:k] = np.repeat(rng.standard_normal((k // 6, d)), 6, axis=0) + 0.35 * rng.standard_normal((k, d))
    x = x[rng.permutation(n)]
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="no CUDA device")
@pytest.mark.parametrize("block_size", [None, 256])  # one block, and many blocks of the upper triangle
def test_find_pairs_on_cuda_equals_cpu_and_brute_force(block_size):
    from vhmine.mine.join.simsearch import assert_same_pairs, brute_force_pairs, find_pairs

    clip, dino = _clustered(2000, 768, 0), _clustered(2000, 1024, 1)
    want = brute_force_pairs(clip, dino, 0.85, 0.6)
    assert len(want) > 50  # the check means something only if there are pairs to find
    st: dict = {}
    got = find_pairs(clip, dino, 0.85, 0.6, device="cuda", block_size=block_size, stats=st)
    assert st["blocks"] == (1 if block_size is None else 36)
    assert_same_pairs(got, want, atol=0.0)  # the re-check is float64 on the CPU: the same bits
    assert_same_pairs(got, find_pairs(clip, dino, 0.85, 0.6, device="cpu", block_size=block_size), atol=0.0)
    # a threshold set to a found pair's own similarity finds that pair on the GPU too (inclusive)
    edge = float(want.clip_sim.min())
    assert_same_pairs(find_pairs(clip, dino, edge, 0.6, device="cuda"), brute_force_pairs(clip, dino, edge, 0.6))


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="no CUDA device")
def test_embed_on_cuda_matches_cpu_within_half_precision(tmp_path, photos_dir, tiny_models):
    import torch

    from vhmine.embed.job import EmbedOptions, embed_collection
    from vhmine.index import open_index

    clip, dino = tiny_models
    half = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    for dev, precision in (("cpu", "fp32"), ("cuda", half)):
        embed_collection(
            EmbedOptions(
                images=photos_dir,
                name=dev,
                indexes=tmp_path / "idx",
                clip_model=clip,
                dino_model=dino,
                device=dev,
                workers=0,
                batch_size=4,
                progress=False,
                precision=precision,
            )
        )
    cpu, on_gpu = open_index(tmp_path / "idx", "cpu"), open_index(tmp_path / "idx", "cuda")
    pd.testing.assert_series_equal(cpu.images["sha256"], on_gpu.images["sha256"])  # same rows, same order
    assert on_gpu.manifest["precision"] == {"name": half, "chosen": "forced"}  # the precision as run is recorded
    assert {on_gpu.manifest["encoders"][k]["dtype"] for k in ("clip", "dino")} == {
        {"bf16": "bfloat16", "fp16": "float16"}[half]
    }
    for kind in ("clip", "dino"):
        a, b = getattr(cpu, kind), getattr(on_gpu, kind)
        assert a.shape == b.shape and b.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
        cos = (a.astype(np.float64) * b).sum(axis=1)
        assert cos.min() >= 0.98, f"{kind}: CUDA (half precision) and CPU rows differ, min cosine {cos.min():.4f}"


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="no CUDA device")
def test_auto_precision_on_cuda_measures_and_takes_half_precision_for_real_shapes(tmp_path):
    """ViT-B/32 + DINOv2-S shapes on a GPU: auto measures fp32 and bf16 (fp16 without bf16) in wall time and
    takes the half precision, whose tensor cores run it several times faster; the models are cast to it."""
    import torch

    from vhmine.embed import tiny
    from vhmine.embed.encoders import load_clip, load_dino

    clip = tiny.build_clip(tmp_path / "clip", like="ViT-B-32")
    dino = tiny.build_dino(tmp_path / "dino", hidden_size=384, layers=12, heads=6, image_size=224)
    dev = torch.device("cuda")
    encoders = (load_clip(clip, dev), load_dino(dino, dev))
    choice = P.choose(encoders, dev, "auto", cache=tmp_path / "precision.json")
    half = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    assert choice.source == "measured" and set(choice.rates) == {"fp32", half}, choice
    assert choice.name == half and choice.rates[half] >= P.MIN_GAIN * choice.rates["fp32"], choice
    assert {p.dtype for e in encoders for p in e.model.parameters()} == {P.torch_dtype(half)}


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="no CUDA device")
def test_mine_local_engine_on_cuda_writes_the_cpu_pairs(tmp_path):
    from helpers import make_index
    from typer.testing import CliRunner

    from vhmine.cli import app

    clip, dino = _clustered(300, 64, 2), _clustered(300, 48, 3)
    make_index(tmp_path / "idx", "syn", clip, dino, root=tmp_path / "imgs")
    runner = CliRunner()
    for dev in ("cpu", "cuda"):
        res = runner.invoke(
            app,
            [
                "mine",
                "--index",
                "syn",
                "--indexes",
                str(tmp_path / "idx"),
                "--clip",
                "0.8",
                "--dino",
                "0.5",
                "--engine",
                "local",
                "--device",
                dev,
                "--out",
                str(tmp_path / dev),
            ],
        )
        assert res.exit_code == 0, res.output
    cpu, cuda = (pd.read_parquet(tmp_path / d / "pairs.parquet") for d in ("cpu", "cuda"))
    assert len(cpu) > 5
    pd.testing.assert_frame_equal(cpu, cuda)


# --- the check script's plumbing, on any machine ----------------------------------------------------


def test_gpu_marker_is_registered_and_check_script_parses():
    tomllib = pytest.importorskip("tomllib")  # (Python 3.11+)
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    assert any(m.startswith("gpu: ") for m in markers), markers  # -m gpu selects a registered marker
    subprocess.run(["bash", "-n", str(ROOT / "scripts" / "gpu_check.sh")], check=True)


@pytest.mark.slow
@pytest.mark.skipif(_cuda(), reason="checks the no-CUDA path")
def test_check_script_without_cuda_skips_every_part_and_exits_2():
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    res = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_check.sh")], capture_output=True, text=True, env=env, timeout=300
    )
    out = res.stdout + res.stderr
    assert res.returncode == 2, out
    for part in (
        "SKIP 1 mine: no CUDA device",
        "SKIP 2 embed: no CUDA device",
        "SKIP 3 tests:",
        "SKIP 4 faiss-gpu: no CUDA device (faiss.get_num_gpus() == ",
        "SKIP 5 ray: no CUDA device",
    ):
        assert part in out, out
    assert "FAIL" not in out, out


@pytest.mark.slow
@pytest.mark.skipif(_cuda(), reason="checks the no-CUDA path")
def test_check_script_dry_run_runs_the_faiss_and_ray_parts_on_the_cpu():
    """Parts 4 and 5 at toy sizes: the k-NN search equals range_search, and a Ray mine through the tile
    reading equals the float64 brute force of its tiles (the plumbing of what runs on the GPU machine)."""
    pytest.importorskip("ray")
    # part 2 at 16 images (48 by default) of tiny encoders: ViT-B/32-shaped ones' forward passes, at fp32 and bf16,
    # were half of this test's time, and the plumbing is the same
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT), "GPU_CHECK_EMBED_N": "16"}
    env.update(GPU_CHECK_PREC_N="16", GPU_CHECK_PRESET="tiny")
    res = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_check.sh"), "--cpu-dry-run"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    out = res.stdout + res.stderr
    assert "the same neighbours as the CPU: True" in out and "DRY 4 faiss-gpu:" in out, out
    assert re.search(r"DRY 2 embed: [0-9]+ images/s end to end on cpu .* 16 images;", out), out  # ran to its end
    for name in ("random", "clip-shaped"):  # part 1: pairs exact, and the miner timed against its floors
        m = re.search(
            rf"DRY 1 mine \({name}\): .*identical to the float64 brute force: (\w+); floor "
            rf"([0-9.]+) CPU-s, vs floor \([a-z0-9-]+\): ([0-9.]+) x; vs unique-pair floor \([a-z0-9-]+, CPU time\): "
            rf"([0-9.]+) x \(([0-9]+) GMAC/s\); products kernel: ",
            out,
        )
        assert m and m[1] == "True" and all(float(m[k]) > 0 for k in (2, 3, 4, 5)), out
    assert "DRY 5 ray: N=30,000 on cpu, 3 of 21 tiles" in out, out
    assert "identical to the float64 brute force of those tiles: True" in out, out
    assert "FAIL" not in out, out
