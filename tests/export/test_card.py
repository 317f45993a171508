"""vhmine.export.card: the hf export's README.md is a Hugging Face dataset card that `datasets` reads (a config per
kind, images as PIL images), with the sections a publisher needs; other READMEs carry the same "How it was made"."""

from __future__ import annotations

import json

import pytest
from helpers import make_published_store
from PIL import Image

from vhmine.export.card import made_section
from vhmine.export.job import ExportOptions, export_benchmark

yaml = pytest.importorskip("yaml")


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("card")
    store, ids = make_published_store(tmp)
    export_benchmark(
        store,
        ExportOptions(
            out=tmp / "hf", format="hf", near_dups=None, license="cc-by-4.0", citation="@misc{vh, title={VH}}"
        ),
    )
    export_benchmark(
        store,
        ExportOptions(
            out=tmp / "vl", format="vlmevalkit", near_dups=None, license="cc-by-4.0", citation="@misc{vh, title={VH}}"
        ),
    )  # the same publication: the same section
    yield tmp, store, ids
    store.close()


def _front(text: str) -> dict:
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n", 2)[1])


def test_datasets_loads_the_card_with_a_config_per_kind(published, tmp_path):
    datasets = pytest.importorskip("datasets")
    tmp, _, ids = published
    every = sorted(i for v in ids.values() for i in v)
    ds = datasets.load_dataset(str(tmp / "hf"), cache_dir=str(tmp_path / "cache"))  # the default config: every item
    assert list(ds) == ["test"] and sorted(ds["test"]["id"]) == every
    assert isinstance(ds["test"].features["image"], datasets.Image)
    assert all(isinstance(r["image"], Image.Image) and r["image"].size[0] > 0 for r in ds["test"])
    assert datasets.get_dataset_config_names(str(tmp / "hf")) == ["default", "oeq", "ynq"]
    ynq = datasets.load_dataset(str(tmp / "hf"), "ynq", split="test", cache_dir=str(tmp_path / "cache"))
    oeq = datasets.load_dataset(str(tmp / "hf"), "oeq", split="test", cache_dir=str(tmp_path / "cache"))
    assert set(ynq["kind"]) == {"YNQ"} and set(oeq["kind"]) == {"OEQ"} and len(ynq) + len(oeq) == len(every)
    assert set(ynq["truth"]) == {True, False} and all(isinstance(r["image"], Image.Image) for r in oeq)


def test_card_front_matter(published):
    tmp, _, ids = published
    front = _front((tmp / "hf" / "README.md").read_text())
    assert front["pretty_name"] == "hf" and front["license"] == "cc-by-4.0"
    assert front["task_categories"] == ["visual-question-answering"] and front["size_categories"] == ["n<1K"]
    configs = {c["config_name"]: c for c in front["configs"]}
    assert configs["default"]["default"] is True
    assert configs["oeq"]["data_files"] == [{"split": "test", "path": ["data/oeq/test-00000-of-00001.parquet"]}]
    assert configs["ynq"]["data_files"] == [{"split": "test", "path": ["data/ynq/test-00000-of-00001.parquet"]}]
    info = {c["config_name"]: c for c in front["dataset_info"]}
    feats = {f["name"]: f for f in info["default"]["features"]}
    assert feats["image"] == {"name": "image", "dtype": "image"} and feats["answers"] == {
        "name": "answers",
        "list": "string",
    }
    assert feats["truth"]["dtype"] == "bool"
    n = sum(len(v) for v in ids.values())
    assert [s["num_examples"] for s in info["default"]["splits"]] == [n]
    assert info["ynq"]["splits"][0]["num_examples"] + info["oeq"]["splits"][0]["num_examples"] == n


def test_card_sections_say_how_it_was_made(published):
    tmp, _, _ = published
    text = (tmp / "hf" / "README.md").read_text()
    heads = [line for line in text.splitlines() if line.startswith("## ")]
    assert heads == [
        "## The data",
        "## How it was made",
        "## Intended use",
        "## Limitations",
        "## Licence",
        "## Citation",
        "## Version and changelog",
    ]
    made = text.split("## How it was made", 1)[1].split("## Intended use", 1)[0]
    assert (
        "3 pair(s) from mining run `t` over index `photos`: CLIP `tiny` cosine >= 0.9, DINOv2 `tiny` cosine <= 0.55"
        in made
    )
    assert "| fake-vlm | drafted items that workers verified | draft@v1#test |" in made
    assert "| blind-llm | blind solver (asked without the image) | blind@v1#abcd1234 |" in made
    assert "2 worker(s), named by pseudonyms" in made and f"counting: Cohen's kappa {7 / 9:.3f} over 6 item(s)" in made
    assert "The near-duplicate check did not run: turned off (--no-near-dups)." in made
    assert "```bibtex\n@misc{vh, title={VH}}\n```" in text
    man = json.loads((tmp / "hf" / "manifest.json").read_text())
    assert f"Version 1, content hash `{man['content_hash']}`" in text
    assert b"alice" not in (tmp / "hf" / "README.md").read_bytes()


