"""`vhmine embed --engine ray` on a real local Ray cluster (2 CPUs, started here): the index equals the
local engine's row for row and vector for vector, also when a worker process dies mid-shard, and a
rerun skips the finished shards."""

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ray = pytest.importorskip("ray")

from helpers import free_port, write_photos  # noqa: E402

from vhmine.embed.job import EmbedOptions, embed_collection  # noqa: E402
from vhmine.errors import EncoderError, InputError  # noqa: E402
from vhmine.index import open_index  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(ray_cluster, ray_exit_marker):
    """The session's 2-CPU Ray cluster; yields the marker file that makes one worker exit mid-shard."""
    yield ray_exit_marker
    ray_exit_marker.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """10 photos, a copy of one (in a later shard), and two files that are not images."""
    root = tmp_path_factory.mktemp("imgs")
    write_photos(root)
    shutil.copy(root / "astronaut.png", root / "zz-astronaut-copy.png")
    (root / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    (root / "notes.jpg").write_text("not a picture")
    return root


def _opts(images, indexes, models, **kw):
    clip, dino = models
    return EmbedOptions(
        images=images,
        indexes=indexes,
        name="c",
        clip_model=clip,
        dino_model=dino,
        workers=0,
        batch_size=2,
        shard_size=3,
        progress=False,
        device="cpu",
        **kw,
    )


@pytest.fixture(scope="module")
def local_index(tmp_path_factory, folder, tiny_models):
    indexes = tmp_path_factory.mktemp("local")
    embed_collection(_opts(folder, indexes, tiny_models))
    return open_index(indexes, "c")


def _assert_same(idx, ref):
    pd.testing.assert_frame_equal(idx.images, ref.images)
    assert np.array_equal(idx.clip, ref.clip) and np.array_equal(idx.dino, ref.dino)
    for key in ("counts", "skipped", "duplicates", "encoders"):
        assert idx.manifest[key] == ref.manifest[key], key


@pytest.mark.slow
def test_ray_engine_writes_the_local_index(cluster, folder, tiny_models, local_index, tmp_path):
    res = embed_collection(_opts(folder, tmp_path, tiny_models, engine="ray", ray_actors=2))
    idx = open_index(tmp_path, "c")
    _assert_same(idx, local_index)
    assert res.images == 10 and res.skipped == 2 and res.duplicates == 1 and res.embedded_now == 13
    assert len(list((tmp_path / "c" / "work" / "shards").glob("part-*.parquet"))) == 5


@pytest.mark.slow
def test_auto_precision_is_measured_by_one_actor_and_run_by_every_one(cluster, folder, tiny_models, tmp_path):
    """--precision auto on Ray: the first actor measures (or reads the node's cache), the others run its choice,
    so every shard is in one precision: the index equals the local engine's in that precision, named."""
    res = embed_collection(_opts(folder, tmp_path / "ray", tiny_models, engine="ray", ray_actors=2, precision="auto"))
    idx = open_index(tmp_path / "ray", "c")
    chosen = idx.manifest["precision"]
    assert chosen["name"] in ("fp32", "bf16") and chosen["chosen"] in ("measured", "cached"), chosen
    assert set(chosen["images_per_s"]) == {"fp32", "bf16"} and res.precision == chosen
    embed_collection(_opts(folder, tmp_path / "local", tiny_models, precision=chosen["name"]))
    _assert_same(idx, open_index(tmp_path / "local", "c"))
    assert {idx.manifest["encoders"][k]["dtype"] for k in ("clip", "dino")} == {
        {"fp32": "float32", "bf16": "bfloat16"}[chosen["name"]]
    }


@pytest.mark.slow
def test_a_worker_killed_mid_shard_is_retried(cluster, folder, tiny_models, local_index, tmp_path):
    cluster.write_text("2")  # the worker that embeds shard 2 exits after its first batch, once
    embed_collection(_opts(folder, tmp_path, tiny_models, engine="ray", ray_actors=1))
    assert not cluster.exists(), "the worker never reached shard 2"
    _assert_same(open_index(tmp_path, "c"), local_index)


@pytest.mark.slow
def test_rerun_skips_finished_shards(cluster, folder, tiny_models, local_index, tmp_path):
    opts = _opts(folder, tmp_path, tiny_models, engine="ray", ray_actors=1)
    embed_collection(opts)
    shards = tmp_path / "c" / "work" / "shards"
    # a job stopped before shard 3 and the index files were written
    for f in shards.glob("part-00003.*"):
        f.unlink()
    (tmp_path / "c" / "manifest.json").unlink()
    kept = {f.name: f.stat().st_mtime_ns for f in shards.iterdir()}
    res = embed_collection(opts)
    assert res.embedded_now == 3  # only shard 3's files were read again
    assert {f.name: f.stat().st_mtime_ns for f in shards.iterdir() if f.name in kept} == kept
    _assert_same(open_index(tmp_path, "c"), local_index)
    assert embed_collection(opts).embedded_now == 0


def test_an_unreachable_cluster_address_is_a_clear_error(folder, tiny_models, tmp_path):
    port = free_port()  # nothing listens there
    with pytest.raises(InputError, match=rf"--ray-address 127.0.0.1:{port}: no Ray cluster answers there"):
        embed_collection(_opts(folder, tmp_path, tiny_models, engine="ray", ray_address=f"127.0.0.1:{port}"))


@pytest.mark.slow
def test_cluster_errors_say_what_to_do(cluster, folder, tiny_models, tmp_path):
    with pytest.raises(InputError, match="--ray-actors 3: the Ray cluster has 2 CPUs"):
        embed_collection(_opts(folder, tmp_path, tiny_models, engine="ray", ray_actors=3))
    missing = (tiny_models[0], str(tmp_path / "no-such-dino"))  # a node without the model files
    with pytest.raises(
        EncoderError, match=r"a Ray actor could not start: .*no-such-dino.*model files at the same path"
    ):
        embed_collection(_opts(folder, tmp_path, missing, engine="ray", ray_actors=1))
    assert not (tmp_path / "c").exists()  # nothing half-written
