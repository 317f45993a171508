"""vhmine.mine.publish: a run folder that the disk cannot hold is one line, and leaves nothing behind
(a real full disk: a tiny tmpfs in a namespace of the command's own, helpers.on_a_full_disk)."""

import sys

import numpy as np
import pytest
from helpers import make_index, on_a_full_disk, unit_rows


@pytest.mark.parametrize("size", ["16k", "180k", "320k"])  # full at pairs.parquet, scatter.png, gallery.html
def test_mine_on_a_full_disk_says_so_in_one_line_and_leaves_nothing(tmp_path, size):
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(6, 16))
    make_index(
        tmp_path / "idx",
        "syn",
        unit_rows(np.repeat(centres, 10, axis=0) + 0.2 * rng.normal(size=(60, 16))),
        unit_rows(rng.normal(size=(60, 12))),
        root=tmp_path / "imgs",
    )
    full = tmp_path / "full"
    r = on_a_full_disk(
        full,
        size,
        [
            sys.executable,
            "-m",
            "vhmine.cli",
            "mine",
            "--index",
            "syn",
            "--indexes",
            "idx",
            "--clip",
            "0.5",
            "--dino",
            "1",
            "--out",
            "full/run",
            "--device",
            "cpu",
        ],
        cwd=tmp_path,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    said = [
        ln
        for ln in r.stderr.splitlines()  # besides the bars and the products kernel's INFO line
        if ln.strip() and not ln.startswith(("mining pairs", "gallery", "INFO "))
    ]
    assert said == [  # (--dino 1 >= --clip 0.5 is warned of, before the search)
        "WARNING vhmine.mine.job: --dino 1.0 >= --clip 0.5: pairs are meant to be ones CLIP finds MORE alike than "
        "DINOv2 (e.g. --clip 0.9 --dino 0.55); many of these pairs will be plain near-duplicates",
        "error: writing full/run failed (No space left on device): no run was written (an earlier run there is as it "
        "was); free some space, or choose another --out, and run the same command again",
    ]
    assert "Traceback" not in r.stdout + r.stderr
    assert r.left == []  # no temporary folder, no half run


def test_the_objects_frozen_while_the_folder_is_written_are_handed_back(tmp_path, monkeypatch):
    """publish leaves the objects alive before it out of the collector's passes while it writes the run folder
    (gc.freeze), and hands them back after, also when the writing fails; a caller's own freeze is left alone."""
    import gc

    from vhmine.mine import publish

    with publish._settled():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
    with pytest.raises(OSError), publish._settled():
        raise OSError("disk full")
    assert gc.get_freeze_count() == 0
    gc.freeze()
    try:
        # (not the freeze count before and after: a frozen object another thread frees leaves it meanwhile)
        calls: list[str] = []
        monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
        monkeypatch.setattr(gc, "unfreeze", lambda: calls.append("unfreeze"))
        with publish._settled():
            pass
        assert calls == [] and gc.get_freeze_count() > 0
    finally:
        monkeypatch.undo()
        gc.unfreeze()
