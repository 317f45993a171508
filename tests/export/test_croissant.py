"""vhmine.export.croissant (and croissant_records): every export's croissant.json validates with mlcroissant, and
`mlcroissant.Dataset(...).records(...)` gives back every item of the export with an image that decodes (the formats
whose files Croissant can read), with checksums of every file and the RAI fields filled from the store."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys

import numpy as np
import pytest
from helpers import make_published_store

from vhmine import formats as F
from vhmine.export.job import ExportOptions, export_benchmark

mlc = pytest.importorskip("mlcroissant", reason="the Croissant tests need mlcroissant (pip install 'vhmine[test]')")

KINDS = {
    "hf": "both",
    "lmms-eval": "both",
    "pope": "ynq",
    "llava": "both",
    "hallusionbench": "ynq",
    "vlmevalkit": "both",
    "vhtest": "both",
    "mmvp": "ynq",
}
WITH_IMAGES = ("hf", "lmms-eval", "pope", "llava", "hallusionbench")  # Croissant reads their items and images


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("croissant")
    store, ids = make_published_store(tmp)
    for fmt, kind in KINDS.items():
        export_benchmark(store, ExportOptions(out=tmp / fmt, format=fmt, kind=kind, near_dups=None))
    store.close()
    return tmp, ids


def _text(v):
    """mlcroissant gives sc:Text as bytes (a repeated field as a list of bytes)."""
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, list):
        return [_text(x) for x in v]
    return v


def _pixels(img) -> np.ndarray:
    from PIL import Image

    if isinstance(img, (bytes, bytearray)):
        img = Image.open(io.BytesIO(img))
    return np.asarray(img.convert("RGB"))


def _validate(path) -> None:
    cli = subprocess.run(
        [sys.executable, "-m", "mlcroissant", "validate", "--jsonld", str(path)], capture_output=True, text=True
    )
    if cli.returncode != 0 and "No module named mlcroissant.__main__" in cli.stderr:
        cli = subprocess.run(["mlcroissant", "validate", "--jsonld", str(path)], capture_output=True, text=True)
    log = cli.stdout + cli.stderr
    bad = [line for line in log.splitlines() if ("ERROR" in line or "WARNING" in line) and "absl" not in line]
    assert cli.returncode == 0 and not bad, log[-2000:]


def _records(folder) -> dict[str, list[dict]]:
    ds = mlc.Dataset(jsonld=str(folder / "croissant.json"))
    issues = ds.metadata.ctx.issues
    assert not issues.errors and not issues.warnings, issues.report()
    return {
        rs.name: [{k.split("/", 1)[1]: v for k, v in r.items()} for r in ds.records(record_set=rs.name)]
        for rs in ds.metadata.record_sets
    }


@pytest.mark.slow
@pytest.mark.parametrize("fmt", WITH_IMAGES)
def test_croissant_yields_every_item_with_its_image(exports, fmt):
    tmp, _ = exports
    folder = tmp / fmt
    _validate(folder / "croissant.json")
    bench = F.load(folder)
    want = bench.by_id()
    sets = _records(folder)
    seen: dict[str, int] = {}
    for name, rows in sets.items():
        if name == "images" or name.endswith("_rows"):
            continue
        for r in rows:
            iid = _text(r["id"])
            seen[iid] = seen.get(iid, 0) + 1
            it = want[iid]
            assert (_text(r["question"]), _text(r["mode"]), _text(r["kind"]), r["truth"]) == (
                it.question,
                it.mode,
                it.kind,
                it.truth,
            )
            assert _text(r["answers"]) == list(it.answers) and _text(r["group_id"]) == it.group_id
            # the record's image is this item's picture, decoded (not merely some image)
            assert np.array_equal(_pixels(r["image"]), _pixels(bench.image_bytes(it))), iid
    assert seen == dict.fromkeys(want, 1)


@pytest.mark.slow
def test_vlmevalkit_croissant_reads_the_rows_and_says_why_not_the_images(exports):
    tmp, _ = exports
    folder = tmp / "vlmevalkit"
    _validate(folder / "croissant.json")
    sets = _records(folder)
    bench = F.load(folder)
    rows = {_text(r["id"]): r for rs in sets.values() for r in rs}
    assert sorted(rows) == sorted(it.id for it in bench)
    assert {i: _text(r["question"]) for i, r in rows.items()} == {it.id: it.question for it in bench}
    doc = json.loads((folder / "croissant.json").read_text())
    assert "base64" in doc["description"] and "cannot decode" in doc["description"]


@pytest.mark.slow
def test_vhtest_croissant_describes_its_images_and_lists_its_sheets(exports):
    tmp, _ = exports
    folder = tmp / "vhtest"
    _validate(folder / "croissant.json")
    rows = _records(folder)["images"]
    files = sorted(p.relative_to(folder).as_posix() for p in (folder / "Images").rglob("*.png"))
    assert sorted(_text(r["path"]) for r in rows) == files
    for r in rows:
        assert np.array_equal(_pixels(r["content"]), _pixels((folder / _text(r["path"])).read_bytes()))
        assert _text(r["mode"]) == _text(r["path"]).split("/")[1]
    doc = json.loads((folder / "croissant.json").read_text())
    sheets = {d["@id"] for d in doc["distribution"] if d["@id"].endswith(".xlsx")}
    assert sheets == {p.relative_to(folder).as_posix() for p in folder.rglob("*.xlsx")} and len(sheets) == 6
    assert "xlsx" in doc["description"]


@pytest.mark.slow
def test_mmvp_croissant_reads_the_rows_and_the_images_apart_and_says_why(exports):
    tmp, _ = exports
    folder = tmp / "mmvp"
    _validate(folder / "croissant.json")
    sets = _records(folder)
    bench = F.load(folder)
    rows = sorted(sets["questions"], key=lambda r: r["index"])
    assert [r["index"] for r in rows] == list(range(1, len(bench) + 1)) and len(bench) % 2 == 0
    for r, it in zip(rows, bench, strict=True):  # row k is the k-th item, its question and correct option
        assert _text(r["question"]) == it.question
        assert (_text(r["options"]), _text(r["correct_answer"])) == ("(a) Yes (b) No", "(a)" if it.truth else "(b)")
        assert json.loads(_text(r["vhmine_item"]))["id"] == it.id
    images = {_text(r["path"]): r for r in sets["images"]}
    assert sorted(images) == sorted(f"MMVP Images/{k}.jpg" for k in range(1, len(bench) + 1))
    for k, it in enumerate(bench, start=1):  # row k's picture is MMVP Images/<k>.jpg, as MMVP's scripts open it
        assert np.array_equal(_pixels(images[f"MMVP Images/{k}.jpg"]["content"]), _pixels(bench.image_bytes(it)))
    doc = json.loads((folder / "croissant.json").read_text())
    assert "cannot build from the Index" in doc["description"]


@pytest.mark.parametrize("fmt", list(KINDS))
def test_every_file_is_in_the_distribution_with_its_sha256(exports, fmt):
    tmp, _ = exports
    folder = tmp / fmt
    doc = json.loads((folder / "croissant.json").read_text())
    objs = {d["contentUrl"]: d for d in doc["distribution"] if d["@type"] == "cr:FileObject"}
    assert all(" " not in d["@id"] for d in objs.values())  # mlcroissant refuses an @id with a space (MMVP Images/)
    files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {
        "croissant.json",
        "manifest.json",
    }
    assert set(objs) == files
    for rel, d in objs.items():
        assert d["sha256"] == hashlib.sha256((folder / rel).read_bytes()).hexdigest()
        assert d["contentSize"] == f"{(folder / rel).stat().st_size} B"
    # and the manifest checksums croissant.json, so that an export with --replace still knows it as its own
    man = json.loads((folder / "manifest.json").read_text())
    assert (
        man["files"]["croissant.json"]["sha256"] == hashlib.sha256((folder / "croissant.json").read_bytes()).hexdigest()
    )


def test_rai_fields_come_from_the_store(exports):
    tmp, ids = exports
    m = mlc.Dataset(jsonld=str(tmp / "hf" / "croissant.json")).metadata
    assert "3 mined pair(s) from run t over index photos" in m.data_collection
    assert "cosine >= 0.9" in m.data_collection and "cosine <= 0.55" in m.data_collection
    assert "Mined image pairs (CLIP-alike, DINOv2-apart) from an image collection" in m.data_collection_type
    protocol = " ".join(m.data_annotation_protocol)
    assert "2 worker(s), named by pseudonyms" in protocol
    assert "6 item(s) started as model drafts (fake-vlm with prompt draft@v1#test: 6 accepted, 0 edited)" in protocol
    # counting: bob answered alice's 6 items blind and differed on one open answer: Cohen's kappa (5/6 - 1/4) / (3/4)
    assert (
        f"counting: Cohen's kappa {7 / 9:.3f} over 6 item(s), 2 worker(s), 1 disagreement(s)."
        in m.data_annotation_analysis
    )
    assert "color: no blind reviews, agreement not measured." in m.data_annotation_analysis
    assert any("blind-llm (prompt blind@v1#abcd1234): blind solver" == t for t in m.machine_annotation_tools)
    pre = " ".join(m.data_preprocessing_protocol)
    assert "Blind solvers (asked without the image): blind-llm with blind@v1#abcd1234" in pre
    assert "The near-duplicate check did not run: turned off (--no-near-dups)." in pre
    assert any("did not run" in s for s in m.data_limitations)
    assert m.annotator_demographics[0].startswith("unspecified: vhmine records no demographics")
    assert m.data_manipulation_protocol == "No image was edited."
    assert m.license == ["unspecified: the publisher gave no licence (vhmine export --license)"]
    assert m.cite_as.startswith("unspecified")
    made = sorted(
        v["created_at"][:10] for v in json.loads((tmp / "hf" / "manifest.json").read_text())["instances"].values()
    )
    assert {d.date().isoformat() for d in m.data_collection_timeframe} == {made[0], made[-1]}  # JSON-LD: a set of dates
    doc = json.loads((tmp / "hf" / "croissant.json").read_text())
    assert doc["rai:dataCollectionTimeframe"] == doc["rai:dataCollectionTimeFrame"]  # both spellings (module docstring)
    assert (
        b"alice" not in (tmp / "hf" / "croissant.json").read_bytes()
        and b"bob" not in (tmp / "hf" / "croissant.json").read_bytes()
    )


def test_the_publishers_licence_description_and_citation(tmp_path):
    store, _ = make_published_store(tmp_path)
    bib = "@inproceedings{vh2025,\n  title={A benchmark},\n  year={2025}\n}"
    export_benchmark(
        store,
        ExportOptions(
            out=tmp_path / "b",
            format="pope",
            kind="ynq",
            near_dups=None,
            license="cc-by-4.0",
            description="Our yes/no benchmark.",
            citation=bib,
        ),
    )
    m = mlc.Dataset(jsonld=str(tmp_path / "b" / "croissant.json")).metadata
    assert m.license == ["cc-by-4.0"] and m.cite_as == bib
    assert m.description.startswith("Our yes/no benchmark.\n\n") and "12 question(s)" in m.description
    # the benchmark's licence is not the images': vhmine does not record theirs, and says the publisher must state it
    assert "cc-by-4.0" not in m.data_collection_raw_data
    assert (
        "their licence is that of their source collection, which vhmine does not record: unspecified by the publisher."
    ) in m.data_collection_raw_data
    man = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert man["publication"] == {"license": "cc-by-4.0", "description": "Our yes/no benchmark.", "citation": bib}
    store.close()


@pytest.mark.slow
def test_an_export_without_a_store_says_what_is_not_recorded(tmp_path):
    from helpers import write_tiny_bench

    folder = write_tiny_bench(tmp_path)  # write_benchmark alone: no datasheet
    doc = json.loads((folder / "croissant.json").read_text())
    assert doc["rai:dataCollection"].startswith("unspecified: not recorded")
    _validate(folder / "croissant.json")
