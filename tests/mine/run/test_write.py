"""The pairs table's writers (mine.write, mine.csvtext, index.join_locations): built by column operations, they
write the bytes the per-row code before them wrote (kept here as the reference: pandas' to_parquet and to_csv
over columns built a row at a time), on tricky inputs: paths with commas, quotes, line breaks, unicode, odd
slashes and URL roots; missing categories and coco ids; no pairs at all; an --against run's index columns;
the Ray engine's shards. And the columns they write, pinned."""

import io

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from vhmine.images import join_location
from vhmine.index import CollectionIndex, join_locations
from vhmine.mine import idjoin, pairwriter, write
from vhmine.mine.csvtext import csv_fields, write_csv
from vhmine.mine.pairwriter import PairWriter

COLUMNS = [
    "rank",
    "image_id_a",
    "image_id_b",
    "sha256_a",
    "sha256_b",
    "path_a",
    "path_b",
    "clip_sim",
    "dino_sim",
    "gap",
    "coco_id_a",
    "coco_id_b",
    "categories_a",
    "categories_b",
]
PATHS = [
    "a.jpg",
    "dir with space/b,c.jpg",
    'q"uote.jpg',
    "naïve/été.png",
    "漢字/写真.jpg",
    "emoji😀.png",
    "./dot/x.jpg",
    "a//b.jpg",
    "/abs/path.jpg",
    "trail/",
    "new\nline.jpg",
    "cr\rx.jpg",
    "pipe|x.jpg",
    "",
    ".",
    "..",
    "../up.jpg",
    "x/./y.jpg",
    "a/.",
    "train2017/000000000139.jpg",
]
CATEGORIES = [[], ["cat"], ["dog", "hot, dog"], ['say "cheese"'], ["naïve", "漢字"], ["a|b"], ["line\nbreak"], []]
ROOTS = ["/data/images", "relative/root", "/", "s3://bucket/coll/", "file:///data/images", "gs://b"]
SIMS = [0.0, -0.0, 1.0, -1.0, 1e-5, -3e-7, 0.5, 1 / 3, 2.0, 1e-4, 9.99e-5, 0.123456789, 1.5, -0.25]


# --- the per-row code before (the reference) ------------------------------------------------------------


def old_side(images, rows, location) -> dict:
    rows = np.asarray(rows, dtype=np.int64)
    return {
        "image_id": images["image_id"].to_numpy()[rows],
        "sha256": images["sha256"].to_numpy()[rows],
        "path": np.asarray(list(map(location, images["path"].to_numpy()[rows])), dtype=object),
        "coco_id": images["coco_id"].array[rows],
        "categories": list(map(list, images["categories"].to_numpy()[rows])),
    }


def old_pairs_frame(first_rank, side_a, side_b, clip_sim, dino_sim, gap):
    n = len(clip_sim)
    cols = {"rank": np.arange(first_rank, first_rank + n, dtype=np.int64)}
    for key in ("image_id", "sha256", "path"):
        cols[f"{key}_a"], cols[f"{key}_b"] = side_a[key], side_b[key]
    cols.update(clip_sim=clip_sim, dino_sim=dino_sim, gap=gap)
    for s, side in (("a", side_a), ("b", side_b)):
        cols[f"coco_id_{s}"] = side["coco_id"] if n else pd.array([], dtype="Int64")
    cols["categories_a"], cols["categories_b"] = side_a["categories"], side_b["categories"]
    return pd.DataFrame(cols)


def old_csv_frame(frame):
    csv = frame.copy()
    for col in ("categories_a", "categories_b"):
        csv[col] = ["|".join(c) for c in csv[col]]
    return csv


def old_write(folder, frame, *, append=False, parquet="pairs.parquet"):
    frame.to_parquet(folder / parquet, index=False)
    old_csv_frame(frame).to_csv(folder / "pairs.csv", index=False, mode="a" if append else "w", header=not append)


