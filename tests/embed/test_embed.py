"""embed.py + index.py: a real collection through tiny real encoders into a FAISS index."""

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import copy_photos, embed_options, interrupt_when, sha_of
from PIL import Image
from PIL import Image as PILImage
from typer.testing import CliRunner

from vhmine.cli import app
from vhmine.embed.job import EmbedOptions, embed_collection
from vhmine.errors import EncoderMismatchError, IndexCorruptError, IndexMissingError, InputError
from vhmine.index import open_index


def _opts(images, indexes, models, **kw):
    clip, dino = models
    return EmbedOptions(
        images=images,
        indexes=indexes,
        clip_model=clip,
        dino_model=dino,
        workers=0,
        batch_size=4,
        shard_size=5,
        progress=False,
        **kw,
    )


@pytest.fixture()
def collection(tmp_path, photos_dir):
    folder = tmp_path / "photos"
    shutil.copytree(photos_dir, folder)
    return folder


@pytest.mark.slow
def test_embed_writes_aligned_index_and_records_duplicates_once(tmp_path, collection, tiny_models):
    res = embed_collection(_opts(collection, tmp_path / "idx", tiny_models, name="photos"))
    n_files = len(list(collection.glob("*.png")))
    assert res.images == n_files - 1 and res.duplicates == 1 and res.skipped == 0
    idx = open_index(tmp_path / "idx", "photos")
    assert list(idx.images.columns[:5]) == ["image_id", "path", "sha256", "width", "height"]
    assert idx.clip.shape == (n_files - 1, 32) and idx.dino.shape == (n_files - 1, 32)
    assert idx.images["image_id"].is_unique
    # cat.png and chelsea.png are the same bytes: one row, the other path listed under it
    row = idx.images[idx.images["path"].isin(["cat.png", "chelsea.png"])]
    assert len(row) == 1 and list(row["duplicate_paths"].iloc[0]) == ["chelsea.png"]
    assert idx.manifest["duplicates"] == [{"path": "chelsea.png", "image_id": row["image_id"].iloc[0]}]
    # row i of the vectors is the embedding of the image at row i of images.parquet
    from vhmine.embed.encoders import load_clip, load_dino
    from vhmine.images import decode_rgb

    clip_enc, dino_enc = load_clip(tiny_models[0], "cpu"), load_dino(tiny_models[1], "cpu")
    for k in (0, 7, len(idx.images) - 1):
        img = decode_rgb((collection / idx.images["path"].iloc[k]).read_bytes())
        assert np.allclose(idx.clip[k], clip_enc.encode(clip_enc.preprocess(img)[None])[0].numpy(), atol=1e-5)
        assert np.allclose(idx.dino[k], dino_enc.encode(dino_enc.preprocess(img)[None])[0].numpy(), atol=1e-5)
        assert idx.images["width"].iloc[k] == img.width
    m = idx.manifest
    assert m["encoders"]["clip"]["spec"] == tiny_models[0] and m["encoders"]["dino"]["dim"] == 32
    assert m["encoders"]["dino"]["preprocess"]["crop_size"] == {"height": 56, "width": 56}
    assert m["counts"] == {"files": n_files, "images": n_files - 1, "skipped": 0, "duplicates": 1}
    assert set(m["files"]) == {"images.parquet", "skipped.csv", "clip.faiss", "dino.faiss"}


