"""How a mining run travels through the package: the walk of `vhmine.api.mine`'s options, module by module.

Builds a small index of random unit vectors (vhmine.index.write_index; no encoders), then runs
`vhmine.api.mine` on it under a profiler that records each vhmine function the first time it is called, in
call order. Consecutive functions of one module are one *stay*; a stay in a module the walk had already
left is a *return*. A run whose work passes once down its layers (plan -> engine -> rank -> state ->
publish) returns seldom; one that shuttles between a grab-bag module and its callers returns often.

Prints, per shape (the triangle of one index, the band of a grown index, the rectangle of --against):
`walk (SHAPE): S stays in M modules, R returns` and, with --path, the stays in order. Reads and writes only
a temporary folder.

    python scripts/walk_mine.py
    python scripts/walk_mine.py --path
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


def _index(indexes: Path, name: str, n: int, seed: int, start: int = 0) -> None:
    """An index of n rows (image keys start..start+n-1) of random unit vectors, written by vhmine.index."""
    import numpy as np
    import pandas as pd
    from PIL import Image

    from vhmine.index import write_index

    root = indexes.parent / "photos"
    root.mkdir(parents=True, exist_ok=True)
    keys = range(start, start + n)

    def unit(d: int, stream: int) -> np.ndarray:
        rng = np.random.default_rng([seed, stream])  # its own stream: a grown index keeps its first rows
        base = rng.standard_normal((1, d))  # one shared direction: CLIP-alike pairs exist
        rows = base + 0.35 * rng.standard_normal((n, d))
        return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)

    for k in keys:
        Image.fromarray(np.full((24, 32, 3), (k * 37) % 255, np.uint8)).save(root / f"img{k:04d}.png")
    images = pd.DataFrame(
        {
            "image_id": [f"{k:016x}" for k in keys],
            "path": [f"img{k:04d}.png" for k in keys],
            "sha256": [f"{k:064x}" for k in keys],
            "width": [32] * n,
            "height": [24] * n,
            "coco_id": pd.array([None] * n, dtype="Int64"),
            "categories": [[] for _ in keys],
        }
    )
    clip, dino = unit(32, 0), unit(24, 1)
    manifest = {
        "name": name,
        "root": str(root),
        "encoders": {"clip": {"spec": "walk-clip", "dim": 32}, "dino": {"spec": "walk-dino", "dim": 24}},
    }
    skipped = pd.DataFrame({"path": [], "reason": []})
    write_index(indexes / name, images, clip, dino, skipped=skipped, manifest=manifest)


def walk(call) -> list[str]:
    """The modules of the vhmine functions `call()` reaches, each function at its first call, in order."""
    seen: set = set()
    order: list[str] = []

    def profile(frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        mod = frame.f_globals.get("__name__", "")
        # a comprehension, generator expression or lambda is part of the function that holds it (Python 3.12
        # inlines comprehensions: no frame of their own)
        if not mod.startswith("vhmine") or code in seen or code.co_name.startswith("<"):
            return
        seen.add(code)
        order.append(mod)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return order


def stays(order: list[str]) -> list[str]:
    """Consecutive runs of one module folded to one entry."""
    out: list[str] = []
    for mod in order:
        if not out or out[-1] != mod:
            out.append(mod)
    return out


def summary(shape: str, path: list[str]) -> str:
    modules = set(path)
    returns = len(path) - len(modules)
    return f"walk ({shape}): {len(path)} stays in {len(modules)} modules, {returns} returns"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=400)
    ap.add_argument("--path", action="store_true", help="print each walk's stays in order")
    args = ap.parse_args(argv)

    from vhmine import api

    with tempfile.TemporaryDirectory() as tmp:
        indexes, runs = Path(tmp) / "indexes", Path(tmp) / "runs"
        n = args.rows
        _index(indexes, "walk", n, seed=1)
        _index(indexes, "other", n // 2, seed=2, start=10 * n)
        opts = dict(clip=0.5, dino=0.5, indexes=str(indexes), gallery_size=4)
        shapes = {
            "triangle": lambda: api.mine(index="walk", out=str(runs / "tri"), **opts),
            "rectangle": lambda: api.mine(index="walk", against="other", out=str(runs / "rect"), **opts),
        }
        api.mine(index="walk", out=str(runs / "grow"), **opts)  # the run a grown index reuses (not walked)
        results = {}
        for shape, call in shapes.items():
            results[shape] = stays(walk(call))
        _index(indexes, "walk", n + n // 20, seed=1)  # the same rows first, then 5% new ones
        results["band"] = stays(walk(lambda: api.mine(index="walk", out=str(runs / "grow"), **opts)))
        for shape, path in results.items():
            if args.path:
                print(f"{shape}:")
                for mod in path:
                    print("   ", mod)
            print(summary(shape, path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
