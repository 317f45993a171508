"""mine.state: the row digests a run keeps, by which a later run proves that a row it reuses is the same."""

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from vhmine.index import row_digests


def _rows(seed, n=50, d=(12, 9)):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d[0])).astype(np.float32), rng.standard_normal((n, d[1])).astype(np.float32)


def test_digests_follow_each_row_not_its_place_or_the_chunking():
    clip, dino = _rows(0, n=20_000)
    got = row_digests(clip, dino, workers=2)
    order = np.random.default_rng(1).permutation(len(clip))
    assert (row_digests(clip[order], dino[order])[np.argsort(order)] == got).all()
    assert (row_digests(clip[7:8], dino[7:8]) == got[7]).all()
    assert len(np.unique(got)) == len(got)


@given(
    row=st.integers(0, 49),
    side=st.sampled_from(["clip", "dino"]),
    col=st.integers(0, 8),
    bits=st.integers(1, 2**32 - 1),
)
def test_property_a_change_of_one_value_changes_its_row_digest_only(row, side, col, bits):
    clip, dino = _rows(2)
    before = row_digests(clip, dino)
    x = clip if side == "clip" else dino
    x.view(np.uint32)[row, col] ^= np.uint32(bits)  # any other bits of one float32 (NaNs too)
    after = row_digests(clip, dino)
    assert np.flatnonzero(after != before).tolist() == [row]


def _flip(x: np.ndarray, row: int, cols) -> None:
    for c in cols:
        x.view(np.uint32)[row, c] ^= np.uint32(1 << 31)  # the sign bit


def test_sign_flips_of_clip_dims_1_and_3_of_one_row_change_its_digest():
    # the shrunk counterexample of the issue: the old linear digest summed two float32 words a 64-bit word
    # times an odd multiplier, so two sign flips (bit 63 of two words) cancelled mod 2^64
    clip, dino = _rows(3, d=(768, 768))
    before = row_digests(clip, dino)
    _flip(clip, 5, [1, 3])
    assert np.flatnonzero(row_digests(clip, dino) != before).tolist() == [5]


@pytest.mark.parametrize("cols", [[1], [1, 3]])
def test_sign_flips_of_dinov2_dim_1_of_one_row_change_its_digest(cols):
    clip, dino = _rows(4, d=(768, 1024))
    before = row_digests(clip, dino)
    _flip(dino, 7, cols)
    assert np.flatnonzero(row_digests(clip, dino) != before).tolist() == [7]


_CHANGE = st.tuples(
    st.sets(st.integers(0, 3)),  # columns whose sign flips: what a linear sum of words cancels
    st.lists(st.tuples(st.integers(0, 3), st.integers(1, 2**32 - 1)), max_size=2),  # any other bits
)


@given(row=st.integers(0, 9), clip_change=_CHANGE, dino_change=_CHANGE)
def test_property_a_change_of_any_bits_of_a_row_changes_its_digest_only(row, clip_change, dino_change):
    clip, dino = _rows(5, n=10, d=(4, 4))
    before = row_digests(clip, dino)
    masks = []
    for signs, others in (clip_change, dino_change):
        mask = np.zeros(4, np.uint32)
        for c in signs:
            mask[c] ^= np.uint32(1 << 31)
        for c, bits in others:
            mask[c] ^= np.uint32(bits)
        masks.append(mask)
    assume(masks[0].any() or masks[1].any())  # a non-empty set of bits changed
    clip.view(np.uint32)[row] ^= masks[0]
    dino.view(np.uint32)[row] ^= masks[1]
    assert np.flatnonzero(row_digests(clip, dino) != before).tolist() == [row]


def _reference(path, ids, digests, group=None):
    """rows.parquet as the code before streaming wrote it: the whole table at once, with its digests' kind."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vhmine.index import DIGEST
    from vhmine.mine.state import DIGEST_KEY

    table = pa.table(
        {
            "image_id": pa.array(np.asarray(ids, dtype=object), pa.string()),
            "digest": pa.array(digests.astype(np.uint64)),
        }
    )
    pq.write_table(table.replace_schema_metadata({DIGEST_KEY: DIGEST}), path, row_group_size=group)
    return path.read_bytes()


def _cut(x, cuts):
    edges = sorted({min(c, len(x)) for c in cuts})
    return [x[a:b] for a, b in zip([0, *edges], [*edges, len(x)])]


@given(
    n=st.integers(0, 300),
    group=st.integers(1, 70),
    id_cuts=st.lists(st.integers(0, 300), max_size=8),
    digest_cuts=st.lists(st.integers(0, 300), max_size=8),
    arrow=st.booleans(),
)
def test_property_rows_parquet_streamed_is_the_whole_tables_bytes(
    tmp_path_factory, n, group, id_cuts, digest_cuts, arrow
):
    """However the ids and digests arrive (cut anywhere, numpy or arrow), the streamed rows.parquet is the file
    pq.write_table writes for the whole table, row group for row group (tiny groups: several of them)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vhmine.mine.state import ROWS, write_rows_streamed

    tmp = tmp_path_factory.mktemp("rows")
    ids = np.array([f"{k:x}é" * (1 + k % 3) for k in range(n)], dtype=object)
    digests = np.random.default_rng(n).integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2)
    parts = _cut(ids, id_cuts)
    if arrow:
        parts = [pa.array(p, pa.large_string()) for p in parts]
    assert write_rows_streamed(tmp, parts, _cut(digests, digest_cuts), group=group) == n
    assert (tmp / ROWS).read_bytes() == _reference(tmp / "ref.parquet", ids, digests, group)
    meta = pq.ParquetFile(tmp / ROWS).metadata
    assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == (
        [min(group, n - s) for s in range(0, n, group)] or [0]
    )


def test_rows_parquet_is_the_same_file_as_before_streaming(tmp_path):
    from vhmine.mine.state import ROWS, write_rows

    ids = np.array([f"img{k:05d}" for k in range(2_000)], dtype=object)
    digests = np.arange(2_000, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    write_rows(tmp_path, ids, digests)
    assert (tmp_path / ROWS).read_bytes() == _reference(tmp_path / "ref.parquet", ids, digests)


@pytest.mark.parametrize("digests", [3, 5])
def test_rows_parquet_refuses_ids_and_digests_of_other_lengths(tmp_path, digests):
    from vhmine.mine.state import write_rows_streamed

    ids = np.array(["a", "b", "c", "d"], dtype=object)
    with pytest.raises(ValueError, match="digests than"):
        write_rows_streamed(tmp_path, [ids[:2], ids[2:]], [np.zeros(digests, np.uint64)], group=2)
