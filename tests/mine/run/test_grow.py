"""mine.grow: a grown, shrunk or changed index mined again with the same command reuses the earlier run and
mines only the new rows' pairs, and the run it writes equals a full mine of the index as it is now."""

import json

import numpy as np
import pandas as pd
import pytest
from helpers import make_index, unit_rows
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule
from mine_runs import CLIP, DINO, brute, build, run_json, sorted_pairs, vectors

from vhmine import api


def mine(tmp_path, out="run", **kw):
    kw.setdefault("clip", CLIP)
    kw.setdefault("dino", DINO)
    return api.mine("col", indexes=tmp_path / "indexes", out=tmp_path / out, progress=False, gallery_size=0, **kw)


def assert_equals_full(tmp_path, keys, out="run", **kw):
    """The run in `out` equals a full mine of the index into another folder (pairs.csv byte for byte, the
    parquet table after sorting) and a float64 brute force (the uncapped case)."""
    mine(tmp_path, out="full", full=True, **kw)
    assert (tmp_path / out / "pairs.csv").read_bytes() == (tmp_path / "full" / "pairs.csv").read_bytes()
    pd.testing.assert_frame_equal(sorted_pairs(tmp_path / out), sorted_pairs(tmp_path / "full"))
    got, full = run_json(tmp_path, out), run_json(tmp_path, "full")
    assert got["counts"] == full["counts"]
    if not kw:
        df = sorted_pairs(tmp_path / out)
        assert list(zip(df.image_id_a, df.image_id_b, df.clip_sim, df.dino_sim)) == brute(keys)


START = [k for k in range(50) if k % 5 != 4]  # 40 images; keys 4, 9, ... are alike to them


def test_new_files_mine_only_their_pairs_and_the_run_equals_a_full_mine(tmp_path):
    build(tmp_path, START)
    first = mine(tmp_path)
    assert first.written > 0 and not first.reuse
    before = run_json(tmp_path)
    grown = START + [4, 19, 60, 61]  # images alike to old ones, and a new group
    build(tmp_path, grown)
    res = mine(tmp_path)
    inc = run_json(tmp_path)["incremental"]
    assert inc == {
        "from": before["run_id"],
        "old_rows": 40,
        "new_rows": 4,
        "removed_rows": 0,
        "products": 4 * 3 // 2 + 4 * 40,
    }
    assert "mined 4 new rows against 40" in res.summary()
    assert_equals_full(tmp_path, grown)


def test_changed_and_removed_files_drop_their_pairs_and_mine_the_new_images(tmp_path):
    build(tmp_path, START)
    mine(tmp_path)
    now = [k for k in START if k not in (0, 1, 12)]
    now[5] = 500 + now[5]  # the file at row 5 holds another image now: a new id, the old one gone
    build(tmp_path, now)
    mine(tmp_path)
    inc = run_json(tmp_path)["incremental"]
    assert (inc["old_rows"], inc["new_rows"], inc["removed_rows"]) == (36, 1, 4)
    assert_equals_full(tmp_path, now)


def test_caps_apply_to_the_merged_pairs_as_in_a_full_mine(tmp_path):
    build(tmp_path, START)
    mine(tmp_path, max_per_image=1, max_pairs=6)
    grown = [k for k in START if k != 2] + [9, 14, 24, 70]
    build(tmp_path, grown)
    mine(tmp_path, max_per_image=1, max_pairs=6)
    assert "incremental" in run_json(tmp_path)
    assert_equals_full(tmp_path, grown, max_per_image=1, max_pairs=6)


def test_a_fresh_out_reuses_the_run_in_the_commands_default_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    build(tmp_path, START)
    api.mine("col", indexes=tmp_path / "indexes", clip=CLIP, dino=DINO, progress=False, gallery_size=0)
    default = tmp_path / "runs" / "col-clip0.8-dino0.5"
    build(tmp_path, START + [44])
    mine(tmp_path, out="fresh")
    assert (
        run_json(tmp_path, "fresh")["incremental"]["from"] == json.loads((default / "run.json").read_text())["run_id"]
    )


