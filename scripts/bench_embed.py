"""Benchmark: the embedding precisions (vhmine.embed.precision), runtimes (vhmine.embed.backend) and `vhmine
embed` end to end, in one process.

On a CPU, first the runtime table (scripts/embed_runtimes.py): both encoders' forward passes in each precision
on torch eager, OpenVINO and ONNX Runtime where installed (--backends; add `compile` for torch.compile), at
--table-batch-sizes and --threads, in GMAC per CPU second of the process (MACs counted, the fused attention
included); then for each precision its best row against the instruction peak measured here by a hand loop
(scripts/bench_peak.py): `P: G GMAC per CPU-s, S% of the PEAKNAME peak (K GMAC/s a core, measured here)`.

Then for each precision (--precisions; default fp32 and bf16, fp16 too on a GPU) on the same images:

- forward passes alone: both encoders on batches preprocessed beforehand (untimed), all torch threads;
  images/s by wall time and CPU seconds an image (the process's, every thread: the load of a shared machine
  moves it less than wall time), each as a ratio to fp32's: CPU time over CPU time first, the wall time's beside;
- `vhmine embed --precision P` end to end (embed_collection: decode, preprocess, encode, shard and index
  writes; model loading apart in wall time, a fixed cost, but inside its CPU time): images/s and CPU seconds an
  image, and their ratios to the forward passes alone (target: at least 0.85 on a CPU, by CPU time; by wall time
  beside it: the device's time on a GPU);
- (each precision on the runtime --backend names: auto, vhmine's own choice, by default)
- agreement with torch fp32 on what matters downstream: the largest change of any CLIP and any DINOv2 similarity
  over every pair of images, and the Jaccard overlap of the mined pair sets (CLIP >= c and DINOv2 <= d) at
  the default thresholds (0.9, 0.55) and, since random weights put similarities elsewhere than trained ones
  do, at thresholds set from fp32's similarities so that the box holds about --box-share of the pairs (a box
  with pairs in it); also of the CLIP-alike sets (CLIP >= c alone).

Then what `--precision auto --backend auto` choose here (measured afresh, in one thread). The measurements
alternate between the precisions, --repeat times; the best of each counts.

Images (--images photos, the default): JPEG variants of scikit-image's photos (scripts/photo_variants.py: crops,
mirror images, turns, colour shifts of 21 pictures), so pairs sit at every similarity from near duplicates to
unrelated; --images synthetic: COCO-sized gradients plus noise (make_jpegs), for throughput alone. Encoders:
random weights in real architectures' shapes (--preset small: ViT-B/32 + DINOv2-S/14; large: ViT-L/14 +
DINOv2-L/14; tiny: vhmine.embed.tiny's defaults), built locally: they cost what trained ones do, but their
agreement figures are a weaker test than trained weights' (random layers spread activations differently, and
their similarities crowd where trained ones do not).

    python scripts/bench_embed.py                      # CPU: small preset, 300 photo variants
    python scripts/bench_embed.py --preset large --device cuda --n 20000 --batch-size 256 --workers 14
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

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


def build_encoders(folder: Path, preset: str) -> tuple[str, str]:
    """(clip spec, dino spec) of random-weight encoders of the preset's shapes, saved in the real formats."""
    from vhmine.embed import tiny

    if preset == "tiny":
        return tiny.build_clip(folder / "clip"), tiny.build_dino(folder / "dino")
    arch, hidden, layers, heads = PRESETS[preset]
    clip = tiny.build_clip(folder / "clip", like=arch)
    return clip, tiny.build_dino(folder / "dino", hidden_size=hidden, layers=layers, heads=heads, image_size=224)


def describe_preset(preset: str) -> str:
    if preset == "tiny":
        return "tiny (vhmine.embed.tiny: 32-d CLIP and DINOv2 of 2 layers)"
    arch, hidden, layers, heads = PRESETS[preset]
    return f"{preset} ({arch} + DINOv2 {hidden}d x {layers} layers, 224 px)"


def machine_line() -> str:
    """The CPU's model, cores and the instruction sets that matter to these precisions; torch; a GPU if any."""
    import torch

    from vhmine.embed.precision import machine

    m = machine(torch.device("cpu"))
    gpu = f"; GPU {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "; no GPU"
    return (
        f"CPU {m['cpu']}, {m['cores']} cores, flags {' '.join(m['flags']) or '-'} (torch ISA {m['isa']}), "
        f"torch {m['torch']}{gpu}"
    )


