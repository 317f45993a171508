"""Indexes and runs the miner's run tests share (tests/mine/run/, tests/mine/ray/): each image's vectors from its
key alone, an index of chosen keys, a run's run.json and sorted pairs, the float64 brute-force references of a
triangle and of a rectangle (from test_grow and test_mine_across), a bit flipped in a vector file in place (from
test_kept_digests and test_kept_states). Imported by name (`from mine_runs import
...`): tests/mine/conftest.py puts this folder on the path."""

import json

import numpy as np
import pandas as pd
from helpers import make_index, unit_rows

from vhmine.mine.join import brute_force_pairs

CLIP, DINO = 0.8, 0.5


def vectors(keys):
    """Each image's vectors follow from its key alone: images of one group of 5 keys are CLIP-alike, and in
    every other group DINOv2 disagrees."""
    clip, dino = [], []
    for k in keys:
        g = np.random.default_rng(1000 + k // 5)
        r = np.random.default_rng(k)
        clip.append(g.standard_normal(16) + 0.35 * r.standard_normal(16))
        dino.append((g.standard_normal(12) if (k // 5) % 2 else 0.0) + 0.8 * r.standard_normal(12))
    return unit_rows(clip), unit_rows(dino)


def build(tmp_path, keys, name="col", **kw):
    clip, dino = vectors(keys)
    make_index(
        tmp_path / "indexes",
        name,
        clip,
        dino,
        root=tmp_path / "images",
        keys=keys,
        created=kw.pop("created", "2026-11-01T00:00:00+0000"),
        **kw,
    )


def run_json(tmp_path, out="run"):
    return json.loads((tmp_path / out / "run.json").read_text())


def sorted_pairs(folder):
    df = pd.read_parquet(folder / "pairs.parquet")
    return df.sort_values(["image_id_a", "image_id_b"]).reset_index(drop=True)


def brute(keys):
    """The in-box pairs of these images by a float64 brute force, as sorted (id_a, id_b, clip, dino) tuples."""
    clip, dino = vectors(keys)
    ids = np.array([f"{k:016x}"[::-1] for k in keys], dtype=object)
    ps = brute_force_pairs(clip, dino, CLIP, DINO)
    a, b = ids[ps.i], ids[ps.j]
    return sorted(zip(np.minimum(a, b), np.maximum(a, b), ps.clip_sim, ps.dino_sim))


A_KEYS = [k for k in range(60) if k % 5 < 3]  # 36 images


B_KEYS = [k for k in range(70) if k % 5 >= 3]  # 28 other images of the same groups (and two groups of B alone)


def ids(keys):
    return np.array([f"{k:016x}"[::-1] for k in keys], dtype=object)


def rectangle_brute(a_keys, b_keys, clip_min=CLIP, dino_max=DINO):
    """(id from A, id from B, clip, dino) of every in-box pair across, by a float64 brute force over the
    stacked rows, sorted."""
    ca, da = vectors(a_keys)
    cb, db = vectors(b_keys)
    ps = brute_force_pairs(np.concatenate([ca, cb]), np.concatenate([da, db]), clip_min, dino_max)
    cross = (ps.i < len(ca)) & (ps.j >= len(ca))
    return sorted(
        zip(ids(a_keys)[ps.i[cross]], ids(b_keys)[ps.j[cross] - len(ca)], ps.clip_sim[cross], ps.dino_sim[cross])
    )


SHARED = [0, 1, 5, 6, 10, 11, 15, 20, 21, 25]  # 10 images in both indexes: a group's images are alike


def unordered_brute(a_keys, b_keys, clip_min, dino_max):
    """{(lower id, higher id): (clip, dino)} of every in-box pair of two different images, one from A and one
    from B, each unordered pair once (the brute force over the rectangle, then as a set)."""
    out = {}
    for x, y, c, d in rectangle_brute(a_keys, b_keys, clip_min, dino_max):
        if x != y:
            out.setdefault((min(x, y), max(x, y)), (c, d))
    return out


def build_named(tmp_path, name, keys, **kw):
    """Index `name` of these keys' images (test_mine_across's two indexes)."""
    clip, dino = vectors(keys)
    make_index(tmp_path / "indexes", name, clip, dino, root=tmp_path / f"images-{name}", keys=keys, **kw)


def flip_in_place(path, row: int, col: int, bit: int) -> None:
    """One bit of one stored float32 of a vector file changed in place, the file's size and mtime put back
    (its ctime, which no program sets, moves on)."""
    import os

    from vhmine.index.rows import open_vectors

    vf, was = open_vectors(path), os.stat(path)
    with open(path, "r+b") as f:
        f.seek(vf.offset + row * vf.row_bytes + 4 * col + bit // 8)
        byte = f.read(1)[0] ^ (1 << (bit % 8))
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte]))
    os.utime(path, ns=(was.st_atime_ns, was.st_mtime_ns))
