"""Benchmark: `vhmine embed` end to end vs the two encoders' forward passes alone, in one process.

The baseline preprocesses every image first (untimed) and then times only the CLIP and DINOv2
forward passes on the same batches. The end-to-end run times embed_collection's decode, preprocess,
encode, shard and index writes (model loading is reported apart; it is a fixed cost). Target: a
ratio (baseline time / end-to-end time) of at least 0.85 on CPU, and >= 1,000 img/s on an H200 with
`--preset large --device cuda` (ViT-L/14 + DINOv2-L/14 shapes; random weights cost what real ones do).

    python scripts/bench_embed.py                      # CPU: ViT-B-32 + DINOv2-S shapes, 192 images
    python scripts/bench_embed.py --preset large --device cuda --n 20000 --batch-size 256 --workers 14
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

PRESETS = {
    # name: (open_clip architecture, DINOv2 hidden, layers, heads)
    "small": ("ViT-B-32", 384, 12, 6),
    "large": ("ViT-L-14", 1024, 24, 16),
}


def make_jpegs(folder: Path, n: int, seed: int = 0) -> None:
    """COCO-like 640x480 JPEGs: smooth gradients plus noise, so decoding costs what photos cost."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:480, 0:640].astype(np.float32)
    for k in range(n):
        base = np.stack(
            [(xx * rng.uniform(0.1, 0.4) + yy * rng.uniform(0.1, 0.4) + rng.uniform(0, 255)) % 255 for _ in range(3)],
            axis=-1,
        )
        img = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
        Image.fromarray(img).save(folder / f"{k:06d}.jpg", quality=90)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="small")
    ap.add_argument("--n", type=int, default=192)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--workers", type=int, default=None, help="default: vhmine's own choice for the device")
    ap.add_argument("--device", default=None)
    ap.add_argument("--repeat", type=int, default=2, help="alternate both measurements this often; best of each counts")
    args = ap.parse_args()

    import torch

    from vhmine.embed import tiny
    from vhmine.embed.encoders import load_clip, load_dino
    from vhmine.embed.job import EmbedOptions, embed_collection
    from vhmine.images import decode_rgb, list_images

    arch, hidden, layers, heads = PRESETS[args.preset]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "imgs").mkdir()
        t = time.time()
        make_jpegs(tmp / "imgs", args.n)
        print(f"made {args.n} JPEGs in {time.time() - t:.1f} s")
        clip_spec = tiny.build_clip(tmp / "clip", like=arch)
        dino_spec = tiny.build_dino(tmp / "dino", hidden_size=hidden, layers=layers, heads=heads, image_size=224)

        # Baseline: the two forward passes alone on preprocessed batches.
        clip_enc, dino_enc = load_clip(clip_spec, args.device), load_dino(dino_spec, args.device)
        print(f"device {clip_enc.device}, dtype {clip_enc.dtype}, torch threads {torch.get_num_threads()}")
        imgs = [decode_rgb(p.read_bytes()) for p in list_images(tmp / "imgs")]
        batches = []
        for s in range(0, len(imgs), args.batch_size):
            chunk = imgs[s : s + args.batch_size]
            batches.append(
                (
                    torch.stack([clip_enc.preprocess(i) for i in chunk]),
                    torch.stack([dino_enc.preprocess(i) for i in chunk]),
                )
            )
        del imgs
        clip_enc.encode(batches[0][0][:2]), dino_enc.encode(batches[0][1][:2])  # warm-up
        sync = torch.cuda.synchronize if clip_enc.device.type == "cuda" else (lambda: None)

        def forward_alone() -> float:
            sync()
            t = time.time()
            for c, d in batches:
                clip_enc.encode(c), dino_enc.encode(d)
            sync()
            return time.time() - t

        def end_to_end(k: int):
            return embed_collection(
                EmbedOptions(
                    images=tmp / "imgs",
                    name=f"bench{k}",
                    indexes=tmp / "idx",
                    clip_model=clip_spec,
                    dino_model=dino_spec,
                    device=args.device,
                    batch_size=args.batch_size,
                    workers=args.workers,
                    progress=False,
                )
            )

        # Alternate the two so that a change in machine load hits both alike; the best of each counts.
        forwards, runs = [], []
        for k in range(args.repeat):
            forwards.append(forward_alone())
            runs.append(end_to_end(k))
        t_forward = min(forwards)
        res = min(runs, key=lambda r: r.timings["encode"] + r.timings["finalize"])
        t_e2e = res.timings["encode"] + res.timings["finalize"]
        print(f"forward passes alone: {t_forward:.2f} s ({args.n / t_forward:.1f} img/s)")
        print(f"vhmine embed: {t_e2e:.2f} s ({args.n / t_e2e:.1f} img/s) + model load {res.timings['load']:.2f} s")
        print(
            f"ratio: {t_forward / t_e2e:.2f} (target >= 0.85), preset {args.preset} ({arch} + DINOv2 {hidden}d x"
            f" {layers}), {args.n} images, batch {args.batch_size}, workers {args.workers}"
        )


if __name__ == "__main__":
    main()
