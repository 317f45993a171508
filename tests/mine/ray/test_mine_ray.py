"""vhmine.mine.ray.engine: `vhmine mine --engine ray` on a local 2-CPU Ray cluster gives the local miner's pairs.

Tiles are small (64-192 rows) so that they cut through clusters, and one test kills a tile's worker
process on its first attempt and checks that the retry gives the same pairs.
"""

import json
import math

import numpy as np
import pandas as pd
import pytest
from helpers import unit_rows
from hypothesis import given, settings
from hypothesis import strategies as st
from mine_sets import check_exact_or_refused, clustered, vector_sets
from typer.testing import CliRunner

from vhmine.cli import app
from vhmine.errors import InputError, VhmineError
from vhmine.mine.join.simsearch import assert_same_pairs, brute_force_pairs, find_pairs

ray = pytest.importorskip("ray", reason="the Ray engine needs the ray extra: pip install -e '.[ray]'")

from vhmine.mine.ray.arrays import find_pairs_ray  # noqa: E402
from vhmine.mine.ray.engine import tile_bytes, tile_rows  # noqa: E402

# every test here starts (or shares) the session's Ray cluster: the slow tier, so the inner loop starts none
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.usefixtures("ray_cluster")]


def tile_memory(rows, clip_dim, dino_dim):
    return tile_bytes(rows, clip_dim, dino_dim)  # exactly the memory of a tile of `rows` rows


@pytest.mark.parametrize(
    "kind, n, tile, clip_min, dino_max",
    [
        ("random", 700, 64, 0.5, 0.2),
        ("clustered", 901, 64, 0.9, 0.55),
        ("clustered", 901, 192, 0.8, math.inf),
        ("spiky", 800, 128, 0.95, 0.6),
    ],
)
def test_pairs_equal_local_miner_and_brute_force(kind, n, tile, clip_min, dino_max):
    if kind == "random":
        rng = np.random.default_rng(0)
        clip, dino = unit_rows(rng.standard_normal((n, 8))), unit_rows(rng.standard_normal((n, 8)))
    else:
        clip, dino = clustered(n, 32, 16, 1, spiky=kind == "spiky")
    stats = {}
    got = find_pairs_ray(
        clip, dino, clip_min, dino_max, tile_memory=tile_memory(tile, clip.shape[1], dino.shape[1]), stats=stats
    )
    assert stats["tile"] == tile and stats["blocks"] > 10
    want = brute_force_pairs(clip, dino, clip_min, dino_max)
    assert len(want) > 50
    assert_same_pairs(got, want)
    local = find_pairs(clip, dino, clip_min, dino_max, device="cpu")
    assert_same_pairs(got, local)
    assert np.array_equal(got.i, local.i) and np.array_equal(got.j, local.j)  # same order, bit-equal sims
    assert np.array_equal(got.clip_sim, local.clip_sim) and np.array_equal(got.dino_sim, local.dino_sim)
    if kind == "spiky":
        assert stats["rotated"]  # the spikes are spread before quantising


@pytest.mark.parametrize("kernel", [None, "fbgemm", "torch-f32"])
def test_each_node_chooses_its_products_kernel_and_a_forced_one_narrows_the_quantiser(kernel):
    from vhmine.mine.join.kernels import available, levels_of

    if kernel and kernel not in available("cpu"):
        pytest.skip(f"{kernel} is not offered on this CPU")
    clip, dino = clustered(500, 32, 16, 3, spiky=True)
    stats = {}
    got = find_pairs_ray(clip, dino, 0.9, 0.55, tile=128, stats=stats, kernel=kernel)
    assert_same_pairs(got, brute_force_pairs(clip, dino, 0.9, 0.55))
    ((name, used),) = stats["kernels"].items()  # one node: one kernel, for every tile
    assert used["tiles"] == stats["blocks"] and name == (kernel or name)
    assert stats["quantiser"]["qmax"] == levels_of(name, 32)  # the scan took the nodes' levels
    if kernel is None:  # measured there: the fastest of the candidates it lists
        rates = {k: v for k, v in used["gmac_per_s"].items() if v is not None}
        assert name in rates and len(rates) >= 2


