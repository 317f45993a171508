"""vhmine manipulate: AutoHallusion's three edits on a COCO-annotated collection of scikit-image photos,
a loopback OpenAI-compatible server as victim and judge, a tiny inpainting pipeline, and the ASR /
MASR / CASR figures checked by hand."""

import json
import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from helpers import tiny_sd_pipeline, write_photos  # noqa: E402
from manipulate_scenes import OBJECTS, _opts, _store, _victim  # noqa: E402
from openai_server import chat_text  # noqa: E402

from vhmine.manipulate import manipulate  # noqa: E402
from vhmine.manipulate.detect import FamilyResult  # noqa: E402
from vhmine.manipulate.metrics import attack_metrics, metrics_table  # noqa: E402
from vhmine.manipulate.questions import relation  # noqa: E402


@pytest.fixture(scope="module")
def tiny_inpaint(tmp_path_factory):
    """A random-weight StableDiffusionInpaintPipeline (9-channel UNet), saved with save_pretrained."""
    return tiny_sd_pipeline(tmp_path_factory.mktemp("tiny-inpaint"), inpaint=True)


@pytest.mark.slow
def test_abnormal_insertion_caught_by_both_and_queued_with_provenance(collection, openai_server):
    from sqlalchemy import select

    from vhmine.store import Generation, Task

    openai_server.responder = _victim(
        [
            ("Describe this image", "A photo of something."),
            ("Describe its appearance", "a small odd thing"),
            ("given their center positions", "Yes."),
            ("We have an image depicting", "No, there is none."),  # the caption level denies the pasted object
            ("Is there a", "Yes, there is."),
        ]
    )
    with _store(collection) as store:
        res = manipulate(store, _opts(collection, "abnormal"))
        with store.session(write=False) as s:
            gens = s.scalars(select(Generation)).all()
            tasks = s.scalars(select(Task)).all()
    assert len(res.cases) == 1 and not res.partial
    case = res.cases[0]
    ex = next(r for r in res.results if r.family == "existence")
    assert [it.question.level for it in ex.items] == ["none", "caption", "description"]
    assert [it.verdict for it in ex.items] == ["correct", "hallucinated", "correct"]
    assert ex.by_correctness and ex.by_consistency and ex.first_induced == 2
    assert ex.items[0].question.text == f"Is there a {case.edit.target} in this image?"
    # the edit: a masked cut-out from another photo, queued for verification with its provenance
    (gen,) = gens
    p = gen.params
    assert p["strategy"] == "abnormal" and p["inserted_object"] == case.edit.target
    assert p["source_image_id"] == case.edit.scene.image_id and p["donor"]["image_id"] != p["source_image_id"]
    assert p["prior"] == "counts" and (collection / "edited" / p["mask"]).is_file()
    assert "existence" in {t.mode for t in tasks} and all(t.status == "open" for t in tasks)
    mask = np.asarray(case.edit.mask)
    assert 0 < (mask > 0).sum() < mask.size
    report = json.loads(res.report.read_text())
    assert (
        report["metrics"]["existence"]["ASR"] == 100.0
        and report["families"][0]["questions"][1]["verdict"] == "hallucinated"
    )


@pytest.mark.slow
def test_paired_insertion_caught_by_correctness_only_through_the_judge(collection, openai_server):
    openai_server.responder = _victim(
        [
            ("Describe this image", "A photo."),
            ("Describe its appearance", "a thing"),
            ("given their center positions", "Yes."),
            ("Is there", "Yes, there is."),
        ]
    )
    with _store(collection) as store:
        res = manipulate(store, _opts(collection, "paired", judge="judge-llm"))
    (case,) = res.cases
    assert case.edit.asked != case.edit.target  # the partner is asked about, not the pasted object
    ex = next(r for r in res.results if r.family == "existence")
    assert [it.question.level for it in ex.items] == ["none", "paired", "caption"]
    assert ex.items[1].question.text.startswith(f"We have {case.edit.target} in this image.")
    assert ex.by_correctness and not ex.by_consistency and ex.first_induced == 1
    judged = [b for b in openai_server.chats() if b["model"] == "judge-llm"]
    assert len(judged) == len(case.questions)  # every answer went to the judge, with the edit's truth
    assert any(f"There is no {case.edit.asked}." in chat_text(b) for b in judged)


