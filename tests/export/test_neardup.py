"""Near duplicates and contamination (vhmine.export.neardup through `vhmine export --near-dups / --against`),
with tiny real encoders on scikit-image photos: an exported generated image is a resized, JPEG
re-encoded copy of an exported mined photo, and the reference index (built by `vhmine embed`) holds
another encoding of the same photo. Tiny random encoders crowd every cosine near 1 (unrelated photos
reach 0.995 here), so the test's thresholds are 0.999; the copies score above 0.9997."""

import hashlib
import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import interrupt_when, write_pairs, write_photos  # noqa: E402

TH = ["--dup-clip", "0.999", "--dup-dino", "0.999"]


def _embed(runner, folder, name, indexes, tiny_models):
    from vhmine.cli import app

    clip, dino = tiny_models
    res = runner.invoke(
        app,
        [
            "embed",
            str(folder),
            "--name",
            name,
            "--clip-model",
            clip,
            "--dino-model",
            dino,
            "--indexes",
            str(indexes),
            "--device",
            "cpu",
            "--workers",
            "0",
        ],
    )
    assert res.exit_code == 0, res.output
    return indexes / name


def _setup(tmp_path, tiny_models):
    """A store whose mined pairs come from index `home` (astronaut, coffee, rocket), a generated image that
    is a copy of astronaut, and a reference index `ref` with astronaut (full size, JPEG) and unrelated photos."""
    import skimage.data
    from PIL import Image
    from typer.testing import CliRunner

    from vhmine import curate as C
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    runner = CliRunner()
    indexes = tmp_path / "indexes"
    photos = write_photos(tmp_path / "photos", ("astronaut", "coffee", "rocket"))
    home = _embed(runner, tmp_path / "photos", "home", indexes, tiny_models)
    ref_dir = tmp_path / "ref"
    write_photos(ref_dir, ("camera", "moon", "page", "clock", "horse"))
    Image.fromarray(skimage.data.astronaut()).save(ref_dir / "astronaut-big.jpg", quality=90)
    _embed(runner, ref_dir, "ref", indexes, tiny_models)
    gen_dir = tmp_path / "generated"
    gen_dir.mkdir()
    Image.open(photos[0]).convert("RGB").resize((72, 72)).save(gen_dir / "astronaut-copy.jpg", quality=80)

    pairs = write_pairs(tmp_path / "runs" / "t", photos)
    run_json = pairs.parent / "run.json"  # as `vhmine mine` writes it: the index the pairs came from
    meta = json.loads(run_json.read_text())
    meta.update(
        index="home",
        index_folder=str(home.resolve()),
        encoders=json.loads((home / "manifest.json").read_text())["encoders"],
    )
    run_json.write_text(json.dumps(meta))
    store = open_store(tmp_path / "store.db")
    seed_pairs(store, pairs, per_mode=1, modes=["counting", "color"])
    C.add_worker(store, "alice")
    for mode, tpl, slots, a_ans, b_ans in (
        ("counting", "counting.how_many", {"object": "cats"}, "3", "2"),
        ("color", "color.what_color", {"object": "cup"}, "red", "blue"),
    ):
        item = C.next_item(store, "alice", mode)
        a, b = (v.id for v in item.images)
        C.save_annotation(store, "alice", item.task_id, C.Annotation(tpl, slots, answers={a: a_ans, b: b_ans}))
    C.work.add_generation(
        store, gen_dir / "astronaut-copy.jpg", "counting", "an astronaut", backend="openai", model="dall-e-3"
    )
    item = C.next_item(store, "alice", "counting")
    C.save_annotation(
        store,
        "alice",
        item.task_id,
        C.Annotation("counting.how_many", {"object": "flags"}, answers={item.images[0].id: "1"}),
    )
    ids = {p.stem: hashlib.sha256(p.read_bytes()).hexdigest()[:16] for p in photos + [gen_dir / "astronaut-copy.jpg"]}
    store.close()
    return indexes, ids


def _ids(entries):
    return sorted((e["a"]["image_id"], e["b"]["image_id"]) for e in entries)