# --- the inputs ----------------------------------------------------------------------------------------


def images_file(tmp_path, n=40, categories=None, coco=True, name="images.parquet"):
    """An images.parquet of n tricky rows, and its table as open_index reads it."""
    k = range(n)
    frame = pd.DataFrame(
        {
            "image_id": [f"{x * 2654435761 % 2**64:016x}" for x in k],
            "path": [PATHS[x % len(PATHS)] for x in k],
            "sha256": [f"{x:064x}" for x in k],
            "width": [64] * n,
            "height": [48] * n,
            "coco_id": pd.array([x if coco and x % 3 else None for x in k], dtype="Int64"),
            "categories": [list(CATEGORIES[x % len(CATEGORIES)]) if categories is None else categories for x in k],
        }
    )
    path = tmp_path / name
    frame.to_parquet(path, index=False)
    return path, pd.read_parquet(path)


def index_of(images, root):
    return CollectionIndex("t", None, {"root": root}, images, None, None)


def pair_rows(n_images, n_pairs, seed=0):
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, n_images, n_pairs), rng.integers(0, n_images, n_pairs)
    sims = np.array(SIMS)
    clip = np.where(rng.random(n_pairs) < 0.5, sims[rng.integers(0, len(sims), n_pairs)], rng.uniform(-1, 1, n_pairs))
    dino = np.where(rng.random(n_pairs) < 0.5, sims[rng.integers(0, len(sims), n_pairs)], rng.uniform(-1, 1, n_pairs))
    return a, b, clip, dino, clip - dino


def both(tmp_path, images, root, rows, *, columns=None):
    """(new bytes, old bytes) of pairs.parquet and pairs.csv for these rows of these images."""
    idx = index_of(images, root)
    a, b, clip, dino, gap = rows
    new = write.pairs_frame(
        1, write.side(images, a, idx.locations), write.side(images, b, idx.locations), clip, dino, gap
    )
    old = old_pairs_frame(1, old_side(images, a, idx.location), old_side(images, b, idx.location), clip, dino, gap)
    out = {}
    for kind, frame in (("new", new), ("old", old)):
        for col, value in (columns or {}).items():
            frame[col] = value
        folder = tmp_path / kind
        folder.mkdir(exist_ok=True)
        (write.write_table if kind == "new" else old_write)(folder, frame)
        out[kind] = [(folder / f).read_bytes() for f in ("pairs.parquet", "pairs.csv")]
    return out["new"], out["old"]


# --- the tests ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("root", ROOTS)
def test_the_pairs_table_is_the_per_row_codes_bytes_on_tricky_rows(tmp_path, root):
    _, images = images_file(tmp_path)
    new, old = both(tmp_path, images, root, pair_rows(len(images), 300))
    assert new[1] == old[1]
    assert new[0] == old[0]
    written = pd.read_parquet(tmp_path / "new" / "pairs.parquet")
    assert list(written.columns) == COLUMNS  # the columns pinned, in their order
    assert new[1].split(b"\n", 1)[0].decode() == ",".join(COLUMNS)


@pytest.mark.parametrize(
    "case",
    ["no pairs", "one pair", "no categories anywhere", "no coco ids", "against"],
)
def test_edge_tables_are_the_per_row_codes_bytes(tmp_path, case):
    kw = {"no categories anywhere": dict(categories=[]), "no coco ids": dict(coco=False)}.get(case, {})
    _, images = images_file(tmp_path, **kw)
    n_pairs = {"no pairs": 0, "one pair": 1}.get(case, 50)
    columns = {"index_a": "photos, mine", "index_b": "coco"} if case == "against" else None
    new, old = both(tmp_path, images, "/data/images", pair_rows(len(images), n_pairs, seed=3), columns=columns)
    assert new == old


