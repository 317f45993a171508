"""Images that `vhmine embed` read from WebDataset tars, through every later stage.

End to end through the real CLI (subprocesses, one workdir, the loopback OpenAI-compatible server): embed tars
-> mine (the gallery's thumbnails) -> seed -> the app's image bytes -> export (vhtest, hf) -> probe and eval --model
(the server receives the images). Then images.read_image_bytes and index.locate_image on their own: one .tar given to
embed, an fsspec URL, a member that changed, a tar that moved, a member cut short.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import shutil
import tarfile

import numpy as np
import pandas as pd
import pytest
from helpers import Workdir, embed_options, jpeg_bytes, wds_sample, write_photos, write_tar
from openai_server import chat_images
from PIL import Image

from vhmine.embed.job import embed_collection
from vhmine.images import read_image_bytes
from vhmine.index import locate_image, open_index


def _shards(folder, photos) -> dict[str, bytes]:
    """00000.tar and 00001.tar, three photos each; returns member location (under `folder`) -> its jpg bytes."""
    folder.mkdir(parents=True)
    members = {}
    for t in range(2):
        samples = [wds_sample(f"{t}000{k}", photos[3 * t + k], f"photo {t}-{k}") for k in range(3)]
        write_tar(folder / f"0000{t}.tar", samples)
        members.update({str(folder / f"0000{t}.tar" / f"{key}.jpg"): files[".jpg"] for key, files in samples})
    return members


def _pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), dtype=np.int16)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.slow
def test_tar_images_go_through_mine_seed_curate_export_probe_and_eval(tmp_path, tiny_models, openai_server):
    from vhmine import curate as C
    from vhmine.rules import modes as M
    from vhmine.store import Image as StoredImage

    srv = openai_server
    w = Workdir(tmp_path / "work", srv.base_url)
    wds = w.root / "wds"
    members = _shards(wds, write_photos(tmp_path / "photos"))
    by_sha = {_sha(b): b for b in members.values()}
    clip, dino = tiny_models
    w.vhmine(
        "embed",
        str(wds),
        "--name",
        "w",
        "--clip-model",
        clip,
        "--dino-model",
        dino,
        "--device",
        "cpu",
        "--workers",
        "0",
        db=False,
    )

    # mine: every pair (tiny random encoders: the box is the whole square); paths point into the tars
    w.vhmine("mine", "--index", "w", "--clip", "-1", "--dino", "1", "--out", "runs/r", "--device", "cpu", db=False)
    pairs = pd.read_parquet(w.root / "runs" / "r" / "pairs.parquet")
    assert len(pairs) == 15
    for side in "ab":
        assert all(members[p] and _sha(members[p]) == s for p, s in zip(pairs[f"path_{side}"], pairs[f"sha256_{side}"]))
    # the gallery shows each pair's two images: thumbnails of the members' pixels (the photos are under 256 px)
    page = (w.root / "runs" / "r" / "gallery.html").read_text()
    assert "(image unreadable)" not in page
    shown = re.findall(r'<img src="data:image/jpeg;base64,([^"]+)" alt="([0-9a-f]{16})">', page)
    assert len(shown) == 30
    by_id = {s[:16]: b for s, b in by_sha.items()}
    for b64, image_id in shown:
        thumb, want = _pixels(base64.b64decode(b64)), _pixels(by_id[image_id])
        assert thumb.shape == want.shape and np.abs(thumb - want).mean() < 6  # JPEG again, at quality 85

    # seed: the store records where each image is, inside its tar
    w.vhmine("seed", "--pairs", "runs/r/pairs.parquet", "--per-mode", "2")
    token = w.vhmine("workers", "add", "alice").stdout.strip()
    with w.store() as store:
        with store.session(write=False) as s:
            stored = {i.id: i.path for i in s.query(StoredImage)}
        assert stored and all(members[p] for p in stored.values())
        # the app: image bytes of each image of a task, and one annotated pair
        me = C.sign_in(store, token).name
        item = C.next_item(store, me, "counting")
        a, b = (v.id for v in item.images)
        for v in item.images:
            assert C.image_bytes(store, v.id) == members[stored[v.id]]
            assert str(C.image_file(store, v.id)) == stored[v.id]
        tpl = M.get_mode("counting").template("counting.how_many")
        C.save_annotation(store, me, item.task_id, C.Annotation(tpl.id, {"object": "cats"}, answers={a: "3", b: "2"}))
        C.confirm_drafts(
            store,
            me,
            [C.DraftDecision(d.instance_id, True) for d in C.pending_drafts(store, me, "counting")],
        )
        recs = C.ready_instances(store)
    assert len(recs) == 6 and {r.image_id for r in recs} == {a, b}

    # export: the benchmarks hold the members' images (vhtest as PNG, hf as the jpg bytes themselves)
    w.vhmine("export", "--format", "vhtest", "--mode", "counting", "--out", "bench-vhtest")
    for kind in ("OEQ", "YNQ"):
        for _, row in pd.read_excel(w.root / "bench-vhtest" / f"{kind}_Benchmark" / "counting.xlsx").iterrows():
            rec = next(r for r in recs if r.id == row["vhmine_id"])
            png = (w.root / "bench-vhtest" / "Images" / "counting" / row["Image"]).read_bytes()
            assert np.array_equal(_pixels(png), _pixels(by_sha[rec.image_sha256]))
    w.vhmine("export", "--format", "hf", "--mode", "counting", "--out", "bench-hf")
    table = pd.concat(
        [pd.read_parquet(w.root / "bench-hf" / "data" / k / "test-00000-of-00001.parquet") for k in ("oeq", "ynq")]
    )
    assert len(table) == 6
    assert all(img["bytes"] == members[stored[iid]] for img, iid in zip(table["image"], table["image_id"]))

    # probe reads the images from the tars; eval from the export: the model receives the members' bytes
    w.vhmine("probe", "--model", "fake-vlm", "--kind", "ynq", "--base-url", w.base_url, "--retry-wait", "0.01")
    asked = [chat_images(c) for c in srv.chats() if c["model"] == "fake-vlm"]
    assert asked and all(len(x) == 1 for x in asked)
    assert (
        {x[0] for x in asked}
        == {r.image_sha256 for r in recs if r.kind == "YNQ"}
        == {_sha(members[stored[a]]), _sha(members[stored[b]])}
    )
    w.vhmine(
        "eval", "--bench", "bench-hf", "--model", "fake-vlm-2", "--base-url", w.base_url, "--out", "eval", db=False
    )
    asked = [chat_images(c) for c in srv.chats() if c["model"] == "fake-vlm-2"]
    assert len(asked) == 6 and sorted(x[0] for x in asked) == sorted(r.image_sha256 for r in recs)
    report = json.loads((w.root / "eval" / "report.json").read_text())
    assert report["models"]["fake-vlm-2"]["metrics"]["overall"]["n"] == 6


def test_one_tar_given_to_embed_and_a_file_url_give_readable_locations(tmp_path, tiny_models):
    members = _shards(tmp_path / "wds", write_photos(tmp_path / "photos"))
    embed_collection(
        embed_options(
            tmp_path / "wds" / "00001.tar", tmp_path / "idx", tiny_models, name="one", shard_size=4, device="cpu"
        )
    )
    idx = open_index(tmp_path / "idx", "one")
    assert list(idx.images["path"]) == [f"00001.tar/1000{k}.jpg" for k in range(3)]
    assert idx.abs_paths() == [str(tmp_path / "wds" / "00001.tar" / f"1000{k}.jpg") for k in range(3)]
    assert [read_image_bytes(p) for p in idx.abs_paths()] == [members[p] for p in idx.abs_paths()]
    # through an fsspec file:// URL: the same local locations (no URL in what later stages record)
    embed_collection(
        embed_options(
            f"file://{tmp_path / 'wds'}", tmp_path / "idx", tiny_models, name="url", shard_size=4, device="cpu"
        )
    )
    url = open_index(tmp_path / "idx", "url")
    assert url.abs_paths() == sorted(members) and all(read_image_bytes(p) == members[p] for p in url.abs_paths())


def test_members_are_checked_against_their_sha256_and_found_again_after_the_tars_move(tmp_path, tiny_models):
    photos = write_photos(tmp_path / "photos")
    members = _shards(tmp_path / "wds", photos)
    embed_collection(
        embed_options(tmp_path / "wds", tmp_path / "idx", tiny_models, name="w", shard_size=4, device="cpu")
    )
    first = str(tmp_path / "wds" / "00000.tar" / "00001.jpg")
    sha = _sha(members[first])
    assert locate_image(sha, first, lambda: []) == tmp_path / "wds" / "00000.tar" / "00001.jpg"
    # the shards move, and are embedded again at their new place: the image is found there, by content
    shutil.move(tmp_path / "wds", tmp_path / "moved")
    assert locate_image(sha, first, lambda: []) is None
    embed_collection(
        embed_options(tmp_path / "moved", tmp_path / "idx", tiny_models, name="moved", shard_size=4, device="cpu")
    )
    found = locate_image(sha, first, lambda: [tmp_path / "idx" / "w", tmp_path / "idx" / "moved"])
    assert found == tmp_path / "moved" / "00000.tar" / "00001.jpg"
    # a tar written again with other bytes under the same name is not taken for the image it was
    moved = tmp_path / "moved" / "00000.tar"
    write_tar(moved, [("00001", {".jpg": jpeg_bytes(photos[9])})])
    assert read_image_bytes(moved / "00001.jpg") == jpeg_bytes(photos[9])
    assert locate_image(sha, moved / "00001.jpg", lambda: []) is None
    with pytest.raises(FileNotFoundError, match="no image member '00002.jpg'"):
        read_image_bytes(moved / "00002.jpg")


def test_fsspec_urls_and_a_member_cut_short(tmp_path):
    import fsspec

    photos = write_photos(tmp_path / "photos")
    members = _shards(tmp_path / "wds", photos)
    fs = fsspec.filesystem("memory")
    fs.pipe("/vhmine-test/shards/00000.tar", (tmp_path / "wds" / "00000.tar").read_bytes())
    want = members[str(tmp_path / "wds" / "00000.tar" / "00002.jpg")]
    assert read_image_bytes("memory://vhmine-test/shards/00000.tar/00002.jpg") == want
    # a location that went through a Path has lost a slash of its URL: still the same image
    from pathlib import Path

    assert read_image_bytes(Path("memory://vhmine-test/shards/00000.tar/00002.jpg")) == want
    with pytest.raises(FileNotFoundError):
        read_image_bytes("memory://vhmine-test/shards/00009.tar/00002.jpg")
    # a tar cut in the middle of a member: that member cannot be read, the one before it can
    data = (tmp_path / "wds" / "00001.tar").read_bytes()
    with tarfile.open(tmp_path / "wds" / "00001.tar") as tf:
        cut = next(m for m in tf.getmembers() if m.name == "10002.jpg")
    (tmp_path / "wds" / "00001.tar").write_bytes(data[: cut.offset_data + cut.size // 2])
    assert (
        read_image_bytes(tmp_path / "wds" / "00001.tar" / "10001.jpg")
        == members[str(tmp_path / "wds" / "00001.tar" / "10001.jpg")]
    )
    with pytest.raises(OSError, match="truncated tar member"):
        read_image_bytes(tmp_path / "wds" / "00001.tar" / "10002.jpg")