def test_near_duplicates_within_against_reference_and_generated(tmp_path, tiny_models, monkeypatch):
    from typer.testing import CliRunner

    from vhmine.cli import app

    indexes, ids = _setup(tmp_path, tiny_models)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "bench"
    res = CliRunner().invoke(
        app,
        [
            "export",
            "--out",
            str(out),
            "--db",
            str(tmp_path / "store.db"),
            "--kind",
            "oeq",
            "--against",
            "ref",
            "--indexes",
            str(indexes),
            "--device",
            "cpu",
            *TH,
        ],
    )
    assert res.exit_code == 0, res.output
    assert "near duplicates: 1 pair(s) within the export, 2 against ref, 1 generated" in res.output
    nd = json.loads((out / "manifest.json").read_text())["near_duplicates"]
    assert nd["images_checked"] == 4
    # every decision says which encoders made it and with which thresholds
    enc = nd["decided_by"]["encoders"]
    assert enc["clip"]["spec"].startswith("local-dir:") and enc["dino"]["dim"] == 32
    assert nd["decided_by"]["encoders_from_index"] == "ref"
    # the three mined photos' vectors come from the indexes (home holds them, with ref's encoders and precision);
    # only the generated image is embedded, in that precision
    assert nd["decided_by"]["vectors"] == {"from_indexes": 3, "embedded": 1}
    assert nd["decided_by"]["precision"] == "fp32"
    assert nd["decided_by"]["thresholds"] == {
        "clip": 0.999,
        "dino": 0.999,
        "inclusive": True,
        "rule": "CLIP cosine >= clip AND DINOv2 cosine >= dino",
    }
    assert str(tmp_path) not in json.dumps(nd)  # public paths only (relative to the working folder)
    models = Path(tiny_models[0].partition(":")[2]).parent  # the tiny encoders live outside the working folder
    assert str(models) not in json.dumps(nd) and enc["clip"]["model"] == "local-dir:clip"
    assert not re.search(r'"(local-dir:)?/', json.dumps(nd))  # no absolute path in any field
    astro, copy = ids["astronaut"], ids["astronaut-copy"]
    # within the export: the copy and its original; coffee and rocket, unrelated, not listed
    assert _ids(nd["within_export"]) == [tuple(sorted((astro, copy)))]
    e = nd["within_export"][0]
    assert e["clip"] >= 0.999 and e["dino"] >= 0.999 and e["exact"] is False
    assert {e["a"]["source"], e["b"]["source"]} == {"mined", "generated"}
    # against the reference: both the photo and its copy near the reference's astronaut, nothing else
    big = nd["against_reference"][0]["b"]
    assert big["index"] == "ref" and big["path"] == "astronaut-big.jpg"
    assert _ids(nd["against_reference"]) == sorted([(astro, big["image_id"]), (copy, big["image_id"])])
    assert nd["reference"]["index"] == "ref" and nd["reference"]["images"] == 6
    # the generated image against the collection it came from (the mining run's index)
    assert nd["generated_checked_against"] == ["home"]
    assert [(g["a"]["image_id"], g["b"]["index"], g["b"]["image_id"]) for g in nd["generated_against_source"]] == [
        (copy, "home", astro)
    ]
    assert nd["generated_against_source"][0]["b"]["path"] == "astronaut.png"
    # the page shows them side by side, self-contained (thumbnails as data URLs)
    page = (out / "near_duplicates.html").read_text()
    assert page.count("<tr>") == 1 + 1 + 2 + 1 + 2  # header rows of the three tables, then 1 + 2 + 1 pairs
    assert page.count("data:image/jpeg;base64,") == 2 * 4
    assert copy in page and big["image_id"] in page and ids["coffee"] not in page and ids["rocket"] not in page
    assert 'src="http' not in page and "file:" not in page
    man = json.loads((out / "manifest.json").read_text())
    assert "near_duplicates.html" in man["files"]
    # the datasheet and croissant.json say the check ran, with what, and what it found; and the generated image
    sheet = man["datasheet"]
    assert sheet["near_duplicates"] == {
        "ran": True,
        "encoders": enc,
        "thresholds": nd["decided_by"]["thresholds"],
        "within_export": 1,
        "reference": "ref",
        "against_reference": 2,
        "generated_against_source": 1,
        "overruled": 0,
        "removed": 0,
    }
    assert sheet["collection"]["by_source"] == {"generated": 1, "mined": 3}
    assert [(g["backend"], g["model"], g["images"]) for g in sheet["generated"]] == [("openai", "dall-e-3", 1)]
    rai = json.loads((out / "croissant.json").read_text())
    pre = " ".join(rai["rai:dataPreprocessingProtocol"])
    assert "cosine >= 0.999): 1 pair(s) within the benchmark, 2 against reference ref, 1 generated image(s)" in pre
    assert "1 image(s) generated by dall-e-3 (openai)." in rai["rai:dataCollection"]
    assert "Generated images (text-to-image models)" in rai["rai:dataCollectionType"]


