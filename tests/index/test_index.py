"""vhmine.index: later stages find an image by its content (sha256), so a moved collection still serves the app, export
and seed."""

import hashlib
import json
import os

import numpy as np
import pandas as pd
import pytest
from helpers import embed_options, sha_of
from PIL import Image as PILImage

from vhmine import curate as C
from vhmine.embed.job import embed_collection
from vhmine.errors import InputError, StoreError
from vhmine.export.job import ExportOptions, export_benchmark


def test_app_export_and_seed_find_moved_images_by_content(mined, tiny_models):
    tmp, photos, store = mined
    from vhmine.store import Image

    with store.session(write=False) as s:
        recorded = {img.id: (img.sha256, img.path) for img in s.query(Image)}
    assert len(recorded) == 3  # astronaut, cat (= chelsea), coffee
    cat_id = sha_of(photos / "cat.png")[:16]
    astro_id = sha_of(photos / "astronaut.png")[:16]
    assert recorded[cat_id][1].endswith("cat.png")
    # the embedded copy of the cat goes (chelsea.png is the same bytes); the astronaut moves
    (photos / "cat.png").unlink()
    assert C.image_bytes(store, cat_id) == (photos / "chelsea.png").read_bytes()  # through the index's duplicate list
    (photos / "sub").mkdir()
    os.rename(photos / "astronaut.png", photos / "sub" / "astronaut-moved.png")
    embed_collection(embed_options(photos, tmp / "idx", tiny_models, name="p"))  # the index follows the move
    for iid, (sha, _) in recorded.items():
        assert hashlib.sha256(C.image_bytes(store, iid)).hexdigest() == sha
    assert C.image_file(store, astro_id) == photos / "sub" / "astronaut-moved.png"
    # export writes the right pictures
    res = export_benchmark(store, ExportOptions(out=tmp / "bench", format="hf", kind="oeq"))
    assert sum(c["OEQ"] for c in res.counts.values()) > 0
    table = pd.read_parquet(tmp / "bench" / "data" / "oeq" / "test-00000-of-00001.parquet")
    for image_id, image in zip(table["image_id"], table["image"]):
        assert hashlib.sha256(image["bytes"]).hexdigest() == recorded[image_id][0]
    # seeding the run mined before the move again finds both images and records where they are now
    from vhmine.seed import seed_pairs

    seed_pairs(store, tmp / "runs" / "r" / "pairs.parquet", per_mode=3, modes=["counting"])
    with store.session(write=False) as s:
        assert s.get(Image, astro_id).path == str((photos / "sub" / "astronaut-moved.png").resolve())
        assert s.get(Image, cat_id).path == str((photos / "chelsea.png").resolve())
    # a file whose content changed (and no copy of the old content anywhere) is never served as that image
    coffee = photos / "coffee.png"
    coffee_id = sha_of(coffee)[:16]
    PILImage.fromarray(np.full((30, 30, 3), 9, np.uint8)).save(coffee)
    embed_collection(embed_options(photos, tmp / "idx", tiny_models, name="p"))
    with pytest.raises(StoreError, match="no longer matches its recorded sha256: the file was changed; restore it"):
        C.image_bytes(store, coffee_id)
    left = export_benchmark(store, ExportOptions(out=tmp / "bench2", format="hf", kind="oeq"))  # without its items
    assert "changed since it was curated" in left.summary()
    exported = json.loads((tmp / "bench2" / "manifest.json").read_text())["instances"].values()
    assert exported and coffee_id not in {i["image_id"] for i in exported}
    with pytest.raises(InputError, match=r"coffee\.png no longer holds image .*restore it, or run `vhmine embed`"):
        seed_pairs(store, tmp / "runs" / "r" / "pairs.parquet", per_mode=3, modes=["counting"])


def test_a_folder_that_never_was_an_index_is_not_called_half_written(tmp_path):
    """`vhmine mine --index FOLDER` on a folder of photos said it "is half-written ... run the same vhmine embed
    command again"; an index left by a stopped embed (its work/ folder is there) still says that."""
    from helpers import make_index, unit_rows
    from typer.testing import CliRunner

    from vhmine.cli import app

    rng = np.random.default_rng(0)
    make_index(
        tmp_path / "idx",
        "syn",
        unit_rows(rng.normal(size=(4, 4))),
        unit_rows(rng.normal(size=(4, 3))),
        root=tmp_path / "imgs",
    )
    photos = tmp_path / "photos"
    photos.mkdir()
    PILImage.new("RGB", (8, 8)).save(photos / "a.png")
    r = CliRunner().invoke(app, ["mine", "--index", str(photos), "--indexes", str(tmp_path / "idx")])
    assert r.exit_code == 2
    assert r.output.strip() == (
        f"error: {photos} is not an index: it has no manifest.json, nor the work/ folder a stopped `vhmine embed` "
        f"leaves. --index names an index under {tmp_path / 'idx'}/ (there are: syn); build one with "
        "`vhmine embed IMAGES --name NAME`"
    )
    (photos / "work").mkdir()  # what a stopped embed leaves
    r = CliRunner().invoke(app, ["mine", "--index", str(photos), "--indexes", str(tmp_path / "idx")])
    assert r.exit_code == 2 and "is half-written (no manifest.json): its embed job did not finish" in r.output