@pytest.mark.slow
def test_correlated_removal_inpainted_and_caught_by_consistency_only(collection, openai_server, tiny_inpaint):
    from PIL import Image

    names = sorted({c for objs in OBJECTS.values() for c, *_ in objs})
    openai_server.responder = _victim(
        [
            ("Describe this image", "A scene with " + ", ".join(names) + "."),  # the caption names the removed object
            ("Describe its appearance", "a plain object"),
            ("given their center positions", "No."),
            ("Is there", "No."),
        ]
    )
    with _store(collection) as store:
        res = manipulate(store, _opts(collection, "removal", inpaint=f"diffusers:{tiny_inpaint}"))
    (case,) = res.cases
    ex = next(r for r in res.results if r.family == "existence")
    assert [it.question.level for it in ex.items] == ["none", "description", "paired", "caption"]
    assert all(it.verdict == "correct" for it in ex.items) and all(it.conflicts == ["caption"] for it in ex.items)
    assert not ex.by_correctness and ex.by_consistency and ex.first_induced == 1
    before = Image.open(case.edit.scene.path).convert("RGB")
    after, mask = case.edit.image, case.edit.mask
    inside = np.asarray(mask) > 0
    b, a = np.asarray(before), np.asarray(after)
    assert (a[~inside] == b[~inside]).all() and (a[inside] != b[inside]).any()
    assert res.metrics["existence"] == {
        "cases": 1,
        "ASR": 100.0,
        "MASR": 0.0,
        "CASR": 100.0,
        "induced": 1,
        "avg_questions_to_induce": 1.0,
        "unanswered": 0,
        "unjudged": 0,
    }


def _fr(family, corr, cons, first, strategy="abnormal"):
    return FamilyResult("c", strategy, family, 3, corr, cons, first)


def test_asr_masr_casr_by_hand():
    table = [  # family, by correctness, by consistency, first question that induced
        _fr("existence", True, True, 2),
        _fr("existence", True, False, 1),
        _fr("existence", False, True, 3),
        _fr("existence", False, False, None),
        _fr("spatial", True, False, 2, "removal"),
        _fr("spatial", False, False, None, "removal"),
    ]
    m = attack_metrics(table)
    # overall: induced 4 of 6; by correctness 3 of 6; by consistency 2 of 6; questions (2 + 1 + 3 + 2) / 4
    assert m["overall"] == {
        "cases": 6,
        "ASR": pytest.approx(200 / 3),
        "MASR": 50.0,
        "CASR": pytest.approx(100 / 3),
        "induced": 4,
        "avg_questions_to_induce": 2.0,
        "unanswered": 0,
        "unjudged": 0,
    }
    assert m["overall"]["ASR"] != round(m["overall"]["ASR"], 2)  # kept unrounded: only the printed table rounds
    assert " 66.7 " in metrics_table(m) and "66.67" not in metrics_table(m)
    assert (m["existence"]["ASR"], m["existence"]["MASR"], m["existence"]["CASR"]) == (75.0, 50.0, 50.0)
    assert (m["spatial"]["ASR"], m["spatial"]["MASR"], m["spatial"]["CASR"]) == (50.0, 50.0, 0.0)
    assert m["existence"]["avg_questions_to_induce"] == 2.0 and m["spatial"]["avg_questions_to_induce"] == 2.0
    assert m["by_strategy"]["removal"]["cases"] == 2


def test_a_case_without_any_answer_is_no_failed_attack():
    # one induced case, one whose every request failed (asked 0): before, ASR 50 from the failed one
    m = attack_metrics(
        [_fr("existence", True, False, 1), FamilyResult("d", "abnormal", "existence", 0, False, False, None)]
    )
    assert (m["overall"]["cases"], m["overall"]["ASR"], m["overall"]["MASR"], m["overall"]["CASR"]) == (
        1,
        100.0,
        100.0,
        0.0,
    )
    assert m["overall"]["unanswered"] == 1 and m["existence"]["unanswered"] == 1
    nothing = attack_metrics([FamilyResult("d", "abnormal", "existence", 0, False, False, None)])["overall"]
    assert (nothing["cases"], nothing["ASR"], nothing["unanswered"]) == (0, None, 1)
    assert "1 case(s) got no answer to any question" in metrics_table(
        attack_metrics([FamilyResult("d", "abnormal", "spatial", 0, False, False, None)])
    )


