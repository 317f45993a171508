"""mine.py: thresholds, ranking, caps and the run folder, on indexes with known vectors."""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import interrupt_when, make_index, run_vhmine, unit_rows
from typer.testing import CliRunner

from vhmine.cli import app
from vhmine.errors import IndexCorruptError, IndexMissingError, InputError
from vhmine.mine import MineOptions, check_thresholds, mine_index
from vhmine.mine.rank import rank_pairs


@pytest.fixture()
def clustered(tmp_path):
    rng = np.random.default_rng(3)
    centers = rng.normal(size=(6, 16))
    clip = unit_rows(np.repeat(centers, 5, axis=0) + 0.25 * rng.normal(size=(30, 16)))
    dino = unit_rows(rng.normal(size=(30, 12)))
    images = make_index(tmp_path / "idx", "syn", clip, dino, root=tmp_path / "imgs")
    return tmp_path, clip, dino, images


def _brute(clip, dino, cmin, dmax):
    """The reference pair set and the reference similarity matrices (simsearch.pair_sims: one definition)."""
    from vhmine.mine.join.simsearch import brute_force_pairs, pair_sims

    ref = brute_force_pairs(clip, dino, cmin, dmax)
    n = len(clip)
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    c = pair_sims(clip, i.ravel(), j.ravel()).reshape(n, n)
    d = pair_sims(dino, i.ravel(), j.ravel()).reshape(n, n)
    return {(int(a), int(b)) for a, b in zip(ref.i, ref.j)}, c, d