def test_near_dups_without_reference_uses_the_mining_index(tmp_path, tiny_models):
    from vhmine.export.job import ExportOptions, export_benchmark
    from vhmine.export.neardup import DupOptions
    from vhmine.store import open_store

    indexes, ids = _setup(tmp_path, tiny_models)
    with open_store(tmp_path / "store.db") as store:
        export_benchmark(
            store,
            ExportOptions(
                out=tmp_path / "b",
                format="vhtest",
                kind="oeq",
                near_dups=DupOptions(clip_min=0.999, dino_min=0.999, device="cpu"),
            ),
        )
    nd = json.loads((tmp_path / "b" / "manifest.json").read_text())["near_duplicates"]
    assert nd["decided_by"]["encoders_from_index"] == "home" and nd["reference"] is None
    assert _ids(nd["within_export"]) == [tuple(sorted((ids["astronaut"], ids["astronaut-copy"])))]
    assert nd["against_reference"] == []
    assert [(g["a"]["image_id"], g["b"]["image_id"]) for g in nd["generated_against_source"]] == [
        (ids["astronaut-copy"], ids["astronaut"])
    ]


def test_near_dups_needs_an_index_and_says_so(tmp_path):
    from helpers import make_ready_store

    from vhmine.errors import InputError
    from vhmine.export.job import ExportOptions, export_benchmark
    from vhmine.export.neardup import DupOptions

    store = make_ready_store(tmp_path)  # its run.json names no index
    try:
        export_benchmark(store, ExportOptions(out=tmp_path / "b", format="vhtest", near_dups=DupOptions(required=True)))
    except InputError as err:
        assert "pass --against INDEX" in str(err)
    else:
        raise AssertionError("no error")
    assert not (tmp_path / "b").exists()


def _export(tmp_path, out, *args):
    from typer.testing import CliRunner

    from vhmine.cli import app

    res = CliRunner().invoke(
        app,
        ["export", "--out", str(out), "--db", str(tmp_path / "store.db"), "--kind", "oeq", "--device", "cpu", *args],
    )
    assert res.exit_code == 0, res.output
    return json.loads((out / "manifest.json").read_text())["near_duplicates"], res.output


