"""vhmine.mine.ray_engine: `vhmine mine --engine ray` on a local 2-CPU Ray cluster gives the local miner's pairs.

Tiles are small (64-192 rows) so that they cut through clusters, and one test kills a tile's worker
process on its first attempt and checks that the retry gives the same pairs.
"""

import math

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from vhmine.cli import app
from vhmine.errors import InputError
from vhmine.mine.simsearch import assert_same_pairs, brute_force_pairs, find_pairs

ray = pytest.importorskip("ray", reason="the Ray engine needs the ray extra: pip install -e '.[ray]'")

from vhmine.mine.ray_engine import find_pairs_ray, tile_bytes, tile_rows  # noqa: E402

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module", autouse=True)
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def unit(a):
    return (a / np.linalg.norm(a, axis=1, keepdims=True)).astype(np.float32)


def clustered(n, d, e, seed, spiky=False):
    """A third random rows, the rest in clusters of 2-40 rows in row order (so 64-row tiles cut through
    them), CLIP cosines from about 0.6 to 0.99; DINOv2 agrees in half the clusters. spiky: three
    dimensions 10-25x the rest and of one sign in every row, as in real CLIP embeddings."""
    rng = np.random.default_rng(seed)
    clip, dino = rng.standard_normal((n, d)), rng.standard_normal((n, e))
    start = n // 3
    while start < n:
        rows = slice(start, start + int(rng.integers(2, 41)))
        size = len(clip[rows])
        clip[rows] = rng.standard_normal(d) + rng.uniform(0.1, 0.7) * rng.standard_normal((size, d))
        if rng.random() < 0.5:
            dino[rows] = rng.standard_normal(e) + 0.5 * rng.standard_normal((size, e))
        start += size
    if spiky:
        for k, f in zip((1, 7, 20), (10, 15, 25)):
            clip[:, k] = f * (1 + 0.3 * clip[:, k])
    return unit(clip), unit(dino)


def tile_memory(rows, clip_dim, dino_dim):
    return tile_bytes(rows, clip_dim, dino_dim)  # exactly the memory of a tile of `rows` rows


@pytest.mark.parametrize("kind, n, tile, clip_min, dino_max", [
    ("random", 700, 64, 0.5, 0.2),
    ("clustered", 901, 64, 0.9, 0.55),
    ("clustered", 901, 192, 0.8, math.inf),
    ("spiky", 800, 128, 0.95, 0.6),
])
def test_pairs_equal_local_miner_and_brute_force(kind, n, tile, clip_min, dino_max):
    if kind == "random":
        rng = np.random.default_rng(0)
        clip, dino = unit(rng.standard_normal((n, 8))), unit(rng.standard_normal((n, 8)))
    else:
        clip, dino = clustered(n, 32, 16, 1, spiky=kind == "spiky")
    stats = {}
    got = find_pairs_ray(clip, dino, clip_min, dino_max, tile_memory=tile_memory(tile, clip.shape[1], dino.shape[1]), stats=stats)
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
        find_pairs_ray(clip, dino, 0.9, tile=64, max_retries=0,
                       _crash_marker=str(tmp_path / "m"))


def test_tile_size_follows_the_memory_bound():
    for mem in (2 * 10**6, 64 * 2**20, 2**30):
        side = tile_rows(mem, 768, 1024)
        assert side % 64 == 0 and tile_bytes(side, 768, 1024) <= mem < tile_bytes(side + 64, 768, 1024)
    assert tile_rows(2**30, 768, 1024) == 13248  # the figure --tile-memory's help gives
    with pytest.raises(InputError, match="--tile-memory 0.50 MiB is too small: .* at 768 \\+ 1024 dims needs 1.50 MiB"):
        tile_rows(int(0.5 * 2**20), 768, 1024)


def test_a_device_ray_cannot_give_is_named():
    clip, dino = clustered(100, 8, 4, 6)
    with pytest.raises(InputError, match="--device gpu: Ray tiles run on cpu or cuda"):
        find_pairs_ray(clip, dino, 0.9, device="gpu")


def test_too_many_candidates_stops_the_job():
    rng = np.random.default_rng(0)
    clip, dino = unit(rng.standard_normal((400, 8))), unit(rng.standard_normal((400, 4)))
    with pytest.raises(InputError, match=r"more than the limit of 1,000 candidates; raise --clip"):
        find_pairs_ray(clip, dino, 0.1, tile=64, max_candidates=1000)


def test_cli_engine_ray_writes_the_local_engines_pairs(tmp_path, monkeypatch):
    from test_mine import make_index

    clip, dino = clustered(150, 16, 12, 4)
    make_index(tmp_path / "idx", "syn", clip, dino, root=tmp_path / "imgs")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VHMINE_INDEXES", str(tmp_path / "idx"))
    runner = CliRunner()
    for engine in ("local", "ray"):
        r = runner.invoke(app, ["mine", "--clip", "0.8", "--dino", "0.5", "--engine", engine,
                                "--tile-memory", "0.1", "--out", f"runs/{engine}"])
        assert r.exit_code == 0, r.output
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

    from test_mine import make_index

    clip, dino = clustered(40, 8, 4, 5)
    make_index(tmp_path / "idx", "syn", clip, dino, root=tmp_path / "imgs")
    env = {**os.environ, "VHMINE_INDEXES": str(tmp_path / "idx")}
    env.pop("RAY_ADDRESS", None)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "vhmine.cli", "mine", "--engine", "ray", "--ray-address", "127.0.0.1:9"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "could not reach the Ray cluster at 127.0.0.1:9: Connection refused." in r.stdout + r.stderr
    assert "leave out --ray-address" in r.stdout + r.stderr
    assert time.monotonic() - t0 < 60  # Ray alone retries an absent head for minutes
    assert not (tmp_path / "runs").exists()