def test_pairs_equal_brute_force_with_inclusive_thresholds(clustered):
    tmp, clip, dino, images = clustered
    want, c, d = _brute(clip, dino, 0.8, 0.2)
    assert len(want) > 5
    # put both thresholds exactly on one pair's similarities: it must be found
    a, b = sorted(want)[0]
    res = mine_index(
        MineOptions(index="syn", indexes=tmp / "idx", clip=c[a, b], dino=d[a, b], out=tmp / "run1", progress=False)
    )
    want_exact, _, _ = _brute(clip, dino, c[a, b], d[a, b])
    pairs = pd.read_parquet(tmp / "run1" / "pairs.parquet")
    row_of = {i: k for k, i in enumerate(images["image_id"])}
    got = {tuple(sorted((row_of[x], row_of[y]))) for x, y in zip(pairs["image_id_a"], pairs["image_id_b"])}
    assert (a, b) in got and got == want_exact and res.in_box == len(want_exact)
    res = mine_index(
        MineOptions(index="syn", indexes=tmp / "idx", clip=0.8, dino=0.2, out=tmp / "run2", progress=False)
    )
    pairs = pd.read_parquet(tmp / "run2" / "pairs.parquet")
    got = {tuple(sorted((row_of[x], row_of[y]))) for x, y in zip(pairs["image_id_a"], pairs["image_id_b"])}
    assert got == want
    # columns, ranking and values
    assert list(pairs["rank"]) == list(range(1, len(pairs) + 1))
    assert (np.diff(pairs["gap"]) <= 0).all()
    assert np.allclose(pairs["gap"], pairs["clip_sim"] - pairs["dino_sim"])
    assert (pairs["image_id_a"] < pairs["image_id_b"]).all()
    for r in pairs.itertuples():
        i, j = row_of[r.image_id_a], row_of[r.image_id_b]
        assert r.clip_sim == pytest.approx(c[i, j], abs=1e-12) and r.dino_sim == pytest.approx(d[i, j], abs=1e-12)
        assert r.path_a.endswith(images["path"][i]) and r.coco_id_a == 100 + i
        assert list(r.categories_b) == (["cat"] if j % 2 else [])
    run = json.loads((tmp / "run2" / "run.json").read_text())
    assert run["clip_threshold"] == 0.8 and run["dino_threshold"] == 0.2 and run["index"] == "syn"
    assert run["encoders"]["clip"]["spec"] == "test-clip" and run["counts"]["written"] == len(pairs)
    assert run["counts"]["clip_alike"] >= run["counts"]["in_box"] == len(want)
    csv = pd.read_csv(tmp / "run2" / "pairs.csv")
    assert list(csv["image_id_a"]) == list(pairs["image_id_a"])
    assert (tmp / "run2" / "scatter.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (tmp / "run2" / "gallery.html").read_text()
    assert html.count("data:image/jpeg;base64,") == 2 * len(pairs) and pairs["image_id_a"][0] in html


def test_caps_per_image_and_total():
    ids_a = np.array(["a", "a", "a", "b", "c"])
    ids_b = np.array(["b", "c", "d", "c", "d"])
    gap = np.array([0.9, 0.8, 0.7, 0.6, 0.6])
    assert list(rank_pairs(ids_a, ids_b, gap)) == [0, 1, 2, 3, 4]
    assert list(rank_pairs(ids_a, ids_b, gap, max_per_image=1)) == [0, 4]
    assert list(rank_pairs(ids_a, ids_b, gap, max_per_image=2)) == [0, 1, 3]
    assert list(rank_pairs(ids_a, ids_b, gap, max_pairs=2)) == [0, 1]
    # ties are broken by image ids, not by input order
    assert list(rank_pairs(ids_a[::-1], ids_b[::-1], gap[::-1])) == [4, 3, 2, 1, 0]
    cuts = {}
    assert list(rank_pairs(ids_a, ids_b, gap, max_per_image=1, max_pairs=5, cuts=cuts)) == [0, 4]
    assert cuts == {"--max-per-image 1": 3}
    cuts = {}
    assert list(rank_pairs(ids_a, ids_b, gap, max_per_image=2, max_pairs=2, cuts=cuts)) == [0, 1]
    assert cuts == {"--max-pairs 2": 3}  # (it stopped at 2; the per-image cap had left out none before)
    cuts = {}
    rank_pairs(ids_a, ids_b, gap, cuts=cuts)
    assert cuts == {}


def test_caps_through_mine(clustered):
    tmp, *_ = clustered
    res = mine_index(
        MineOptions(
            index="syn", indexes=tmp / "idx", clip=0.5, dino=1.0, max_per_image=1, out=tmp / "r", progress=False
        )
    )
    pairs = pd.read_parquet(tmp / "r" / "pairs.parquet")
    both = pd.concat([pairs["image_id_a"], pairs["image_id_b"]])
    assert len(pairs) > 3 and both.is_unique
    in_box = json.loads((tmp / "r" / "run.json").read_text())["counts"]["in_box"]
    assert (
        f"{in_box - len(pairs):,} of the {in_box:,} pairs in the box were cut: --max-per-image 1 left out"
        in res.summary()
    )
    res = mine_index(
        MineOptions(index="syn", indexes=tmp / "idx", clip=0.5, dino=1.0, max_pairs=3, out=tmp / "r", progress=False)
    )
    assert len(pd.read_parquet(tmp / "r" / "pairs.parquet")) == 3
    assert "were cut: --max-pairs 3 left out" in res.summary() and "--max-per-image" not in res.summary()


def test_threshold_errors_and_warning():
    with pytest.raises(InputError, match=r"--clip 1.5: a cosine similarity threshold must lie in \[-1, 1\]"):
        check_thresholds(1.5, 0.5)
    with pytest.raises(InputError, match="--dino nan"):
        check_thresholds(0.9, math.nan)
    assert check_thresholds(0.9, 0.55) == []
    assert "--dino 0.95 >= --clip 0.9" in check_thresholds(0.9, 0.95)[0]


def test_cli_mine_with_the_only_index_and_errors(clustered, monkeypatch):
    tmp, *_ = clustered
    monkeypatch.chdir(tmp)
    monkeypatch.setenv("VHMINE_INDEXES", str(tmp / "idx"))
    runner = CliRunner()
    r = runner.invoke(app, ["mine", "--clip", "0.8", "--dino", "0.2"])
    assert r.exit_code == 0, r.output
    assert (tmp / "runs" / "syn-clip0.8-dino0.2" / "pairs.parquet").is_file()
    assert "gallery.html" in r.output
    r = runner.invoke(app, ["mine", "--clip", "2"])
    assert r.exit_code == 2 and "--clip 2.0: a cosine similarity threshold must lie in [-1, 1]" in r.output
    r = runner.invoke(app, ["mine", "--index", "nope"])
    assert r.exit_code == 2 and "no index named 'nope'" in r.output and "(there are: syn)" in r.output
    r = runner.invoke(app, ["mine", "--clip", "0.5", "--dino", "0.7"])  # (its warning: test_mine_warns_once_...)
    assert r.exit_code == 0
    run = json.loads((tmp / "runs" / "syn-clip0.5-dino0.7" / "run.json").read_text())
    assert run["warnings"][0].startswith("--dino 0.7 >= --clip 0.5: pairs are meant to be ones CLIP finds MORE alike")


def test_no_index_and_too_few_images(tmp_path):
    with pytest.raises(IndexMissingError, match="no index under .*vhmine embed FOLDER"):
        mine_index(MineOptions(indexes=tmp_path / "none"))
    make_index(tmp_path / "idx", "one", unit_rows([[1, 0]]), unit_rows([[0, 1]]), root=tmp_path / "imgs")
    with pytest.raises(InputError, match="index 'one' has 1 usable image: mining needs at least 2") as err:
        mine_index(MineOptions(indexes=tmp_path / "idx"))
    assert "skipped.csv" not in str(err.value) and "--against" in str(err.value)  # it lists no image


def test_nothing_in_the_box_still_writes_a_run(clustered):
    tmp, *_ = clustered
    res = mine_index(
        MineOptions(index="syn", indexes=tmp / "idx", clip=1.0, dino=-1.0, out=tmp / "empty", progress=False)
    )
    assert res.written == 0
    assert len(pd.read_parquet(tmp / "empty" / "pairs.parquet")) == 0
    assert "No pair passed both thresholds" in (tmp / "empty" / "gallery.html").read_text()


def test_out_folder_that_is_not_a_run_is_never_replaced(clustered):
    """--out pointed at a folder of the user's own (or at runs/ itself) must not be swapped away and deleted."""
    tmp, *_ = clustered
    mine_opts = dict(index="syn", indexes=tmp / "idx", clip=0.8, dino=0.2, progress=False)
    mine_index(MineOptions(**mine_opts, out=tmp / "runs" / "r1"))
    for folder in (tmp / "mywork", tmp / "runs"):
        folder.mkdir(exist_ok=True)
        (folder / "notes.txt").write_text("keep me")
        with pytest.raises(InputError, match="not a run that `vhmine mine` wrote .*give a new or empty folder"):
            mine_index(MineOptions(**mine_opts, out=folder))
        assert (folder / "notes.txt").read_text() == "keep me"
    assert (tmp / "runs" / "r1" / "pairs.parquet").is_file()
    with pytest.raises(InputError, match=r"--out \.: name the run's own folder"):
        mine_index(MineOptions(**mine_opts, out=Path(".")))
    # an earlier run and an empty folder are fine to (re)place
    (tmp / "empty").mkdir()
    for out in (tmp / "runs" / "r1", tmp / "empty"):
        assert mine_index(MineOptions(**mine_opts, out=out)).written > 0
        assert json.loads((out / "run.json").read_text())["producer"] == "vhmine mine"


def test_an_out_folder_that_cannot_be_written_is_said_in_one_line(clustered):
    from helpers import unwritable_folders

    tmp, *_ = clustered
    for folder in unwritable_folders(tmp):
        r = CliRunner().invoke(
            app,
            [
                "mine",
                "--index",
                "syn",
                "--indexes",
                str(tmp / "idx"),
                "--clip",
                "0.8",
                "--dino",
                "0.2",
                "--out",
                str(folder / "run"),
            ],
        )
        assert r.exit_code == 2, (folder, r.output, r.exception)
        (line,) = r.output.strip().splitlines()
        assert line.startswith(f"error: --out: cannot write in {folder} (") and line.endswith("or fix its permissions")


def test_gallery_says_how_many_pairs_it_leaves_out(clustered):
    tmp, *_ = clustered
    res = mine_index(
        MineOptions(
            index="syn", indexes=tmp / "idx", clip=0.5, dino=1.0, gallery_size=0, out=tmp / "g0", progress=False
        )
    )
    html = (tmp / "g0" / "gallery.html").read_text()
    assert res.written > 2 and "No pair passed" not in html and f"{res.written} pairs passed both thresholds" in html
    mine_index(
        MineOptions(
            index="syn", indexes=tmp / "idx", clip=0.5, dino=1.0, gallery_size=2, out=tmp / "g2", progress=False
        )
    )
    assert f"Top 2 of {res.written} pairs" in (tmp / "g2" / "gallery.html").read_text()


def test_mine_warns_once_about_reversed_thresholds(tmp_path):
    import numpy as np

    rng = np.random.default_rng(0)
    make_index(
        tmp_path / "idx",
        "syn",
        unit_rows(rng.normal(size=(8, 6))),
        unit_rows(rng.normal(size=(8, 5))),
        root=tmp_path / "imgs",
    )
    r = run_vhmine(
        "mine",
        "--index",
        "syn",
        "--indexes",
        str(tmp_path / "idx"),
        "--clip",
        "0.5",
        "--dino",
        "0.7",
        "--out",
        "runs/x",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    said = r.stdout + r.stderr
    assert said.count("--dino 0.7 >= --clip 0.5") == 1, said  # it was logged, then repeated in the summary
    # before the search, not after it (it came after 31 s of mining on a real collection)
    assert "WARNING vhmine.mine.job: --dino 0.7 >= --clip 0.5: pairs are meant" in r.stderr
    assert r.stderr.index("--dino 0.7 >= --clip 0.5") < r.stderr.index("mining pairs"), r.stderr


def test_a_run_names_the_seed_command_with_its_pairs_file(clustered, monkeypatch):
    tmp, *_ = clustered
    monkeypatch.chdir(tmp)
    res = mine_index(MineOptions(index="syn", indexes=tmp / "idx", clip=0.5, dino=1.0, progress=False))
    assert res.written > 0
    assert res.summary().splitlines()[-1] == "next: vhmine seed --pairs runs/syn-clip0.5-dino1/pairs.parquet"
    assert (tmp / "runs" / "syn-clip0.5-dino1" / "pairs.parquet").is_file()


def test_zero_pairs_says_what_to_relax_with_counts_at_nearby_thresholds(clustered, monkeypatch):
    """The counts are the pairs a run at that threshold finds: checked against the brute force."""
    from vhmine.mine.join.simsearch import brute_force_pairs

    tmp, clip, dino, _ = clustered
    monkeypatch.chdir(tmp)
    dmin = float(brute_force_pairs(clip, dino, 0.8).dino_sim.min())  # the least DINOv2-alike of CLIP >= 0.8
    dino_t = math.floor(dmin * 20) / 20 - 0.05  # below every one of them: 0 pairs
    res = mine_index(MineOptions(index="syn", indexes=tmp / "idx", clip=0.8, dino=dino_t, progress=False))
    assert res.written == 0 and res.clip_alike > 0
    text = res.summary()
    assert "next: vhmine seed" not in text
    assert f"0 pairs: {res.clip_alike} pair(s) have CLIP >= 0.8, but every one has DINOv2 > {dino_t:g}" in text
    want_dino = {
        d: len(brute_force_pairs(clip, dino, 0.8, d))
        for d in (math.floor(dino_t * 10 + 1e-9) / 10 + k / 10 for k in (1, 2, 3))
    }
    line = next(ln for ln in text.splitlines() if "--dino" in ln and "exact" in ln)
    assert (
        line.strip()
        == " / ".join(f"--dino {round(d, 2):g}: {n}" for d, n in want_dino.items()) + "  (with --clip 0.8; exact)"
    )
    want_clip = {
        c: len(brute_force_pairs(clip, dino, c, dino_t)) for c in (0.75, 0.7, 0.65)
    }  # 30 images: every pair sampled
    line = next(ln for ln in text.splitlines() if "--clip 0.75" in ln)
    assert (
        line.strip()
        == " / ".join(f"--clip {c:g}: {n}" for c, n in want_clip.items())
        + f"  (with --dino {dino_t:g}; exact: every pair of the collection)"
    )
    first = next(round(d, 2) for d, n in want_dino.items() if n)
    assert f"relax: vhmine mine --index syn --indexes idx --clip 0.8 --dino {first:g}" in text
    nearby = json.loads((res.run_dir / "run.json").read_text())["nearby"]
    assert nearby["dino"] == {f"{round(d, 2):g}": n for d, n in want_dino.items()}
    # and the command it names finds that many pairs
    res2 = mine_index(MineOptions(index="syn", indexes=tmp / "idx", clip=0.8, dino=first, progress=False))
    assert res2.written == want_dino[next(d for d in want_dino if round(d, 2) == first)]


def test_no_clip_alike_pair_points_at_a_lower_clip(clustered):
    tmp, clip, dino, _ = clustered
    from vhmine.mine.join.simsearch import brute_force_pairs

    top = float(brute_force_pairs(clip, dino, -1.0).clip_sim.max())
    res = mine_index(
        MineOptions(
            index="syn", indexes=tmp / "idx", clip=min(1.0, top + 0.01), dino=0.55, out=tmp / "z", progress=False
        )
    )
    assert res.clip_alike == 0
    text = res.summary()
    assert f"0 pairs: no pair has CLIP >= {min(1.0, top + 0.01):g} at all" in text
    assert "--dino 0.6" not in text  # with no CLIP-alike pair, no --dino helps: not offered
    assert f"relax: vhmine mine --index syn --indexes {tmp / 'idx'} --clip " in text


@pytest.mark.slow
def test_ctrl_c_during_the_search_leaves_no_run_and_says_so(tmp_path):
    """SIGINT to the process group (a terminal's Ctrl-C) while `vhmine mine` multiplies its blocks."""
    import subprocess
    import sys

    from vhmine.index import write_index

    n, rng = 12_000, np.random.default_rng(0)
    clip = unit_rows(rng.normal(size=(n, 768)))  # 3 blocks of 8192 rows: seconds of int8 products
    images = pd.DataFrame(
        {
            "image_id": [f"{k:016x}" for k in range(n)],
            "path": [f"img{k}.png" for k in range(n)],
            "sha256": [f"{k:064x}" for k in range(n)],
            "width": 8,
            "height": 8,
            "coco_id": pd.array([None] * n, dtype="Int64"),
            "categories": [[] for _ in range(n)],
        }
    )
    write_index(
        tmp_path / "idx" / "big",
        images,
        clip,
        unit_rows(rng.normal(size=(n, 8))),
        skipped=pd.DataFrame({"path": [], "reason": []}),
        manifest={
            "name": "big",
            "root": str(tmp_path),
            "encoders": {"clip": {"spec": "c", "dim": 768}, "dino": {"spec": "d", "dim": 8}},
        },
    )
    err_file = tmp_path / "stderr.txt"
    with open(err_file, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vhmine.cli", "mine", "--index", "big", "--indexes", "idx", "--device", "cpu"],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
        interrupt_when(proc, lambda: "mining pairs" in err_file.read_text(), said=err_file.read_text)
        assert proc.wait(timeout=120) == 130, err_file.read_text()
    said = err_file.read_text()
    assert (
        "interrupted: no run written (mine publishes its run folder whole, at the end; an earlier run there is as "
        "it was); run the same command to mine again" in said
    )
    assert "Traceback" not in said
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_the_gallery_shows_a_bar_while_it_draws_its_thumbnails(clustered, capfd):
    tmp, *_ = clustered
    res = mine_index(MineOptions(index="syn", indexes=tmp / "idx", clip=0.5, dino=1.0, out=tmp / "bar", progress=True))
    err = capfd.readouterr().err
    assert "mining pairs" in err
    shown = pd.read_parquet(tmp / "bar" / "pairs.parquet").head(100)
    n = len(set(shown["path_a"]) | set(shown["path_b"]))  # one thumbnail an image, however many pairs it is in
    assert res.written > 0 and f"gallery:   0%|          | 0/{n} " in err


def test_a_small_run_is_the_fast_pass_bit_for_bit_and_loads_no_torch(clustered, monkeypatch):
    """An index of at most SMALL_PAIRS pairs is joined in numpy float64: the same pairs, similarities and state
    as find_pairs gives, and the run's process never imports torch."""
    import subprocess
    import sys

    from vhmine.mine import local_run

    tmp, *_ = clustered
    small = mine_index(MineOptions(index="syn", indexes=tmp / "idx", clip=0.5, dino=0.3, out=tmp / "s", progress=False))
    monkeypatch.setattr(local_run, "SMALL_PAIRS", 0)  # every run through find_pairs, the int8 fast pass
    fast = mine_index(MineOptions(index="syn", indexes=tmp / "idx", clip=0.5, dino=0.3, out=tmp / "f", progress=False))
    assert small.written > 5 and "every one of the 435 pairs in float64" in small.kernel
    assert "products kernel: " in fast.kernel
    for f in ("pairs.parquet", "rows.parquet", "alike.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(tmp / "s" / f), pd.read_parquet(tmp / "f" / f))
    assert json.loads((tmp / "s" / "run.json").read_text())["products_kernel"]["name"] == "float64"
    code = (
        "import sys\nfrom vhmine.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
        "    assert not e.code, e.code\nprint('torch imported:', 'torch' in sys.modules)"
    )
    args = ["mine", "--index", "syn", "--indexes", "idx", "--clip", "0.5", "--dino", "0.3", "--out", "p"]
    r = subprocess.run([sys.executable, "-c", code, *args], cwd=tmp, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "torch imported: False" in r.stdout, r.stdout + r.stderr
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp / "p" / "pairs.parquet"), pd.read_parquet(tmp / "s" / "pairs.parquet")
    )


def test_the_products_kernel_is_said_once(clustered, caplog):
    """`vhmine mine` said "products kernel: ..." twice (the join's INFO line, then the summary): once."""
    tmp, *_ = clustered
    with caplog.at_level("INFO", logger="vhmine"):
        res = mine_index(
            MineOptions(indexes=tmp / "idx", clip=0.8, dino=0.5, kernel="torch-f32", out=tmp / "r", progress=False)
        )
    said = "\n".join(r.getMessage() for r in caplog.records if r.levelname != "DEBUG") + "\n" + res.summary()
    assert said.count("products kernel: torch-f32 (forced by --kernel)") == 1, said


def test_a_second_mine_into_the_same_folder_says_another_mine_is_writing_it(clustered):
    """Two `vhmine mine ... --out runs/same` at once (real processes; the first held still by SIGSTOP while
    it holds the folder): the second says another mine is writing that folder, not that a write failed for
    want of space; the first then finishes its run."""
    import os
    import signal
    import subprocess
    import sys
    import time

    tmp, *_ = clustered
    words = ["mine", "--indexes", "idx", "--clip", "0.8", "--dino", "0.5", "--out", "runs/same"]
    env = dict(os.environ, COLUMNS="200", HF_HUB_OFFLINE="1")
    first = subprocess.Popen(
        [sys.executable, "-m", "vhmine.cli", *words], cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    lock = tmp / "runs" / ".same.lock"
    try:
        deadline = time.time() + 120
        while not (lock.is_file() and lock.read_text().strip() == str(first.pid)) and first.poll() is None:
            assert time.time() < deadline, "the first mine never took the run folder's lock"
            time.sleep(0.02)
        assert first.poll() is None, first.communicate()
        os.kill(first.pid, signal.SIGSTOP)
        second = run_vhmine(*words, cwd=tmp)
    finally:
        os.kill(first.pid, signal.SIGCONT)
    out, err = first.communicate(timeout=300)
    said = second.stdout + second.stderr
    assert second.returncode == 2, said
    assert f"another `vhmine mine` (process {first.pid}) is writing runs/same; nothing was written" in said, said
    assert "free some space" not in said and "Traceback" not in said
    assert first.returncode == 0, err
    assert (tmp / "runs" / "same" / "run.json").is_file() and sorted(p.name for p in (tmp / "runs").iterdir()) == [
        "same"
    ]  # no lock file, no temporary folder left


def test_mining_an_index_being_embedded_says_to_wait_for_the_embed(clustered):
    """While `vhmine embed` holds an index's job lock (a real process holding it with embed's own code),
    mining that index says an embed is running and to wait, not to run the same embed again (which embed
    refuses while it runs); once it is gone, the half-written index says to finish it."""
    import subprocess
    import sys

    tmp, *_ = clustered
    folder = tmp / "idx" / "syn"
    (folder / "manifest.json").rename(tmp / "manifest.json")  # half-written: the embed has not finished
    hold = (
        "import sys; from pathlib import Path; from vhmine.embed.job import _job_lock\n"
        "with _job_lock(Path(sys.argv[1]) / 'work', 'syn'):\n"
        "    print('held', flush=True); sys.stdin.read()\n"
    )
    embed = subprocess.Popen(
        [sys.executable, "-c", hold, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert embed.stdout.readline().strip() == "held"
        for index in ("syn", None):  # named, and the only (unfinished) index
            with pytest.raises((IndexCorruptError, IndexMissingError)) as err:
                mine_index(MineOptions(indexes=tmp / "idx", index=index, out=tmp / "r", progress=False))
            said = str(err.value)
            assert f"index 'syn' is being embedded now (`vhmine embed`, process {embed.pid} is running): wait" in said
            assert "again to finish it" not in said and "rerun the same" not in said, said
        (tmp / "manifest.json").rename(folder / "manifest.json")  # its manifest is there, its files being rewritten
        (folder / "images.parquet").write_bytes(b"PAR1 being written")
        with pytest.raises(IndexCorruptError, match="is being embedded now"):
            mine_index(MineOptions(indexes=tmp / "idx", index="syn", out=tmp / "r", progress=False))
    finally:
        embed.communicate("", timeout=60)
    with pytest.raises(IndexCorruptError, match="rerun `vhmine embed` to rebuild it"):
        mine_index(MineOptions(indexes=tmp / "idx", index="syn", out=tmp / "r", progress=False))
    assert not (tmp / "r").exists()
