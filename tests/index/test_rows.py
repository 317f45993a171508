"""vhmine.index.rows: an index's vectors and image ids read by row range, from a local file (memory map)
or an fsspec URL (byte ranges), the same rows faiss reads; and flat files written chunk by chunk."""

import numpy as np
import pandas as pd
import pytest

from vhmine.errors import IndexCorruptError
from vhmine.index import index_rows, read_faiss_vectors, write_faiss
from vhmine.index.rows import FlatWriter, IndexRows, open_vectors, read_ids


@pytest.fixture()
def vectors():
    return np.random.default_rng(0).standard_normal((1000, 24)).astype(np.float32)


@pytest.mark.parametrize("url", [False, True])
def test_rows_by_range_and_by_number_equal_what_faiss_reads(tmp_path, vectors, url):
    write_faiss(tmp_path / "clip.faiss", vectors)
    where = f"file://{tmp_path / 'clip.faiss'}" if url else str(tmp_path / "clip.faiss")
    vf = open_vectors(where)
    assert (vf.rows, vf.dim) == (1000, 24)
    stored = read_faiss_vectors(tmp_path / "clip.faiss")
    assert np.array_equal(vf.read(0, 1000), stored) and np.array_equal(vf.read(990, 5000), stored[990:])
    rows = np.array([999, 3, 3, 0, 600, 601, 350, 998])  # repeats, near rows (one span) and far ones
    assert np.array_equal(vf.take(rows), stored[rows])
    with pytest.raises(IndexError, match="row 1000 of .*: it has 1000 rows"):
        vf.take(np.array([1000]))


def test_flat_files_written_by_chunks_are_faiss_files(tmp_path, vectors):
    w = FlatWriter(tmp_path / "b.faiss", 24)
    for s in range(0, 1000, 300):
        w.add(vectors[s : s + 300])
    assert not (tmp_path / "b.faiss").exists()  # nothing under the final name until close()
    w.close()
    write_faiss(tmp_path / "a.faiss", vectors)
    assert (tmp_path / "b.faiss").read_bytes() == (tmp_path / "a.faiss").read_bytes()
    assert np.array_equal(read_faiss_vectors(tmp_path / "b.faiss"), vectors)
    assert list(tmp_path.glob(".*.tmp")) == []


def test_npy_rows_read_the_same_way(tmp_path, vectors):
    np.save(tmp_path / "c.npy", vectors)
    vf = open_vectors(tmp_path / "c.npy")
    assert vf.offset == 128 and np.array_equal(vf.read(5, 17), vectors[5:17])
    np.save(tmp_path / "d.npy", vectors.astype(np.float64))
    with pytest.raises(IndexCorruptError, match="expected a C-order 2-D float32 array, found float64"):
        open_vectors(tmp_path / "d.npy")


def test_a_truncated_or_foreign_file_is_named(tmp_path, vectors):
    import faiss

    write_faiss(tmp_path / "clip.faiss", vectors)
    data = (tmp_path / "clip.faiss").read_bytes()
    (tmp_path / "cut.faiss").write_bytes(data[:-4])
    with pytest.raises(
        IndexCorruptError,
        match=r"cut.faiss has 96041 bytes, but its header says 1000 x 24 float32 "
        r"rows after 45 bytes \(96045\): it is truncated",
    ):
        open_vectors(tmp_path / "cut.faiss")
    ivf = faiss.IndexIVFFlat(faiss.IndexFlatIP(24), 24, 4, faiss.METRIC_INNER_PRODUCT)
    ivf.train(vectors)
    faiss.write_index(ivf, str(tmp_path / "ivf.faiss"))
    with pytest.raises(IndexCorruptError, match="ivf.faiss is not a flat faiss index .* vhmine reads only the exact"):
        open_vectors(tmp_path / "ivf.faiss")
    with pytest.raises(IndexCorruptError, match="cannot read .*absent.faiss"):
        open_vectors(tmp_path / "absent.faiss")


def test_ids_by_row_range_across_row_groups_and_from_a_url(tmp_path):
    import fsspec

    ids = [f"{k:016x}"[::-1] if k % 7 else f"id-{k}" for k in range(250)]  # not all of one length
    pd.DataFrame({"image_id": ids}).to_parquet(tmp_path / "images.parquet", row_group_size=64, index=False)
    got = read_ids(str(tmp_path / "images.parquet"), 60, 200, 16)
    assert got.dtype == "S16" and [x.decode() for x in got] == ids[60:200]
    assert [x.decode() for x in read_ids(str(tmp_path / "images.parquet"), 240, 300, 16)] == ids[240:]
    # an order of bytes that is the order of the strings: what the tiles sort pairs by
    assert list(np.argsort(got, kind="stable")) == sorted(range(len(got)), key=lambda k: ids[60 + k])
    with fsspec.open("memory://bucket/images.parquet", "wb") as f:
        f.write((tmp_path / "images.parquet").read_bytes())
    assert [x.decode() for x in read_ids("memory://bucket/images.parquet", 100, 130, 16)] == ids[100:130]


def test_index_rows_of_an_index_and_of_its_copy_at_a_url(tmp_path, vectors):
    import shutil

    from vhmine.index import write_index

    n = len(vectors)
    images = pd.DataFrame({"image_id": [f"{k:016x}" for k in range(n)], "path": [f"{k}.jpg" for k in range(n)]})
    write_index(
        tmp_path / "idx" / "c",
        images,
        vectors,
        vectors[:, :8].copy(),
        skipped=pd.DataFrame({"path": [], "reason": []}),
        manifest={"name": "c", "root": "/x"},
    )
    rows = index_rows(tmp_path / "idx" / "c")
    assert isinstance(rows, IndexRows) and rows.n == n and (rows.clip.dim, rows.dino.dim) == (24, 8)
    assert rows.id_width == 16 and rows.ids(3, 5).tolist() == [b"0000000000000003", b"0000000000000004"]
    shutil.copytree(tmp_path / "idx" / "c", tmp_path / "bucket" / "c")
    there = index_rows(tmp_path / "idx" / "c", url=f"file://{tmp_path / 'bucket' / 'c'}")
    assert there.clip.location.startswith("file://") and np.array_equal(there.dino.read(0, n), vectors[:, :8])
    assert there.probe() == "ok"


def test_a_rewritten_index_is_read_again_by_a_worker_that_cached_the_old_one(tmp_path):
    """Ray keeps worker processes for later jobs: their caches are keyed on the index's version."""
    path = tmp_path / "images.parquet"
    pd.DataFrame({"image_id": ["a1", "b2", "c3"]}).to_parquet(path, index=False)
    assert read_ids(str(path), 0, 3, 2, "v1").tolist() == [b"a1", b"b2", b"c3"]
    pd.DataFrame({"image_id": ["x7", "y8", "z9"]}).to_parquet(path, index=False)  # re-embedded in place
    assert read_ids(str(path), 0, 3, 2, "v2").tolist() == [b"x7", b"y8", b"z9"]
