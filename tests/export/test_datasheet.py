"""vhmine.export.datasheet: the store's facts about how the exported items were made (the manifest's `datasheet`),
with workers pseudonymized, and the limitations those facts imply."""

from __future__ import annotations

import json
from dataclasses import replace

from helpers import make_published_store

from vhmine.bench import BenchItem, Benchmark
from vhmine.export.datasheet import limitations, margin_pp
from vhmine.export.job import ExportOptions, export_benchmark
from vhmine.export.privacy import pseudonym, pseudonym_key


def test_datasheet_tells_how_each_item_was_made(tmp_path):
    store, ids = make_published_store(tmp_path)
    export_benchmark(store, ExportOptions(out=tmp_path / "b", format="hf", near_dups=None))
    sheet = json.loads((tmp_path / "b" / "manifest.json").read_text())["datasheet"]
    key = pseudonym_key(store)
    a = sheet["annotation"]
    # alice wrote counting and color (12), bob verified the model's existence draft (6)
    assert a["items_by_worker"] == {pseudonym("alice", key): 12, pseudonym("bob", key): 6} and a["workers"] == 2
    assert a["from_model_drafts"] == {
        "items": 6,
        "drafts": [{"model": "fake-vlm", "prompt": "draft@v1#test", "accepted": 6, "edited": 0}],
    }
    assert a["written_by_workers"] == 12 and a["ynq_drafted_from_oeq"] == 8  # counting's and color's yes/no variants
    assert a["reviewed"] == {"existence": 0, "color": 0, "counting": 6}
    assert a["agreement"]["counting"] == {
        "statistic": "cohen",
        "kappa": round(7 / 9, 4),
        "items": 6,
        "raters": 2,
        "disagreements": 1,
    }
    run = sheet["collection"]["runs"][0]
    assert (run["run"], run["index"], run["pairs"], run["clip_threshold"], run["dino_threshold"]) == (
        "t",
        "photos",
        3,
        0.9,
        0.55,
    )
    assert sheet["collection"]["by_source"] == {"mined": 3}
    assert sheet["blind"]["ran"] and sheet["blind"]["solvers"][0]["model"] == "blind-llm"
    assert sheet["near_duplicates"] == {"ran": False, "reason": "turned off (--no-near-dups)"}
    assert sheet["models"] == ["blind-llm", "fake-vlm"] and sheet["prompts"] == ["blind@v1#abcd1234", "draft@v1#test"]
    assert b"alice" not in (tmp_path / "b" / "manifest.json").read_bytes()
    # only the exported items count: a --mode export of counting knows nothing of bob's draft
    export_benchmark(store, ExportOptions(out=tmp_path / "c", format="hf", near_dups=None, modes=["counting"]))
    only = json.loads((tmp_path / "c" / "manifest.json").read_text())["datasheet"]["annotation"]
    assert only["items_by_worker"] == {pseudonym("alice", key): 6} and only["from_model_drafts"]["items"] == 0
    assert list(only["agreement"]) == ["counting"]
    # internal use keeps the names
    export_benchmark(store, ExportOptions(out=tmp_path / "d", format="hf", near_dups=None, with_provenance=True))
    full = json.loads((tmp_path / "d" / "manifest.json").read_text())["datasheet"]["annotation"]
    assert full["items_by_worker"] == {"alice": 12, "bob": 6}
    store.close()


def _bench(n_per_mode: int, yes: int, no: int) -> Benchmark:
    it = BenchItem("x", "counting", "YNQ", "Is it?", ("Yes",), True, None, "i", None, {})
    items = [replace(it, id=f"y{k}", truth=True) for k in range(yes)] + [
        replace(it, id=f"n{k}", truth=False) for k in range(no)
    ]
    items += [replace(it, id=f"o{k}", kind="OEQ", truth=None, answers=("3",)) for k in range(n_per_mode - yes - no)]
    return Benchmark("b", items)


def _sheet(**over) -> dict:
    sheet = {
        "annotation": {
            "workers": 3,
            "reviewed": {"counting": 40},
            "own_questions": 0,
            "agreement": {"counting": {"kappa": 0.9}},
        },
        "blind": {"ran": True, "drop_blind": True, "solvers": []},
        "near_duplicates": {"ran": True, "reference": "coco", "within_export": 0},
        "collection": {"runs": [], "by_source": {"mined": 10}},
    }
    for k, v in over.items():
        sheet[k] = {**sheet[k], **v}
    return sheet


def test_limitations_follow_the_facts():
    assert round(margin_pp(400), 1) == 4.9 and round(margin_pp(12)) == 28
    big = limitations(_bench(400, 150, 150), _sheet())
    # a well-made benchmark: only what vhmine never knows about images
    assert big == [
        "The licence and consent status of the images are those of their source collection; vhmine records "
        "neither, and does not screen images for people or personal data."
    ]
    small = limitations(
        _bench(12, 4, 6),
        _sheet(
            annotation={"workers": 1, "reviewed": {"counting": 0}, "agreement": {"counting": {"kappa": 0.41}}},
            near_duplicates={"ran": False, "reason": "no index"},
            blind={"ran": False},
        ),
    )
    text = "\n".join(small)
    assert "counting has 12 item(s) (95% margin of an accuracy about ±28 points)" in text
    assert "not 50/50 in counting" in text and "Every item was written by one worker." in text
    assert "No item of counting was reviewed blind" in text and "counting (kappa 0.41)" in text
    assert "No blind-solver check ran" in text and "were not looked for: no index." in text