def test_bad_images_are_skipped_with_reasons(tmp_path, collection, tiny_models):
    (collection / "empty.jpg").write_bytes(b"")
    (collection / "notes.jpg").write_text("this is not a picture")
    good = (collection / "coffee.png").read_bytes()
    (collection / "sub").mkdir()
    (collection / "sub" / "truncated.png").write_bytes(good[: len(good) // 2])
    Image.fromarray(np.zeros((8, 8, 4), np.uint8)).save(collection / "sub" / "rgba.png")
    Image.fromarray(np.arange(64, dtype=np.uint16).reshape(8, 8) * 1000).save(collection / "sub" / "deep16.png")
    res = embed_collection(_opts(collection, tmp_path / "idx", tiny_models, name="c"))
    assert res.skipped == 3
    idx = open_index(tmp_path / "idx", "c")
    skipped = pd.read_csv(idx.folder / "skipped.csv")
    assert sorted(skipped["path"]) == ["empty.jpg", "notes.jpg", "sub/truncated.png"]
    reasons = dict(zip(skipped["path"], skipped["reason"]))
    assert "empty" in reasons["empty.jpg"] and "truncat" in reasons["sub/truncated.png"]
    assert {r["path"] for r in idx.manifest["skipped"]} == set(skipped["path"])
    assert {"sub/rgba.png", "sub/deep16.png"} <= set(idx.images["path"])
    assert "skipped" in res.summary() and "skipped.csv" in res.summary()


@pytest.mark.slow
def test_rerun_embeds_only_new_images_and_keeps_old_rows(tmp_path, collection, tiny_models, caplog):
    opts = _opts(collection, tmp_path / "idx", tiny_models, name="c")
    embed_collection(opts)
    before = open_index(tmp_path / "idx", "c")
    again = embed_collection(opts)
    assert again.embedded_now == 0
    for k in range(3):
        Image.fromarray(np.full((40, 60, 3), 40 * k + 10, np.uint8)).save(collection / f"new{k}.png")
    with caplog.at_level("WARNING", logger="vhmine"):
        res = embed_collection(opts)
    assert res.embedded_now == 3
    # the same encoders: nothing to warn of (their record read back from JSON equals the one just described)
    assert not [r.getMessage() for r in caplog.records if "encoder details differ" in r.getMessage()]
    after = open_index(tmp_path / "idx", "c")
    n = len(before.images)
    assert len(after.images) == n + 3
    pd.testing.assert_frame_equal(after.images.iloc[:n].reset_index(drop=True), before.images)
    assert np.array_equal(after.clip[:n], before.clip)
    assert sorted(after.images["path"].iloc[n:]) == ["new0.png", "new1.png", "new2.png"]


def test_coco_annotations_give_ids_and_categories(tmp_path, collection, tiny_models):
    ann = {
        "images": [{"id": 139, "file_name": "astronaut.png"}, {"id": 285, "file_name": "horse.png"}],
        "annotations": [
            {"image_id": 139, "category_id": 1},
            {"image_id": 139, "category_id": 3},
            {"image_id": 139, "category_id": 1},
            {"image_id": 285, "category_id": 19},
        ],
        "categories": [{"id": 1, "name": "person"}, {"id": 3, "name": "car"}, {"id": 19, "name": "horse"}],
    }
    (tmp_path / "instances.json").write_text(json.dumps(ann))
    embed_collection(
        _opts(collection, tmp_path / "idx", tiny_models, name="coco", coco_annotations=tmp_path / "instances.json")
    )
    idx = open_index(tmp_path / "idx", "coco")
    by_path = idx.images.set_index("path")
    assert by_path.loc["astronaut.png", "coco_id"] == 139
    assert list(by_path.loc["astronaut.png", "categories"]) == ["car", "person"]
    assert list(by_path.loc["horse.png", "categories"]) == ["horse"]
    assert pd.isna(by_path.loc["coffee.png", "coco_id"]) and len(by_path.loc["coffee.png", "categories"]) == 0
    assert idx.manifest["source"]["kind"] == "coco"


def test_user_errors(tmp_path, collection, tiny_models):
    with pytest.raises(InputError, match="no such folder"):
        embed_collection(_opts(tmp_path / "nowhere", tmp_path / "idx", tiny_models))
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "readme.txt").write_text("no images here")
    with pytest.raises(InputError, match="no images found"):
        embed_collection(_opts(tmp_path / "empty", tmp_path / "idx", tiny_models))
    (tmp_path / "nofile.json").write_text(json.dumps({"images": [{"id": 1}]}))
    with pytest.raises(InputError, match=r"nofile.json: entry 0 of 'images' lacks or mangles field 'file_name'"):
        embed_collection(_opts(collection, tmp_path / "idx", tiny_models, coco_annotations=tmp_path / "nofile.json"))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(InputError, match="bad.json: not valid JSON"):
        embed_collection(_opts(collection, tmp_path / "idx", tiny_models, coco_annotations=tmp_path / "bad.json"))
    embed_collection(_opts(collection, tmp_path / "idx", tiny_models, name="c"))
    other = _opts(collection, tmp_path / "idx", (tiny_models[0], str(tmp_path / "other-dino")), name="c")
    with pytest.raises(EncoderMismatchError, match="was built with --dino-model .* not .*other-dino"):
        embed_collection(other)


def test_an_indexes_folder_that_cannot_be_written_is_said_in_one_line(tmp_path, collection, tiny_models):
    from helpers import unwritable_folders
    from typer.testing import CliRunner

    from vhmine.cli import app

    clip, dino = tiny_models
    for folder in unwritable_folders(tmp_path):
        r = CliRunner().invoke(
            app,
            [
                "embed",
                str(collection),
                "--name",
                "c",
                "--indexes",
                str(folder),
                "--clip-model",
                clip,
                "--dino-model",
                dino,
                "--device",
                "cpu",
                "--workers",
                "0",
            ],
        )
        assert r.exit_code == 2, (folder, r.output, r.exception)
        (line,) = r.output.strip().splitlines()
        assert line.startswith(f"error: --indexes: cannot write in {folder} (") and line.endswith(
            "or fix its permissions"
        )


def test_missing_half_written_and_corrupt_indexes_are_refused(tmp_path, collection, tiny_models):
    with pytest.raises(IndexMissingError, match="no index named 'c'.*vhmine embed"):
        open_index(tmp_path / "idx", "c")
    embed_collection(_opts(collection, tmp_path / "idx", tiny_models, name="c"))
    folder = tmp_path / "idx" / "c"
    manifest = (folder / "manifest.json").read_text()
    (folder / "manifest.json").unlink()
    with pytest.raises(IndexCorruptError, match="half-written.*Run the same `vhmine embed` command again"):
        open_index(tmp_path / "idx", "c")
    (folder / "manifest.json").write_text(manifest)
    data = (folder / "clip.faiss").read_bytes()
    (folder / "clip.faiss").write_bytes(data[:-100])
    with pytest.raises(IndexCorruptError, match="clip.faiss has .* bytes, the manifest says"):
        open_index(tmp_path / "idx", "c")


@pytest.mark.slow
def test_killed_job_resumes_to_the_same_rows(tmp_path, tiny_models):
    """SIGKILL a real `vhmine embed` once some shards are done; the rerun equals an uninterrupted run."""
    rng = np.random.default_rng(0)
    images = tmp_path / "imgs"
    images.mkdir()
    for k in range(48):  # noisy PNGs decode slowly enough for the kill to land mid-job
        Image.fromarray(rng.integers(0, 255, (384, 384, 3), dtype=np.uint8)).save(images / f"im{k:02d}.png")
    shutil.copy(images / "im03.png", images / "im47-copy.png")
    clip, dino = tiny_models
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}

    def cmd(indexes):
        return [
            sys.executable,
            "-m",
            "vhmine.cli",
            "embed",
            str(images),
            "--name",
            "r",
            "--indexes",
            str(indexes),
            "--clip-model",
            clip,
            "--dino-model",
            dino,
            "--batch-size",
            "2",
            "--shard-size",
            "4",
            "--workers",
            "0",
        ]

    proc = subprocess.Popen(cmd(tmp_path / "a"), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shards = tmp_path / "a" / "r" / "work" / "shards"
    deadline = time.time() + 120
    while time.time() < deadline and len(list(shards.glob("*.parquet"))) < 2 and proc.poll() is None:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_at_kill = len(list(shards.glob("part-*.parquet")))
    assert 2 <= done_at_kill < 13, "the job must have been killed part-way"
    assert not (tmp_path / "a" / "r" / "manifest.json").exists()
    with pytest.raises(IndexCorruptError, match="half-written"):
        open_index(tmp_path / "a", "r")
    subprocess.run(cmd(tmp_path / "a"), env=env, check=True, capture_output=True)
    subprocess.run(cmd(tmp_path / "b"), env=env, check=True, capture_output=True)
    resumed, straight = open_index(tmp_path / "a", "r"), open_index(tmp_path / "b", "r")
    pd.testing.assert_frame_equal(resumed.images, straight.images)
    assert len(resumed.images) == 48 and resumed.images["image_id"].is_unique
    assert np.allclose(resumed.clip, straight.clip, atol=1e-5) and np.allclose(resumed.dino, straight.dino, atol=1e-5)
    assert resumed.manifest["counts"] == straight.manifest["counts"]


def _holds_flock(pid: int) -> bool:
    return any(
        "FLOCK" in line.split() and str(pid) in line.split() for line in Path("/proc/locks").read_text().splitlines()
    )


@pytest.mark.slow
def test_two_embed_processes_on_one_index_never_interleave(tmp_path, collection, tiny_models):
    """A real `vhmine embed` holds the index's lock (stopped with SIGSTOP while it does, so the overlap is certain);
    a second real one on the same index is refused in one line naming the first, and writes nothing; once the
    first is done, the second finds the index complete."""
    clip, dino = tiny_models
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    cmd = [
        sys.executable,
        "-m",
        "vhmine.cli",
        "embed",
        str(collection),
        "--name",
        "c",
        "--indexes",
        str(tmp_path / "idx"),
        "--clip-model",
        clip,
        "--dino-model",
        dino,
        "--device",
        "cpu",
        "--workers",
        "0",
        "--shard-size",
        "2",
    ]
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        lock = tmp_path / "idx" / "c" / "work" / "lock"

        def holds_and_said() -> bool:  # the flock, and its id written in the file (a moment after: note_holder)
            return _holds_flock(first.pid) and lock.is_file() and lock.read_text().strip() == str(first.pid)

        while not holds_and_said() and first.poll() is None and time.time() < deadline:
            time.sleep(0.002)
        os.kill(first.pid, signal.SIGSTOP)
        assert first.poll() is None and _holds_flock(first.pid), "the first job must hold the lock"
        work = tmp_path / "idx" / "c" / "work"
        before = sorted(p.relative_to(work).as_posix() for p in work.rglob("*"))
        second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stderr
        assert second.stderr.strip().splitlines()[-1] == (
            f"error: another `vhmine embed` (process {first.pid}) is running on index 'c' ({tmp_path / 'idx' / 'c'}); "
            "nothing was written: wait for it to finish, then run this command again"
        )
        assert "Traceback" not in second.stderr
        assert sorted(p.relative_to(work).as_posix() for p in work.rglob("*")) == before
    finally:
        os.kill(first.pid, signal.SIGCONT)
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "(0 files read in this run" in again.stdout, again.stderr
    idx = open_index(tmp_path / "idx", "c")
    assert idx.images["image_id"].is_unique and len(idx.clip) == len(idx.images)


def test_rerun_rebuilds_a_damaged_index_from_its_shards(tmp_path, collection, tiny_models):
    """open_index tells the user to rerun `vhmine embed`; that rerun must repair, not report 'up to date'."""
    opts = _opts(collection, tmp_path / "idx", tiny_models, name="c")
    embed_collection(opts)
    before = open_index(tmp_path / "idx", "c")
    folder = tmp_path / "idx" / "c"
    (folder / "clip.faiss").write_bytes((folder / "clip.faiss").read_bytes()[:-100])
    with pytest.raises(IndexCorruptError, match="rerun `vhmine embed` to rebuild it"):
        open_index(tmp_path / "idx", "c")
    res = embed_collection(opts)
    assert res.embedded_now == 0
    after = open_index(tmp_path / "idx", "c")
    pd.testing.assert_frame_equal(after.images, before.images)
    assert np.array_equal(after.clip, before.clip) and np.array_equal(after.dino, before.dino)
    # an index from a newer vhmine is refused, not rewritten in the old format
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "format_version": 99}))
    with pytest.raises(IndexCorruptError, match="newer vhmine"):
        embed_collection(opts)
    assert json.loads((folder / "manifest.json").read_text())["format_version"] == 99


