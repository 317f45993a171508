"""The row digests kept with an index (vhmine.index.digests): a grown index's run hashes only its new rows
(the chunks the kept file does not vouch for), an index without the file grows all the same and gets it, and
a changed bit of an old row's stored vectors is still caught, whatever its file's size and mtime say."""

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mine_runs import CLIP, DINO, build, flip_in_place, run_json

import vhmine.index as index_face
from vhmine import api
from vhmine.index import DIGEST, row_digests
from vhmine.index import digests as kept
from vhmine.index.rows import open_vectors

START = [k for k in range(50) if k % 5 != 4]  # 40 images, as tests/mine/run/test_grow.py's
GROWN = START + [4, 19, 60]  # appended, as `vhmine embed` appends a grown collection's new files


def mine(tmp_path, out="run", **kw):
    return api.mine(
        "col",
        indexes=tmp_path / "indexes",
        out=tmp_path / out,
        progress=False,
        gallery_size=0,
        clip=CLIP,
        dino=DINO,
        **kw,
    )


@pytest.fixture
def hashed(monkeypatch):
    """Chunks of 8 rows (so 40 rows are 5 whole chunks), and the rows each row_digests call hashed."""
    monkeypatch.setattr(kept, "CHUNK_ROWS", 8)
    calls: list[int] = []
    real = index_face.row_digests

    def spy(clip, dino, workers=None):
        calls.append(len(clip))
        return real(clip, dino, workers=workers)

    monkeypatch.setattr(index_face, "row_digests", spy)  # (mine.grow.index_digests takes it from there)
    return calls


def _stored(tmp_path) -> np.ndarray:
    with np.load(tmp_path / "indexes" / "col" / kept.ROW_DIGESTS) as z:
        return z["digests"]


def _all_digests(tmp_path) -> np.ndarray:
    folder = tmp_path / "indexes" / "col"
    c, d = (open_vectors(folder / f"{k}.faiss") for k in ("clip", "dino"))
    return row_digests(c.read(0, c.rows), d.read(0, d.rows))


def test_a_grown_index_hashes_only_its_new_rows(tmp_path, hashed):
    build(tmp_path, START)
    mine(tmp_path)
    assert sum(hashed) == 40  # the first run digests every row, once, and keeps them
    assert (_stored(tmp_path) == _all_digests(tmp_path)).all()
    hashed.clear()
    build(tmp_path, GROWN)
    res = mine(tmp_path)
    assert hashed == [3]  # the 5 whole chunks of old rows are read from the kept file, not hashed again
    assert run_json(tmp_path)["incremental"]["new_rows"] == 3 and res.reuse
    assert (_stored(tmp_path) == _all_digests(tmp_path)).all()
    hashed.clear()
    mine(tmp_path)  # nothing changed: nothing hashed
    assert hashed == []


def test_an_index_without_kept_digests_grows_and_gets_them(tmp_path, hashed):
    build(tmp_path, START)
    mine(tmp_path)
    (tmp_path / "indexes" / "col" / kept.ROW_DIGESTS).unlink()  # an index from before the file
    build(tmp_path, GROWN)
    hashed.clear()
    res = mine(tmp_path)
    assert sum(hashed) == len(GROWN) and res.reuse  # every row hashed once, the earlier run reused
    assert run_json(tmp_path)["incremental"]["old_rows"] == 40
    assert (_stored(tmp_path) == _all_digests(tmp_path)).all()


@pytest.mark.parametrize("kind, col, bit", [("clip", 3, 31), ("dino", 0, 0)])
def test_a_flipped_bit_in_an_old_rows_stored_vectors_is_caught(tmp_path, caplog, hashed, kind, col, bit):
    build(tmp_path, START)
    mine(tmp_path)
    build(tmp_path, GROWN)
    flip_in_place(tmp_path / "indexes" / "col" / f"{kind}.faiss", 5, col, bit)
    with caplog.at_level("WARNING", logger="vhmine"):
        res = mine(tmp_path)
    said = [r.getMessage() for r in caplog.records if "mining in full" in r.getMessage()]
    assert len(said) == 1 and "1 row(s) of index 'col' have other vectors" in said[0], said
    assert "incremental" not in run_json(tmp_path) and not res.reuse
    assert (_stored(tmp_path) == _all_digests(tmp_path)).all()  # the kept file follows the rows as they are