def test_near_dups_on_by_default_and_overruled_by_a_worker(tmp_path, tiny_models):
    """No --near-dups: the check runs with the mining index's encoders and stores each pair; a worker
    overrules one and the next export lists it as overruled (by a pseudonym); reinstating takes it back;
    when the index is gone the export goes on and says the check did not run, and why."""
    import shutil

    import pytest

    from vhmine import curate as C
    from vhmine.errors import FormError
    from vhmine.store import open_store

    indexes, ids = _setup(tmp_path, tiny_models)
    pair = tuple(sorted((ids["astronaut"], ids["astronaut-copy"])))
    nd, output = _export(tmp_path, tmp_path / "b1", *TH)
    assert nd["ran"] is True and nd["decided_by"]["encoders_from_index"] == "home"
    assert _ids(nd["within_export"]) == [pair] and nd["within_export"][0]["overruled"] is None
    assert nd["overruled"] == 0 and "near duplicates: 1 pair(s) within the export" in output
    dup_id = nd["within_export"][0]["id"]
    gen_id = nd["generated_against_source"][0]["id"]
    with open_store(tmp_path / "store.db") as store:
        seen = {d.id: d for d in C.work.near_duplicate_list(store, "alice")}
        assert set(seen) == {dup_id, gen_id}  # the store holds what the manifest lists, with what decided it
        d = seen[dup_id]
        assert (d.scope, tuple(sorted((d.a_image, d.b_image))), d.b_index) == ("within", pair, None)
        assert d.encoders["clip"]["spec"].startswith("local-dir:") and d.thresholds["clip"] == 0.999
        assert seen[gen_id].b_index == "home" and seen[gen_id].b_path.endswith("astronaut.png")
        with pytest.raises(FormError):
            C.work.overrule_near_duplicate(store, "alice", dup_id, "  ")
        C.work.overrule_near_duplicate(store, "alice", dup_id, "the copy is the generated counterpart; intended")
        assert [d.id for d in C.work.near_duplicate_list(store, "alice", include_overruled=False)] == [gen_id]

    nd, _ = _export(tmp_path, tmp_path / "b2", *TH)
    e = nd["within_export"][0]
    assert e["id"] == dup_id and nd["overruled"] == 1
    assert e["overruled"]["reason"] == "the copy is the generated counterpart; intended"
    assert e["overruled"]["by"].startswith("w-") and "alice" not in json.dumps(nd)  # a pseudonym by default
    assert nd["generated_against_source"][0]["overruled"] is None
    assert "by w-" in (tmp_path / "b2" / "near_duplicates.html").read_text()
    nd, _ = _export(tmp_path, tmp_path / "b3", *TH, "--with-provenance")
    assert nd["within_export"][0]["overruled"]["by"] == "alice"

    with open_store(tmp_path / "store.db") as store:
        C.work.reinstate_near_duplicate(store, "alice", dup_id)
    nd, _ = _export(tmp_path, tmp_path / "b4", *TH)
    assert nd["within_export"][0]["overruled"] is None and nd["overruled"] == 0

    nd, output = _export(tmp_path, tmp_path / "b5", "--no-near-dups")
    assert nd == {"ran": False, "reason": "turned off (--no-near-dups)"} and "NOT checked" in output
    assert not (tmp_path / "b5" / "near_duplicates.html").exists()

    shutil.rmtree(indexes / "home")  # the index the pairs were mined from is gone: said, not silent
    nd, output = _export(tmp_path, tmp_path / "b6", *TH)
    assert nd["ran"] is False and "its index cannot be read" in nd["reason"] and "run t" in nd["reason"]
    assert "near duplicates: NOT checked" in output


def test_near_dups_default_without_an_index_is_recorded_as_not_run(tmp_path):
    """A store from a hand-written pairs table has no index: the default check does not run, the export
    succeeds and its manifest says why; an explicit --near-dups is an error that says what to do."""
    from helpers import make_ready_store
    from typer.testing import CliRunner

    from vhmine.cli import app

    make_ready_store(tmp_path).close()
    db = str(tmp_path / "store.db")
    res = CliRunner().invoke(app, ["export", "--out", str(tmp_path / "b"), "--db", db])
    assert res.exit_code == 0, res.output
    nd = json.loads((tmp_path / "b" / "manifest.json").read_text())["near_duplicates"]
    assert nd["ran"] is False and "name no index" in nd["reason"] and "--against INDEX" in nd["reason"]
    assert "near duplicates: NOT checked" in res.output
    res = CliRunner().invoke(app, ["export", "--out", str(tmp_path / "c"), "--db", db, "--near-dups"])
    assert res.exit_code == 2 and "pass --against INDEX" in res.output and not (tmp_path / "c").exists()
    res = CliRunner().invoke(
        app, ["export", "--out", str(tmp_path / "c"), "--db", db, "--no-near-dups", "--against", "ref"]
    )
    assert res.exit_code == 2 and "pass one of them" in res.output


