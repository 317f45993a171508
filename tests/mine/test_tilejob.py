"""vhmine.mine.tilejob: the Ray job folder keeps every finished tile (atomic file, checksum in the
ledger), and only those: a changed or cut-short record is mined again, another command starts over."""

import json

import numpy as np
import pytest

from vhmine.errors import InputError
from vhmine.mine.tilejob import LEDGER, PLAIN, TileJob, Triangle


def rows(k):
    out = np.zeros(k + 1, PLAIN)
    out["i"], out["j"], out["clip"] = np.arange(k + 1), np.arange(k + 1) + 1, 0.5 + k
    return out


def test_triangle_numbers_tiles_row_by_row():
    tri = Triangle(1000, 256)
    assert tri.blocks == 4 and len(tri) == 10
    assert [tri.tile_at(k) for k in range(10)] == [(r, c) for r in range(0, 1024, 256) for c in range(r, 1024, 256)]


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
        from vhmine.mine.tilejob import PLAIN, TileJob
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
        "done again: [0, 1, 2]"]
    assert r.left == ["job", "job/job.json", "job/lock", "job/tiles", "job/tiles.jsonl", "job/tiles/000000000.npy",
                      "job/tiles/000000001.npy", "job/tiles/000000002.npy"]  # and no temporary file