@pytest.mark.parametrize("dtype", [object, "string[pyarrow]", "string[python]"])
def test_an_image_table_of_other_text_dtypes_gives_the_per_row_codes_bytes(tmp_path, dtype):
    """An images table whose text columns are not pandas' default str (an index written by pandas 2, a table
    built in memory): the pairs' columns are typed as the per-row code typed them."""
    _, images = images_file(tmp_path)
    images = images.astype({"image_id": dtype, "sha256": dtype, "path": dtype})
    new, old = both(tmp_path, images, "/data/images", pair_rows(len(images), 60, seed=7))
    assert new == old


def two_sides(tmp_path):
    """Two images tables (a's, and b's for --against: (path, table, index)) and 30 ranked pairs over 25 rows."""
    path_a, images_a = images_file(tmp_path, name="a.parquet")
    path_b, images_b = images_file(tmp_path, n=25, categories=["x, y"], name="b.parquet")
    a, b, clip, dino, gap = pair_rows(25, 30, seed=5)
    rows = np.empty(30, [("a", "<i8"), ("b", "<i8"), ("clip", "<f8"), ("dino", "<f8"), ("gap", "<f8")])
    rows["a"], rows["b"], rows["clip"], rows["dino"], rows["gap"] = a, b, clip, dino, gap
    ia, ib = index_of(images_a, "/data/a"), index_of(images_b, "s3://bucket/b")
    return (path_a, images_a, ia), (path_b, images_b, ib), rows


def test_the_ray_engines_shards_are_the_per_row_codes_bytes(tmp_path):
    """PairWriter: shards of 7 rows (pairs.parquet a folder of them, pairs.csv appended shard by shard), and the
    --against form (each side from its own images.parquet, constant columns)."""
    (path_a, images_a, ia), (path_b, images_b, ib), rows = two_sides(tmp_path)
    for across in (False, True):
        folder = tmp_path / f"new{across}"
        folder.mkdir()
        side_b = (path_b, ib.locations) if across else None
        columns = {"index_a": "a", "index_b": "b"} if across else None
        w = PairWriter(folder, path_a, ia.locations, shard_rows=7, side_b=side_b, columns=columns)
        for s in range(0, 30, 4):  # arrivals cut other than the shards
            w.add(rows[s : s + 4])
        assert w.close() == 30
        ref = tmp_path / f"old{across}"
        (ref / "pairs.parquet").mkdir(parents=True)
        for k, s in enumerate(range(0, 30, 7)):
            part = rows[s : s + 7]
            frame = old_pairs_frame(
                s + 1,
                old_side(images_a, part["a"], ia.location),
                old_side(images_b if across else images_a, part["b"], (ib if across else ia).location),
                part["clip"],
                part["dino"],
                part["gap"],
            )
            for col, value in (columns or {}).items():
                frame[col] = value
            old_write(ref, frame, append=k > 0, parquet=f"pairs.parquet/part-{k:05d}.parquet")
        assert (folder / "pairs.csv").read_bytes() == (ref / "pairs.csv").read_bytes()
        for part in sorted((ref / "pairs.parquet").iterdir()):
            assert (folder / "pairs.parquet" / part.name).read_bytes() == part.read_bytes(), part.name


