"""scripts/embed_runtimes.py, the embedding bench's runtime table: its MAC count (the fused attention counted,
which torch's FlopCounterMode alone misses) and its peak line's instruction name; tiny real encoders
(tests/conftest.py's tiny_models)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import embed_runtimes  # noqa: E402


def _vit_macs(tokens: int, width: int, mlp: int, layers: int, patches: int, patch_in: int, head: int = 0) -> int:
    """A ViT's MACs by hand: the patch embedding, each layer's QKV, output, MLP and attention products."""
    per_layer = tokens * width * 3 * width + tokens * width * width + 2 * tokens * width * mlp
    per_layer += 2 * tokens * tokens * width  # QK^T and AV, every head together
    return patches * patch_in * width + layers * per_layer + head


def test_macs_count_every_layer_the_attention_included(tiny_models):
    import torch

    from vhmine.embed.encoders import load_clip, load_dino

    fast = torch.backends.mha.get_fastpath_enabled()
    got = embed_runtimes.macs_per_image((load_clip(tiny_models[0], "cpu"), load_dino(tiny_models[1], "cpu")))
    # tiny.build_clip: 64 px, patch 16 (16 patches + the class token), width 64, 2 layers, 32-d projection;
    # tiny.build_dino: 56 px, patch 14, hidden 32, 2 layers, MLP 128
    assert got["clip"] == _vit_macs(17, 64, 256, 2, 16, 3 * 16 * 16, head=64 * 32)
    assert got["dino"] == _vit_macs(17, 32, 128, 2, 16, 3 * 14 * 14)
    assert torch.backends.mha.get_fastpath_enabled() == fast  # the fast path as it was


def test_the_peak_line_names_the_instruction_else_the_family():
    assert embed_runtimes.instruction("avx512_bf16 VDPBF16PS zmm, a C hand loop") == "VDPBF16PS"
    assert embed_runtimes.instruction("avx512f VFMADD231PS zmm, a C hand loop") == "VFMADD231PS"
    assert embed_runtimes.instruction("amx_bf16, torch mm in cache") == "amx_bf16"


def test_peak_lines_state_each_precisions_best_row_against_its_peak(monkeypatch):
    import bench_peak

    peaks = {"fp32": (58.5, "avx512f VFMADD231PS zmm, a C hand loop"), "bf16": (116.8, "avx512_bf16 VDPBF16PS zmm, x")}
    monkeypatch.setattr(bench_peak, "peak", lambda p: peaks[p])
    rows = [
        dict(precision="bf16", backend="torch", batch=16, threads=1, gmac_per_cpu_s=73.2, images_per_s=6.3),
        dict(precision="bf16", backend="openvino", batch=16, threads=1, gmac_per_cpu_s=90.7, images_per_s=6.1),
        dict(precision="fp32", backend="torch", batch=8, threads=2, gmac_per_cpu_s=25.2, images_per_s=0.8),
    ]
    lines = embed_runtimes.peak_lines(rows, ["fp32", "bf16"], 10.5)
    assert lines[0] == "fp32: 25.2 GMAC per CPU-s, 43.1% of the VFMADD231PS peak (58.5 GMAC/s a core, measured here)"
    assert lines[2] == "bf16: 90.7 GMAC per CPU-s, 77.7% of the VDPBF16PS peak (116.8 GMAC/s a core, measured here)"
    assert lines[3].startswith("  (openvino, batch 16, threads 1: 6.10 images/s")