def test_a_killed_tile_is_retried_and_the_pairs_are_the_same(tmp_path):
    clip, dino = clustered(700, 32, 16, 2)
    marker = tmp_path / "killed-once"
    got = find_pairs_ray(clip, dino, 0.9, 0.55, tile=64, _crash_marker=str(marker))
    assert marker.exists()  # a worker did die (os._exit on its first attempt)
    assert_same_pairs(got, find_pairs(clip, dino, 0.9, 0.55, device="cpu"))


def test_a_tile_that_keeps_dying_is_named(tmp_path):
    from vhmine.errors import VhmineError

    clip, dino = clustered(300, 16, 8, 3)
    with pytest.raises(VhmineError, match="a mining tile failed after 0 retries: .*lower --tile-memory"):
        find_pairs_ray(clip, dino, 0.9, tile=64, max_retries=0, _crash_marker=str(tmp_path / "m"))


def test_tile_size_follows_the_memory_bound():
    for mem in (2 * 10**6, 64 * 2**20, 2**30):
        side = tile_rows(mem, 768, 1024)
        assert side % 64 == 0 and tile_bytes(side, 768, 1024) <= mem < tile_bytes(side + 64, 768, 1024)
    assert tile_rows(2**30, 768, 1024) == 13248  # the figure --tile-memory's help gives
    with pytest.raises(InputError, match="--tile-memory 0.50 MiB is too small: .* at 768 \\+ 1024 dims needs 1.51 MiB"):
        tile_rows(int(0.5 * 2**20), 768, 1024)


def test_too_small_a_tile_memory_prints_enough_digits_to_be_true():
    need = tile_bytes(64, 16, 68)  # 73,728 bytes: 0.0703 MiB, which 2 decimals show as the 0.07 given
    assert int(0.07 * 2**20) < need and f"{need / 2**20:.2f}" == "0.07"
    with pytest.raises(InputError) as err:
        tile_rows(int(0.07 * 2**20), 16, 68)
    assert str(err.value) == (
        "--tile-memory 0.0700 MiB is too small: a tile of 64 rows at 16 + 68 dims needs 0.0704 MiB; give at least that"
    )
    assert tile_rows(int(0.0704 * 2**20), 16, 68) == 64  # and what it says to give is enough
    assert tile_bytes(64, 768, 1024) > 1.50 * 2**20  # (which "needs 1.50 MiB" was not, at 768 + 1024 dims)
    assert tile_rows(int(1.51 * 2**20), 768, 1024) == 64


def test_a_device_ray_cannot_give_is_named():
    clip, dino = clustered(100, 8, 4, 6)
    with pytest.raises(InputError, match="--device gpu: Ray tiles run on cpu or cuda"):
        find_pairs_ray(clip, dino, 0.9, device="gpu")


def test_too_many_candidates_stops_the_job():
    rng = np.random.default_rng(0)
    clip, dino = unit_rows(rng.standard_normal((400, 8))), unit_rows(rng.standard_normal((400, 4)))
    with pytest.raises(InputError, match=r"more than the limit of 1,000 candidates; raise --clip"):
        find_pairs_ray(clip, dino, 0.1, tile=64, max_candidates=1000)