def test_shard_files_are_closed_before_they_are_renamed(tmp_path):
    import warnings

    from vhmine.embed.work import write_shard as _write_shard

    row = {
        "path": "a.png",
        "status": "ok",
        "reason": "",
        "sha256": "ab" * 32,
        "width": 1,
        "height": 1,
        "duplicate_of": None,
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _write_shard(tmp_path, 0, [row], [np.ones(4, np.float32)], [np.ones(3, np.float32)], (4, 3))
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert np.load(tmp_path / "shards" / "part-00000.clip.npy").shape == (1, 4)


def test_embed_rerun_reembeds_a_file_changed_in_place_and_drops_a_deleted_one(tmp_path, photos_dir, tiny_models):
    photos = copy_photos(
        tmp_path / "photos", photos_dir, names=("astronaut", "cat", "chelsea", "coffee", "rocket", "horse")
    )
    opts = embed_options(photos, tmp_path / "idx", tiny_models, name="c")
    embed_collection(opts)
    before = open_index(tmp_path / "idx", "c")
    old = {p: sha_of(photos / p) for p in ("coffee.png", "rocket.png")}
    rocket = (photos / "rocket.png").read_bytes()
    PILImage.fromarray(np.full((40, 50, 3), 200, np.uint8)).save(photos / "coffee.png")  # same name, new picture
    (photos / "rocket.png").unlink()
    res = embed_collection(opts)
    assert res.embedded_now == 1  # only the changed file is read again
    after = open_index(tmp_path / "idx", "c")
    rows = after.images.set_index("path")
    assert rows.loc["coffee.png", "sha256"] == sha_of(photos / "coffee.png")
    assert old["coffee.png"] not in set(after.images["sha256"])  # the old row left the index
    assert "rocket.png" not in rows.index and old["rocket.png"] not in set(after.images["sha256"])
    assert len(after.images) == len(before.images) - 1 == after.clip.shape[0] == after.dino.shape[0]
    removed = {(r["path"], r["reason"]): r for r in after.manifest["removed"]}
    assert set(removed) == {("coffee.png", "changed"), ("rocket.png", "deleted")}
    assert removed[("rocket.png", "deleted")]["sha256"] == old["rocket.png"]
    assert removed[("rocket.png", "deleted")]["image_id"] == old["rocket.png"][:16]
    assert removed[("coffee.png", "changed")]["sha256"] == old["coffee.png"]
    assert after.manifest["counts"]["files"] == 5
    # the index equals a fresh embed of the folder as it is now, row for row
    fresh = embed_collection(embed_options(photos, tmp_path / "fresh", tiny_models, name="c"))
    assert fresh.images == len(after.images)
    straight = open_index(tmp_path / "fresh", "c")
    by_sha = {s: k for k, s in enumerate(straight.images["sha256"])}
    order = [by_sha[s] for s in after.images["sha256"]]
    assert np.allclose(after.clip, straight.clip[order], atol=1e-5)
    assert np.allclose(after.dino, straight.dino[order], atol=1e-5)
    # nothing changed since: the rerun is a no-op; the deleted file coming back returns it, unembedded
    assert embed_collection(opts).embedded_now == 0
    assert open_index(tmp_path / "idx", "c").manifest["removed"] == after.manifest["removed"]
    (photos / "rocket.png").write_bytes(rocket)
    assert embed_collection(opts).embedded_now == 0
    back = open_index(tmp_path / "idx", "c")
    assert old["rocket.png"] in set(back.images["sha256"]) and len(back.images) == len(before.images)
    assert [r["path"] for r in back.manifest["removed"]] == ["coffee.png"]


def test_an_image_keeps_its_vectors_when_only_its_duplicate_copy_is_left(tmp_path, photos_dir, tiny_models):
    photos = copy_photos(tmp_path / "photos", photos_dir)
    opts = embed_options(photos, tmp_path / "idx", tiny_models, name="c")
    embed_collection(opts)
    before = open_index(tmp_path / "idx", "c").images.set_index("path")
    cat = before.loc["cat.png"]
    assert list(cat["duplicate_paths"]) == ["chelsea.png"]
    (photos / "cat.png").unlink()  # the copy that was embedded goes; chelsea.png holds the same bytes
    embed_collection(opts)
    after = open_index(tmp_path / "idx", "c")
    rows = after.images.set_index("path")
    assert (
        rows.loc["chelsea.png", "image_id"] == cat["image_id"] and len(rows.loc["chelsea.png", "duplicate_paths"]) == 0
    )
    k_new = list(after.images["path"]).index("chelsea.png")
    assert len(after.images) == len(before)
    assert after.manifest["removed"] == [
        {"path": "cat.png", "sha256": cat["sha256"], "image_id": cat["image_id"], "reason": "deleted"}
    ]
    assert after.manifest["duplicates"] == []
    fresh = embed_collection(embed_options(photos, tmp_path / "fresh", tiny_models, name="c"))
    assert fresh.images == len(after.images)
    straight = open_index(tmp_path / "fresh", "c")
    k_straight = list(straight.images["path"]).index("chelsea.png")
    assert np.allclose(after.clip[k_new], straight.clip[k_straight], atol=1e-5)


def test_an_embed_whose_encoder_does_not_load_leaves_no_index_and_the_fixed_command_works(
    tmp_path, photos_dir, tiny_models
):
    photos = copy_photos(tmp_path / "photos", photos_dir)
    idx = tmp_path / "idx"
    clip, dino = tiny_models

    def embed(clip_model):
        return CliRunner().invoke(
            app,
            [
                "embed",
                str(photos),
                "--name",
                "p",
                "--indexes",
                str(idx),
                "--clip-model",
                clip_model,
                "--dino-model",
                dino,
                "--workers",
                "0",
                "--shard-size",
                "2",
            ],
        )

    r = embed(f"local-dir:{tmp_path / 'no-such-model'}")
    assert r.exit_code == 2 and "no-such-model" in r.output, r.output
    assert not (idx / "p").exists()  # nothing half-written for `mine` or a listing to find
    r = CliRunner().invoke(app, ["mine", "--indexes", str(idx), "--out", str(tmp_path / "run")])
    assert r.exit_code == 2 and "no index under" in r.output and "vhmine embed" in r.output, r.output
    r = embed(clip)  # the corrected command
    assert r.exit_code == 0, r.output
    assert len(open_index(idx, "p").images) == 3
    # it ends by naming the next command (after the duplicates line), which runs as written
    last = r.output.strip().splitlines()[-1]
    assert last == f"next: vhmine mine --index p --indexes {idx}", r.output
    r = CliRunner().invoke(
        app,
        shlex.split(last.removeprefix("next: vhmine "))
        + ["--out", str(tmp_path / "run"), "--clip", "-1", "--dino", "1"],
    )
    assert r.exit_code == 0, r.output


def test_a_job_stopped_before_it_embedded_anything_starts_clean_and_is_never_picked(tmp_path, photos_dir, tiny_models):
    """A job killed while its models loaded leaves work/job.json (with the encoders asked for) and no shard."""
    from vhmine.errors import EncoderError
    from vhmine.index import default_index_name

    photos = copy_photos(tmp_path / "photos", photos_dir)
    idx = tmp_path / "idx"
    (idx / "p").mkdir(parents=True)  # the folder was there before (made by the killed job): it stays
    with pytest.raises(EncoderError):
        embed_collection(embed_options(photos, idx, (f"local-dir:{tmp_path / 'nope'}", tiny_models[1]), name="p"))
    assert (idx / "p" / "work" / "job.json").is_file()
    with pytest.raises(
        IndexMissingError,
        match=r"no finished index under .*: p did not finish embedding; rerun the same `vhmine embed`",
    ):
        default_index_name(idx, None)
    embed_collection(embed_options(photos, tmp_path / "idx", tiny_models, name="good"))
    assert default_index_name(idx, None) == "good"  # the unfinished one is no candidate
    res = embed_collection(embed_options(photos, idx, tiny_models, name="p"))  # other encoders: starts clean
    assert res.images == 3
    job = json.loads((idx / "p" / "work" / "job.json").read_text())
    assert job["clip_model"] == tiny_models[0]
    with pytest.raises(IndexMissingError, match="2 indexes"):
        default_index_name(idx, None)
    # a folder of the user's own under the indexes is never taken for an index
    (idx / "notes").mkdir()
    (idx / "notes" / "todo.txt").write_text("x")
    with pytest.raises(InputError, match="is not an index that `vhmine embed` wrote"):
        embed_collection(embed_options(photos, idx, tiny_models, name="notes"))
    assert (idx / "notes" / "todo.txt").read_text() == "x"


def test_a_collection_moved_as_a_whole_is_found_at_its_new_place_after_a_rerun(tmp_path, photos_dir, tiny_models):
    old = copy_photos(tmp_path / "old", photos_dir)
    embed_collection(embed_options(old, tmp_path / "indexes", tiny_models, name="c"))
    before = open_index(tmp_path / "indexes", "c", load_vectors=False)
    new = tmp_path / "moved"
    old.rename(new)
    res = embed_collection(embed_options(new, tmp_path / "indexes", tiny_models, name="c"))
    assert res.embedded_now == 0  # same paths, same content: nothing is embedded again
    after = open_index(tmp_path / "indexes", "c", load_vectors=False)
    assert list(after.images["sha256"]) == list(before.images["sha256"])
    assert all(Path(p).is_file() and Path(p).is_relative_to(new) for p in after.abs_paths())


@pytest.mark.slow
def test_ctrl_c_says_how_many_shards_are_kept_and_the_same_command_resumes(tmp_path, tiny_models):
    rng = np.random.default_rng(1)
    images = tmp_path / "imgs"
    images.mkdir()
    for k in range(48):
        Image.fromarray(rng.integers(0, 255, (384, 384, 3), dtype=np.uint8)).save(images / f"im{k:02d}.png")
    clip, dino = tiny_models
    cmd = [
        sys.executable,
        "-m",
        "vhmine.cli",
        "embed",
        "imgs",
        "--name",
        "r",
        "--indexes",
        "idx",
        "--clip-model",
        clip,
        "--dino-model",
        dino,
        "--batch-size",
        "2",
        "--shard-size",
        "4",
        "--workers",
        "0",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    shards = tmp_path / "idx" / "r" / "work" / "shards"
    interrupt_when(proc, lambda: len(list(shards.glob("part-*.parquet"))) >= 2)
    out, err = proc.communicate(timeout=120)
    kept = len(list(shards.glob("part-*.parquet")))
    assert proc.returncode == 130, err
    assert f"interrupted: {kept} of 12 shards kept in idx/r/work; run the same command to resume" in err.splitlines()
    assert "Traceback" not in err and "Aborted" not in err and 2 <= kept < 12
    assert f"loading the encoders (CLIP {clip}, DINOv2 {dino}) for 48 images in 12 shards" in err  # before any bar
    r = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"({48 - 4 * kept} files read in this run" in r.stdout  # only the shards not kept
    assert len(open_index(tmp_path / "idx", "r").images) == 48


def test_a_grown_embed_says_what_was_new_changed_and_deleted_and_its_hint_quotes_paths_with_spaces(
    tmp_path, photos_dir, tiny_models, monkeypatch
):
    """Issue 33: after growth the summary says how many files were new, changed and deleted, not only how many
    were read; and its `next:` command, for an index named after a folder with a space and kept in one, runs as
    printed."""
    monkeypatch.chdir(tmp_path)
    photos = copy_photos(tmp_path / "My Photos", photos_dir, names=("astronaut", "cat", "coffee", "rocket"))
    clip, dino = tiny_models
    cmd = ["embed", str(photos), "--indexes", "my indexes", "--clip-model", clip, "--dino-model", dino]
    cmd += ["--workers", "0", "--shard-size", "2"]
    r = CliRunner().invoke(app, cmd)
    assert r.exit_code == 0, r.output
    assert "(5 files read in this run," in r.output and " new, " not in r.output  # a first embed: all new
    shutil.copy(photos_dir / "horse.png", photos / "horse.png")
    PILImage.fromarray(np.full((40, 50, 3), 200, np.uint8)).save(photos / "coffee.png")  # same name, new picture
    (photos / "rocket.png").unlink()
    r = CliRunner().invoke(app, cmd)
    assert r.exit_code == 0, r.output
    assert "(2 files read in this run: 1 new, 1 changed; 1 deleted since the last embed, " in r.output, r.output
    last = r.output.strip().splitlines()[-1]
    assert last == "next: vhmine mine --index 'My Photos' --indexes 'my indexes'", r.output
    r = CliRunner().invoke(app, shlex.split(last.removeprefix("next: vhmine ")))
    assert r.exit_code == 0, r.output


def test_embed_keeps_each_rows_digest_so_the_next_mine_of_the_grown_index_hashes_none(
    tmp_path, photos_dir, tiny_models
):
    from vhmine.index import ROW_DIGESTS, row_digests
    from vhmine.mine.grow import index_digests

    photos = copy_photos(tmp_path / "photos", photos_dir, names=("astronaut", "cat", "coffee", "rocket"))
    opts = embed_options(photos, tmp_path / "idx", tiny_models, name="c")
    rows = []
    for grown in (False, True):
        if grown:  # a new file: its row appended, the old rows' digests read back from the kept file
            PILImage.fromarray(np.full((40, 50, 3), 90, np.uint8)).save(photos / "new.png")
        embed_collection(opts)
        idx = open_index(tmp_path / "idx", "c")
        with np.load(tmp_path / "idx" / "c" / ROW_DIGESTS) as z:
            kept = z["digests"]
        rows.append(len(idx.images))
        assert len(kept) == rows[-1] == rows[0] + grown
        assert np.array_equal(kept, row_digests(idx.clip, idx.dino))
        st: dict = {}
        assert np.array_equal(index_digests(idx, stats=st), kept) and st["rows_digested"] == 0  # what mine takes
        assert st["rows_checked"] == 0  # the vector files as the embed checked and recorded them: no byte read