def preprocessed(specs: tuple[str, str], paths: list[Path], batch_size: int) -> list[tuple]:
    """The images as both encoders' preprocessed batches (the same for every precision)."""
    import torch

    from vhmine.embed.encoders import load_clip, load_dino
    from vhmine.images import decode_rgb

    clip, dino = load_clip(specs[0], "cpu"), load_dino(specs[1], "cpu")
    out = []
    for s in range(0, len(paths), batch_size):
        imgs = [decode_rgb(p.read_bytes()) for p in paths[s : s + batch_size]]
        out.append((torch.stack([clip.preprocess(i) for i in imgs]), torch.stack([dino.preprocess(i) for i in imgs])))
    return out


def forward(pair, batches, device) -> tuple[float, float, tuple]:
    """(wall s, process CPU s, (clip, dino) vectors) of both encoders' forward passes over the batches."""
    import numpy as np
    import torch

    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    sync()
    w0, c0 = time.perf_counter(), time.process_time()
    vecs = [pair.encode(c, d) for c, d in batches]
    sync()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return wall, cpu, (np.concatenate([v[0] for v in vecs]), np.concatenate([v[1] for v in vecs]))


def similarities(x):
    """Every pair i < j's float64 cosine (rows are unit vectors) as a flat array, in triu order."""
    import numpy as np

    x = x.astype(np.float64)
    i, j = np.triu_indices(len(x), k=1)
    return (x @ x.T)[i, j]


def jaccard(a, b) -> float | None:
    """|a & b| / |a | b| of two boolean masks over the same pairs; None when both are empty."""
    union = int((a | b).sum())
    return None if union == 0 else int((a & b).sum()) / union


def box_thresholds(clip_sims, dino_sims, share: float) -> tuple[float, float]:
    """(c, d) with about `share` of all pairs CLIP-alike (CLIP >= c) and a fifth of those in the box (DINOv2 <=
    d): the shape of a real run's box, placed where these encoders' similarities are."""
    import numpy as np

    c = float(np.quantile(clip_sims, 1 - 5 * share))
    d = float(np.quantile(dino_sims[clip_sims >= c], 0.2))
    return c, d


def agreement(ref: tuple, got: tuple, thresholds: dict) -> dict:
    """How far `got`'s vectors are from `ref`'s downstream: the largest change of a CLIP and of a DINOv2
    similarity, and per named (c, d) the Jaccard overlap of the box's pairs and of the CLIP-alike pairs."""
    import numpy as np

    (rc, rd), (gc, gd) = (similarities(ref[0]), similarities(ref[1])), (similarities(got[0]), similarities(got[1]))
    out = {"clip": float(np.abs(gc - rc).max()), "dino": float(np.abs(gd - rd).max())}
    for name, (c, d) in thresholds.items():
        ref_box, got_box = (rc >= c) & (rd <= d), (gc >= c) & (gd <= d)
        out[name] = (jaccard(ref_box, got_box), int(ref_box.sum()), jaccard(rc >= c, gc >= c), int((rc >= c).sum()))
    return out