def test_cli_engine_ray_writes_the_local_engines_pairs(tmp_path, monkeypatch):
    from helpers import make_index

    clip, dino = clustered(150, 16, 12, 4)
    make_index(tmp_path / "idx", "syn", clip, dino, root=tmp_path / "imgs")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VHMINE_INDEXES", str(tmp_path / "idx"))
    runner = CliRunner()
    for engine in ("local", "ray"):
        r = runner.invoke(
            app,
            [
                "mine",
                "--clip",
                "0.8",
                "--dino",
                "0.5",
                "--engine",
                engine,
                "--tile-memory",
                "0.1",
                "--out",
                f"runs/{engine}",
            ],
        )
        assert r.exit_code == 0, r.output
    # the console and run.json name the products kernel: the local one, and the ones the nodes chose
    assert "products kernels the nodes chose: " in r.output and " tiles)" in r.output, r.output
    kernels = json.loads((tmp_path / "runs" / "ray" / "run.json").read_text())["ray"]["kernels"]
    assert kernels and all(v["tiles"] > 0 and v["gmac_per_s"][k] for k, v in kernels.items())
    assert json.loads((tmp_path / "runs" / "local" / "run.json").read_text())["products_kernel"]["name"]
    local, remote = (pd.read_parquet(tmp_path / "runs" / e / "pairs.parquet") for e in ("local", "ray"))
    assert len(local) > 20
    pd.testing.assert_frame_equal(local, remote)
    r = runner.invoke(app, ["mine", "--engine", "spark"])
    assert r.exit_code == 2 and "--engine spark: not an engine; use local or ray" in r.output


def test_unreachable_cluster_is_named_in_seconds(tmp_path):
    import os
    import subprocess
    import sys
    import time

    from helpers import make_index

    clip, dino = clustered(40, 8, 4, 5)
    make_index(tmp_path / "idx", "syn", clip, dino, root=tmp_path / "imgs")
    env = {**os.environ, "VHMINE_INDEXES": str(tmp_path / "idx")}
    env.pop("RAY_ADDRESS", None)
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "vhmine.cli", "mine", "--engine", "ray", "--ray-address", "127.0.0.1:9"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "could not reach the Ray cluster at 127.0.0.1:9: Connection refused." in r.stdout + r.stderr
    assert "leave out --ray-address" in r.stdout + r.stderr
    assert time.monotonic() - t0 < 60  # Ray alone retries an absent head for minutes
    assert not (tmp_path / "runs").exists()


# --- the index read by row range: `vhmine mine --engine ray` ------------------------------------------


def _mine(tmp_path, out, **kw):
    from vhmine.mine import MineOptions, mine_index

    return mine_index(
        MineOptions(index="syn", indexes=tmp_path / "idx", out=tmp_path / "runs" / out, progress=False, **kw)
    )


def _with_ties(n, seed):
    """clustered rows with exact copies (CLIP and DINOv2 both) of a few rows: pairs whose gaps tie exactly,
    so the ranking's tie-breaks (image ids, then rows) decide."""
    clip, dino = clustered(n, 16, 12, seed)
    for src, dst in ((40, [200, 201, 202]), (41, [330, 331]), (250, [251])):
        clip[dst], dino[dst] = clip[src], dino[src]
    return clip, dino


@pytest.mark.parametrize("caps", [{}, {"max_pairs": 25}, {"max_per_image": 2, "max_pairs": 40}, {"max_per_image": 1}])
def test_caps_are_applied_across_tiles_as_the_local_engine_does(tmp_path, caps):
    from helpers import make_index

    clip, dino = _with_ties(420, 9)
    make_index(tmp_path / "idx", "syn", clip, dino, root=tmp_path / "imgs")
    local = _mine(tmp_path, "local", clip=0.8, dino=0.6, **caps)
    res = _mine(tmp_path, "ray", clip=0.8, dino=0.6, engine="ray", tile_memory=tile_memory(64, 16, 12), **caps)
    assert res.job["tiles"] == 28 and res.written == local.written > 10
    assert (res.clip_alike, res.in_box) == (local.clip_alike, local.in_box)
    got, want = (pd.read_parquet(tmp_path / "runs" / e / "pairs.parquet") for e in ("ray", "local"))
    pd.testing.assert_frame_equal(got, want)
    gaps = want["gap"].to_numpy()
    if caps.get("max_per_image") != 1:  # (one pair per image leaves no copies to tie)
        assert len(gaps) > len(np.unique(gaps))  # the ties are there, and broken the same way
    assert (tmp_path / "runs" / "ray" / "pairs.csv").read_text() == (
        tmp_path / "runs" / "local" / "pairs.csv"
    ).read_text()
    assert not (tmp_path / "runs" / ".ray.job").exists()  # the job folder goes once the run is written