def test_flags_page_shows_near_duplicates_side_by_side_and_overrules(tmp_path, monkeypatch):
    """The app's Blind flags page lists the recorded pairs (both images, what decided) and a worker overrules
    one with a reason, then reinstates it."""
    import pytest

    pytest.importorskip("streamlit")
    from helpers import make_ready_store
    from streamlit.testing.v1 import AppTest

    from vhmine import curate as C

    store = make_ready_store(tmp_path)
    token = C.add_worker(store, "bob")
    a, b = sorted({r.image_id for r in C.ready_instances(store, "counting", "OEQ")})
    enc = {
        "clip": {"spec": "ViT-B-32:openai", "model": "ViT-B-32", "dim": 512},
        "dino": {"spec": "facebook/dinov2-small", "model": "dinov2-small", "dim": 384},
    }
    C.work.record_near_duplicates(
        store,
        [{"scope": "within", "a_image": a, "b_image": b, "clip": 0.97, "dino": 0.93, "exact": False}],
        encoders=enc,
        thresholds={"clip": 0.95, "dino": 0.9},
    )
    [d] = C.work.near_duplicate_list(store, "bob")
    monkeypatch.setenv("VHMINE_DB", f"sqlite:///{tmp_path / 'store.db'}")
    at = AppTest.from_file(
        str(Path(__file__).resolve().parents[2] / "vhmine" / "apps" / "curate.py"), default_timeout=60
    )
    at.run()
    at.text_input(key="token").input(token)
    at.button[0].click().run()
    at.sidebar.radio(key="page").set_value("Blind flags").run()
    assert not at.exception, at.exception
    assert "Near duplicates" in [h.value for h in at.subheader]
    captions = [re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", c.value) for c in at.caption]  # markdown escapes undone
    assert any("CLIP 0.9700, DINOv2 0.9300" in c and "ViT-B-32:openai" in c for c in captions)
    assert a in captions and b in captions and not any("unreadable" in c for c in captions)  # side by side
    at.button(key=f"ndov:{d.id}").click().run()
    assert any("say why the pair is not a problem" in re.sub(r"\\", "", e.value) for e in at.error)
    at.text_input(key=f"ndwhy:{d.id}").input("two different cats; the questions differ").run()
    at.button(key=f"ndov:{d.id}").click().run()
    [d] = C.work.near_duplicate_list(store, "bob")
    assert (d.overruled_by, d.overrule_reason) == ("bob", "two different cats; the questions differ")
    at.button(key=f"ndre:{d.id}").click().run()
    assert not C.work.near_duplicate_list(store, "bob")[0].overruled
    store.close()


@pytest.mark.slow
def test_the_check_shows_a_bar_and_ctrl_c_leaves_no_export(tmp_path, tiny_models):
    """A real `vhmine export` stopped by SIGINT (to its process group, as a terminal's Ctrl-C) while the
    near-duplicate check loads its encoders: one line, exit 130, no folder; the rerun shows the check's bar."""
    import subprocess

    _setup(tmp_path, tiny_models)
    cmd = [
        sys.executable,
        "-m",
        "vhmine.cli",
        "export",
        "--out",
        "benchmarks/b",
        "--db",
        "store.db",
        "--kind",
        "oeq",
        "--device",
        "cpu",
        "--indexes",
        "indexes",
    ]
    err_file = tmp_path / "stderr.txt"
    with open(err_file, "w") as err:
        proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        interrupt_when(
            proc, lambda: "near duplicates: loading encoders" in err_file.read_text(), said=err_file.read_text
        )
        assert proc.wait(timeout=60) == 130, err_file.read_text()
    said = err_file.read_text()
    assert (
        "interrupted: nothing written to benchmarks/b (an export is published whole, at the end; an earlier export "
        "there is as it was); run the same command to export again" in said
    )
    assert "Traceback" not in said
    assert not (tmp_path / "benchmarks" / "b").exists() and not list((tmp_path / "benchmarks").glob(".b.tmp-*"))
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    # (the bar counts the images embedded: the generated one; the three mined ones' vectors are the index's)
    assert re.search(r"near duplicates: embedding: 100%\|.*\| 1/1", r.stderr), r.stderr
    assert re.search(r"^near duplicates: \d+ pair\(s\) within the export", r.stdout, re.M), r.stdout


def test_the_check_takes_the_index_vectors_and_needs_no_encoder_files(tmp_path, photos_dir, tiny_models):
    """An export of mined images only: every vector comes from the index they were mined from, equal to what
    embedding the exported files gives; with the encoders' files gone the check still runs, to the same result."""
    import shutil

    import numpy as np
    from helpers import copy_photos, embed_options, ready_store_from_run

    from vhmine.embed.job import embed_collection
    from vhmine.export.dupvectors import embed_images
    from vhmine.export.job import ExportOptions, export_benchmark
    from vhmine.export.neardup import DupOptions
    from vhmine.index import open_index
    from vhmine.mine import MineOptions, mine_index

    models = tmp_path / "models"  # a copy of the tiny encoders, deleted below
    shutil.copytree(Path(tiny_models[0].partition(":")[2]).parent, models)
    specs = (f"local-dir:{models / 'clip'}", str(models / "dino"))
    photos = copy_photos(tmp_path / "photos", photos_dir, ("astronaut", "cat", "coffee", "camera"))
    embed_collection(embed_options(photos, tmp_path / "idx", specs, name="p"))
    mine_index(
        MineOptions(index="p", indexes=tmp_path / "idx", clip=-1.0, dino=1.0, out=tmp_path / "r", progress=False)
    )
    store = ready_store_from_run(tmp_path / "store.db", tmp_path / "r")
    dup = DupOptions(clip_min=0.999, dino_min=0.999, device="cpu", progress=False, required=True)

    def export(out):
        export_benchmark(store, ExportOptions(out=out, format="vhtest", kind="oeq", near_dups=dup))
        return json.loads((out / "manifest.json").read_text())["near_duplicates"]

    first = export(tmp_path / "b1")
    assert first["ran"] and first["images_checked"] >= 2
    assert first["decided_by"]["vectors"] == {"from_indexes": first["images_checked"], "embedded": 0}
    # the index's rows are the exported files' embeddings (the same bytes, the same encoders and precision)
    idx = open_index(tmp_path / "idx", "p")
    files = sorted((tmp_path / "b1").rglob("*.png"))
    assert len(files) == first["images_checked"]
    rows = [int(np.flatnonzero(idx.images["sha256"] == sha_of(f))[0]) for f in files]
    clip, dino = embed_images([str(f) for f in files], *specs, device="cpu")
    assert np.allclose(clip, idx.clip[rows], atol=1e-6) and np.allclose(dino, idx.dino[rows], atol=1e-6)
    shutil.rmtree(models)
    again = export(tmp_path / "b2")
    assert again["ran"] and again["within_export"] == first["within_export"]
    store.close()


def sha_of(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_the_within_search_says_its_products_kernel_once(monkeypatch, caplog):
    """An export past SMALL_WITHIN images searches itself with find_pairs: the products kernel is said once
    (the join says it only at DEBUG; the check says it at INFO), as mine says it once."""
    import numpy as np

    from vhmine.export import neardup

    monkeypatch.setattr(neardup, "SMALL_WITHIN", 0)
    rng = np.random.default_rng(0)
    clip = rng.standard_normal((40, 16)).astype(np.float32)
    clip /= np.linalg.norm(clip, axis=1, keepdims=True)
    dino = clip[:, :8] / np.linalg.norm(clip[:, :8], axis=1, keepdims=True)
    with caplog.at_level("INFO", logger="vhmine"):
        neardup._within(clip, dino, neardup.DupOptions(clip_min=0.5, dino_min=0.0, device="cpu", progress=False))
    said = [r.getMessage() for r in caplog.records if r.levelname == "INFO" and "products kernel: " in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("near duplicates: products kernel: "), said
