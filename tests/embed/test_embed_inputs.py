"""`vhmine embed` inputs: WebDataset tar shards as img2dataset writes them (local and through an fsspec URL),
with broken members skipped with reasons and reruns that follow the tars; and the summary of a job whose
every image was skipped."""

import tarfile

import numpy as np
import pandas as pd
import pytest
from helpers import embed_options, jpeg_bytes, wds_sample, write_photos, write_tar

from vhmine.embed.job import embed_collection
from vhmine.index import open_index


@pytest.fixture()
def shards(tmp_path):
    """00000.tar: 4 photos and a .jpg that is not an image; 00001.tar: 3 photos, the last cut short."""
    photos = write_photos(tmp_path / "photos")
    out = tmp_path / "wds"
    out.mkdir()
    first = [wds_sample(f"0000{k}", photos[k], f"photo number {k}") for k in range(4)]
    first.append(("00004", {".jpg": b"<html>404 not found</html>", ".json": b'{"url": "https://example.org/x"}'}))
    write_tar(out / "00000.tar", first)
    write_tar(out / "00001.tar", [wds_sample(f"1000{k}", photos[4 + k], f"another {k}") for k in range(3)])
    data = (out / "00001.tar").read_bytes()
    with tarfile.open(out / "00001.tar") as tf:
        last = [m for m in tf.getmembers() if m.name == "10002.jpg"][0]
    (out / "00001.tar").write_bytes(data[: last.offset_data + last.size // 2])  # a download cut short
    (out / "00000_stats.json").write_text("{}")  # img2dataset's other files are not read
    return out, photos


def test_webdataset_tars_are_embedded_with_key_tar_url_and_caption(tmp_path, shards, tiny_models):
    out, photos = shards
    res = embed_collection(embed_options(out, tmp_path / "idx", tiny_models, name="w", shard_size=4, device="cpu"))
    idx = open_index(tmp_path / "idx", "w")
    assert res.images == 6 and res.skipped == 2
    images = idx.images.set_index("path")
    assert list(images.index) == [
        "00000.tar/00000.jpg",
        "00000.tar/00001.jpg",
        "00000.tar/00002.jpg",
        "00000.tar/00003.jpg",
        "00001.tar/10000.jpg",
        "00001.tar/10001.jpg",
    ]
    row = images.loc["00001.tar/10001.jpg"]
    assert (row["key"], row["tar"], row["url"], row["caption"]) == (
        "10001",
        "00001.tar",
        "https://example.org/10001.jpg",
        "another 1",
    )
    skipped = dict(pd.read_csv(idx.folder / "skipped.csv").values)
    assert set(skipped) == {"00000.tar/00004.jpg", "00001.tar/10002.jpg"}
    assert "not an image" in skipped["00000.tar/00004.jpg"]
    assert "truncated tar member" in skipped["00001.tar/10002.jpg"]
    assert idx.manifest["source"]["kind"] == "webdataset"
    # the vectors are those of the jpg bytes in the tar, row for row
    from vhmine.embed.encoders import load_clip
    from vhmine.images import decode_rgb

    clip = load_clip(tiny_models[0], "cpu")
    img = decode_rgb(jpeg_bytes(photos[5]))
    k = list(images.index).index("00001.tar/10001.jpg")
    assert np.allclose(idx.clip[k], clip.encode(clip.preprocess(img)[None])[0].numpy(), atol=1e-5)
    assert images.loc["00001.tar/10001.jpg", "width"] == img.width

    # the same tars through an fsspec URL give the same index
    embed_collection(
        embed_options(f"file://{out}", tmp_path / "idx2", tiny_models, name="w", shard_size=4, device="cpu")
    )
    again = open_index(tmp_path / "idx2", "w")
    pd.testing.assert_frame_equal(again.images, idx.images)
    assert np.array_equal(again.clip, idx.clip) and np.array_equal(again.dino, idx.dino)


def test_webdataset_reruns_embed_only_new_tars_and_changed_members(tmp_path, shards, tiny_models):
    out, photos = shards
    opts = embed_options(out, tmp_path / "idx", tiny_models, name="w", shard_size=4, device="cpu")
    embed_collection(opts)
    before = open_index(tmp_path / "idx", "w")
    assert embed_collection(opts).embedded_now == 0
    write_tar(out / "00002.tar", [wds_sample("20000", photos[8], "a new one")])
    res = embed_collection(opts)
    assert res.embedded_now == 1 and res.images == 7
    after = open_index(tmp_path / "idx", "w")
    pd.testing.assert_frame_equal(after.images.iloc[:6], before.images)
    # a tar downloaded again, whole this time: its members are read again, the cut one now indexed
    write_tar(out / "00001.tar", [wds_sample(f"1000{k}", photos[4 + k], f"another {k}") for k in range(3)])
    res = embed_collection(opts)
    assert res.embedded_now == 1 and res.images == 8 and res.skipped == 1
    assert "00001.tar/10002.jpg" in set(open_index(tmp_path / "idx", "w").images["path"])


def test_summary_says_when_every_image_was_skipped(tmp_path, tiny_models):
    folder = tmp_path / "bad"
    folder.mkdir()
    for name in ("a.jpg", "b.png", "c.webp"):
        (folder / name).write_text("not a picture")
    res = embed_collection(embed_options(folder, tmp_path / "idx", tiny_models, name="bad", shard_size=4, device="cpu"))
    text = res.summary()
    assert "0 images in the index; 3 skipped (see skipped.csv)" in text
    assert "embedded" not in text.splitlines()[0]
    assert "the index holds no images" in text