def test_other_readmes_carry_the_same_section(published):
    tmp, _, _ = published
    vl = (tmp / "vl" / "README.md").read_text()
    assert vl.startswith("# vl: a vhmine benchmark for VLMEvalKit")  # VLMEvalKit's how-to stays first
    section = vl.split("## How it was made", 1)[1]
    assert (
        section.strip()
        == (tmp / "hf" / "README.md")
        .read_text()
        .split("## How it was made", 1)[1]
        .split("## Intended use", 1)[0]
        .strip()
    )


def test_unspecified_licence_and_store_text_escaped(tmp_path):
    store, _ = make_published_store(tmp_path)
    from vhmine.store import Action

    with store.session() as s:  # a model name crafted to break out of the table, or into HTML
        for a in s.query(Action).filter_by(kind="verify"):
            a.payload = dict(a.payload, model="<img src=x onerror=alert(1)>|evil")
    export_benchmark(store, ExportOptions(out=tmp_path / "hf", format="hf", near_dups=None))
    text = (tmp_path / "hf" / "README.md").read_text()
    assert _front(text)["license"] == "unknown" and "Unspecified: the publisher gave no licence" in text
    assert "<img" not in text and "| &lt;img src=x onerror=alert(1)&gt;\\|evil | drafted" in text
    export_benchmark(
        store,
        ExportOptions(out=tmp_path / "url", format="hf", near_dups=None, license="https://example.org/our-licence"),
    )
    front = _front((tmp_path / "url" / "README.md").read_text())
    assert (front["license"], front["license_link"]) == ("other", "https://example.org/our-licence")
    store.close()


def test_made_section_without_a_store():
    assert "not recorded" in made_section(None)


def test_cli_export_takes_the_publication_options(tmp_path):
    from typer.testing import CliRunner

    from vhmine.cli import app

    store, _ = make_published_store(tmp_path)
    url = store.url
    store.close()
    r = CliRunner().invoke(
        app,
        [
            "export",
            "--db",
            url,
            "--out",
            str(tmp_path / "b"),
            "--format",
            "hf",
            "--no-near-dups",
            "--license",
            "cc0-1.0",
            "--description",
            "Ours.",
            "--citation",
            "@misc{a}",
        ],
    )
    assert r.exit_code == 0, r.output
    man = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert man["publication"] == {"license": "cc0-1.0", "description": "Ours.", "citation": "@misc{a}"}
    assert _front((tmp_path / "b" / "README.md").read_text())["license"] == "cc0-1.0"
    assert (tmp_path / "b" / "README.md").read_text().split("\n# b\n", 1)[1].lstrip().startswith("Ours.")


def test_the_cards_opening_names_only_the_checks_that_ran_and_what_the_publisher_must_still_state(published, tmp_path):
    """It named checks that did not run (blind review, blind solvers, near duplicates, all three always)."""
    tmp, store, _ = published
    made = (tmp / "hf" / "README.md").read_text().split("## How it was made", 1)[1]
    opening = made.split("### Images", 1)[0]
    assert (
        "checked by blind review by a second worker and blind solvers (asked without the image) and exported with "
        "`vhmine export`."
    ) in opening  # the near-duplicate check was turned off: not named
    assert "near-duplicate" not in opening and "near duplicates" not in opening
    assert (
        "The publisher must still state the images' licence (that of their source collection; vhmine does not "
        "record it)."
    ) in opening  # --license and --citation were given
    export_benchmark(store, ExportOptions(out=tmp_path / "bare", format="hf", near_dups=None))
    bare = (tmp_path / "bare" / "README.md").read_text().split("### Images", 1)[0]
    assert (
        "The publisher must still state the images' licence (that of their source collection; vhmine does not "
        "record it), the benchmark's licence (--license) and how to cite it (--citation)."
    ) in bare
    assert "pip install 'mlcroissant[parquet]'" in (tmp / "hf" / "README.md").read_text()


def test_nothing_checked_is_said_so_and_no_reference_is_never_a_count():
    """ "0 against no reference collection": a near-duplicate search without --against says it was not checked."""
    from vhmine.export.croissant import filter_lines

    sheet = {
        "blind": {"ran": False, "drop_blind": False, "left_out": 0, "solvers": []},
        "near_duplicates": {
            "ran": True,
            "thresholds": {"clip": 0.95, "dino": 0.9},
            "encoders": {},
            "within_export": 2,
            "against_reference": 0,
            "reference": None,
            "generated_against_source": 0,
        },
    }
    lines = filter_lines(sheet)
    assert "no reference collection" not in " ".join(lines) and "0 against" not in " ".join(lines)
    assert lines[1].endswith(
        "none removed. The images were not checked against a reference collection (export --against)."
    )
    sheet["near_duplicates"].update(reference="coco", against_reference=3)
    assert "3 against reference coco, 0 generated image(s)" in filter_lines(sheet)[1]