@pytest.mark.parametrize(
    "change, why",
    [
        ("clip", "other options (--clip 0.8 there, 0.75 now)"),
        ("caps", "other options (--max-per-image None there, 2 now)"),
        ("encoders", "other encoders than index 'col' has now (clip.spec differ)"),
        ("rebuilt", "as it was before it was built again"),
        ("vectors", "1 row(s) of index 'col' have other vectors than the run in"),
        ("state", "alike.parquet is missing or changed since its run was written"),
        ("older", "keeps no record of its rows (an older vhmine wrote it)"),
        ("full", None),
    ],
)
def test_an_earlier_run_that_cannot_be_reused_gives_a_full_mine_and_says_why(tmp_path, caplog, change, why):
    build(tmp_path, START)
    mine(tmp_path)
    opts = {}
    keys = START + [44]
    if change == "clip":
        opts["clip"] = 0.75
    elif change == "caps":
        opts["max_per_image"] = 2
    elif change == "full":
        opts["full"] = True
    if change == "encoders":
        build(tmp_path, keys, encoders=("other-clip", "test-dino"))
    elif change == "rebuilt":
        build(tmp_path, keys, created="2026-11-30T00:00:00+0000")
    elif change == "vectors":  # the same image (id) with other vectors: e.g. embedded again by other weights
        clip, dino = vectors(keys)
        clip[3] = unit_rows(clip[3:4] + 0.01)[0]
        make_index(
            tmp_path / "indexes",
            "col",
            clip,
            dino,
            root=tmp_path / "images",
            keys=keys,
            created="2026-11-01T00:00:00+0000",
        )
    else:
        build(tmp_path, keys)
    if change == "state":
        (tmp_path / "run" / "alike.parquet").write_bytes(b"PAR1 not what the run wrote")
    elif change == "older":
        meta = run_json(tmp_path)
        del meta["run_id"]
        (tmp_path / "run" / "run.json").write_text(json.dumps(meta))
    with caplog.at_level("WARNING", logger="vhmine"):
        res = mine(tmp_path, **opts)
    assert "incremental" not in run_json(tmp_path) and not res.reuse
    said = [r.getMessage() for r in caplog.records if "mining in full" in r.getMessage()]
    if why is None:
        assert not said
    else:
        assert len(said) == 1 and why in said[0], said


