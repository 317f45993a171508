"""vhmine.mine.ray.tilejob: the Ray job folder keeps every finished tile (atomic file, checksum in the
ledger), and only those: a changed or cut-short record is mined again, another command starts over."""

import json

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from mine_sets import rows

from vhmine.errors import InputError
from vhmine.mine.ray.tilejob import LEDGER, SCAN, Band, Rectangle, TileJob, Triangle


def test_triangle_numbers_tiles_row_by_row():
    tri = Triangle(1000, 256)
    assert tri.blocks == 4 and len(tri) == 10
    assert [tri.tile_at(k) for k in range(10)] == [(r, c) for r in range(0, 1024, 256) for c in range(r, 1024, 256)]


@st.composite
def grown(draw):
    n = draw(st.integers(1, 300))
    new = draw(st.one_of(st.just([n - 1]), st.just(list(range(n))), st.lists(st.integers(0, n - 1), max_size=n)))
    return n, sorted(set(new)), draw(st.sampled_from([64, 128]))


@given(grown())
@example((130, [0, 64, 65, 129], 64))  # new rows at block edges
def test_property_band_tiles_hold_every_pair_touching_a_new_row_once(case):
    """Every (chunk row, block row) pair of every tile through Tile.band_pairs: each pair of rows that
    touches a new row exactly once over all tiles, and no other."""
    n, new, side = case
    band = Band(n, side, new)
    assert len(band) == -(-len(new) // side) * -(-n // side)
    got = []
    for k in range(len(band)):
        t = band.tile(k)
        assert np.array_equal(t.x_rows, np.array(new[t.r : t.r + side], np.int64))
        cols = np.arange(t.c, min(t.c + side, n))
        assert np.array_equal(t.new_cols, np.intersect1d(cols, new))
        i, j = np.repeat(t.x_rows, len(cols)), np.tile(cols, len(t.x_rows))
        lo, hi = t.band_pairs(i, j)
        assert np.all(lo < hi)
        got += list(zip(lo.tolist(), hi.tolist()))
    want = [(i, j) for i in range(n) for j in range(i + 1, n) if i in set(new) or j in set(new)]
    assert sorted(got) == want  # (sorted lists: a pair twice would show)


def test_rectangle_tiles_are_row_blocks_of_a_by_row_blocks_of_b():
    rect = Rectangle(130, 1, 64)
    assert len(rect) == 3 and [(t.r, t.c) for t in map(rect.tile, range(3))] == [(0, 0), (64, 0), (128, 0)]
    rect = Rectangle(100, 200, 64)
    assert len(rect) == 2 * 4 and rect.tile(5).r == 64 and rect.tile(5).c == 64
    assert Band(10, 64, []).record()["new_rows"] == 0 and len(Band(10, 64, [])) == 0
    with pytest.raises(ValueError, match=r"new rows must lie in \[0, 10\), got 3 to 10"):
        Band(10, 64, [3, 10])


def test_scanned_chunks_and_their_digests_survive_and_a_lost_file_asks_for_that_chunk_again(tmp_path, caplog):
    ident = {"clip": 0.9}
    job = TileJob(tmp_path / "job", ident).open()
    for s in range(0, 150, 64):
        e = min(s + 64, 150)
        job.record_chunk("a", s, e, {"amax": 0.5, "levels": 127}, np.arange(s, e, dtype=np.uint64))
    job.record_chunk("b", 0, 20, {"amax": 0.25, "levels": 63}, np.full(20, 7, np.uint64))
    job.record_chunk("b", 20, 30, {"amax": 0.25, "levels": 63})  # scanned without digests
    assert np.array_equal(job.digests("a", 150), np.arange(150, dtype=np.uint64))
    with pytest.raises(ValueError, match=r"digests of side b cover rows \[0, 20\), not \[0, 30\)"):
        job.digests("b", 30)
    job.close()
    (tmp_path / "job" / "digests" / "a-000000064.npy").unlink()
    with open(tmp_path / "job" / SCAN, "a") as f:
        f.write('{"side": "a", "sta')  # cut short
    again = TileJob(tmp_path / "job", ident).open()
    assert sorted(again.chunks) == [("a", 0), ("a", 64), ("a", 128), ("b", 0), ("b", 20)]
    assert "file" not in again.chunks[("a", 64)] and again.chunks[("a", 64)]["amax"] == 0.5
    assert "row chunk ('a', 64): its file" in caplog.text
    with pytest.raises(ValueError, match=r"cover rows \[0, 64\), not \[0, 150\)"):
        again.digests("a", 150)
    again.close()


def test_finished_tiles_survive_and_changed_ones_are_dropped(tmp_path, caplog):
    ident = {"clip": 0.9, "tile": 64}
    job = TileJob(tmp_path / "job", ident).open()
    for k in range(4):
        job.record(k, rows(k), {"candidates": k})
    job.save(quantiser={"dim": 8, "scale": 0.01, "qmax": 127, "rotated": False})
    with pytest.raises(InputError, match="another `vhmine mine` is running this job"):
        TileJob(tmp_path / "job", ident).open()
    job.close()
    # tile 1's bytes changed, tile 2's file is gone, and the ledger's last line was cut short
    f1 = job.tile_file(1)
    data = bytearray(f1.read_bytes())
    data[-12] ^= 0xFF  # one byte of a sim: same size, other content
    f1.write_bytes(bytes(data))
    job.tile_file(2).unlink()
    with open(tmp_path / "job" / LEDGER, "a") as f:
        f.write('{"tile": 7, "file": "til')
    again = TileJob(tmp_path / "job", ident).open()
    assert sorted(again.done) == [0, 3] and again.job["quantiser"]["scale"] == 0.01
    assert np.array_equal(again.rows(3)[:], rows(3)) and again.done[3]["candidates"] == 3
    assert "tile 1: its file" in caplog.text and "mining it again" in caplog.text
    again.close()


def test_a_folder_made_for_another_command_starts_over(tmp_path, caplog):
    job = TileJob(tmp_path / "job", {"clip": 0.9, "tile": 64}).open()
    job.record(0, rows(0), {})
    job.close()
    other = TileJob(tmp_path / "job", {"clip": 0.85, "tile": 64}).open()
    assert other.done == {} and not other.tile_file(0).exists()
    assert "made for another command (clip differ): starting the job over" in caplog.text
    assert json.loads((tmp_path / "job" / "job.json").read_text())["identity"]["clip"] == 0.85
    other.close()


def test_a_full_disk_is_one_line_and_keeps_the_tiles_recorded_before_it(tmp_path):
    import sys

    from helpers import on_a_full_disk

    code = """if True:
        import numpy as np
        from vhmine.errors import VhmineError
        from vhmine.mine.ray.tilejob import PLAIN, TileJob
        job = TileJob("full/job", {"clip": 0.9}).open()
        try:
            for k in range(100):
                job.record(k, np.zeros(2000, PLAIN), {"candidates": k})  # 64,128 bytes a tile
        except VhmineError as err:
            print(f"{type(err).__name__}: {err}")
        job.close()
        print("done again:", sorted(TileJob("full/job", {"clip": 0.9}).open().done))
    """
    r = on_a_full_disk(tmp_path / "full", "224k", [sys.executable, "-c", code], cwd=tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert r.stdout.splitlines() == [
        "OutputError: writing full/job failed (No space left on device): the 3 tile(s) recorded before it are kept; "
        "free some space and run the same command: it resumes from them",
        "done again: [0, 1, 2]",
    ]
    assert r.left == [
        "job",
        "job/job.json",
        "job/lock",
        "job/tiles",
        "job/tiles.jsonl",
        "job/tiles/000000000.npy",
        "job/tiles/000000001.npy",
        "job/tiles/000000002.npy",
    ]  # and no temporary file