def test_a_large_result_is_written_as_parquet_shards_with_the_same_columns(tmp_path, monkeypatch):
    import json

    from helpers import make_index

    from vhmine.mine import write

    clip, dino = _with_ties(400, 10)
    make_index(tmp_path / "idx", "syn", clip, dino, root=tmp_path / "imgs")
    local = _mine(tmp_path, "local", clip=0.8, dino=0.6)
    monkeypatch.setattr(write, "SHARD_ROWS", 40)
    _mine(tmp_path, "ray", clip=0.8, dino=0.6, engine="ray", tile_memory=tile_memory(64, 16, 12))
    shards = sorted((tmp_path / "runs" / "ray" / "pairs.parquet").glob("part-*.parquet"))
    assert local.written > 120 and len(shards) == -(-local.written // 40)
    assert all(len(pd.read_parquet(p)) == 40 for p in shards[:-1])
    want = pd.read_parquet(tmp_path / "runs" / "local" / "pairs.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "runs" / "ray" / "pairs.parquet"), want)
    listed = json.loads((tmp_path / "runs" / "ray" / "run.json").read_text())["files"]
    assert f"pairs.parquet/{shards[-1].name}" in listed  # checksummed like every other file of the run
    assert (tmp_path / "runs" / "ray" / "pairs.csv").read_text() == (
        tmp_path / "runs" / "local" / "pairs.csv"
    ).read_text()


@pytest.mark.slow
def test_workers_read_the_index_by_byte_range_from_an_fsspec_url(tmp_path):
    import shutil

    from helpers import make_index

    clip, dino = clustered(400, 24, 12, 11, spiky=True)
    make_index(tmp_path / "idx", "syn", clip, dino, root=tmp_path / "imgs")
    shutil.copytree(tmp_path / "idx" / "syn", tmp_path / "bucket" / "syn")  # the "object store" copy
    local = _mine(tmp_path, "local", clip=0.9, dino=0.6)
    res = _mine(
        tmp_path,
        "ray",
        clip=0.9,
        dino=0.6,
        engine="ray",
        tile_memory=tile_memory(64, 24, 12),
        index_url=f"file://{tmp_path / 'bucket' / 'syn'}",
    )
    assert res.job["quantiser"]["rotated"] and local.written > 20
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "runs" / "ray" / "pairs.parquet"),
        pd.read_parquet(tmp_path / "runs" / "local" / "pairs.parquet"),
    )
    make_index(tmp_path / "bucket", "syn", clip[:399], dino[:399], root=tmp_path / "imgs")  # now another index
    with pytest.raises(
        VhmineError,
        match=r"bucket/syn/clip.faiss holds 399 x 24 rows, the index at .* 400 x 24: "
        r"--index-url names another index",
    ):
        _mine(tmp_path, "ray2", clip=0.9, dino=0.6, engine="ray", index_url=f"file://{tmp_path / 'bucket' / 'syn'}")


