"""mine.across: `vhmine mine --index A --against B`, the pairs with one image from each index, exact."""

import json

import numpy as np
import pandas as pd
import pytest
from mine_runs import A_KEYS, B_KEYS, CLIP, DINO, SHARED, ids, rectangle_brute, unordered_brute
from mine_runs import build_named as build

from vhmine import api
from vhmine.errors import InputError


def mine_across(tmp_path, out="run", **kw):
    kw.setdefault("clip", CLIP)
    kw.setdefault("dino", DINO)
    return api.mine(
        "mine", against="ref", indexes=tmp_path / "indexes", out=tmp_path / out, progress=False, gallery_size=5, **kw
    )


def test_against_gives_a_brute_forces_pairs_across_each_side_from_its_own_index(tmp_path):
    build(tmp_path, "mine", A_KEYS)
    build(tmp_path, "ref", B_KEYS)
    res = mine_across(tmp_path)
    df = pd.read_parquet(tmp_path / "run" / "pairs.parquet")
    want = rectangle_brute(A_KEYS, B_KEYS)
    assert len(want) > 10 and res.written == len(want)
    got = sorted(zip(df.image_id_a, df.image_id_b, df.clip_sim, df.dino_sim))
    assert got == want  # the same float64 bits
    assert set(df.index_a) == {"mine"} and set(df.index_b) == {"ref"}
    assert all(p.startswith(str(tmp_path / "images-mine")) for p in df.path_a)
    assert all(p.startswith(str(tmp_path / "images-ref")) for p in df.path_b)
    assert list(df["rank"]) == list(range(1, len(df) + 1)) and (np.diff(df.gap) <= 0).all()
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["against"]["index"] == "ref" and meta["against"]["index_folder"] == str(
        (tmp_path / "indexes" / "ref").resolve()
    )
    assert meta["counts"]["images_a"] == len(A_KEYS) and meta["counts"]["images_b"] == len(B_KEYS)
    assert "incremental" not in meta
    csv = pd.read_csv(tmp_path / "run" / "pairs.csv")
    assert list(csv.columns) == list(df.columns) and list(csv.index_b) == list(df.index_b)


def test_against_caps_and_ties_rank_as_a_single_index_would(tmp_path):
    build(tmp_path, "mine", A_KEYS)
    build(tmp_path, "ref", B_KEYS)
    mine_across(tmp_path, max_per_image=1, max_pairs=5)
    df = pd.read_parquet(tmp_path / "run" / "pairs.parquet")
    want = rectangle_brute(A_KEYS, B_KEYS)
    want.sort(key=lambda p: (-(p[2] - p[3]), p[0], p[1]))
    used, keep = {}, []
    for a, b, _c, _d in want:
        if used.get(a, 0) < 1 and used.get(b, 0) < 1:
            used[a] = used[b] = 1
            keep.append((a, b))
    assert list(zip(df.image_id_a, df.image_id_b)) == keep[:5]


def test_against_refuses_indexes_with_other_encoders_in_one_line_naming_both(tmp_path):
    build(tmp_path, "mine", A_KEYS)
    build(tmp_path, "ref", B_KEYS, encoders=("test-clip", "other-dino"))
    with pytest.raises(InputError) as err:
        mine_across(tmp_path)
    msg = str(err.value)
    assert "\n" not in msg and "'mine'" in msg and "'ref'" in msg and "test-dino" in msg and "other-dino" in msg
    assert not (tmp_path / "run").exists()


def test_against_an_index_itself_is_refused_and_a_folder_names_an_index(tmp_path):
    build(tmp_path, "mine", A_KEYS)
    build(tmp_path, "ref", B_KEYS)
    with pytest.raises(InputError, match="is index 'mine' itself"):
        api.mine("mine", against="mine", indexes=tmp_path / "indexes", out=tmp_path / "run", progress=False)
    res = api.mine(
        "mine",
        against=str(tmp_path / "indexes" / "ref"),
        indexes=tmp_path / "indexes",
        clip=CLIP,
        dino=DINO,
        out=tmp_path / "run",
        progress=False,
        gallery_size=0,
    )
    assert res.written == len(rectangle_brute(A_KEYS, B_KEYS))


def test_against_with_no_pair_says_what_to_relax_over_the_rectangle(tmp_path):
    build(tmp_path, "mine", A_KEYS[:6])
    build(tmp_path, "ref", B_KEYS[:4])
    res = mine_across(tmp_path, clip=0.99)
    assert res.written == 0
    text = res.summary()
    assert "vhmine mine --index mine --against ref" in text and "every pair of the collection" in text


def test_against_default_run_folder_names_both_indexes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    build(tmp_path, "mine", A_KEYS)
    build(tmp_path, "ref", B_KEYS)
    res = api.mine(
        "mine", against="ref", indexes=tmp_path / "indexes", clip=CLIP, dino=DINO, progress=False, gallery_size=0
    )
    assert res.run_dir.resolve() == tmp_path / "runs" / "mine-x-ref-clip0.8-dino0.5"


def test_against_with_images_in_both_indexes_pairs_no_image_with_itself_and_each_pair_once(tmp_path):
    a_keys, b_keys = A_KEYS + [k for k in SHARED if k not in A_KEYS], B_KEYS + [k for k in SHARED if k not in B_KEYS]
    build(tmp_path, "mine", a_keys)
    build(tmp_path, "ref", b_keys)
    res = mine_across(tmp_path, dino=1.0)  # (a pair of an image with itself is in this box: DINOv2 1.0)
    df = pd.read_parquet(tmp_path / "run" / "pairs.parquet")
    assert not (df.image_id_a == df.image_id_b).any()
    key = [tuple(sorted(p)) for p in zip(df.image_id_a, df.image_id_b)]
    assert len(set(key)) == len(key)
    want = unordered_brute(a_keys, b_keys, CLIP, 1.0)
    assert dict(zip(key, zip(df.clip_sim, df.dino_sim))) == want and res.written == len(want)
    both = set(ids(SHARED))
    twice = [(x, y) for x, y in zip(df.image_id_a, df.image_id_b) if x in both and y in both]
    assert twice and all(x < y for x, y in twice)  # a pair of two shared images: side a has the lower id
    assert set(df.image_id_a) <= set(ids(a_keys)) and set(df.image_id_b) <= set(ids(b_keys))
    assert json.loads((tmp_path / "run" / "run.json").read_text())["counts"]["shared_images"] == 10
    assert "10 image(s) are in both indexes" in res.summary()


@pytest.mark.parametrize("side", ["a", "b"])
def test_against_an_index_of_one_image_is_a_1_x_n_rectangle(tmp_path, side):
    one, many = [3], [k for k in range(40) if k != 3]
    build(tmp_path, "mine", one if side == "a" else many)
    build(tmp_path, "ref", many if side == "a" else one)
    res = mine_across(tmp_path)
    want = rectangle_brute(*((one, many) if side == "a" else (many, one)))
    df = pd.read_parquet(tmp_path / "run" / "pairs.parquet")
    assert want and res.written == len(want)
    assert sorted(zip(df.image_id_a, df.image_id_b, df.clip_sim, df.dino_sim)) == want