def test_a_run_records_settled_files_and_the_next_reads_none_of_their_bytes_until_one_changes(
    tmp_path, caplog, hashed, monkeypatch
):
    """The first run checks every chunk and records the vector files' states (they settled before it read
    them); the next run of the same files checks none; a bit flipped in place after that, mtime put back,
    is still caught."""
    import time

    checked: list[int] = []
    real = kept.chunk_checks
    monkeypatch.setattr(kept, "chunk_checks", lambda c, d, rows: checked.append(len(c)) or real(c, d, rows))
    build(tmp_path, START)
    time.sleep(kept.file_states(tmp_path / "indexes" / "col").wait_ns() / 1e9)
    mine(tmp_path)
    assert checked == [40] and sum(hashed) == 40
    checked.clear()
    hashed.clear()
    assert mine(tmp_path).reuse and checked == [] and hashed == []  # the same files: no byte read again
    flip_in_place(tmp_path / "indexes" / "col" / "clip.faiss", 9, 1, 22)
    with caplog.at_level("WARNING", logger="vhmine"):
        res = mine(tmp_path)
    assert checked == [40] and not res.reuse
    assert any("1 row(s) of index 'col' have other vectors" in r.getMessage() for r in caplog.records)
    assert (_stored(tmp_path) == _all_digests(tmp_path)).all()


def test_a_kept_file_that_is_unreadable_or_of_another_kind_is_digested_again(tmp_path, hashed):
    build(tmp_path, START)
    mine(tmp_path)
    path = tmp_path / "indexes" / "col" / kept.ROW_DIGESTS
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1  # a zip member's CRC-32 no longer matches
    path.write_bytes(bytes(data))
    hashed.clear()
    mine(tmp_path)
    assert sum(hashed) == 40 and (_stored(tmp_path) == _all_digests(tmp_path)).all()
    got = kept.stored_digests(tmp_path / "indexes" / "col", *_vectors(tmp_path), "another-kind", row_digests)
    assert (got == _all_digests(tmp_path)).all() and sum(hashed) == 40  # (row_digests itself, not the spy)


def _vectors(tmp_path):
    folder = tmp_path / "indexes" / "col"
    c, d = (open_vectors(folder / f"{k}.faiss") for k in ("clip", "dino"))
    return c.read(0, c.rows), d.read(0, d.rows)


@settings(max_examples=60, deadline=None)
@given(
    row=st.integers(0, 49),
    side=st.sampled_from(["clip", "dino"]),
    col=st.integers(0, 8),
    bits=st.integers(1, 2**32 - 1),
)
def test_property_a_change_of_one_value_after_the_digests_were_kept_changes_its_digest_only(row, side, col, bits):
    rng = np.random.default_rng(2)
    clip, dino = rng.standard_normal((50, 12)).astype(np.float32), rng.standard_normal((50, 9)).astype(np.float32)
    with tempfile.TemporaryDirectory() as folder:
        before = kept.stored_digests(folder, clip, dino, DIGEST, row_digests)
        x = clip if side == "clip" else dino
        x.view(np.uint32)[row, col] ^= np.uint32(bits)  # any other bits of one float32 (NaNs too)
        after = kept.stored_digests(folder, clip, dino, DIGEST, row_digests)
        assert np.flatnonzero(after != before).tolist() == [row]
        assert (after == row_digests(clip, dino)).all()


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 40), first=st.integers(0, 5), span=st.integers(1, 50), cuts=st.integers(1, 6))
def test_property_a_streamed_file_reads_back_whole_and_by_range(n, first, span, cuts):
    """store_streamed (a Ray driver's writer, parts cut anywhere) writes the file stored_digests reads with no
    row hashed again, and stored_range gives any whole-chunk range of it: the rows the file holds."""
    rng = np.random.default_rng(n)
    clip, dino = rng.standard_normal((n, 6)).astype(np.float32), rng.standard_normal((n, 5)).astype(np.float32)
    chunk = kept.CHUNK_ROWS
    try:
        kept.CHUNK_ROWS = 8
        d, c = row_digests(clip, dino), kept.chunk_checks(clip, dino, 8)
        with tempfile.TemporaryDirectory() as folder:
            kept.store_streamed(folder, DIGEST, (6, 5), n, np.array_split(d, cuts), np.array_split(c, cuts))
            calls: list[int] = []
            got = kept.stored_digests(
                folder, clip, dino, DIGEST, lambda a, b: calls.append(len(a)) or row_digests(a, b)
            )
            assert (got == d).all() and calls == []
            start = 8 * first
            r = kept.stored_range(str(Path(folder) / kept.ROW_DIGESTS), start, start + span, DIGEST, (6, 5))
            if start >= n:
                assert r is None
            else:
                stop = min(n, start + span)
                assert (r[0] == d[start:stop]).all() and (r[1] == c[first : -(-stop // 8)]).all()
            assert kept.stored_range(str(Path(folder) / kept.ROW_DIGESTS), 0, n, "another-kind", (6, 5)) is None
            assert kept.stored_range(str(Path(folder) / kept.ROW_DIGESTS), 0, n, DIGEST, (6, 4)) is None
            assert kept.stored_range(str(Path(folder) / "none.npz"), 0, n, DIGEST, (6, 5)) is None
    finally:
        kept.CHUNK_ROWS = chunk