def _old_digests(clip, dino):
    """The digests vhmine wrote before BLAKE2b (a linear sum of two float32 words a 64-bit word times odd
    multipliers): what rows.parquet of a run written by an older vhmine holds."""
    acc = np.zeros(len(clip), np.uint64)
    for part, x in enumerate((np.ascontiguousarray(clip, np.float32), np.ascontiguousarray(dino, np.float32))):
        w = x.view(np.uint64) if x.shape[1] % 2 == 0 else x.view(np.uint32).astype(np.uint64)
        rng = np.random.default_rng(part + 0x766D)
        m = rng.integers(0, 2**63, size=w.shape[1], dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        acc += np.multiply(w, m).sum(axis=1)
    return acc


def test_a_run_with_an_older_vhmines_digests_is_mined_in_full_not_reused(tmp_path, caplog):
    """A run written with the old linear digests, then CLIP dims 1 and 3 of one row negated (the old digest
    of that row is unchanged): the rerun must not reuse the run, and says why."""
    import hashlib

    import pyarrow as pa
    import pyarrow.parquet as pq

    build(tmp_path, START)
    mine(tmp_path)
    clip, dino = vectors(START)
    ids = np.array([f"{k:016x}"[::-1] for k in START], dtype=object)
    rows = tmp_path / "run" / "rows.parquet"
    pq.write_table(pa.table({"image_id": pa.array(ids, pa.string()), "digest": _old_digests(clip, dino)}), rows)
    meta = run_json(tmp_path)
    meta["files"]["rows.parquet"] = {
        "bytes": rows.stat().st_size,
        "sha256": hashlib.sha256(rows.read_bytes()).hexdigest(),
    }
    (tmp_path / "run" / "run.json").write_text(json.dumps(meta))
    clip[3, [1, 3]] *= -1
    assert _old_digests(clip, dino)[3] == _old_digests(*vectors(START))[3]  # what the old digests missed
    make_index(
        tmp_path / "indexes",
        "col",
        clip,
        dino,
        root=tmp_path / "images",
        keys=START,
        created="2026-11-01T00:00:00+0000",
    )
    with caplog.at_level("WARNING", logger="vhmine"):
        res = mine(tmp_path)
    said = [r.getMessage() for r in caplog.records if "mining in full" in r.getMessage()]
    assert len(said) == 1 and "keeps row digests of an older kind" in said[0], said
    assert "incremental" not in run_json(tmp_path) and not res.reuse
    mine(tmp_path, out="full", full=True)
    assert (tmp_path / "run" / "pairs.csv").read_bytes() == (tmp_path / "full" / "pairs.csv").read_bytes()
    # and the run written now keeps the new digests: the next rerun reuses it
    assert mine(tmp_path).reuse


def test_nothing_changed_mines_no_products_and_writes_the_same_pairs(tmp_path):
    build(tmp_path, START)
    mine(tmp_path)
    before = (tmp_path / "run" / "pairs.csv").read_bytes()
    mine(tmp_path)
    assert run_json(tmp_path)["incremental"]["products"] == 0
    assert (tmp_path / "run" / "pairs.csv").read_bytes() == before


@pytest.mark.slow  # two command lines in their own processes, and a full mine of 600 rows
def test_a_rerun_imports_no_torch_where_a_fresh_mine_needs_it(tmp_path):
    """600 rows (past local_run.SMALL_PAIRS: a fresh mine runs find_pairs' int8 kernel, torch's): the same
    command run again, with nothing changed and then with 3 new images, reuses the run in a process that never
    imports torch (nothing to multiply, then the band's 1,803 pairs in numpy float64) and writes a full mine's
    pairs (issue 45: the re-run of an unchanged index had imported torch, and cost 2.3x a fresh small mine)."""
    import subprocess
    import sys

    keys = list(range(600))
    build(tmp_path, keys)
    assert "products kernel" in mine(tmp_path).kernel
    code = (
        "import sys\nfrom vhmine.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
        "    assert not e.code, e.code\nprint('torch imported:', 'torch' in sys.modules)"
    )
    args = ["mine", "--index", "col", "--indexes", "indexes", "--clip", str(CLIP), "--dino", str(DINO)]
    for grown, said in ((keys, "mined 0 new rows against 600"), (keys + [600, 601, 602], "mined 3 new rows")):
        build(tmp_path, grown)
        r = subprocess.run(
            [sys.executable, "-c", code, *args, "--out", "run", "--gallery-size", "0"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0 and "torch imported: False" in r.stdout, r.stdout + r.stderr
        assert said in r.stdout + r.stderr
    assert_equals_full(tmp_path, grown)


class GrowingCollection(RuleBasedStateMachine):
    """Any sequence of additions, removals and changes, each followed by the same `vhmine mine`, gives the
    pairs of a float64 brute force over the index as it is then; each run after the first reuses the last."""

    def __init__(self):
        super().__init__()
        import tempfile
        from pathlib import Path

        self.tmp = Path(tempfile.mkdtemp(prefix="vhmine-grow-"))
        self.keys: list[int] = []
        self.next_key = 1000
        self.runs = 0

    @initialize(n=st.integers(2, 25))
    def start(self, n):
        self.keys = list(range(n))

    @rule(k=st.integers(0, 60))
    def add(self, k):
        if k not in self.keys:
            self.keys.append(k)

    @rule(at=st.integers(0, 100))
    def remove(self, at):
        if len(self.keys) > 2:
            self.keys.pop(at % len(self.keys))

    @rule(at=st.integers(0, 100))
    def change(self, at):  # the file at a row holds another image now, alike to its group
        self.keys[at % len(self.keys)] = self.next_key + self.keys[at % len(self.keys)] % 5
        self.next_key += 5

    @rule()
    def mine_again(self):
        build(self.tmp, self.keys)
        res = mine(self.tmp)
        meta = run_json(self.tmp)
        assert ("incremental" in meta) == (self.runs > 0) and bool(res.reuse) == (self.runs > 0)
        df = sorted_pairs(self.tmp / "run")
        assert list(zip(df.image_id_a, df.image_id_b, df.clip_sim, df.dino_sim)) == brute(self.keys)
        self.runs += 1

    def teardown(self):
        import shutil

        shutil.rmtree(self.tmp, ignore_errors=True)


TestGrowingCollectionProperty = pytest.mark.slow(GrowingCollection.TestCase)  # ~20 s: the slow tier
TestGrowingCollectionProperty.settings = settings(max_examples=6, stateful_step_count=8)


def test_a_collection_embedded_again_after_it_grew_and_changed_reuses_the_run(tmp_path, photos_dir, tiny_models):
    """The real path: `vhmine embed` of a folder that gained files, lost one and had one rewritten, then the
    same `vhmine mine`: the index's created date and its kept rows' vectors are the earlier run's."""
    from PIL import Image

    from tests.helpers import copy_photos, embed_options
    from vhmine.embed.job import embed_collection

    photos = copy_photos(tmp_path / "photos", photos_dir, names=("astronaut", "cat", "chelsea", "coffee", "rocket"))
    idx = tmp_path / "idx"
    embed_collection(embed_options(photos, idx, tiny_models, name="p"))

    def mine_p(out, **kw):
        return api.mine("p", indexes=idx, clip=-1.0, dino=1.0, out=tmp_path / out, progress=False, gallery_size=0, **kw)

    mine_p("run")
    first = run_json(tmp_path)
    for name in ("horse", "camera"):
        img = Image.open(photos_dir / f"{name}.png")
        img.thumbnail((64, 64))
        img.save(photos / f"{name}.png")
    (photos / "rocket.png").unlink()
    Image.open(photos / "coffee.png").transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(photos / "coffee.png")
    embed_collection(embed_options(photos, idx, tiny_models, name="p"))
    res = mine_p("run")
    inc = run_json(tmp_path)["incremental"]
    # cat and chelsea are one image; astronaut and cat kept; rocket and the old coffee gone; horse, camera, new coffee
    assert inc == {
        "from": first["run_id"],
        "old_rows": 2,
        "new_rows": 3,
        "removed_rows": 2,
        "products": 3 * 2 // 2 + 3 * 2,
    }, inc
    assert "mined 3 new rows against 2" in res.summary()
    mine_p("full", full=True)
    assert (tmp_path / "run" / "pairs.csv").read_bytes() == (tmp_path / "full" / "pairs.csv").read_bytes()
    assert res.written == 5 * 4 // 2