def test_an_index_url_must_hold_the_index_it_names_checked_before_any_tile(tmp_path):
    """Another index of the same shape at --index-url used to be mined, beside the named index's image paths,
    with exit 0. Each mismatch is one line, and nothing is written (no run, no job folder)."""
    import shutil

    from helpers import make_index

    clip, dino = clustered(300, 16, 12, 15)
    make_index(tmp_path / "idx", "syn", clip, dino, root=tmp_path / "imgs")
    make_index(tmp_path / "bucket", "syn", *clustered(300, 16, 12, 16), root=tmp_path / "imgs")  # same shape
    url = f"file://{tmp_path / 'bucket' / 'syn'}"
    copy = tmp_path / "bucket" / "syn"

    def refused(match):
        with pytest.raises(VhmineError) as err:
            _mine(tmp_path, "ray", clip=0.9, dino=0.6, engine="ray", tile_memory=tile_memory(64, 16, 12), index_url=url)
        assert "\n" not in str(err.value) and str(err.value).endswith(
            f"--index-url {url} must hold a copy of the index at {(tmp_path / 'idx' / 'syn').resolve()} (every file, "
            "manifest.json included); copy the folder there again, or point --index-url at its copy"
        )
        assert re.search(match, str(err.value)), str(err.value)
        assert not (tmp_path / "runs").exists()

    import re

    refused(rf"^{url} holds another index: its manifest.json gives other checksums for clip.faiss, dino.faiss; ")
    shutil.rmtree(copy)
    shutil.copytree(tmp_path / "idx" / "syn", copy)
    with open(copy / "clip.faiss", "r+b") as f:  # the same size and manifest, another last row
        f.seek(-4, 2)
        f.write(np.float32(0.5).tobytes())
    refused(rf"^{url}/clip.faiss holds other vectors than .*idx/syn/clip.faiss \(its first or last row differs\); ")
    shutil.copy(tmp_path / "idx" / "syn" / "clip.faiss", copy / "clip.faiss")
    with open(copy / "images.parquet", "ab") as f:
        f.write(b"\0")
    refused(rf"^{url}/images.parquet has [\d,]+ bytes, the manifest says [\d,]+: it was changed or cut short; ")
    shutil.copy(tmp_path / "idx" / "syn" / "images.parquet", copy / "images.parquet")
    (copy / "manifest.json").unlink()
    refused(rf"^{url}/manifest.json is absent; ")
    shutil.copy(tmp_path / "idx" / "syn" / "manifest.json", copy / "manifest.json")  # the whole copy again: mined
    res = _mine(tmp_path, "ray", clip=0.9, dino=0.6, engine="ray", tile_memory=tile_memory(64, 16, 12), index_url=url)
    assert res.written == len(brute_force_pairs(clip, dino, 0.9, 0.6)) > 0


def test_a_node_that_cannot_read_the_index_is_named_in_seconds(tmp_path):
    import time

    from vhmine.index.rows import IndexRows, VectorFile
    from vhmine.mine.ray.engine import run_job
    from vhmine.mine.ray.tilejob import TileJob

    gone = VectorFile(str(tmp_path / "not-mounted" / "clip.faiss"), 45, 500, 16)  # what the driver saw elsewhere
    rows = IndexRows(gone, VectorFile(str(tmp_path / "not-mounted" / "dino.faiss"), 45, 500, 12), None)
    job = TileJob(tmp_path / "job", {}).open()
    t0 = time.monotonic()
    with pytest.raises(
        InputError,
        match=r"node \S+ cannot read the index: IndexCorruptError: cannot read "
        r".*not-mounted/clip.faiss.*pass --index-url with a URL every node can read",
    ):
        run_job(ray, rows, job, side=64, clip_min=0.9, dino_max=0.5, ranked=False)
    assert time.monotonic() - t0 < 30
    assert not job.done


def test_plan_sizes_the_job_from_a_measured_tile_and_mines_nothing(tmp_path, monkeypatch):
    from helpers import make_index

    clip, dino = clustered(700, 16, 12, 12)
    make_index(tmp_path / "idx", "syn", clip, dino, root=tmp_path / "imgs")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VHMINE_INDEXES", str(tmp_path / "idx"))
    r = CliRunner().invoke(
        app, ["mine", "--engine", "ray", "--plan", "--tile-memory", str(tile_memory(128, 16, 12) / 2**20)]
    )
    assert r.exit_code == 0, r.output
    assert "tiles: 21 (6 row blocks of 128 rows, upper triangle), 244,650 pairs to look at" in r.output
    assert "memory per tile task: " in r.output and "measured: a 128 x 128 tile in " in r.output
    assert "pairs/s per worker" in r.output and "estimated: " in r.output
    assert "that worker's products kernel: " in r.output  # the kernel the rate was measured with
    assert not (tmp_path / "runs").exists()
    r = CliRunner().invoke(app, ["mine", "--plan"])
    assert r.exit_code == 2 and "--plan sizes a Ray job: add --engine ray" in r.output