def precision_rows(
    specs, paths, precisions, *, device, batch_size, repeat, workers, tmp: Path, box_share, backend="auto"
) -> dict:
    """{precision: measured figures} for the images at `paths` (see the module docstring), each precision on
    the runtime `backend` (torch, openvino, or auto: vhmine's choice, embed.backend); agreement against torch
    fp32's vectors."""
    import numpy as np
    import torch

    from vhmine.config import DEFAULT_CLIP_MIN, DEFAULT_DINO_MAX, resolve_device
    from vhmine.embed.encoders import load_pair
    from vhmine.embed.job import EmbedOptions, embed_collection

    dev = resolve_device(device)
    batches = preprocessed(specs, paths, batch_size)
    ref_pair = load_pair(*specs, dev, "fp32", backend="torch")
    ref = forward(ref_pair, batches, dev)[2]  # torch fp32: what every precision and runtime is held to
    del ref_pair
    pairs = {p: load_pair(*specs, dev, p, backend=backend) for p in precisions}
    for p in precisions:  # warm: the first pass of each batch shape packs weights and allocates
        for c, d in {tuple(c.shape): (c, d) for c, d in batches}.values():
            pairs[p].encode(c, d)
    rows = {p: {"forward": [], "cpu": [], "e2e": [], "e2e_cpu": []} for p in precisions}
    for k in range(repeat):  # alternated: a change in the machine's load meets every precision alike
        for p in precisions:
            wall, cpu, vecs = forward(pairs[p], batches, dev)
            rows[p]["forward"].append(wall)
            rows[p]["cpu"].append(cpu)
            rows[p].setdefault("vectors", vecs)
            c0 = time.process_time()
            res = embed_collection(
                EmbedOptions(
                    images=paths[0].parent,
                    name=f"{p}-{k}",
                    indexes=tmp / "idx",
                    clip_model=specs[0],
                    dino_model=specs[1],
                    device=device,
                    batch_size=batch_size,
                    workers=workers,
                    precision=p,
                    backend=backend,
                    progress=False,
                )
            )
            rows[p]["e2e"].append(res.timings["encode"] + res.timings["finalize"])
            rows[p]["e2e_cpu"].append(time.process_time() - c0)  # (the models' loading included: a few seconds)
    thresholds = {"default": (DEFAULT_CLIP_MIN, DEFAULT_DINO_MAX)}
    thresholds["box"] = box_thresholds(similarities(ref[0]), similarities(ref[1]), box_share)
    for p, r in rows.items():
        r.update(
            n=len(paths), forward=min(r["forward"]), cpu=min(r["cpu"]), e2e=min(r["e2e"]), e2e_cpu=min(r["e2e_cpu"])
        )
        same = p == "fp32" and pairs[p].backend.name == "torch"  # the reference itself
        r["agree"] = None if same else agreement(ref, r["vectors"], thresholds)
        r["thresholds"] = thresholds
        r["dtype"] = str(pairs[p].clip.dtype).replace("torch.", "")
        r["backend"] = pairs[p].backend.name
    del pairs
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    assert all(np.isfinite(r["vectors"][0]).all() for r in rows.values()), "a precision gave NaN or inf vectors"
    return rows


def report(rows: dict) -> list[str]:
    """The figures as printed lines: one per precision, then the agreement with fp32."""
    base = rows.get("fp32")
    lines = []
    for p, r in rows.items():
        n = r["n"]
        rate, per = n / r["forward"], r["cpu"] / n
        vs = ""
        if base and r is not base:
            # CPU over CPU first (the load stretches wall time), the wall time's beside it
            vs = (
                f" ({base['cpu'] / r['cpu']:.2f}x less CPU time than fp32; wall time: "
                f"{rate * base['forward'] / n:.2f}x fp32's rate)"
            )
        lines.append(
            f"{p} ({r['dtype']}, {r['backend']}): forward passes alone {rate:.1f} images/s, "
            f"{per:.3f} CPU s an image{vs}; "
            f"vhmine embed {n / r['e2e']:.1f} images/s, {r['e2e_cpu'] / n:.3f} CPU s an image (model load included): "
            f"{r['cpu'] / r['e2e_cpu']:.2f} of the forward passes alone by CPU time (target >= 0.85), "
            f"{r['forward'] / r['e2e']:.2f} by wall time"
        )
    for p, r in rows.items():
        if not r["agree"]:
            continue
        a = r["agree"]
        parts = [f"largest change of a CLIP similarity {a['clip']:.5f}, of a DINOv2 similarity {a['dino']:.5f}"]
        for name, (c, d) in r["thresholds"].items():
            jb, nb, ja, na = a[name]
            box = "n/a (no pair in the box)" if jb is None else f"{jb:.4f}"
            alike = "n/a" if ja is None else f"{ja:.4f}"
            label = "default thresholds" if name == "default" else "thresholds with a box"
            parts.append(
                f"{label} (CLIP >= {c:.4f}, DINOv2 <= {d:.4f}): Jaccard of the mined pairs {box} ({nb} in fp32's box), "
                f"of the CLIP-alike pairs {alike} ({na})"
            )
        lines.append(f"{p} on {r['backend']} vs torch fp32: " + "; ".join(parts))
    return lines


