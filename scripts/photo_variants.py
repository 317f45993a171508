"""Realistic benchmark images: scikit-image's sample photos (vhmine.demo.write_sample_photos) and many
variants of each, as a collection of near duplicates and unrelated photos is: random crops (a third of the
picture to all of it), mirror images, small turns, brightness and colour shifts, resizing, JPEG at several
qualities. Used by scripts/bench_embed.py (the agreement of precisions) and scripts/bench_small.py (a small
`vhmine mine` and `vhmine export`).

`make_variants(folder, n)` writes n JPEG files (`NAME-KKKK.jpg`, the photos in turn: each of the 21
distinct photos has about n / 21 variants) and returns their paths; the same n and seed give the same bytes.
Writes the variants into `folder` and the sample photos they come from into `photos` (default: a `photos`
folder beside `folder`, so an embed of `folder` sees only the variants).
"""

from __future__ import annotations

from pathlib import Path


def make_variants(folder: Path, n: int, *, seed: int = 0, photos: Path | None = None, side: int = 480) -> list[Path]:
    """n JPEG variants of the sample photos in `folder` (created); `photos`: where the sample photos are kept
    [default: a `photos` folder beside `folder`]; `side`: the longer side of a variant before its crop, about."""
    import numpy as np
    from PIL import Image, ImageEnhance

    from vhmine.demo import write_sample_photos

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    sources = sorted(write_sample_photos(Path(photos) if photos else folder.parent / "photos"))
    # cat.png and chelsea.png are the same picture: one of them is enough
    sources = [p for p in sources if p.stem != "chelsea"]
    base = []
    for p in sources:
        img = Image.open(p).convert("RGB")
        scale = side / max(img.size)
        base.append((p.stem, img.resize((max(32, round(img.width * scale)), max(32, round(img.height * scale))))))
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        name, img = base[k % len(base)]
        w, h = img.size
        frac = rng.uniform(0.35, 1.0)  # the share of each side kept
        cw, ch = max(16, int(w * frac)), max(16, int(h * frac))
        x0, y0 = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        v = img.crop((x0, y0, x0 + cw, y0 + ch))
        if rng.random() < 0.5:
            v = v.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        if rng.random() < 0.3:
            v = v.rotate(float(rng.uniform(-12, 12)), resample=Image.Resampling.BICUBIC, expand=False)
        v = ImageEnhance.Brightness(v).enhance(float(rng.uniform(0.7, 1.3)))
        v = ImageEnhance.Color(v).enhance(float(rng.uniform(0.5, 1.5)))
        if rng.random() < 0.3:
            s = rng.uniform(0.5, 1.0)
            v = v.resize((max(16, int(v.width * s)), max(16, int(v.height * s))), Image.Resampling.BILINEAR)
        path = folder / f"{name}-{k:04d}.jpg"
        v.save(path, format="JPEG", quality=int(rng.integers(60, 96)))
        out.append(path)
    return out