def test_pairs_joined_with_their_images_in_many_small_steps_are_the_same_table(tmp_path, monkeypatch):
    """PairWriter's join on disk cut small: ranges of 3 pairs (row groups of a shard), images in ranges of 4
    rows, buckets read 5 entries at a time and flushed every 2: pairs.csv the same bytes, pairs.parquet the
    same table, for one index and --against, a shard and several."""
    (path_a, images_a, ia), (path_b, images_b, ib), rows = two_sides(tmp_path)
    for across in (False, True):
        for shard_rows in (7, 100):
            kw = dict(side_b=(path_b, ib.locations) if across else None, columns={"k": "v"} if across else None)
            folders = []
            for small in (False, True):
                folder = tmp_path / f"{across}-{shard_rows}-{small}"
                folder.mkdir()
                with monkeypatch.context() as m:
                    if small:
                        m.setattr(pairwriter, "RANK_ROWS", 3)
                        m.setattr(pairwriter, "READ_ROWS", 5)
                        m.setattr(idjoin, "BUCKET_ROWS", 4)
                        m.setattr(idjoin, "FLUSH_ROWS", 2)
                    w = PairWriter(folder, path_a, ia.locations, shard_rows=shard_rows, **kw)
                    for s in range(0, 30, 4):
                        w.add(rows[s : s + 4])
                    assert w.close() == 30 and len(w.head) == 30
                folders.append(folder)
            big, small = folders
            assert (small / "pairs.csv").read_bytes() == (big / "pairs.csv").read_bytes()
            pd.testing.assert_frame_equal(
                pd.read_parquet(small / "pairs.parquet"), pd.read_parquet(big / "pairs.parquet")
            )
            assert sorted(p.name for p in small.iterdir()) == ["pairs.csv", "pairs.parquet"]  # (no scratch left)


def test_no_pairs_write_the_empty_table_as_before(tmp_path):
    path_a, images_a = images_file(tmp_path, name="a.parquet")
    w = PairWriter(tmp_path, path_a, index_of(images_a, "/data/a").locations)
    assert w.close() == 0 and len(w.head) == 0
    assert list(pd.read_parquet(tmp_path / "pairs.parquet").columns)[:3] == ["rank", "image_id_a", "image_id_b"]


@given(st.lists(st.text(alphabet='ab/.,é漢 "\n', max_size=8), max_size=12), st.sampled_from(ROOTS))
def test_join_locations_is_join_location_of_each(rels, root):
    assert list(join_locations(root, rels)) == [join_location(root, r) for r in rels]


def same_as_pandas(values, kind=None) -> bool:
    """write_csv of a table of this column and a plain one writes what pandas' to_csv writes for them (two
    columns: a row of one empty field alone is quoted by the csv module, never a pairs table's)."""
    frame = pd.DataFrame({"x": values, "k": 1})
    out = io.BytesIO()
    write_csv(pa.table({"x": pa.array(values, kind), "k": pa.array([1] * len(values))}), out)
    return out.getvalue() == frame.to_csv(index=False).encode("utf-8")


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=40))
def test_float_fields_are_pandas_own(values):
    assert same_as_pandas(np.asarray(values, dtype=np.float64))


def test_float_fields_are_pandas_own_over_many_values():
    """Hundreds of thousands of values where pyarrow's cast writes the digits (similarities, gaps, rounded ones,
    integral ones), and past its range."""
    rng = np.random.default_rng(1)
    x = np.concatenate(
        [
            rng.uniform(-2, 2, 200_000),
            rng.uniform(-1, 1, 50_000).astype(np.float32).astype(np.float64),
            np.round(rng.uniform(-1, 1, 50_000), 4),
            10.0 ** rng.uniform(-7, 8, 50_000) * rng.choice([-1, 1], 50_000),
            np.arange(-5, 5, dtype=np.float64),
            [1e-4, np.nextafter(1e-4, 0), 1e6, np.nextafter(1e6, 0), 5e-324, 0.1 + 0.2],
        ]
    )
    want = x.astype(str)  # what to_csv writes without a float_format
    assert np.array_equal(np.asarray(csv_fields(pa.array(x)).to_pylist(), dtype=object), want.astype(object))


@given(st.lists(st.text(st.characters(exclude_categories=("Cs",)), max_size=6), min_size=1, max_size=20))
def test_text_fields_are_quoted_as_pandas_quotes_them(values):
    assert same_as_pandas(np.asarray(values, dtype=object), pa.string())


def test_an_empty_table_is_its_header_alone():
    out = io.BytesIO()
    write_csv(pa.table({"a,b": pa.array([], pa.int64()), "c": pa.array([], pa.string())}), out)
    assert out.getvalue() == pd.DataFrame({"a,b": [], "c": []}).to_csv(index=False).encode()
