"""`vhmine mine --against`: two indexes are compared by what their encoders are (vhmine.index.comparable), not by
how their specs were typed: real tiny indexes embedded with the tiny encoders under two spellings of one folder,
in two precisions, from a copy of the folder and from the folder with its weights replaced."""

import json
import shutil

import pytest
from helpers import copy_photos, embed_options
from typer.testing import CliRunner

from vhmine import api
from vhmine.errors import InputError


@pytest.fixture(scope="module")
def indexes(tmp_path_factory, tiny_models, photos_dir):
    """work/idx/: `rel` (the encoders' folders as relative paths, fp32), `abs` (the same folders as absolute paths,
    fp32), `bf16` (absolute, bf16), `copy` (CLIP from a copy of its folder, fp32), `replaced` (that copy with
    other weights written into it, fp32), `old` (as `rel`, its manifest without the checksums, as an index
    written before they were recorded)."""
    from vhmine.embed import tiny
    from vhmine.embed.job import embed_collection

    work = tmp_path_factory.mktemp("against-encoders")
    clip_dir = tiny_models[0].removeprefix("local-dir:")
    shutil.copytree(clip_dir, work / "models" / "clip")
    shutil.copytree(tiny_models[1], work / "models" / "dino")
    shutil.copytree(clip_dir, work / "elsewhere" / "clip")
    a = copy_photos(work / "photos-a", photos_dir, names=("astronaut", "cat", "coffee"))
    b = copy_photos(work / "photos-b", photos_dir, names=("cat", "rocket", "horse"))
    absolute = (f"local-dir:{work / 'models' / 'clip'}", str(work / "models" / "dino"))
    copied = (f"local-dir:{work / 'elsewhere' / 'clip'}", absolute[1])

    def embed(name, photos, models, precision="fp32"):
        embed_collection(embed_options(photos, work / "idx", models, name=name, precision=precision))

    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(work)  # the relative spelling, as typed in the folder above models/
        embed("rel", a, ("local-dir:models/clip", "models/dino"))
        embed("old", a, ("local-dir:models/clip", "models/dino"))
    embed("abs", b, absolute)
    embed("bf16", b, absolute, precision="bf16")
    embed("copy", b, copied)
    tiny.build_clip(work / "other", seed=1)
    shutil.copy(work / "other" / "open_clip_model.safetensors", work / "elsewhere" / "clip")
    embed("replaced", b, copied)
    manifest = work / "idx" / "old" / "manifest.json"
    m = json.loads(manifest.read_text())
    for enc in m["encoders"].values():
        del enc["weights_sha256"]
    manifest.write_text(json.dumps(m, indent=2))
    return work


PAIRS = 8  # every pair of 3 x 3 images (--clip -1 --dino 1) but cat with itself (in both)


def mine(indexes, tmp_path, a, b):
    return api.mine(
        a, against=b, indexes=indexes / "idx", out=tmp_path / "run", clip=-1.0, dino=1.0, progress=False, gallery_size=0
    )


def refusal(indexes, tmp_path, a, b) -> str:
    with pytest.raises(InputError) as err:
        mine(indexes, tmp_path, a, b)
    assert not (tmp_path / "run").exists()
    msg = str(err.value)
    assert "\n" not in msg and f"index {a!r} and index {b!r}" in msg, msg
    return msg


def test_one_encoder_folder_typed_relative_and_absolute_is_one_encoder(indexes, tmp_path):
    rel = json.loads((indexes / "idx" / "rel" / "manifest.json").read_text())["encoders"]
    assert rel["clip"]["spec"] == "local-dir:models/clip" and rel["dino"]["spec"] == "models/dino"
    assert set(rel["clip"]["weights_sha256"]) == {"open_clip_model.safetensors", "open_clip_config.json"}
    res = mine(indexes, tmp_path, "rel", "abs")
    assert res.written == PAIRS


def test_a_copy_of_the_folder_is_the_same_encoder_and_replaced_weights_are_another(indexes, tmp_path):
    assert mine(indexes, tmp_path, "abs", "copy").written == 3  # one collection twice: its 3 pairs, each once
    shutil.rmtree(tmp_path / "run")
    msg = refusal(indexes, tmp_path, "copy", "replaced")
    spec = f"local-dir:{indexes / 'elsewhere' / 'clip'}"
    # one spec, one folder: the weights' checksums tell them apart
    assert f"were embedded with other clip encoders ({spec} with weights sha256 " in msg, msg
    assert "dino" not in msg.split(":")[0]


def test_an_index_from_before_the_checksums_is_known_by_its_resolved_folder(indexes, tmp_path):
    assert mine(indexes, tmp_path, "old", "abs").written == PAIRS
    shutil.rmtree(tmp_path / "run")
    msg = refusal(indexes, tmp_path, "old", "copy")  # another folder, and no checksum to say it holds the same
    assert "other clip encoders (local-dir:models/clip and local-dir:" in msg, msg


def test_bf16_against_fp32_is_refused_naming_the_precision_in_one_line(indexes, tmp_path):
    from vhmine.cli import app

    msg = refusal(indexes, tmp_path, "bf16", "abs")
    assert "differ in clip and dino precision (bf16 and fp32)" in msg and "other" not in msg.split(":")[0], msg
    assert "vhmine embed --precision fp32" in msg
    r = CliRunner().invoke(
        app, ["mine", "--index", "rel", "--against", "bf16", "--indexes", str(indexes / "idx"), "--out", "x"]
    )
    assert r.exit_code == 2 and "index 'rel' and index 'bf16' differ in clip and dino precision (fp32 and bf16)" in (
        " ".join(r.output.split())
    ), r.output