def test_a_failed_judge_request_leaves_the_answer_unjudged():
    from vhmine.manipulate.detect import judge_family
    from vhmine.manipulate.questions import Question

    qs = [
        Question(
            "existence", "none", "cup", "Is there a cup in this image?", False, "There is no cup.", "exists.none", "cup"
        ),
        Question(
            "existence",
            "caption",
            "cup",
            "We have a table. Is there a cup?",
            False,
            "There is no cup.",
            "exists.caption",
            "cup",
        ),
    ]
    # the victim says "Yes" (wrong) twice; the judge answered the second only: the first is unjudged, never read
    # by the yes/no rule (before: "hallucinated" by the rule, and the case induced by correctness at question 1)
    r = judge_family("c", "removal", "existence", qs, ["Yes.", "Yes."], "vhtest", judge_texts=[None, "incorrect"])
    assert [it.verdict for it in r.items] == [None, "hallucinated"] and [it.unjudged for it in r.items] == [True, False]
    assert r.by_correctness and r.first_induced == 2 and r.unjudged == 1
    assert attack_metrics([r])["overall"]["unjudged"] == 1


def test_spatial_truth_from_box_centres():
    assert relation((0, 0, 10, 10), (20, 0, 30, 10)) == ["left"]
    assert relation((20, 30, 30, 40), (0, 0, 10, 10)) == ["right", "down"]
    assert relation((4, 4, 6, 6), (0, 0, 10, 10)) == ["front"]  # overlapping, the smaller box in front
    assert relation((0, 0, 10, 10), (6, 6, 16, 16)) == []  # overlapping, neither holds the other: no question


def test_owlvit_detector_finds_boxes_in_scenes_without_annotations(tmp_path):
    from helpers import tiny_owlvit

    from vhmine.manipulate.scenes import Scene, detect_scenes

    tiny_owlvit(tmp_path / "owl")
    (photo,) = write_photos(tmp_path / "p", ("coffee",))
    from PIL import Image

    w, h = Image.open(photo).size
    scenes = detect_scenes([Scene("x", photo, "0" * 64, w, h)], str(tmp_path / "owl"), ["cup", "spoon"], threshold=0.0)
    objs = scenes[0].objects
    assert objs and {o.name for o in objs} <= {"cup", "spoon"} and len({o.name for o in objs}) == len(objs)
    assert all(0 <= o.box[0] < o.box[2] <= w and 0 <= o.box[1] < o.box[3] <= h for o in objs)


@pytest.mark.slow
def test_cli_run_then_a_verified_edit_exports_with_its_provenance(collection, openai_server, tmp_path):
    from typer.testing import CliRunner

    from vhmine import curate as C
    from vhmine.cli import app
    from vhmine.export.job import ExportOptions, export_benchmark
    from vhmine.store import open_store

    openai_server.responder = _victim([("Describe", "A photo."), ("Is there", "No.")])
    db, out = tmp_path / "cli.db", tmp_path / "edited"
    res = CliRunner().invoke(
        app,
        [
            "manipulate",
            "--model",
            "victim-vlm",
            "--index",
            "scenes",
            "--indexes",
            str(collection / "idx"),
            "--strategy",
            "abnormal",
            "--per-strategy",
            "1",
            "--out",
            str(out),
            "--cache",
            str(tmp_path / "c.db"),
            "--db",
            str(db),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "ASR" in res.output and "existence" in res.output
    report = json.loads((out / "manipulate-report.json").read_text())
    (case,) = report["cases"].values()
    assert report["metrics"]["existence"]["MASR"] == 100.0  # "No" about a pasted object is wrong
    with open_store(db) as store:
        C.add_worker(store, "alice")
        item = C.next_item(store, "alice", "existence")
        assert item.images[0].id == case["image_id"]
        C.save_annotation(
            store,
            "alice",
            item.task_id,
            C.Annotation(
                "existence.is_there",
                {"object": case["target"]},
                answers={case["image_id"]: "yes"},
                truths={case["image_id"]: True},
            ),
        )
        export_benchmark(store, ExportOptions(out=tmp_path / "bench", format="pope", kind="ynq", allow_unbalanced=True))
    meta = json.loads((tmp_path / "bench" / "manifest.json").read_text())["instances"]
    edit = next(iter(meta.values()))["edit"]
    assert edit["strategy"] == "abnormal" and edit["inserted_object"] == case["target"]
    assert edit["source_image_id"] == case["source_image_id"] and (out / edit["mask"]).is_file()
    assert str(tmp_path) not in json.dumps(edit)  # no machine paths leave with it