def auto_line(specs, device) -> str:
    """What `--precision auto --backend auto` choose on this machine, measured afresh (caches of their own)."""
    from vhmine.embed import backend, precision
    from vhmine.embed.encoders import load_pair

    with tempfile.TemporaryDirectory() as tmp:
        saved = {env: os.environ.get(env) for env in (precision.CACHE_ENV, backend.CACHE_ENV)}
        for env in saved:
            os.environ[env] = str(Path(tmp) / f"{env}.json")
        try:
            pair = load_pair(*specs, device, "auto", backend="auto")
            return f"auto: {pair.precision.line()}; {pair.backend.line()}"
        finally:
            for env, value in saved.items():
                if value is None:
                    del os.environ[env]
                else:
                    os.environ[env] = value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=["tiny", *sorted(PRESETS)], default="small")
    ap.add_argument("--n", type=int, default=300, help="images")
    ap.add_argument("--images", choices=("photos", "synthetic"), default="photos")
    ap.add_argument("--precisions", default=None, help="comma-separated [default: fp32,bf16; and fp16 on a GPU]")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--workers", type=int, default=None, help="default: vhmine's own choice for the device")
    ap.add_argument("--device", default=None)
    ap.add_argument("--repeat", type=int, default=2, help="alternate the measurements this often; best of each counts")
    ap.add_argument("--box-share", type=float, default=0.002, help="share of all pairs in the fitted box, about")
    ap.add_argument("--backend", default="auto", help="the runtime of the precision rows and vhmine embed [auto]")
    ap.add_argument(
        "--backends", default="torch,openvino,onnxruntime", help="the runtime table's (add compile: torch.compile)"
    )
    ap.add_argument("--table-batch-sizes", default="8,32", help="the runtime table's batch sizes")
    ap.add_argument("--threads", default="1,0", help="the runtime table's thread counts (0: torch's default, all)")
    ap.add_argument("--no-table", action="store_true", help="skip the runtime table and the peak lines")
    args = ap.parse_args()

    import torch
    from photo_variants import make_variants

    gpu = (args.device or ("cuda" if torch.cuda.is_available() else "cpu")).startswith("cuda")
    precisions = (args.precisions or ("fp32,bf16,fp16" if gpu else "fp32,bf16")).split(",")
    print(machine_line())
    print(f"load before: {os.getloadavg()[0]:.2f} (1-minute average)")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t = time.time()
        if args.images == "photos":
            paths = make_variants(tmp / "imgs", args.n, photos=tmp / "photos")
        else:
            (tmp / "imgs").mkdir()
            make_jpegs(tmp / "imgs", args.n)
            paths = sorted((tmp / "imgs").glob("*.jpg"))
        specs = build_encoders(tmp / "models", args.preset)
        print(f"made {args.n} images ({args.images}) and the encoders in {time.time() - t:.1f} s")
        print(
            f"preset {describe_preset(args.preset)}, {args.n} images, batch {args.batch_size}, torch threads "
            f"{torch.get_num_threads()}, device {args.device or ('cuda' if gpu else 'cpu')}, best of {args.repeat}"
        )
        if not args.no_table and not gpu:
            import embed_runtimes

            print(f"runtime table (CPU time of the process, every thread; best of {args.repeat}):", flush=True)
            table = embed_runtimes.table(
                specs,
                precisions,
                args.backends.split(","),
                [int(b) for b in args.table_batch_sizes.split(",")],
                [int(t) for t in args.threads.split(",")],
                args.repeat,
                log=lambda line: print(line, flush=True),
            )
            from vhmine.embed.encoders import load_clip, load_dino

            counted = embed_runtimes.macs_per_image((load_clip(specs[0], "cpu"), load_dino(specs[1], "cpu")))
            macs = sum(counted.values())
            shown = ", ".join(f"{k} {v / 1e9:.3g}" for k, v in counted.items())
            print(f"MACs an image (counted, the fused attention included): {shown}, together {macs / 1e9:.3g} G")
            for line in embed_runtimes.peak_lines(table, precisions, macs / 1e9):
                print(line)
        rows = precision_rows(
            specs,
            paths,
            precisions,
            device=args.device,
            batch_size=args.batch_size,
            repeat=args.repeat,
            workers=args.workers,
            tmp=tmp,
            box_share=args.box_share,
            backend=args.backend,
        )
        for line in report(rows):
            print(line)
        print(auto_line(specs, args.device))
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