@pytest.mark.slow
def test_a_driver_killed_mid_job_resumes_and_skips_the_finished_tiles(tmp_path):
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    from helpers import make_index

    clip, dino = _with_ties(1300, 13)
    make_index(tmp_path / "idx", "syn", clip, dino, root=tmp_path / "imgs")
    cmd = [
        sys.executable,
        "-m",
        "vhmine.cli",
        "mine",
        "--engine",
        "ray",
        "--ray-address",
        ray.get_runtime_context().gcs_address,
        "--clip",
        "0.8",
        "--dino",
        "0.6",
        "--max-per-image",
        "3",
        "--tile-memory",
        str(tile_memory(64, 16, 12) / 2**20),
        "--out",
        "runs/ray",
    ]
    env = {**os.environ, "VHMINE_INDEXES": str(tmp_path / "idx")}
    ledger = tmp_path / "runs" / ".ray.job" / "tiles.jsonl"
    driver = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and driver.poll() is None:
        if ledger.is_file() and len(ledger.read_text().splitlines()) >= 3:
            break
        time.sleep(0.02)
    driver.send_signal(signal.SIGKILL)  # no clean-up of any kind
    out = driver.communicate()[0].decode()
    done = len(ledger.read_text().splitlines())
    assert driver.returncode == -signal.SIGKILL and 3 <= done < 231, out  # stopped mid-job
    assert not (tmp_path / "runs" / "ray").exists()
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    skipped = int(r.stdout.split("resumed: ")[1].split(" of 231 tiles were already done")[0])
    assert skipped >= done - 2  # every finished tile (the last line or two may have been cut short)
    run = json.loads((tmp_path / "runs" / "ray" / "run.json").read_text())
    assert run["ray"]["tiles_done_before"] == skipped and run["ray"]["tiles"] == 231
    _mine(tmp_path, "local", clip=0.8, dino=0.6, max_per_image=3)
    want = pd.read_parquet(tmp_path / "runs" / "local" / "pairs.parquet")
    assert len(want) > 50
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "runs" / "ray" / "pairs.parquet"), want)


# --- exact at every scale it accepts (vhmine.mine.join.rowcheck) ------------------------------------------


@pytest.mark.slow
def test_ray_refuses_rows_the_fast_pass_cannot_bound_and_nan_thresholds(tmp_path):
    from helpers import make_index

    clip, dino = clustered(200, 16, 12, 14)
    with pytest.raises(InputError, match=r"^clip_min is NaN: give a number"):
        find_pairs_ray(clip, dino, math.nan)
    clip[150:] *= np.float32(3e19)  # squares overflow float32: the tile's threshold would be NaN
    with pytest.raises(InputError, match=r"^clip row 150 has norm 3e\+19 \(50 row\(s\) in all\): the exact miner"):
        find_pairs_ray(clip, dino, 0.9, tile=64)
    make_index(tmp_path / "idx", "syn", clip, dino, root=tmp_path / "imgs")
    with pytest.raises(InputError) as err:  # from the streaming pass, in a task, as its own line
        _mine(tmp_path, "ray", clip=0.9, dino=0.6, engine="ray", tile_memory=tile_memory(64, 16, 12))
    assert str(err.value).startswith(  # (a run's scan reads whole chunks of the kept digests: 4,096 rows)
        "clip row 150 has norm 3e+19 (50 row(s) of rows 0 to 199): the exact miner needs"
    )
    assert "Traceback" not in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@settings(max_examples=6)  # each example starts a job on the cluster: seconds
@given(vector_sets(max_rows=150), st.sampled_from([64, 128]))
def test_property_ray_tiles_are_brute_force_or_refuse_by_row(data, tile):
    clip, dino, clip_min, dino_max = data
    check_exact_or_refused(lambda *a: find_pairs_ray(*a, tile=tile), clip, dino, clip_min, dino_max)
